//! The whole node's benchmarks: `gdrprov bench copy --concurrent` (every GPU at once) and
//! `gdrprov bench p2p` (every ordered GPU pair). Their arguments live here, self-contained, so
//! that `bench copy` gains one flattened field and `bench` one subcommand.

use crate::bench::concurrent;
use crate::bench::copy::CopyOptions;
use crate::bench::error::BenchError;
use crate::bench::p2p;
use crate::bench::parse::parse_size;
use crate::output::{Format, Output};
use gdrprov_rdma::cuda::node::Method;

/// `bench copy --concurrent` (flattened into `bench copy`'s arguments).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConcurrentArgs {
    /// Host -> device and device -> host on every GPU at once (each alone first), per GPU and in
    /// sum, floors from the topology (512 MiB copies, median of --samples, nvbandwidth's method).
    #[arg(long)]
    pub concurrent: bool,
    /// Samples whose median counts (with --concurrent).
    #[arg(long, default_value_t = 3, value_name = "N", requires = "concurrent")]
    pub samples: u32,
}

/// `gdrprov bench p2p`
#[derive(Debug, Clone, clap::Args)]
pub struct P2pArgs {
    /// CUDA device indexes (default: every GPU); every ordered pair of them is measured.
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub gpu: Vec<u32>,
    /// Bytes per copy; K/M/G suffixes [default: 512MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Samples whose median counts.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub samples: u32,
}

/// `bench copy`'s own options that `--concurrent` uses (passed in, so that this file needs
/// nothing of `bench copy`'s argument struct).
#[derive(Debug, Clone, Default)]
pub struct CopyChoice {
    pub gpu: Vec<u32>,
    pub size: Option<u64>,
    pub min_fraction: Option<f64>,
    pub min_gbs: Option<f64>,
}

/// Text, or the JSON document in gdrprov's envelope (bench runs on the running system: root `/`).
fn show<T: serde::Serialize>(
    out: &Output,
    command: &str,
    text: impl FnOnce() -> String,
    v: &T,
) -> Result<(), BenchError> {
    if out.format == Format::Json {
        let v = crate::output::envelope(command, std::path::Path::new("/"), v);
        let json = serde_json::to_string_pretty(&v)
            .map_err(|e| BenchError::InvalidArgument(format!("JSON: {e}")))?;
        out.raw(&format!("{json}\n"));
    } else {
        out.raw(&text());
    }
    Ok(())
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
        return Err(BenchError::Cuda {
            op: "cuDeviceGetCount",
            code: 100,
            name: "CUDA_ERROR_NO_DEVICE".into(),
            message: "no CUDA device".into(),
            hint: ": no NVIDIA GPU is visible (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)".into(),
        });
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
    let gpus = indexes(&args.gpu)?;
    let opts = CopyOptions {
        gpus: gpus.clone(),
        min_fraction: args.min_fraction,
        min_gbs: args.min_gbs,
        ..CopyOptions::default()
    };
    let topo = crate::facts::gpu_topo::of_running_system();
    let r = concurrent::run(&gpus, size(args.size)?, &m, None, &opts, &topo)?;
    show(
        out,
        "bench copy",
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
    show(out, "bench p2p", || crate::output::node::p2p_text(&r), &r)?;
    Ok(if r.passed { 0 } else { 1 })
}

/// `gdrprov bench nccl`
#[derive(Debug, Clone, clap::Args)]
pub struct NcclArgs {
    /// CUDA device indexes (default: every GPU); one communicator each, in this process.
    #[arg(long, value_name = "N", value_delimiter = ',')]
    pub gpu: Vec<u32>,
    /// Message size(s) in bytes; K/M/G suffixes, comma lists [default: 1MiB,8MiB,64MiB,256MiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Timed all_reduce steps per size (after 5 warm-ups).
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub iters: u32,
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
    let gpus = indexes(&args.gpu)?;
    let pcis = crate::bench::nccl::pci_addresses(&gpus);
    let r = if gpus.len() < 2 {
        crate::bench::nccl::one_gpu(pcis.first().map(String::as_str).unwrap_or("?"))
    } else {
        let topo = crate::facts::gpu_topo::of_running_system();
        crate::bench::nccl::run(&gpus, &pcis, &sizes, args.iters, &topo)?
    };
    show(out, "bench nccl", || crate::output::node::nccl_text(&r), &r)?;
    Ok(if r.verdict == "fail" { 1 } else { 0 })
}
