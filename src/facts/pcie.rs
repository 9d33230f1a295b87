//! The PCIe path between each GPU and each RDMA NIC: NUMA nodes, the common
//! upstream bridge, an nvidia-smi topo distance (PIX/PXB/PHB/NODE/SYS) and ACS on the
//! bridges in between (extended capability 0x000D in config space, whose
//! request/completion redirect sends peer-to-peer traffic up to the root
//! complex and breaks GPUDirect RDMA).

use super::gpu::Gpu;
use super::pci;
use super::rdma::RdmaDevice;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Distance {
    /// At most one PCIe bridge (the same switch).
    PIX,
    /// Several bridges, without crossing the host bridge.
    PXB,
    /// Through the PCIe host bridge (the same CPU).
    PHB,
    /// Between two PCIe host bridges of one NUMA node (several root complexes per socket).
    NODE,
    /// Across the CPU interconnect (another NUMA node).
    SYS,
}

/// ACS control register bits.
pub const ACS_SV: u16 = 0x01;
pub const ACS_TB: u16 = 0x02;
pub const ACS_RR: u16 = 0x04;
pub const ACS_CR: u16 = 0x08;
pub const ACS_UF: u16 = 0x10;
pub const ACS_EC: u16 = 0x20;
pub const ACS_DT: u16 = 0x40;
/// The bits that divert peer-to-peer traffic.
pub const ACS_P2P_BLOCKING: u16 = ACS_RR | ACS_CR | ACS_EC;

