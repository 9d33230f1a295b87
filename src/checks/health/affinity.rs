//! GPU <-> NIC affinity: for each GPU the nearest RDMA NIC, their PCIe
//! distance as nvidia-smi topo names it (PIX/PXB/PHB/NODE/SYS) and NUMA nodes. A GPU
//! whose best NIC is beyond its PCIe host bridge (NODE: another host bridge of
//! its NUMA node; SYS: across the CPU interconnect) gets no GPUDirect RDMA
//! from NCCL by default (NCCL_NET_GDR_LEVEL defaults to PHB/PXB). The one
//! fact behind `verify`'s check and `doctor`'s finding of the same name.

use super::HealthCheck;
use crate::facts::pcie::{Distance, PciePath};
use crate::facts::Facts;

pub const NAME: &str = "gpu-nic-affinity";

fn numa(n: Option<i64>) -> String {
    n.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Per GPU, its nearest NIC (ties: the first by name).
pub fn nearest(facts: &Facts) -> Vec<&PciePath> {
    let mut out: Vec<&PciePath> = Vec::new();
    for g in &facts.gpus {
        let best = facts
            .pcie
            .iter()
            .filter(|p| p.gpu == g.pci)
            .min_by(|a, b| a.distance.cmp(&b.distance).then(a.nic.cmp(&b.nic)));
        if let Some(b) = best {
            out.push(b);
        }
    }
    out
}

pub fn check(facts: &Facts) -> HealthCheck {
    if facts.gpus.is_empty() {
        return HealthCheck::skip(NAME, "no NVIDIA GPU on this root");
    }
    let best = nearest(facts);
    if best.is_empty() {
        return HealthCheck::skip(
            NAME,
            "no PCI RDMA NIC on this root (soft RDMA devices have no PCIe path)",
        );
    }
    let describe = |p: &PciePath| {
        format!(
            "GPU {} -> {} ({}) {:?}, NUMA {}/{}",
            p.gpu,
            p.nic,
            p.nic_pci,
            p.distance,
            numa(p.gpu_numa),
            numa(p.nic_numa)
        )
    };
    let far: Vec<String> = best
        .iter()
        .filter(|p| p.distance > Distance::PHB)
        .map(|p| describe(p))
        .collect();
    let all: Vec<String> = best.iter().map(|p| describe(p)).collect();
    if !far.is_empty() {
        return HealthCheck::warn(
            NAME,
            format!(
                "best NIC is beyond the GPU's host bridge (NODE: another root complex; SYS: another CPU socket): {}",
                far.join("; ")
            ),
            "use a NIC under each GPU's own PCIe host bridge (ideally its PCIe switch): move the cards, or point NCCL_IB_HCA at the nearest NICs; NCCL uses GPUDirect RDMA only up to NCCL_NET_GDR_LEVEL (PHB by default), so these GPUs stage through host memory",
        );
    }
    HealthCheck::pass(NAME, all.join("; "))
}

/// The farthest of the GPUs' nearest NICs beyond the host bridge, said as
/// its distance means it (a title for the warning, never wider than its
/// evidence: NODE is one NUMA node, SYS another).
pub fn title(facts: &Facts) -> &'static str {
    match nearest(facts).iter().map(|p| p.distance).max() {
        Some(Distance::SYS) => {
            "a GPU's nearest RDMA NIC is on another CPU socket (SYS: across the CPU interconnect)"
        }
        Some(Distance::NODE) => {
            "a GPU's nearest RDMA NIC is under another PCIe host bridge of its NUMA node (NODE)"
        }
        _ => "every GPU has an RDMA NIC under its own PCIe host bridge",
    }
}

/// Why a far NIC matters, for any distance beyond the host bridge.
pub const CAUSE: &str = "traffic between the GPU and its nearest NIC leaves the GPU's PCIe host bridge (NODE) or also crosses the CPU interconnect (SYS); NCCL disables GPUDirect RDMA beyond NCCL_NET_GDR_LEVEL (PHB in gdrprov's nccl.conf)";
