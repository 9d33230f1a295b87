//! Command-line arguments of `gdrprov bench` and their execution.

use std::time::Duration;

use crate::bench::error::BenchError;
use crate::bench::loopback::{export_only, run_loopback, LoopbackOptions, RunLength};
use crate::bench::memory::MemoryKind;
use crate::bench::probe::{probe_all, probe_dmabuf_support, DmabufSupport};
use crate::output::bench::{render_export_text, render_text};
use crate::output::{Format, Output};

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchFormat {
    Text,
    Json,
}

/// `gdrprov bench ...`
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// RDMA WRITE bandwidth between two QPs of this host (like ib_write_bw against itself), with a data check.
    Loopback(LoopbackArgs),
    /// Does the RDMA device accept dma-buf memory regions? (needs no GPU)
    Probe(ProbeArgs),
    /// GPU <-> host copy bandwidth (pinned memory, 256 MiB, best of several runs) per GPU.
    Copy(CopyArgs),
    /// RDMA between two hosts: `--listen` on one, `pair PEER` on the other; with a data check.
    Pair(crate::bench::pair::PairArgs),
    /// GPU -> GPU copy-engine bandwidth of every ordered pair: read, write, bidirectional, peer access and path.
    P2p(crate::commands::bench_node::P2pArgs),
    /// NCCL all_reduce over every local GPU in one process: busbw per size, the transports NCCL chose.
    Nccl(crate::commands::bench_node::NcclArgs),
}

/// `gdrprov bench copy`
#[derive(Debug, Clone, clap::Args)]
pub struct CopyArgs {
    /// CUDA device index(es) (default: every GPU).
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub gpu: Vec<u32>,
    /// Bytes per copy; K/M/G suffixes [default: 256MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Timed runs per direction; the best counts.
    #[arg(long, default_value_t = crate::bench::copy::DEFAULT_RUNS, value_name = "N")]
    pub runs: u32,
    /// Pass at this fraction of the link's raw rate [default: Azure's floor for the GPU, else 0.75].
    #[arg(long, value_name = "FRACTION")]
    pub min_fraction: Option<f64>,
    /// Pass at this many GB/s each way.
    #[arg(long, value_name = "GBS")]
    pub min_gbs: Option<f64>,
    #[command(flatten)]
    pub node: crate::commands::bench_node::ConcurrentArgs,
}

/// `gdrprov bench loopback`
#[derive(Debug, Clone, clap::Args)]
pub struct LoopbackArgs {
    /// RDMA device and port that sends (default: the first ACTIVE port).
    #[arg(long, value_name = "DEV[:PORT]")]
    pub device: Option<String>,
    /// RDMA device and port that receives (default: the sending port itself).
    #[arg(long, value_name = "DEV[:PORT]")]
    pub to: Option<String>,
    /// Where the buffers live (default: cuda-dmabuf when a GPU is present, else host).
    #[arg(long, value_enum)]
    pub memory: Option<MemoryKind>,
    /// CUDA device index for GPU memory.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub gpu: u32,
    /// Message size(s) in bytes; K/M/G (binary) suffixes and comma lists are accepted [default: 8MiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size, conflicts_with = "sweep")]
    pub size: Vec<u64>,
    /// Every power of two from 4 KiB to 8 MiB.
    #[arg(long)]
    pub sweep: bool,
    /// Seconds per message size [default: 5, or 1 with --sweep].
    #[arg(long, value_name = "SECS", conflicts_with = "iters")]
    pub duration: Option<f64>,
    /// Iterations (messages per QP) per message size, instead of a duration.
    #[arg(long, value_name = "N")]
    pub iters: Option<u64>,
    /// Number of QP pairs.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub qps: u32,
    /// Outstanding WRITEs per QP (capped so that at most 32 MiB are in flight per QP).
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub tx_depth: u32,
    /// GID index on RoCE (default: the RoCE v2 IPv4 GID).
    #[arg(long, value_name = "N")]
    pub gid_index: Option<u32>,
    /// Pass when the average reaches this fraction of line rate [default: 0.90 GPU memory, 0.95 host].
    #[arg(long, value_name = "FRACTION")]
    pub min_fraction: Option<f64>,
    /// Pass when the average reaches this many Gb/s (also on software RDMA devices).
    #[arg(long, value_name = "GBPS")]
    pub min_gbps: Option<f64>,
    /// Allocate GPU memory and export it as dma-buf, then stop (test mode; needs no RDMA device).
    #[arg(long)]
    pub export_only: bool,
}

/// `gdrprov bench probe`
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// RDMA device (default: every device).
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
}

pub use crate::bench::parse::{parse_dev_port, parse_size};

/// The sizes of --sweep: 4 KiB .. 8 MiB.
pub fn sweep_sizes() -> Vec<u64> {
    (12..=23).map(|p| 1u64 << p).collect()
}

impl LoopbackArgs {
    /// Turn the arguments into run options.
    pub fn to_options(&self, format: BenchFormat) -> Result<LoopbackOptions, BenchError> {
        let (device, port) = match &self.device {
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
        } else if self.size.is_empty() {
            vec![8 << 20]
        } else {
            self.size.clone()
        };
        let length = match (self.iters, self.duration) {
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
            ("--min-fraction", self.min_fraction),
            ("--min-gbps", self.min_gbps),
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
            memory: self.memory,
            gpu: self.gpu,
            sizes,
            length,
            qps: self.qps,
            tx_depth: self.tx_depth,
            gid_index: self.gid_index,
            min_line_rate_fraction: self.min_fraction,
            min_gbps: self.min_gbps,
            progress: format == BenchFormat::Text && crate::output::stderr_is_terminal(),
        })
    }
}