#[derive(Debug, Clone, Serialize)]
pub struct AcsBridge {
    pub bridge: String,
    /// ACS control register; `None` when the bridge has no ACS capability.
    pub control: Option<u16>,
    /// lspci-style rendering, `SrcValid+ ReqRedir+ CmpltRedir+`.
    pub bits: Option<String>,
    /// Request or completion redirect (or egress control) is on.
    pub blocks_p2p: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct PciePath {
    pub gpu: String,
    pub nic: String,
    pub nic_pci: String,
    pub gpu_numa: Option<i64>,
    pub nic_numa: Option<i64>,
    /// The deepest bridge above both, if they share one below the host bridge.
    pub common_bridge: Option<String>,
    pub distance: Distance,
    /// Bridges between the two, with their ACS state; `None` inside when
    /// config space could not be read (needs root on a live system).
    pub bridges: Vec<AcsBridge>,
}

impl PciePath {
    pub fn acs_blocking(&self) -> Vec<&AcsBridge> {
        self.bridges.iter().filter(|b| b.blocks_p2p).collect()
    }
}

/// Finds the ACS control register in a config-space dump (through the one parser,
/// [`pcicfg`](super::pcicfg)).
pub fn acs_control(config: &[u8]) -> Option<u16> {
    super::pcicfg::parse(config).acs_control
}

pub fn acs_bits(ctl: u16) -> String {
    [
        (ACS_SV, "SrcValid"),
        (ACS_TB, "TransBlk"),
        (ACS_RR, "ReqRedir"),
        (ACS_CR, "CmpltRedir"),
        (ACS_UF, "UpstreamFwd"),
        (ACS_EC, "EgressCtrl"),
        (ACS_DT, "DirectTrans"),
    ]
    .iter()
    .map(|(b, n)| format!("{n}{}", if ctl & b != 0 { '+' } else { '-' }))
    .collect::<Vec<_>>()
    .join(" ")
}

/// One bridge's ACS state from its config space (also read between two GPUs: `gpu_acs`).
pub fn bridge_acs(host: &Host, addr: &str) -> AcsBridge {
    let cfg = host.read_fact_bytes(&format!("/sys/bus/pci/devices/{addr}/config"), 4096);
    let control = cfg.as_deref().and_then(acs_control);
    AcsBridge {
        bridge: addr.to_string(),
        control,
        bits: control.map(acs_bits),
        blocks_p2p: control.is_some_and(|c| c & ACS_P2P_BLOCKING != 0),
    }
}

/// nvidia-smi topo's distance from the two sysfs paths: under different host bridges it is
/// NODE within one NUMA node, SYS across nodes.
pub fn distance(
    gpu_path: &str,
    nic_path: &str,
    gpu_numa: Option<i64>,
    nic_numa: Option<i64>,
) -> (Distance, Option<String>, Vec<String>) {
    let g = pci::chain(gpu_path);
    let n = pci::chain(nic_path);
    let gb = &g[..g.len().saturating_sub(1)];
    let nb = &n[..n.len().saturating_sub(1)];
    if pci::host_bridge(gpu_path) != pci::host_bridge(nic_path) {
        let d = if gpu_numa == nic_numa {
            Distance::NODE
        } else {
            Distance::SYS
        };
        let mut between: Vec<String> = gb.to_vec();
        between.extend(nb.iter().cloned());
        return (d, None, between);
    }
    let k = gb.iter().zip(nb.iter()).take_while(|(a, b)| a == b).count();
    let mut between: Vec<String> = Vec::new();
    if k > 0 {
        between.push(gb[k - 1].clone());
    }
    between.extend(gb[k..].iter().cloned());
    between.extend(nb[k..].iter().cloned());
    if k == 0 {
        return (Distance::PHB, None, between);
    }
    let (dg, dn) = (gb.len() - k, nb.len() - k);
    let d = if dg <= 1 && dn <= 1 {
        Distance::PIX
    } else {
        Distance::PXB
    };
    (d, Some(gb[k - 1].clone()), between)
}

pub fn probe(host: &Host, gpus: &[Gpu], nics: &[RdmaDevice]) -> Vec<PciePath> {
    let mut out = Vec::new();
    for g in gpus {
        for n in nics {
            let (Some(nic_pci), Some(nic_path)) = (&n.pci, &n.sysfs_path) else {
                continue;
            };
            let (distance, common_bridge, between) =
                distance(&g.sysfs_path, nic_path, g.numa_node, n.numa_node);
            out.push(PciePath {
                gpu: g.pci.clone(),
                nic: n.name.clone(),
                nic_pci: nic_pci.clone(),
                gpu_numa: g.numa_node,
                nic_numa: n.numa_node,
                common_bridge,
                distance,
                bridges: between.iter().map(|b| bridge_acs(host, b)).collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        let sw = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
        let gpu = format!("{sw}/0000:02:08.0/0000:03:00.0");
        let nic = format!("{sw}/0000:02:10.0/0000:04:00.0");
        let (d, common, between) = distance(&gpu, &nic, Some(0), Some(0));
        assert_eq!(d, Distance::PIX);
        assert_eq!(common.as_deref(), Some("0000:01:00.0"));
        assert_eq!(between, ["0000:01:00.0", "0000:02:08.0", "0000:02:10.0"]);
        let other_rp = "/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0";
        assert_eq!(distance(&gpu, other_rp, Some(0), Some(0)).0, Distance::PHB);
        let other_root = "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0";
        assert_eq!(
            distance(&gpu, other_root, Some(0), Some(0)).0,
            Distance::NODE
        );
        assert_eq!(
            distance(&gpu, other_root, Some(0), Some(1)).0,
            Distance::SYS
        );
        let nested = format!("{sw}/0000:02:10.0/0000:06:00.0/0000:07:01.0/0000:08:00.0");
        assert_eq!(distance(&gpu, &nested, Some(0), Some(0)).0, Distance::PXB);
    }

    #[test]
    fn acs_capability_is_found_in_the_extended_list() {
        let mut cfg = vec![0u8; 4096];
        // 0x100: AER (id 1), next 0x148; 0x148: ACS (id 0xd), next 0.
        cfg[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (0x148 << 20)).to_le_bytes());
        cfg[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
        cfg[0x14e..0x150].copy_from_slice(&(ACS_SV | ACS_RR | ACS_CR | ACS_UF).to_le_bytes());
        let ctl = acs_control(&cfg).unwrap();
        assert_eq!(ctl & ACS_P2P_BLOCKING, ACS_RR | ACS_CR);
        assert!(acs_bits(ctl).starts_with("SrcValid+ TransBlk- ReqRedir+ CmpltRedir+"));
        assert_eq!(acs_control(&cfg[..64]), None);
    }
}
