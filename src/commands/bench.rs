//! `gdrprov bench ...`: its arguments (src/commands/cli/bench.rs) turned into
//! run options, and the runs.

use std::time::Duration;

use crate::bench::error::BenchError;
use crate::bench::loopback::{export_only, run_loopback, LoopbackOptions, RunLength};
use crate::bench::memory::MemoryKind;
use crate::bench::pair::error::PairError;
use crate::bench::pair::protocol::WireLength;
use crate::bench::pair::PairOptions;
use crate::bench::parse::parse_dev_port;
use crate::bench::probe::{probe_all, probe_dmabuf_support, DmabufSupport};
use crate::commands::cli::bench::{
    BenchArgs, BenchCommand, CopyArgs, LoopbackArgs, PairArgs, ProbeArgs,
};
use crate::names;
use crate::output::bench::{render_export_text, render_text};
use crate::output::{Format, Output};

/// Output format of a bench command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchFormat {
    Text,
    Json,
}

/// The sizes of --sweep: 4 KiB .. 8 MiB.
pub fn sweep_sizes() -> Vec<u64> {
    (12..=23).map(|p| 1u64 << p).collect()
}

impl LoopbackArgs {
    /// Turn the arguments into run options.
    pub fn to_options(&self, format: BenchFormat) -> Result<LoopbackOptions, BenchError> {
        let (device, port) = match &self.end.device {
            Some(d) => {
                let (d, p) = parse_dev_port(d)?;
                (Some(d), p)
            }
            None => (None, None),
        };
        let (to_device, to_port) = match &self.to {
            Some(d) => {
                let (d, p) = parse_dev_port(d)?;
                (Some(d), p)
            }
            None => (None, None),
        };
        let sizes = if self.sweep {
            sweep_sizes()
        } else if self.run.size.is_empty() {
            vec![8 << 20]
        } else {
            self.run.size.clone()
        };
        let length = match (self.run.iters, self.run.duration) {
            (Some(n), _) if n > 0 => RunLength::Iterations(n),
            (Some(_), _) => return Err(BenchError::InvalidArgument("--iters must be > 0".into())),
            (None, Some(d)) if d.is_finite() && d > 0.0 && d < 86_400.0 => {
                RunLength::Duration(Duration::from_secs_f64(d))
            }
            (None, Some(d)) => {
                return Err(BenchError::InvalidArgument(format!(
                    "--duration {d}: must be > 0 seconds"
                )))
            }
            (None, None) => {
                RunLength::Duration(Duration::from_secs(if self.sweep { 1 } else { 5 }))
            }
        };
        for (name, v) in [
            ("--min-fraction", self.run.min_fraction),
            ("--min-gbps", self.run.min_gbps),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0) {
                    return Err(BenchError::InvalidArgument(format!(
                        "{name} {x} is out of range"
                    )));
                }
            }
        }
        Ok(LoopbackOptions {
            device,
            port,
            to_device,
            to_port,
            memory: self.end.memory,
            gpu: self.end.gpu,
            sizes,
            length,
            qps: self.run.qps,
            tx_depth: self.run.tx_depth,
            gid_index: self.run.gid_index,
            min_line_rate_fraction: self.run.min_fraction,
            min_gbps: self.run.min_gbps,
            progress: (format == BenchFormat::Text && crate::output::stderr_is_terminal())
                .then_some(crate::output::progress::bench_bar),
        })
    }
}

fn bad(s: String) -> PairError {
    PairError::Usage(s)
}

