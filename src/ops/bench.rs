//! The one-host and two-host benchmarks as operations: `bench loopback`, `probe`, `copy`
//! and `pair`. The command line (src/commands/bench.rs) maps its arguments onto these
//! requests; here each value is checked, turned into the bench's run options, and run.
//! Nothing here prints: notes go to the caller's callback, results come back for it to
//! render. The whole node's benches (`copy --concurrent`, `p2p`, `nccl`) are
//! src/ops/node.rs.

use crate::bench::copy::{CopyOptions, CopyReport};
use crate::bench::loopback::{export_only, run_loopback, LoopbackOptions};
use crate::bench::pair::allnics::RailsOutcome;
use crate::bench::pair::error::PairError;
use crate::bench::pair::{PairOptions, PairOutcome};
use crate::bench::parse::parse_dev_port;
use crate::bench::probe::{probe_all, probe_dmabuf_support, DmabufProbe, DmabufSupport};
use crate::bench::{ExportReport, LoopbackReport};
use crate::error::Result;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

use crate::bench::error::BenchError;
pub use crate::bench::loopback::RunLength;
pub use crate::bench::memory::MemoryKind;
pub use crate::bench::pair::protocol::{Op, WireLength};
/// What the command line's bench options take as defaults and parsers.
pub use crate::bench::{copy::DEFAULT_RUNS, pair::DEFAULT_PORT, parse::parse_size};

/// This end of a run: `--device DEV[:PORT]`, `--memory`, `--gpu`.
#[derive(Debug, Clone, Default)]
pub struct End {
    pub device: Option<String>,
    pub memory: Option<MemoryKind>,
    pub gpu: u32,
}

/// What runs and when it passes, as given (the loopback and the pair share them).
#[derive(Debug, Clone, Default)]
pub struct Run {
    /// Message sizes; empty: 8 MiB.
    pub sizes: Vec<u64>,
    pub duration: Option<f64>,
    pub iters: Option<u64>,
    pub qps: u32,
    pub tx_depth: u32,
    pub gid_index: Option<u32>,
    pub min_fraction: Option<f64>,
    pub min_gbps: Option<f64>,
}

impl Run {
    fn sizes_or_default(&self) -> Vec<u64> {
        if self.sizes.is_empty() {
            vec![8 << 20]
        } else {
            self.sizes.clone()
        }
    }

    /// `--min-fraction` (0 < x <= 1) and `--min-gbps` (x > 0): the problem, if any.
    fn floors_problem(&self) -> Option<String> {
        [
            ("--min-fraction", self.min_fraction),
            ("--min-gbps", self.min_gbps),
        ]
        .into_iter()
        .find_map(|(name, v)| {
            let x = v?;
            let bad = !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0);
            bad.then(|| format!("{name} {x} is out of range"))
        })
    }
}

/// `DEV[:PORT]`, when given.
fn dev_port(d: Option<&str>) -> std::result::Result<(Option<String>, Option<u8>), BenchError> {
    match d {
        Some(d) => {
            let (d, p) = parse_dev_port(d)?;
            Ok((Some(d), p))
        }
        None => Ok((None, None)),
    }
}

/// The sizes of `--sweep`: 4 KiB .. 8 MiB.
pub fn sweep_sizes() -> Vec<u64> {
    (12..=23).map(|p| 1u64 << p).collect()
}

/// `bench loopback`.
#[derive(Debug, Clone, Default)]
pub struct LoopbackRequest {
    pub end: End,
    /// `--to DEV[:PORT]`: the receiving device.
    pub to: Option<String>,
    /// Every size from 4 KiB to 8 MiB.
    pub sweep: bool,
    pub run: Run,
    /// Only export a dma-buf from GPU memory (no RDMA device).
    pub export_only: bool,
    /// Draw a progress bar (text on a terminal).
    pub progress: bool,
}

