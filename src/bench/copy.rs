//! GPU <-> host copy bandwidth (`gdrprov bench copy`): pinned host memory
//! (cuMemHostAlloc), device memory (cuMemAlloc), cuMemcpyHtoDAsync /
//! cuMemcpyDtoHAsync of one large buffer on a stream, timed with events, best
//! of several runs, per GPU. The floor defaults to Azure's health-check
//! figures (H100/H200 at Gen5 x16: 48 GB/s each way; A100 at Gen4: 21 GB/s),
//! else a fraction of the link's raw rate.

use serde::Serialize;

use super::error::BenchError;
use crate::facts::links::{generation, parse_speed, raw_gbytes};
use crate::facts::numa::Placement;
use gdrprov_rdma::cuda::copy::{ensure_libcuda, CopyRig};
use gdrprov_rdma::cuda::{self, Gpu};

pub const DEFAULT_SIZE: usize = 256 << 20;
pub const DEFAULT_RUNS: u32 = 10;
/// Used where no Azure floor is known: a fraction of the link's raw rate
/// (48 GB/s is 0.76 of Gen5 x16's 63 GB/s).
pub const DEFAULT_FRACTION: f64 = 0.75;

#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// CUDA device indexes; empty = every GPU.
    pub gpus: Vec<u32>,
    pub size: usize,
    pub runs: u32,
    pub min_fraction: Option<f64>,
    pub min_gbs: Option<f64>,
    /// A bar per GPU measured, on standard error (callers pass true only on a
    /// terminal and never with JSON output).
    pub progress: crate::bench::progress::Bars,
    /// Allocate and drive each GPU's pinned host buffer from its NUMA node's CPUs
    /// (`--no-numa-pin` turns it off).
    pub numa_pin: bool,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            gpus: Vec::new(),
            size: DEFAULT_SIZE,
            runs: DEFAULT_RUNS,
            min_fraction: None,
            min_gbs: None,
            progress: None,
            numa_pin: true,
        }
    }
}

/// The PCIe link of the GPU as sysfs shows it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LinkReading {
    pub current_speed: Option<String>,
    /// `current_link_speed` read while a copy was in flight (an idle GPU
    /// lowers its link speed to save power).
    pub speed_under_load: Option<String>,
    pub current_width: Option<u32>,
    pub max_speed: Option<String>,
    pub max_width: Option<u32>,
}

