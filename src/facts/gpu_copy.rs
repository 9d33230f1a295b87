//! GPU <-> host copy figures recorded in a snapshot (`gpu-copy` in its probes): each GPU alone
//! and all together, H2D and D2H, in GB/s. Measuring takes seconds and a GPU, so facts never
//! measure: `verify` does, on the running system, and its host records the figures when it is
//! a recording one; a snapshot that has them replays them, and `verify` and `doctor` judge them
//! against the snapshot's topology (its PCIe links and shared ports) as if just measured.

use crate::host::Host;
use serde::{Deserialize, Serialize};

/// The probe's name in a snapshot's `probes.json`.
pub const PROBE: &str = "gpu-copy";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuFigures {
    pub index: u32,
    pub name: String,
    /// sysfs form, `0000:3b:00.0`.
    pub pci: String,
    pub h2d_alone_gbs: f64,
    pub d2h_alone_gbs: f64,
    pub h2d_together_gbs: f64,
    pub d2h_together_gbs: f64,
    /// The NUMA node and CPUs the host buffer came from, when recorded.
    #[serde(default)]
    pub numa: Option<super::numa::Placement>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CopyFigures {
    pub gpus: Vec<GpuFigures>,
}

/// The figures a snapshot recorded (`None` elsewhere: a running system measures instead).
pub fn replayed(host: &Host) -> Option<CopyFigures> {
    if !host.is_snapshot() {
        return None;
    }
    host.probe(PROBE, CopyFigures::default)
        .filter(|f| !f.gpus.is_empty())
}