/// The loopback's run options, every value checked.
pub fn loopback_options(req: &LoopbackRequest) -> std::result::Result<LoopbackOptions, BenchError> {
    let (device, port) = dev_port(req.end.device.as_deref())?;
    let (to_device, to_port) = dev_port(req.to.as_deref())?;
    let sizes = if req.sweep {
        sweep_sizes()
    } else {
        req.run.sizes_or_default()
    };
    let length = match (req.run.iters, req.run.duration) {
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
        (None, None) => RunLength::Duration(Duration::from_secs(if req.sweep { 1 } else { 5 })),
    };
    if let Some(why) = req.run.floors_problem() {
        return Err(BenchError::InvalidArgument(why));
    }
    Ok(LoopbackOptions {
        device,
        port,
        to_device,
        to_port,
        memory: req.end.memory,
        gpu: req.end.gpu,
        sizes,
        length,
        qps: req.run.qps,
        tx_depth: req.run.tx_depth,
        gid_index: req.run.gid_index,
        min_line_rate_fraction: req.run.min_fraction,
        min_gbps: req.run.min_gbps,
        progress: req.progress.then_some(crate::output::progress::bench_bar),
    })
}

/// What a loopback run gives.
pub enum Loopback {
    /// `--export-only`: the GPU's dma-buf export alone.
    Export(ExportReport),
    Ran(Box<LoopbackReport>),
}

impl Loopback {
    pub fn passed(&self) -> bool {
        match self {
            Loopback::Export(r) => r.passed,
            Loopback::Ran(r) => r.passed,
        }
    }
}

/// `bench loopback`: an RDMA WRITE from this host's memory into its own (GPU) memory.
pub fn loopback(req: &LoopbackRequest, notes: &mut dyn FnMut(&str)) -> Result<Loopback> {
    let opts = loopback_options(req)?;
    if req.export_only {
        if req.end.memory.is_some_and(|m| m != MemoryKind::CudaDmabuf) {
            return Err(BenchError::InvalidArgument(
                "--export-only needs --memory cuda-dmabuf".into(),
            )
            .into());
        }
        let size = opts.sizes.iter().copied().max().unwrap_or(8 << 20);
        return Ok(Loopback::Export(export_only(req.end.gpu, size)?));
    }
    Ok(Loopback::Ran(Box::new(run_loopback(&opts, notes)?)))
}

/// What `bench probe` found (its JSON: `{"devices": [...]}`).
#[derive(Debug, Serialize)]
pub struct Probes {
    pub devices: Vec<DmabufProbe>,
}

impl Probes {
    /// Every device probed registers dma-buf memory.
    pub fn passed(&self) -> bool {
        self.devices
            .iter()
            .all(|p| p.support == DmabufSupport::Supported)
    }

    /// Each device: (name, verdict, detail).
    pub fn verdicts(&self) -> impl Iterator<Item = (&str, &'static str, &str)> {
        self.devices.iter().map(|p| {
            let verdict = match p.support {
                DmabufSupport::Supported => "supported",
                DmabufSupport::Unsupported => "NOT supported",
                DmabufSupport::Unknown => "unknown",
            };
            (p.device.as_str(), verdict, p.detail.as_str())
        })
    }
}

/// `bench probe`: whether each RDMA device (or the one named) registers dma-buf memory.
pub fn probe(device: Option<&str>) -> Result<Probes> {
    let devices = match device {
        Some(d) => vec![probe_dmabuf_support(Some(d))?],
        None => probe_all()?,
    };
    Ok(Probes { devices })
}

/// `bench copy` (one GPU after another).
#[derive(Debug, Clone, Default)]
pub struct CopyRequest {
    /// The GPUs; empty: every one.
    pub gpus: Vec<u32>,
    pub size: Option<u64>,
    pub runs: u32,
    pub min_fraction: Option<f64>,
    pub min_gbs: Option<f64>,
    /// `--no-numa-pin`.
    pub no_numa_pin: bool,
    pub progress: bool,
}

