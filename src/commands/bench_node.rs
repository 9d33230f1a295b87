//! The whole node's benchmarks: `gdrprov bench copy --concurrent` (every GPU at once),
//! `gdrprov bench p2p` (every ordered GPU pair) and `gdrprov bench nccl` (all_reduce over every
//! GPU). Their arguments are in src/commands/cli/bench_node.rs.

use crate::bench::concurrent;
use crate::bench::copy::CopyOptions;
use crate::bench::error::BenchError;
use crate::bench::p2p;
use crate::commands::cli::bench_node::{ConcurrentArgs, NcclArgs, P2pArgs};
use crate::names;
use crate::output::Output;
use gdrprov_rdma::cuda::node::Method;

/// `bench copy`'s own options that `--concurrent` uses (passed in, so that this file needs
/// nothing of `bench copy`'s argument struct).
#[derive(Debug, Clone, Default)]
pub struct CopyChoice {
    pub gpu: Vec<u32>,
    pub size: Option<u64>,
    pub min_fraction: Option<f64>,
    pub min_gbs: Option<f64>,
    /// `--no-numa-pin`.
    pub no_numa_pin: bool,
}

fn method(samples: u32) -> Result<Method, BenchError> {
    if samples == 0 {
        return Err(BenchError::InvalidArgument("--samples must be > 0".into()));
    }
    Ok(Method {
        samples,
        ..Method::default()
    })
}

fn size(v: Option<u64>) -> Result<usize, BenchError> {
    let s = v.unwrap_or(concurrent::DEFAULT_SIZE as u64);
    if s == 0 {
        return Err(BenchError::InvalidArgument("--size must be > 0".into()));
    }
    usize::try_from(s).map_err(|_| BenchError::InvalidArgument("--size is too large".into()))
}

/// The GPUs to use: those named, else every one CUDA sees; no GPU is an error.
fn indexes(named: &[u32]) -> Result<Vec<u32>, BenchError> {
    gdrprov_rdma::cuda::node::ensure_libcuda()?;
    let count = u32::try_from(gdrprov_rdma::cuda::gpu_count()?).unwrap_or(0);
    if count == 0 {
        return Err(BenchError::no_cuda_device());
    }
    if named.is_empty() {
        return Ok((0..count).collect());
    }
    if let Some(&bad) = named.iter().find(|&&i| i >= count) {
        return Err(BenchError::GpuNotFound {
            index: bad,
            count: count as i32,
        });
    }
    Ok(named.to_vec())
}

/// Runs `bench copy --concurrent`: Ok(0) unless a GPU failed its floor (warnings pass).
pub fn run_concurrent(
    args: &CopyChoice,
    node: &ConcurrentArgs,
    out: &Output,
) -> Result<i32, BenchError> {
    let m = method(node.samples)?;
    crate::bench::parse::check_copy_floors(args.min_fraction, args.min_gbs)?;
    let gpus = indexes(&args.gpu)?;
    let opts = CopyOptions {
        gpus: gpus.clone(),
        min_fraction: args.min_fraction,
        min_gbs: args.min_gbs,
        numa_pin: !args.no_numa_pin,
        ..CopyOptions::default()
    };
    let topo = crate::facts::gpu_topo::of_running_system();
    let r = concurrent::run(&gpus, size(args.size)?, &m, None, &opts, &topo)?;
    crate::output::bench::show(
        out,
        names::BENCH_COPY,
        || crate::output::node::concurrent_text(&r),
        &r,
    )?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Runs `bench p2p`: Ok(0) when every pair reached its floor with peer access, else Ok(1).
pub fn run_p2p(args: &P2pArgs, out: &Output) -> Result<i32, BenchError> {
    let m = method(args.samples)?;
    let gpus = indexes(&args.gpu)?;
    let topo = crate::facts::gpu_topo::of_running_system();
    let r = p2p::run(&gpus, size(args.size)?, &m, &topo)?;
    crate::output::bench::show(
        out,
        names::BENCH_P2P,
        || crate::output::node::p2p_text(&r),
        &r,
    )?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Runs `bench nccl`: Ok(0) when the all_reduce was right, GPU to GPU and above its floor.
pub fn run_nccl(args: &NcclArgs, out: &Output) -> Result<i32, BenchError> {
    if args.iters == 0 {
        return Err(BenchError::InvalidArgument("--iters must be > 0".into()));
    }
    let sizes: Vec<usize> = if args.size.is_empty() {
        crate::bench::nccl::SIZES.to_vec()
    } else {
        args.size
            .iter()
            .map(|s| usize::try_from(*s).unwrap_or(usize::MAX))
            .collect()
    };
    if sizes.iter().any(|s| *s < 4096) {
        return Err(BenchError::InvalidArgument(
            "--size: each size must be at least 4KiB".into(),
        ));
    }
    if args.init_timeout == 0 {
        return Err(BenchError::InvalidArgument(
            "--init-timeout must be > 0 seconds".into(),
        ));
    }
    if args.child {
        return Ok(nccl_child(&args.gpu, &sizes, args.iters));
    }
    let gpus = indexes(&args.gpu)?;
    let pcis = crate::bench::nccl::pci_addresses(&gpus);
    let r = if gpus.len() < 2 {
        crate::bench::nccl::one_gpu(pcis.first().map(String::as_str).unwrap_or("?"))
    } else {
        let topo = crate::facts::gpu_topo::of_running_system();
        let limits = crate::bench::nccl_child::Limits {
            init: std::time::Duration::from_secs(args.init_timeout),
            ..Default::default()
        };
        crate::bench::nccl::run(
            crate::bench::nccl::this_executable(),
            &gpus,
            &pcis,
            &sizes,
            args.iters,
            &topo,
            &limits,
        )?
    };
    crate::output::bench::show(
        out,
        names::BENCH_NCCL,
        || crate::output::node::nccl_text(&r),
        &r,
    )?;
    Ok(if r.verdict == "fail" { 1 } else { 0 })
}

/// The child's side (`gdrprov bench nccl --child`): dies with its parent, runs the all_reduce
/// here, writes the stages and the result (or the error) as JSON lines; Ok(0) when it ran.
fn nccl_child(indexes: &[u32], sizes: &[usize], iters: u32) -> i32 {
    // A gdrprov killed while waiting takes its child with it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let line = |v: serde_json::Value| crate::output::json_line(&v);
    let ran = gdrprov_rdma::cuda::nccl::all_reduce(indexes, sizes, 5, iters, &mut |s| {
        line(serde_json::json!({ "stage": s }))
    });
    match ran {
        Ok(a) => {
            let r = crate::bench::nccl_child::ChildResult {
                version: a.version,
                ranks: a.ranks,
                sizes: a
                    .sizes
                    .iter()
                    .map(|s| crate::bench::nccl::Size {
                        bytes: s.bytes,
                        time_us: s.time_us,
                        algbw_gbs: s.algbw_gbs,
                        busbw_gbs: s.busbw_gbs,
                    })
                    .collect(),
                data_ok: a.data_ok,
            };
            line(serde_json::json!({ "result": r }));
            0
        }
        Err(e) => {
            // The parent makes it its own invalid-argument error: the message alone.
            let msg = match e {
                gdrprov_rdma::Error::InvalidArgument(m) => m,
                e => e.to_string(),
            };
            line(serde_json::json!({ "error": msg }));
            1
        }
    }
}
