//! `gdrprov bench ...`: its arguments (src/commands/cli/bench.rs) mapped onto the
//! operations' requests (src/ops/bench.rs, src/ops/node.rs), and the results rendered.

use crate::commands::cli::bench::{
    BenchArgs, BenchCommand, CopyArgs, EndArgs, GdsArgs, LoopbackArgs, PairArgs, ProbeArgs, RunArgs,
};
use crate::error::Result;
use crate::names;
use crate::ops::bench::{self as op, Loopback, Paired};
use crate::output::bench::{render_export_text, render_text};
use crate::output::{Format, Output};

/// Output format of a bench command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFormat {
    Text,
    Json,
}

impl EndArgs {
    fn end(&self) -> op::End {
        op::End {
            device: self.device.clone(),
            memory: self.memory,
            gpu: self.gpu,
        }
    }
}

impl RunArgs {
    fn run(&self) -> op::Run {
        op::Run {
            sizes: self.size.clone(),
            duration: self.duration,
            iters: self.iters,
            qps: self.qps,
            tx_depth: self.tx_depth,
            gid_index: self.gid_index,
            min_fraction: self.min_fraction,
            min_gbps: self.min_gbps,
        }
    }
}

impl LoopbackArgs {
    /// The loopback's request (a progress bar for text on a terminal).
    pub fn request(&self, format: BenchFormat) -> op::LoopbackRequest {
        op::LoopbackRequest {
            end: self.end.end(),
            to: self.to.clone(),
            sweep: self.sweep,
            run: self.run.run(),
            export_only: self.export_only,
            progress: format == BenchFormat::Text && crate::output::stderr_is_terminal(),
        }
    }
}

impl PairArgs {
    /// The pair's request.
    pub fn request(&self) -> op::PairRequest {
        op::PairRequest {
            peer: self.peer.clone(),
            listen: self.listen.clone(),
            port: self.port,
            token_file: self.token_file.clone(),
            timeout: self.timeout,
            end: self.end.end(),
            op: self.op,
            run: self.run.run(),
            check_iters: self.check_iters,
            textfile: self.textfile.clone(),
            all_nics: self.all_nics,
        }
    }
}

fn format_of(out: &Output) -> BenchFormat {
    if out.format == Format::Json {
        BenchFormat::Json
    } else {
        BenchFormat::Text
    }
}

fn code(passed: bool) -> i32 {
    if passed {
        0
    } else {
        1
    }
}

/// Run `gdrprov bench loopback`: Ok(0) when it passed, Ok(1) when the data check or threshold failed.
pub fn run(args: &LoopbackArgs, out: &Output) -> Result<i32> {
    let mut notes = |s: &str| crate::output::stderr_line(s);
    let done = op::loopback(&args.request(format_of(out)), &mut notes)?;
    match &done {
        Loopback::Export(r) => {
            crate::output::bench::show(out, names::BENCH_LOOPBACK, || render_export_text(r), r)?
        }
        Loopback::Ran(r) => {
            crate::output::bench::show(out, names::BENCH_LOOPBACK, || render_text(r), r)?
        }
    }
    Ok(code(done.passed()))
}

/// Run `gdrprov bench probe`: Ok(0) when every probed device supports dma-buf MRs, else Ok(1).
pub fn run_probe(args: &ProbeArgs, out: &Output) -> Result<i32> {
    let probes = op::probe(args.device.as_deref())?;
    let text = || {
        let mut t = String::new();
        for (device, verdict, detail) in probes.verdicts() {
            t.push_str(&format!("{device}: dma-buf MRs {verdict} ({detail})\n"));
        }
        t
    };
    crate::output::bench::show(out, names::BENCH_PROBE, text, &probes)?;
    Ok(code(probes.passed()))
}

/// Run `gdrprov bench copy`: Ok(0) when every GPU reached its floor, else Ok(1).
pub fn run_copy(args: &CopyArgs, out: &Output) -> Result<i32> {
    let r = op::copy(&op::CopyRequest {
        gpus: args.gpu.clone(),
        size: args.size,
        runs: args.runs,
        min_fraction: args.min_fraction,
        min_gbs: args.min_gbs,
        no_numa_pin: args.no_numa_pin,
        progress: !out.json() && crate::output::stderr_is_terminal(),
    })?;
    crate::output::bench::show(out, names::BENCH_COPY, || crate::output::copy::text(&r), &r)?;
    Ok(code(r.passed))
}

/// Run `gdrprov bench pair` (either end): Ok(0) when it passed, Ok(1) when the data check or
/// threshold failed; every other failure is an error naming it.
pub fn run_pair(args: &PairArgs, out: &Output) -> Result<i32> {
    let notes = |s: &str| crate::output::stderr_line(s);
    let done = op::pair(&args.request(), &notes)?;
    match &done {
        Paired::Rails(r) => crate::output::bench::show(
            out,
            names::BENCH_PAIR,
            || crate::output::pair::render_rails(r),
            r,
        )?,
        Paired::One(o) => crate::output::bench::show(
            out,
            names::BENCH_PAIR,
            || crate::output::pair::render_text(&o.report, o.role),
            o,
        )?,
    }
    Ok(code(done.passed()))
}