/// `bench copy`: host-to-GPU and GPU-to-host copy bandwidth of each GPU.
pub fn copy(req: &CopyRequest) -> Result<CopyReport> {
    crate::bench::parse::check_copy_floors(req.min_fraction, req.min_gbs)?;
    let size = usize::try_from(req.size.unwrap_or(crate::bench::copy::DEFAULT_SIZE as u64))
        .map_err(|_| BenchError::InvalidArgument("--size is too large".into()))?;
    let report = crate::bench::copy::run(&CopyOptions {
        gpus: req.gpus.clone(),
        size,
        runs: req.runs,
        min_fraction: req.min_fraction,
        min_gbs: req.min_gbs,
        progress: req.progress.then_some(crate::output::progress::bench_bar),
        numa_pin: !req.no_numa_pin,
    })?;
    Ok(report)
}

/// `bench pair`, either end.
#[derive(Debug, Clone)]
pub struct PairRequest {
    /// The client's peer (the listener's address).
    pub peer: Option<String>,
    /// The listener: `Some("")` listens on every address.
    pub listen: Option<String>,
    pub port: u16,
    pub token_file: Option<PathBuf>,
    /// Seconds for the whole run.
    pub timeout: u64,
    pub end: End,
    pub op: Op,
    pub run: Run,
    pub check_iters: u32,
    /// Write the result as Prometheus metrics to this file (node_exporter's textfile).
    pub textfile: Option<PathBuf>,
    /// Every rail at once.
    pub all_nics: bool,
}

fn bad(s: impl Into<String>) -> PairError {
    PairError::Usage(s.into())
}

/// The pair's run options, every value checked.
pub fn pair_options(req: &PairRequest) -> std::result::Result<PairOptions, PairError> {
    let (device, dev_port) = dev_port(req.end.device.as_deref())?;
    let sizes = req.run.sizes_or_default();
    if sizes.iter().any(|&s| s > u64::from(u32::MAX)) {
        return Err(bad("--size: a message is at most 4 GiB - 1"));
    }
    let length = match (req.run.iters, req.run.duration) {
        (Some(0), _) => return Err(bad("--iters must be > 0")),
        (Some(n), _) => WireLength::Iterations(n),
        (None, Some(d)) if d.is_finite() && d > 0.0 && d < 86_400.0 => WireLength::Seconds(d),
        (None, Some(d)) => return Err(bad(format!("--duration {d}: must be > 0 seconds"))),
        (None, None) => WireLength::Seconds(5.0),
    };
    check_pair(req, &sizes, length)?;
    Ok(PairOptions {
        listen: req.listen.clone(),
        peer: req.peer.clone(),
        port: req.port,
        token_file: req.token_file.clone(),
        timeout: Duration::from_secs(req.timeout),
        device,
        dev_port,
        memory: req.end.memory,
        gpu: req.end.gpu,
        op: req.op,
        sizes,
        length,
        qps: req.run.qps,
        tx_depth: req.run.tx_depth,
        check_iters: req.check_iters,
        gid_index: req.run.gid_index,
        min_fraction: req.run.min_fraction,
        min_gbps: req.run.min_gbps,
        all_nics: req.all_nics,
        rail: None,
        gpu_pci: None,
        rail_note: None,
    })
}

/// The pair's values that are checked together.
fn check_pair(
    req: &PairRequest,
    sizes: &[u64],
    length: WireLength,
) -> std::result::Result<(), PairError> {
    if let Some(why) = req.run.floors_problem() {
        return Err(bad(why));
    }
    let (qps, depth) = (req.run.qps, req.run.tx_depth);
    if qps == 0 || qps > 64 || depth == 0 || depth > 8192 {
        return Err(bad("--qps must be 1..64 and --tx-depth 1..8192"));
    }
    if req.check_iters == 0 {
        return Err(bad("--check-iters must be > 0 (every run checks its data)"));
    }
    if req.all_nics && req.listen.as_deref() == Some("") {
        return Err(bad(
            "--all-nics --listen needs ADDR: the address the client reaches for every rail's set-up (each rail's RDMA goes over its own NIC)",
        ));
    }
    if req.timeout == 0 || req.timeout > 86_400 {
        return Err(bad("--timeout must be 1..86400 seconds"));
    }
    if let WireLength::Seconds(d) = length {
        let need = d * sizes.len() as f64;
        if need >= req.timeout as f64 {
            return Err(bad(format!(
                "{} size(s) x {d} s do not fit in --timeout {} s; raise --timeout",
                sizes.len(),
                req.timeout
            )));
        }
    }
    Ok(())
}