impl LinkReading {
    pub fn label(speed: Option<&str>, width: Option<u32>) -> String {
        let g = speed
            .and_then(parse_speed)
            .and_then(generation)
            .map(|g| format!("Gen{g}"))
            .unwrap_or_else(|| "Gen?".into());
        format!(
            "{g} x{}",
            width.map(|w| w.to_string()).unwrap_or("?".into())
        )
    }
    pub fn under_load(&self) -> String {
        Self::label(
            self.speed_under_load
                .as_deref()
                .or(self.current_speed.as_deref()),
            self.current_width,
        )
    }
    pub fn maximum(&self) -> String {
        Self::label(self.max_speed.as_deref(), self.max_width)
    }
    /// Raw one-direction rate of the maximum link, GB/s.
    pub fn max_gbytes(&self) -> Option<f64> {
        Some(raw_gbytes(
            self.max_speed.as_deref().and_then(parse_speed)?,
            self.max_width?,
        ))
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuCopy {
    pub index: u32,
    pub name: String,
    pub pci_bus_id: String,
    /// sysfs form, `0000:3b:00.0`.
    pub pci: String,
    pub link: LinkReading,
    pub bytes: usize,
    /// Best of the runs, GB/s (10^9 bytes per second).
    pub h2d_gbs: f64,
    pub d2h_gbs: f64,
    pub h2d_runs: Vec<f64>,
    pub d2h_runs: Vec<f64>,
    /// The floor each direction must reach, and where it came from.
    pub floor_gbs: Option<f64>,
    pub floor_source: String,
    /// The NUMA node and CPUs the host buffer was allocated and the copies driven from.
    pub numa: Placement,
    pub passed: bool,
}

impl GpuCopy {
    /// One GPU's copy: `GPU 0 NAME (PCI), link L (max M): H2D x GB/s, D2H y
    /// GB/s, floor F GB/s (where the floor comes from)`.
    pub fn summary(&self) -> String {
        format!(
            "GPU {} {} ({}), link {} (max {}): H2D {:.1} GB/s, D2H {:.1} GB/s, {}, {}",
            self.index,
            self.name,
            self.pci,
            self.link.under_load(),
            self.link.maximum(),
            self.h2d_gbs,
            self.d2h_gbs,
            match self.floor_gbs {
                Some(f) => format!("floor {f:.1} GB/s ({})", self.floor_source),
                None => format!("no floor ({})", self.floor_source),
            },
            self.numa.label()
        )
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct CopyReport {
    pub bytes: usize,
    pub runs: u32,
    pub method: &'static str,
    pub gpus: Vec<GpuCopy>,
    pub passed: bool,
}

/// `0000:3B:00.0` or `00000000:3b:00.0` -> `0000:3b:00.0`.
pub fn sysfs_address(bus_id: &str) -> String {
    let s = bus_id.to_ascii_lowercase();
    match s.split_once(':') {
        Some((dom, rest)) if dom.len() > 4 => format!("{}:{rest}", &dom[dom.len() - 4..]),
        _ => s,
    }
}

/// A PCI device's sysfs attribute on the running system, read through the host layer.
fn sysfs(addr: &str, name: &str) -> Option<String> {
    crate::host::Host::open(std::path::Path::new("/"), true)
        .ok()?
        .read_fact(&format!("/sys/bus/pci/devices/{addr}/{name}"))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

pub fn read_link(addr: &str) -> LinkReading {
    let w = |n: &str| sysfs(addr, n).and_then(|v| v.parse().ok());
    LinkReading {
        current_speed: sysfs(addr, "current_link_speed"),
        speed_under_load: None,
        current_width: w("current_link_width"),
        max_speed: sysfs(addr, "max_link_speed"),
        max_width: w("max_link_width"),
    }
}

/// The floor for a GPU: --min-gbs, else --min-fraction of the link, else
/// Azure's figure for the part, else the default fraction of the link.
pub fn floor(name: &str, link: &LinkReading, opts: &CopyOptions) -> (Option<f64>, String) {
    if let Some(g) = opts.min_gbs {
        return (Some(g), format!("--min-gbs {g}"));
    }
    let max = link.max_gbytes();
    if let (Some(f), Some(m)) = (opts.min_fraction, max) {
        return (
            Some(f * m),
            format!("{f} of the {} link's {m:.1} GB/s", link.maximum()),
        );
    }
    let gen = link
        .max_speed
        .as_deref()
        .and_then(parse_speed)
        .and_then(generation);
    let n = name.to_ascii_uppercase();
    let x16 = link.max_width == Some(16);
    if x16
        && gen >= Some(5)
        && ["H100", "H200", "H800", "H20", "GH200"]
            .iter()
            .any(|p| n.contains(p))
    {
        return (Some(48.0), "Azure's floor for H100/H200 at Gen5 x16".into());
    }
    if x16 && gen == Some(4) && (n.contains("A100") || n.contains("A800")) {
        return (Some(21.0), "Azure's floor for A100 at Gen4 x16".into());
    }
    match max {
        Some(m) => (
            Some(DEFAULT_FRACTION * m),
            format!(
                "{DEFAULT_FRACTION} of the {} link's {m:.1} GB/s",
                link.maximum()
            ),
        ),
        None => (None, "no PCIe link attributes in sysfs: no floor".into()),
    }
}

fn best(v: &[f64]) -> f64 {
    v.iter().copied().fold(0.0, f64::max)
}

/// One GPU, in a worker thread bound to the GPU's NUMA node (see [`super::numa`]).
pub fn run_gpu(index: u32, opts: &CopyOptions) -> Result<GpuCopy, BenchError> {
    super::numa::in_worker(|| run_gpu_here(index, opts)).map_err(BenchError::InvalidArgument)?
}

fn run_gpu_here(index: u32, opts: &CopyOptions) -> Result<GpuCopy, BenchError> {
    let gpu = Gpu::open(index)?;
    let pci = sysfs_address(&gpu.pci_bus_id);
    let mut link = read_link(&pci);
    // Bound before the host buffer is allocated: its pages are placed on this node.
    let free = super::numa::allowed_cpus();
    let mut numa = super::numa::placement(&pci, opts.numa_pin, &free);
    super::numa::apply(&mut numa, &free);
    let rig = CopyRig::new(&gpu, opts.size)?;
    // Warm-up, both ways (and the link comes up to speed).
    rig.copy(true, opts.size, &mut || {})?;
    rig.copy(false, opts.size, &mut || {})?;
    let mut h2d = Vec::new();
    let mut d2h = Vec::new();
    for r in 0..opts.runs {
        let mut read = || {
            if r == 0 {
                link.speed_under_load = sysfs(&pci, "current_link_speed");
            }
        };
        h2d.push(rig.copy(true, opts.size, &mut read)?);
    }
    for _ in 0..opts.runs {
        d2h.push(rig.copy(false, opts.size, &mut || {})?);
    }
    drop(rig);
    let (floor_gbs, floor_source) = floor(&gpu.name, &link, opts);
    let (hb, db) = (best(&h2d), best(&d2h));
    Ok(GpuCopy {
        index,
        name: gpu.name.clone(),
        pci_bus_id: gpu.pci_bus_id.clone(),
        pci,
        link,
        bytes: opts.size,
        h2d_gbs: hb,
        d2h_gbs: db,
        h2d_runs: h2d,
        d2h_runs: d2h,
        passed: floor_gbs.is_none_or(|f| hb >= f && db >= f),
        floor_gbs,
        floor_source,
        numa,
    })
}

/// Every requested GPU (all when none is named).
pub fn run(opts: &CopyOptions) -> Result<CopyReport, BenchError> {
    if opts.size == 0 || opts.runs == 0 {
        return Err(BenchError::InvalidArgument(
            "--size and --runs must be > 0".into(),
        ));
    }
    ensure_libcuda()?;
    let count = cuda::gpu_count()?;
    let indexes: Vec<u32> = if opts.gpus.is_empty() {
        (0..u32::try_from(count).unwrap_or(0)).collect()
    } else {
        opts.gpus.clone()
    };
    if indexes.is_empty() {
        return Err(BenchError::no_cuda_device());
    }
    let bar = opts
        .progress
        .map(|make| make("GPU copy bandwidth", indexes.len() as u64));
    let mut gpus = Vec::new();
    for i in indexes {
        gpus.push(run_gpu(i, opts)?);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish();
    }
    Ok(CopyReport {
        bytes: opts.size,
        runs: opts.runs,
        method: "cuMemcpyHtoDAsync/DtoHAsync, pinned host memory (cuMemHostAlloc) allocated and driven from a thread bound to the GPU's NUMA node, one stream, event-timed, best run",
        passed: gpus.iter().all(|g| g.passed),
        gpus,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(speed: &str, width: u32) -> LinkReading {
        LinkReading {
            current_speed: Some(speed.into()),
            speed_under_load: None,
            current_width: Some(width),
            max_speed: Some(speed.into()),
            max_width: Some(width),
        }
    }

    #[test]
    fn floors() {
        let o = CopyOptions::default();
        let gen5 = link("32.0 GT/s PCIe", 16);
        assert_eq!(floor("NVIDIA H100 80GB HBM3", &gen5, &o).0, Some(48.0));
        assert_eq!(
            floor("NVIDIA A100-SXM4-80GB", &link("16.0 GT/s PCIe", 16), &o).0,
            Some(21.0)
        );
        let l40 = floor("NVIDIA L40S", &link("16.0 GT/s PCIe", 16), &o)
            .0
            .unwrap();
        assert!((l40 - 0.75 * 31.5).abs() < 0.1, "{l40}");
        let f = CopyOptions {
            min_fraction: Some(0.8),
            ..CopyOptions::default()
        };
        assert!((floor("NVIDIA H100", &gen5, &f).0.unwrap() - 0.8 * 63.0).abs() < 0.1);
        assert_eq!(floor("x", &LinkReading::default(), &o).0, None);
        assert_eq!(sysfs_address("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(sysfs_address("0000:3b:00.0"), "0000:3b:00.0");
    }
}
