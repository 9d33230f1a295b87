//! AWS EFA (Elastic Fabric Adapter): the devices (PCI `1d0f:efa*`, or an RDMA
//! device of the `efa` driver) and the driver (`/sys/module/efa/version`).

use super::pci::PciDevice;
use super::rdma::RdmaDevice;
use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

/// Amazon's PCI vendor id; EFA functions are devices `0xefa0`..`0xefaf`.
const AMAZON: u16 = 0x1d0f;

#[derive(Debug, Clone, Default, Serialize)]
pub struct EfaFacts {
    /// The EFA devices: PCI addresses, or RDMA device names where the PCI
    /// device does not show (an image root carrying only /sys/class/infiniband).
    pub devices: Vec<String>,
    /// `/sys/module/efa/version` (the efa driver, loaded).
    pub module_version: Option<String>,
}

impl EfaFacts {
    pub fn present(&self) -> bool {
        !self.devices.is_empty() || self.module_version.is_some()
    }
}

pub fn is_efa(d: &PciDevice) -> bool {
    d.vendor == AMAZON && d.device & 0xfff0 == 0xefa0
}

pub fn probe(host: &Host, pci: &[PciDevice], rdma: &[RdmaDevice]) -> EfaFacts {
    let mut devices: Vec<String> = pci
        .iter()
        .filter(|d| is_efa(d))
        .map(|d| d.address.clone())
        .collect();
    if devices.is_empty() {
        devices = rdma
            .iter()
            .filter(|d| d.driver.as_deref() == Some("efa"))
            .map(|d| d.name.clone())
            .collect();
    }
    EfaFacts {
        devices,
        module_version: read_trim(host, "/sys/module/efa/version"),
    }
}