/// What a pair run gives.
pub enum Paired {
    /// `--all-nics`: every rail.
    Rails(RailsOutcome),
    One(Box<PairOutcome>),
}

impl Paired {
    pub fn passed(&self) -> bool {
        match self {
            Paired::Rails(r) => r.passed,
            Paired::One(o) => o.report.passed,
        }
    }
}

/// `bench pair`: one end of a two-host RDMA run; writes the metrics file when asked.
pub fn pair(req: &PairRequest, notes: &dyn Fn(&str)) -> Result<Paired> {
    let opts = pair_options(req).map_err(BenchError::from)?;
    if opts.all_nics {
        let rails = crate::bench::pair::allnics::run_live(&opts, notes);
        return Ok(Paired::Rails(rails.map_err(BenchError::from)?));
    }
    let done = crate::bench::pair::run(&opts, notes).map_err(BenchError::from)?;
    if let Some(path) = &req.textfile {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let text = crate::output::pair_metrics::prometheus(&done.report, done.role, now);
        crate::host::textfile::write_textfile(path, &text)
            .map_err(|e| BenchError::Pair(format!("--textfile {}: {e}", path.display())))?;
    }
    Ok(Paired::One(Box::new(done)))
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn values_are_checked() {
        let run = Run {
            qps: 1,
            tx_depth: 128,
            ..Run::default()
        };
        let lb = |run: Run| {
            loopback_options(&LoopbackRequest {
                run,
                ..LoopbackRequest::default()
            })
            .err()
            .map(|e| e.to_string())
        };
        assert_eq!(lb(run.clone()), None);
        for (r, says) in [
            (
                Run {
                    iters: Some(0),
                    ..run.clone()
                },
                "--iters must be > 0",
            ),
            (
                Run {
                    duration: Some(-1.0),
                    ..run.clone()
                },
                "--duration -1",
            ),
            (
                Run {
                    min_fraction: Some(1.5),
                    ..run.clone()
                },
                "--min-fraction 1.5 is out of range",
            ),
            (
                Run {
                    min_gbps: Some(0.0),
                    ..run.clone()
                },
                "--min-gbps 0 is out of range",
            ),
        ] {
            let e = lb(r).unwrap_or_default();
            assert!(e.contains(says), "{e}");
        }
        let pair = |r: PairRequest| pair_options(&r).err().map(|e| e.to_string());
        let ok = PairRequest {
            peer: Some("h".into()),
            listen: None,
            port: DEFAULT_PORT,
            token_file: None,
            timeout: 60,
            end: End::default(),
            op: Op::Write,
            run: run.clone(),
            check_iters: 1,
            textfile: None,
            all_nics: false,
        };
        assert_eq!(pair(ok.clone()), None);
        let e = pair(PairRequest {
            run: Run {
                qps: 0,
                ..run.clone()
            },
            ..ok.clone()
        });
        assert!(e.unwrap_or_default().contains("--qps must be 1..64"));
        let e = pair(PairRequest {
            check_iters: 0,
            ..ok.clone()
        });
        assert!(e.unwrap_or_default().contains("--check-iters must be > 0"));
        let e = pair(PairRequest { timeout: 0, ..ok });
        assert!(e.unwrap_or_default().contains("--timeout must be 1..86400"));
    }
}
