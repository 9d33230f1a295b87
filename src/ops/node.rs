//! The whole node's benchmarks as operations: `bench copy --concurrent` (every GPU at
//! once), `bench p2p` (every ordered GPU pair) and `bench nccl` (all_reduce over every GPU,
//! in a child process). The command line (src/commands/bench_node.rs) maps its arguments
//! onto these requests and renders the reports; nothing here prints.

use crate::bench::concurrent::{self, ConcurrentReport};
use crate::bench::copy::CopyOptions;
use crate::bench::nccl::NcclReport;
use crate::bench::p2p::{self, P2pReport};
use gdrprov_rdma::cuda::node::Method;

use crate::bench::error::BenchError;
use crate::error::Result;

type Bench<T> = std::result::Result<T, BenchError>;
/// What the command line's node bench options take as defaults.
pub use crate::bench::nccl_child::DEFAULT_INIT_SECS;

/// `bench copy --concurrent`.
#[derive(Debug, Clone, Default)]
pub struct ConcurrentRequest {
    /// The GPUs; empty: every one CUDA sees.
    pub gpus: Vec<u32>,
    pub size: Option<u64>,
    pub min_fraction: Option<f64>,
    pub min_gbs: Option<f64>,
    /// `--no-numa-pin`.
    pub no_numa_pin: bool,
    pub samples: u32,
}

/// `bench p2p`.
#[derive(Debug, Clone, Default)]
pub struct P2pRequest {
    pub gpus: Vec<u32>,
    pub size: Option<u64>,
    pub samples: u32,
}

/// `bench nccl` (and its child, `--child`).
#[derive(Debug, Clone, Default)]
pub struct NcclRequest {
    pub gpus: Vec<u32>,
    /// Message sizes; empty: the bench's own.
    pub sizes: Vec<u64>,
    pub iters: u32,
    /// Seconds the child may take to set NCCL up.
    pub init_timeout: u64,
}

fn method(samples: u32) -> Bench<Method> {
    if samples == 0 {
        return Err(BenchError::InvalidArgument("--samples must be > 0".into()));
    }
    Ok(Method {
        samples,
        ..Method::default()
    })
}

fn size(v: Option<u64>) -> Bench<usize> {
    let s = v.unwrap_or(concurrent::DEFAULT_SIZE as u64);
    if s == 0 {
        return Err(BenchError::InvalidArgument("--size must be > 0".into()));
    }
    usize::try_from(s).map_err(|_| BenchError::InvalidArgument("--size is too large".into()))
}

/// The GPUs to use: those named, else every one CUDA sees; no GPU is an error.
fn indexes(named: &[u32]) -> Bench<Vec<u32>> {
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

/// `bench copy --concurrent`: every GPU's copies at once.
pub fn concurrent(req: &ConcurrentRequest) -> Result<ConcurrentReport> {
    let m = method(req.samples)?;
    crate::bench::parse::check_copy_floors(req.min_fraction, req.min_gbs)?;
    let gpus = indexes(&req.gpus)?;
    let opts = CopyOptions {
        gpus: gpus.clone(),
        min_fraction: req.min_fraction,
        min_gbs: req.min_gbs,
        numa_pin: !req.no_numa_pin,
        ..CopyOptions::default()
    };
    let topo = crate::facts::gpu_topo::of_running_system();
    Ok(concurrent::run(
        &gpus,
        size(req.size)?,
        &m,
        None,
        &opts,
        &topo,
    )?)
}

/// `bench p2p`: every ordered pair of GPUs.
pub fn p2p(req: &P2pRequest) -> Result<P2pReport> {
    let m = method(req.samples)?;
    let gpus = indexes(&req.gpus)?;
    let topo = crate::facts::gpu_topo::of_running_system();
    Ok(p2p::run(&gpus, size(req.size)?, &m, &topo)?)
}

/// The all_reduce's sizes, every value of the request checked.
fn nccl_sizes(req: &NcclRequest) -> Bench<Vec<usize>> {
    if req.iters == 0 {
        return Err(BenchError::InvalidArgument("--iters must be > 0".into()));
    }
    let sizes: Vec<usize> = if req.sizes.is_empty() {
        crate::bench::nccl::SIZES.to_vec()
    } else {
        req.sizes
            .iter()
            .map(|s| usize::try_from(*s).unwrap_or(usize::MAX))
            .collect()
    };
    if sizes.iter().any(|s| *s < 4096) {
        return Err(BenchError::InvalidArgument(
            "--size: each size must be at least 4KiB".into(),
        ));
    }
    if req.init_timeout == 0 {
        return Err(BenchError::InvalidArgument(
            "--init-timeout must be > 0 seconds".into(),
        ));
    }
    Ok(sizes)
}

/// `bench nccl`: the all_reduce over the GPUs, in a child (`bench nccl --child`).
pub fn nccl(req: &NcclRequest) -> Result<NcclReport> {
    let sizes = nccl_sizes(req)?;
    let gpus = indexes(&req.gpus)?;
    let pcis = crate::bench::nccl::pci_addresses(&gpus);
    if gpus.len() < 2 {
        return Ok(crate::bench::nccl::one_gpu(
            pcis.first().map(String::as_str).unwrap_or("?"),
        ));
    }
    let topo = crate::facts::gpu_topo::of_running_system();
    let limits = crate::bench::nccl_child::Limits {
        init: std::time::Duration::from_secs(req.init_timeout),
        ..Default::default()
    };
    let program = crate::bench::nccl::this_executable();
    let r = crate::bench::nccl::run(program, &gpus, &pcis, &sizes, req.iters, &topo, &limits)?;
    Ok(r)
}

/// The child's side (`gdrprov bench nccl --child`): dies with its parent, runs the
/// all_reduce here and hands each stage and the result (or the error) to LINE, one JSON
/// value each, for the caller to write as a line; Ok(0) when it ran, Ok(1) when not.
pub fn nccl_child(req: &NcclRequest, line: &mut dyn FnMut(serde_json::Value)) -> Result<i32> {
    let sizes = nccl_sizes(req)?;
    // A gdrprov killed while waiting takes its child with it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let ran = gdrprov_rdma::cuda::nccl::all_reduce(&req.gpus, &sizes, 5, req.iters, &mut |s| {
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
            Ok(0)
        }
        Err(e) => {
            // The parent makes it its own invalid-argument error: the message alone.
            let msg = match e {
                gdrprov_rdma::Error::InvalidArgument(m) => m,
                e => e.to_string(),
            };
            line(serde_json::json!({ "error": msg }));
            Ok(1)
        }
    }
}