/// Run `gdrprov bench gds`: Ok(0) when every byte was right, else Ok(1); a file cuFile refuses
/// is an error naming why.
pub fn run_gds(args: &GdsArgs, out: &Output) -> Result<i32> {
    let r = crate::ops::gds::gds(&crate::ops::gds::GdsRequest {
        dir: args.dir.clone(),
        file: args.file.clone(),
        sizes: args.size.clone(),
        gpu: args.gpu,
        threads: args.threads as usize,
        chunk: args.chunk.unwrap_or(4 << 20) as usize,
        rounds: args.rounds,
        textfile: args.textfile.clone(),
    })?;
    crate::output::bench::show(out, names::BENCH_GDS, || crate::output::gds::text(&r), &r)?;
    Ok(code(r.passed))
}

/// Dispatch `gdrprov bench <command>`.
pub fn run_bench(args: &BenchArgs, out: &Output) -> Result<i32> {
    match &args.command {
        BenchCommand::Loopback(a) => run(a, out),
        BenchCommand::Probe(a) => run_probe(a, out),
        BenchCommand::Copy(a) if a.node.concurrent => {
            let req = crate::ops::node::ConcurrentRequest {
                gpus: a.gpu.clone(),
                size: a.size,
                min_fraction: a.min_fraction,
                min_gbs: a.min_gbs,
                no_numa_pin: a.no_numa_pin,
                samples: a.node.samples,
            };
            crate::commands::bench_node::run_concurrent(&req, out)
        }
        BenchCommand::Copy(a) => run_copy(a, out),
        BenchCommand::P2p(a) => crate::commands::bench_node::run_p2p(a, out),
        BenchCommand::Nccl(a) => crate::commands::bench_node::run_nccl(a, out),
        BenchCommand::Pair(a) => run_pair(a, out),
        BenchCommand::Gds(a) => run_gds(a, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::bench::{
        loopback_options, pair_options, MemoryKind, Op, RunLength, WireLength,
    };
    use std::time::Duration;

    #[test]
    fn args_to_options() {
        let parse = |argv: &[&str]| crate::commands::cli::parse_group::<LoopbackArgs>(argv);
        let t = parse(&[
            "t",
            "--device",
            "rxe0:1",
            "--size",
            "64K,1M,8M",
            "--duration",
            "2",
        ])
        .unwrap();
        let o = loopback_options(&t.request(BenchFormat::Text)).unwrap();
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!(o.port, Some(1));
        assert_eq!(o.sizes, vec![65536, 1 << 20, 8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(2)));
        let t = parse(&["t"]).unwrap();
        let o = loopback_options(&t.request(BenchFormat::Text)).unwrap();
        assert_eq!(o.sizes, vec![8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(5)));
        assert!(parse(&["t", "--sweep", "--size", "1M"]).is_err());
        assert!(parse(&["t", "--duration", "1", "--iters", "5"]).is_err());
        let t = parse(&["t", "--sweep", "--iters", "100", "--memory", "cuda-peermem"]).unwrap();
        let o = loopback_options(&t.request(BenchFormat::Text)).unwrap();
        assert_eq!(o.sizes.len(), 12);
        assert_eq!(o.memory, Some(MemoryKind::CudaPeermem));
        assert_eq!(o.length, RunLength::Iterations(100));
        // Refused by the option's type (grammar::fraction_above_zero).
        assert!(parse(&["t", "--min-fraction", "1.5"]).is_err());
    }

    #[test]
    fn pair_arguments() {
        let parse = |argv: &[&str]| crate::commands::cli::parse_group::<PairArgs>(argv);
        let t = parse(&["t", "--listen"]).unwrap();
        assert_eq!(t.listen.as_deref(), Some(""));
        let t = parse(&["t", "--listen", "10.0.0.1"]).unwrap();
        assert_eq!(t.listen.as_deref(), Some("10.0.0.1"));
        assert!(parse(&["t"]).is_err());
        assert!(parse(&["t", "--listen", "peer"]).is_ok());
        assert!(parse(&["t", "host", "--listen"]).is_err());
        let t = parse(&[
            "t", "host", "--size", "64K,1M", "--op", "read", "--iters", "9",
        ])
        .unwrap();
        let o = pair_options(&t.request()).unwrap();
        assert_eq!(o.sizes, vec![65536, 1 << 20]);
        assert_eq!(o.op, Op::Read);
        assert_eq!(o.length, WireLength::Iterations(9));
        let t = parse(&["t", "host", "--size", "1M,2M,4M", "--duration", "120"]).unwrap();
        assert!(pair_options(&t.request())
            .unwrap_err()
            .to_string()
            .contains("--timeout"));
        // Refused by the option's range.
        assert!(parse(&["t", "host", "--check-iters", "0"]).is_err());
    }

    #[test]
    fn all_nics_arguments() {
        let parse = |argv: &[&str]| crate::commands::cli::parse_group::<PairArgs>(argv);
        let t = parse(&["t", "--listen", "--all-nics"]).unwrap();
        let e = pair_options(&t.request()).unwrap_err().to_string();
        assert!(e.contains("--all-nics --listen needs ADDR"), "{e}");
        let t = parse(&["t", "--listen", "10.0.0.1", "--all-nics"]).unwrap();
        assert!(pair_options(&t.request()).unwrap().all_nics);
        assert!(parse(&["t", "h", "--all-nics", "--device", "mlx5_0"]).is_err());
        assert!(parse(&["t", "h", "--all-nics", "--gpu", "1"]).is_err());
        assert!(parse(&["t", "h", "--all-nics", "--textfile", "/x"]).is_err());
    }
}