impl PairArgs {
    /// The pair's run options, every value checked.
    pub fn to_options(&self) -> Result<PairOptions, PairError> {
        let (device, port) = match &self.end.device {
            Some(d) => {
                let (d, p) = parse_dev_port(d)?;
                (Some(d), p)
            }
            None => (None, None),
        };
        let sizes = if self.run.size.is_empty() {
            vec![8 << 20]
        } else {
            self.run.size.clone()
        };
        if sizes.iter().any(|&s| s > u64::from(u32::MAX)) {
            return Err(bad("--size: a message is at most 4 GiB - 1".into()));
        }
        let length = match (self.run.iters, self.run.duration) {
            (Some(0), _) => return Err(bad("--iters must be > 0".into())),
            (Some(n), _) => WireLength::Iterations(n),
            (None, Some(d)) if d.is_finite() && d > 0.0 && d < 86_400.0 => WireLength::Seconds(d),
            (None, Some(d)) => return Err(bad(format!("--duration {d}: must be > 0 seconds"))),
            (None, None) => WireLength::Seconds(5.0),
        };
        for (name, v) in [
            ("--min-fraction", self.run.min_fraction),
            ("--min-gbps", self.run.min_gbps),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0) {
                    return Err(bad(format!("{name} {x} is out of range")));
                }
            }
        }
        if self.run.qps == 0
            || self.run.qps > 64
            || self.run.tx_depth == 0
            || self.run.tx_depth > 8192
        {
            return Err(bad("--qps must be 1..64 and --tx-depth 1..8192".into()));
        }
        if self.check_iters == 0 {
            return Err(bad(
                "--check-iters must be > 0 (every run checks its data)".into()
            ));
        }
        if self.all_nics && self.listen.as_deref() == Some("") {
            return Err(bad(
                "--all-nics --listen needs ADDR: the address the client reaches for every rail's set-up (each rail's RDMA goes over its own NIC)".into(),
            ));
        }
        if self.timeout == 0 || self.timeout > 86_400 {
            return Err(bad("--timeout must be 1..86400 seconds".into()));
        }
        if let WireLength::Seconds(d) = length {
            let need = d * sizes.len() as f64;
            if need >= self.timeout as f64 {
                return Err(bad(format!(
                    "{} size(s) x {d} s do not fit in --timeout {} s; raise --timeout",
                    sizes.len(),
                    self.timeout
                )));
            }
        }
        Ok(PairOptions {
            listen: self.listen.clone(),
            peer: self.peer.clone(),
            port: self.port,
            token_file: self.token_file.clone(),
            timeout: Duration::from_secs(self.timeout),
            device,
            dev_port: port,
            memory: self.end.memory,
            gpu: self.end.gpu,
            op: self.op,
            sizes,
            length,
            qps: self.run.qps,
            tx_depth: self.run.tx_depth,
            check_iters: self.check_iters,
            gid_index: self.run.gid_index,
            min_fraction: self.run.min_fraction,
            min_gbps: self.run.min_gbps,
            all_nics: self.all_nics,
            rail: None,
            gpu_pci: None,
            rail_note: None,
        })
    }
}

fn format_of(out: &Output) -> BenchFormat {
    if out.format == Format::Json {
        BenchFormat::Json
    } else {
        BenchFormat::Text
    }
}

