//! The whole node's benchmarks: `gdrprov bench copy --concurrent` (every GPU at once),
//! `gdrprov bench p2p` (every ordered GPU pair) and `gdrprov bench nccl` (all_reduce over every
//! GPU). Their arguments are in src/commands/cli/bench_node.rs; the runs are src/ops/node.rs.

use crate::commands::cli::bench_node::{NcclArgs, P2pArgs};
use crate::error::Result;
use crate::names;
use crate::ops::node as op;
use crate::output::Output;

/// Runs `bench copy --concurrent`: Ok(0) unless a GPU failed its floor (warnings pass).
pub fn run_concurrent(req: &op::ConcurrentRequest, out: &Output) -> Result<i32> {
    let r = op::concurrent(req)?;
    crate::output::bench::show(
        out,
        names::BENCH_COPY,
        || crate::output::node::concurrent_text(&r),
        &r,
    )?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Runs `bench p2p`: Ok(0) when every pair reached its floor with peer access, else Ok(1).
pub fn run_p2p(args: &P2pArgs, out: &Output) -> Result<i32> {
    let r = op::p2p(&op::P2pRequest {
        gpus: args.gpu.clone(),
        size: args.size,
        samples: args.samples,
    })?;
    crate::output::bench::show(
        out,
        names::BENCH_P2P,
        || crate::output::node::p2p_text(&r),
        &r,
    )?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Runs `bench nccl`: Ok(0) when the all_reduce was right, GPU to GPU and above its floor.
/// The child's side (`--child`) writes its stages and result as JSON lines instead.
pub fn run_nccl(args: &NcclArgs, out: &Output) -> Result<i32> {
    let req = op::NcclRequest {
        gpus: args.gpu.clone(),
        sizes: args.size.clone(),
        iters: args.iters,
        init_timeout: args.init_timeout,
    };
    if args.child {
        return op::nccl_child(&req, &mut |v| crate::output::json_line(&v));
    }
    let r = op::nccl(&req)?;
    crate::output::bench::show(
        out,
        names::BENCH_NCCL,
        || crate::output::node::nccl_text(&r),
        &r,
    )?;
    Ok(if r.verdict == "fail" { 1 } else { 0 })
}
