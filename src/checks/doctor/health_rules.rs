//! The readiness checks that read only facts (src/checks/health: PCIe links, kernel
//! log, RDMA ports, GPU<->NIC affinity) as doctor findings: a failed check is
//! an error, a warning a warning; passes and skips add nothing.

use super::{Finding, Sev};
use crate::checks::health::{self, Outcome};
use crate::facts::Facts;

pub fn findings(facts: &Facts) -> Vec<Finding> {
    health::from_facts(facts)
        .into_iter()
        .filter_map(|c| {
            let sev = match c.status {
                Outcome::Fail => Sev::Error,
                Outcome::Warn => Sev::Warn,
                Outcome::Pass | Outcome::Skip => return None,
            };
            let title = match (c.name.as_ref(), sev) {
                ("pcie-links", Sev::Error) => {
                    "a GPU, NIC or bridge runs below its PCIe link maximum"
                }
                ("pcie-links", _) => "a GPU link is below its maximum speed (possibly idle)",
                ("kernel-log", Sev::Error) => "the kernel log shows GPU or PCIe errors",
                ("kernel-log", _) => "the kernel log shows corrected errors or link flaps",
                ("rdma-ports", Sev::Error) => "an RDMA port is not ready",
                ("rdma-ports", _) => "an RDMA port is not active",
                ("gpu-nic-affinity", _) => health::affinity::title(facts),
                ("nvlink", Sev::Error) => "an NVLink link is down or erroring",
                ("nvlink", _) => "NVLink errors or an NVML function missing",
                ("gpu-fabric", _) => "the NVSwitch fabric is not ready (Fabric Manager)",
                ("copy-bandwidth", Sev::Error) => {
                    "a GPU copies to or from host memory below its floor"
                }
                ("copy-bandwidth", _) => "GPUs are fine alone and slow together: they share a port",
                ("gpu-p2p", _) => {
                    "a GPU pair has no peer access: its traffic goes through host memory"
                }
                _ => c.name.as_ref(),
            };
            Some(Finding::new(
                &c.name,
                sev,
                title,
                c.evidence.clone(),
                cause(&c.name),
                c.fix.clone().unwrap_or_default(),
            ))
        })
        .collect()
}

fn cause(name: &str) -> &'static str {
    match name {
        "pcie-links" => "a link trains lower when the slot, riser, retimer or BIOS link setting cannot do more, or the card is badly seated; an idle NVIDIA GPU also lowers its speed",
        "kernel-log" => "the GPU driver or the PCIe error reporting (AER) logged errors, or a link went down",
        "rdma-ports" => "the port is down, trained at fewer lanes, or (RoCE) has no RoCE v2 GID with an address",
        "gpu-nic-affinity" => health::affinity::CAUSE,
        "nvlink" => "a link that is down or retrains carries no traffic: GPU-to-GPU traffic and NCCL slow down or fall back to PCIe",
        "gpu-fabric" => "on NVSwitch boards Fabric Manager must register every GPU before CUDA can use NVLink",
        "copy-bandwidth" => "GPUs behind one port (a PCIe switch's uplink, or the host bridge and host memory) share its bandwidth when they copy at once; a GPU slow even alone has a degraded link, the IOMMU translating, or host memory on the wrong NUMA node",
        "gpu-p2p" => "ACS redirect on a PCIe switch, the IOMMU translating peer traffic, or a driver setting stops GPUs from reaching each other directly",
        _ => "",
    }
}