/// Run `gdrprov bench loopback`: Ok(0) when it passed, Ok(1) when the data check or threshold failed.
pub fn run(args: &LoopbackArgs, out: &Output) -> Result<i32, BenchError> {
    let format = format_of(out);
    let opts = args.to_options(format)?;
    if args.export_only {
        if args.end.memory.is_some_and(|m| m != MemoryKind::CudaDmabuf) {
            return Err(BenchError::InvalidArgument(
                "--export-only needs --memory cuda-dmabuf".into(),
            ));
        }
        let size = opts.sizes.iter().copied().max().unwrap_or(8 << 20);
        let r = export_only(args.end.gpu, size)?;
        crate::output::bench::show(out, names::BENCH_LOOPBACK, || render_export_text(&r), &r)?;
        return Ok(if r.passed { 0 } else { 1 });
    }
    let mut notes = |s: &str| crate::output::stderr_line(s);
    let r = run_loopback(&opts, &mut notes)?;
    crate::output::bench::show(out, names::BENCH_LOOPBACK, || render_text(&r), &r)?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Run `gdrprov bench probe`: Ok(0) when every probed device supports dma-buf MRs, else Ok(1).
pub fn run_probe(args: &ProbeArgs, out: &Output) -> Result<i32, BenchError> {
    let probes = match &args.device {
        Some(d) => vec![probe_dmabuf_support(Some(d))?],
        None => probe_all()?,
    };
    let text = || {
        let mut t = String::new();
        for p in &probes {
            let verdict = match p.support {
                DmabufSupport::Supported => "supported",
                DmabufSupport::Unsupported => "NOT supported",
                DmabufSupport::Unknown => "unknown",
            };
            t.push_str(&format!(
                "{}: dma-buf MRs {verdict} ({})\n",
                p.device, p.detail
            ));
        }
        t
    };
    crate::output::bench::show(
        out,
        names::BENCH_PROBE,
        text,
        &serde_json::json!({ "devices": probes }),
    )?;
    Ok(
        if probes.iter().all(|p| p.support == DmabufSupport::Supported) {
            0
        } else {
            1
        },
    )
}

/// Run `gdrprov bench copy`: Ok(0) when every GPU reached its floor, else Ok(1).
pub fn run_copy(args: &CopyArgs, out: &Output) -> Result<i32, BenchError> {
    crate::bench::parse::check_copy_floors(args.min_fraction, args.min_gbs)?;
    let size = usize::try_from(args.size.unwrap_or(crate::bench::copy::DEFAULT_SIZE as u64))
        .map_err(|_| BenchError::InvalidArgument("--size is too large".into()))?;
    let opts = crate::bench::copy::CopyOptions {
        gpus: args.gpu.clone(),
        size,
        runs: args.runs,
        min_fraction: args.min_fraction,
        min_gbs: args.min_gbs,
        progress: (!out.json() && crate::output::stderr_is_terminal())
            .then_some(crate::output::progress::bench_bar),
        numa_pin: !args.no_numa_pin,
    };
    let r = crate::bench::copy::run(&opts)?;
    crate::output::bench::show(out, names::BENCH_COPY, || crate::output::copy::text(&r), &r)?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Run `gdrprov bench pair` (either end): Ok(0) when it passed, Ok(1) when the data check or
/// threshold failed; every other failure is an error naming it.
pub fn run_pair(args: &PairArgs, out: &Output) -> Result<i32, BenchError> {
    let opts = args.to_options()?;
    let notes = |s: &str| crate::output::stderr_line(s);
    if opts.all_nics {
        let done = crate::bench::pair::allnics::run_live(&opts, &notes)?;
        crate::output::bench::show(
            out,
            names::BENCH_PAIR,
            || crate::output::pair::render_rails(&done),
            &done,
        )?;
        return Ok(if done.passed { 0 } else { 1 });
    }
    let done = crate::bench::pair::run(&opts, &notes)?;
    if let Some(path) = &args.textfile {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let text = crate::output::pair_metrics::prometheus(&done.report, done.role, now);
        crate::host::textfile::write_textfile(path, &text)
            .map_err(|e| BenchError::Pair(format!("--textfile {}: {e}", path.display())))?;
    }
    crate::output::bench::show(
        out,
        names::BENCH_PAIR,
        || crate::output::pair::render_text(&done.report, done.role),
        &done,
    )?;
    Ok(if done.report.passed { 0 } else { 1 })
}

/// Dispatch `gdrprov bench <command>`.
pub fn run_bench(args: &BenchArgs, out: &Output) -> Result<i32, BenchError> {
    match &args.command {
        BenchCommand::Loopback(a) => run(a, out),
        BenchCommand::Probe(a) => run_probe(a, out),
        BenchCommand::Copy(a) if a.node.concurrent => {
            let choice = crate::commands::bench_node::CopyChoice {
                gpu: a.gpu.clone(),
                size: a.size,
                min_fraction: a.min_fraction,
                min_gbs: a.min_gbs,
                no_numa_pin: a.no_numa_pin,
            };
            crate::commands::bench_node::run_concurrent(&choice, &a.node, out)
        }
        BenchCommand::Copy(a) => run_copy(a, out),
        BenchCommand::P2p(a) => crate::commands::bench_node::run_p2p(a, out),
        BenchCommand::Nccl(a) => crate::commands::bench_node::run_nccl(a, out),
        BenchCommand::Pair(a) => run_pair(a, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::pair::protocol::Op;
    use crate::bench::parse::parse_size;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("8MiB"), Ok(8 << 20));
        assert_eq!(parse_size("1m"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("8 parsecs").is_err());
        assert!(parse_size("x").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn dev_port() {
        assert_eq!(parse_dev_port("mlx5_0").unwrap(), ("mlx5_0".into(), None));
        assert_eq!(
            parse_dev_port("mlx5_0:2").unwrap(),
            ("mlx5_0".into(), Some(2))
        );
        assert!(parse_dev_port("mlx5_0:0").is_err());
        assert!(parse_dev_port("mlx5_0:x").is_err());
        assert!(parse_dev_port(":1").is_err());
        assert!(parse_dev_port("").is_err());
    }

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
        let o = t.to_options(BenchFormat::Text).unwrap();
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!(o.port, Some(1));
        assert_eq!(o.sizes, vec![65536, 1 << 20, 8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(2)));
        let t = parse(&["t"]).unwrap();
        let o = t.to_options(BenchFormat::Text).unwrap();
        assert_eq!(o.sizes, vec![8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(5)));
        assert!(parse(&["t", "--sweep", "--size", "1M"]).is_err());
        assert!(parse(&["t", "--duration", "1", "--iters", "5"]).is_err());
        let t = parse(&["t", "--sweep", "--iters", "100", "--memory", "cuda-peermem"]).unwrap();
        let o = t.to_options(BenchFormat::Text).unwrap();
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
        let o = t.to_options().unwrap();
        assert_eq!(o.sizes, vec![65536, 1 << 20]);
        assert_eq!(o.op, Op::Read);
        assert_eq!(o.length, WireLength::Iterations(9));
        let t = parse(&["t", "host", "--size", "1M,2M,4M", "--duration", "120"]).unwrap();
        assert!(t
            .to_options()
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
        let e = t.to_options().unwrap_err().to_string();
        assert!(e.contains("--all-nics --listen needs ADDR"), "{e}");
        let t = parse(&["t", "--listen", "10.0.0.1", "--all-nics"]).unwrap();
        assert!(t.to_options().unwrap().all_nics);
        assert!(parse(&["t", "h", "--all-nics", "--device", "mlx5_0"]).is_err());
        assert!(parse(&["t", "h", "--all-nics", "--gpu", "1"]).is_err());
        assert!(parse(&["t", "h", "--all-nics", "--textfile", "/x"]).is_err());
    }
}
