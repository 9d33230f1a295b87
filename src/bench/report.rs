//! The loopback report: one data structure, rendered as text (src/output/bench.rs, like
//! ib_write_bw) or JSON.

use serde::{Deserialize, Serialize};

use super::probe::DmabufProbe;
use gdrprov_rdma::verbs::PortInfo;
use gdrprov_rdma::MemoryKind;

/// One message size's measurement: a row of `bench loopback`, one timed run of `bench pair` (sent
/// across without a line rate fraction) and the figures of a pair size (both directions summed for
/// bidir).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub bytes: u64,
    pub iterations: u64,
    pub peak_gbps: f64,
    pub average_gbps: f64,
    pub msg_rate_mpps: f64,
    /// average / line rate, when the port has one.
    pub line_rate_fraction: Option<f64>,
    pub seconds: f64,
    /// WRITEs outstanding per QP at this size (the tx depth, capped by MAX_IN_FLIGHT bytes).
    pub writes_in_flight: u32,
    /// WRITEs per signaled completion (and per post): perftest's `--cq-mod`.
    pub writes_per_completion: u32,
}

/// The data check after the timed run.
#[derive(Debug, Clone, Serialize)]
pub struct DataCheck {
    pub passed: bool,
    /// Bytes written and compared, per QP.
    pub bytes: u64,
    pub qps: u32,
    pub mismatched_bytes: u64,
    pub first_mismatch: Option<u64>,
}

/// The bandwidth threshold and its outcome (the pair bench sends it across, hence Deserialize).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Threshold {
    pub applicable: bool,
    /// Why not, when not applicable.
    pub reason: Option<String>,
    pub min_line_rate_fraction: Option<f64>,
    pub min_gbps: Option<f64>,
    /// The message size it was judged at (the largest measured).
    pub at_bytes: Option<u64>,
    pub passed: Option<bool>,
}

/// GPU facts, when GPU memory is used.
#[derive(Debug, Clone, Serialize)]
pub struct GpuInfo {
    pub index: u32,
    pub name: String,
    pub pci_bus_id: String,
    pub cuda_driver_version: String,
    pub dmabuf_supported: bool,
    /// Size of each exported dma-buf, for cuda-dmabuf.
    pub dmabuf_bytes: Option<u64>,
    pub dmabuf_exporter: Option<String>,
}

/// Everything `gdrprov bench loopback` found; `verify` embeds this.
#[derive(Debug, Clone, Serialize)]
pub struct LoopbackReport {
    pub from: PortInfo,
    pub to: PortInfo,
    pub memory: MemoryKind,
    /// Why this memory kind was chosen when none was asked for.
    pub memory_note: Option<String>,
    pub gpu: Option<GpuInfo>,
    pub dmabuf_probe: Option<DmabufProbe>,
    pub qps: u32,
    pub tx_depth: u32,
    pub line_rate_gbps: Option<f64>,
    pub results: Vec<SizeResult>,
    pub data_check: DataCheck,
    pub threshold: Threshold,
    pub passed: bool,
}

/// What `--export-only` reports.
#[derive(Debug, Clone, Serialize)]
pub struct ExportReport {
    pub gpu: GpuInfo,
    pub allocated_bytes: u64,
    pub dmabuf_fd_valid: bool,
    pub passed: bool,
}

/// Format a byte count with a binary unit when it is a whole one ("8 MiB", "65536").
pub fn human_bytes(n: u64) -> String {
    const UNITS: &[(u64, &str)] = &[(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= *size && n % size == 0 {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} B")
}