/// The JSON document of a bench command, in gdrprov's envelope (bench runs
/// on the running system only: root `/`).
fn to_json<T: serde::Serialize>(command: &str, v: &T) -> Result<String, BenchError> {
    let v = crate::output::envelope(command, std::path::Path::new("/"), v);
    serde_json::to_string_pretty(&v).map_err(|e| BenchError::InvalidArgument(format!("JSON: {e}")))
}

/// Prints a bench's text, or its JSON document (in the envelope).
fn show<T: serde::Serialize>(
    out: &Output,
    command: &str,
    text: impl FnOnce() -> String,
    v: &T,
) -> Result<(), BenchError> {
    match format_of(out) {
        BenchFormat::Text => out.raw(&text()),
        BenchFormat::Json => out.raw(&format!("{}\n", to_json(command, v)?)),
    }
    Ok(())
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
        if args.memory.is_some_and(|m| m != MemoryKind::CudaDmabuf) {
            return Err(BenchError::InvalidArgument(
                "--export-only needs --memory cuda-dmabuf".into(),
            ));
        }
        let size = opts.sizes.iter().copied().max().unwrap_or(8 << 20);
        let r = export_only(args.gpu, size)?;
        show(out, "bench loopback", || render_export_text(&r), &r)?;
        return Ok(if r.passed { 0 } else { 1 });
    }
    let mut notes = |s: &str| crate::output::stderr_line(s);
    let r = run_loopback(&opts, &mut notes)?;
    show(out, "bench loopback", || render_text(&r), &r)?;
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
    show(
        out,
        "bench probe",
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
    for (name, v) in [
        ("--min-fraction", args.min_fraction),
        ("--min-gbs", args.min_gbs),
    ] {
        if let Some(x) = v {
            if !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0) {
                return Err(BenchError::InvalidArgument(format!(
                    "{name} {x} is out of range"
                )));
            }
        }
    }
    let size = usize::try_from(args.size.unwrap_or(crate::bench::copy::DEFAULT_SIZE as u64))
        .map_err(|_| BenchError::InvalidArgument("--size is too large".into()))?;
    let opts = crate::bench::copy::CopyOptions {
        gpus: args.gpu.clone(),
        size,
        runs: args.runs,
        min_fraction: args.min_fraction,
        min_gbs: args.min_gbs,
    };
    let r = crate::bench::copy::run(&opts)?;
    show(out, "bench copy", || crate::output::copy::text(&r), &r)?;
    Ok(if r.passed { 0 } else { 1 })
}

/// Run `gdrprov bench pair` (either end): Ok(0) when it passed, Ok(1) when the data check or
/// threshold failed; every other failure is an error naming it.
pub fn run_pair(args: &crate::bench::pair::PairArgs, out: &Output) -> Result<i32, BenchError> {
    let opts = args.to_options()?;
    let notes = |s: &str| crate::output::stderr_line(s);
    if opts.all_nics {
        let done = crate::bench::pair::allnics::run_live(&opts, &notes)?;
        show(
            out,
            "bench pair",
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
        crate::fleet::files::write_textfile(path, &text)
            .map_err(|e| BenchError::Pair(format!("--textfile {}: {e}", path.display())))?;
    }
    show(
        out,
        "bench pair",
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
        use clap::Parser;
        #[derive(clap::Parser)]
        struct T {
            #[command(flatten)]
            a: LoopbackArgs,
        }
        let t = T::try_parse_from([
            "t",
            "--device",
            "rxe0:1",
            "--size",
            "64K,1M,8M",
            "--duration",
            "2",
        ])
        .unwrap();
        let o = t.a.to_options(BenchFormat::Text).unwrap();
        assert_eq!(o.device.as_deref(), Some("rxe0"));
        assert_eq!(o.port, Some(1));
        assert_eq!(o.sizes, vec![65536, 1 << 20, 8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(2)));
        let t = T::try_parse_from(["t"]).unwrap();
        let o = t.a.to_options(BenchFormat::Text).unwrap();
        assert_eq!(o.sizes, vec![8 << 20]);
        assert_eq!(o.length, RunLength::Duration(Duration::from_secs(5)));
        assert!(T::try_parse_from(["t", "--sweep", "--size", "1M"]).is_err());
        assert!(T::try_parse_from(["t", "--duration", "1", "--iters", "5"]).is_err());
        let t = T::try_parse_from(["t", "--sweep", "--iters", "100", "--memory", "cuda-peermem"])
            .unwrap();
        let o = t.a.to_options(BenchFormat::Text).unwrap();
        assert_eq!(o.sizes.len(), 12);
        assert_eq!(o.memory, Some(MemoryKind::CudaPeermem));
        assert_eq!(o.length, RunLength::Iterations(100));
        let t = T::try_parse_from(["t", "--min-fraction", "1.5"]).unwrap();
        assert!(t.a.to_options(BenchFormat::Text).is_err());
    }
}
