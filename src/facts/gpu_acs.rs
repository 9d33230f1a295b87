//! ACS between two GPUs under one PCIe switch (issue 48): the bridges between each pair of
//! GPUs that share a bridge below the host bridge, with their ACS state read as
//! [`super::pcie`] reads it for GPU and NIC. Request or completion redirect there sends
//! GPU-to-GPU traffic up to the root complex: peer-to-peer fails or crawls.

use super::gpu::Gpu;
use super::pcie::{bridge_acs, distance, AcsBridge, Distance};
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct GpuPairAcs {
    pub a: String,
    pub b: String,
    /// The deepest bridge above both.
    pub common_bridge: String,
    pub distance: Distance,
    pub bridges: Vec<AcsBridge>,
}

impl GpuPairAcs {
    pub fn acs_blocking(&self) -> Vec<&AcsBridge> {
        self.bridges.iter().filter(|b| b.blocks_p2p).collect()
    }
}

/// Every pair of GPUs behind one switch (PIX or PXB), with the ACS of the bridges between.
pub fn probe(host: &Host, gpus: &[Gpu]) -> Vec<GpuPairAcs> {
    let mut out = Vec::new();
    for (i, a) in gpus.iter().enumerate() {
        for b in &gpus[i + 1..] {
            let (d, common, between) =
                distance(&a.sysfs_path, &b.sysfs_path, a.numa_node, b.numa_node);
            let Some(common) = common.filter(|_| matches!(d, Distance::PIX | Distance::PXB)) else {
                continue;
            };
            out.push(GpuPairAcs {
                a: a.pci.clone(),
                b: b.pci.clone(),
                common_bridge: common,
                distance: d,
                bridges: between.iter().map(|x| bridge_acs(host, x)).collect(),
            });
        }
    }
    out
}
