//! The PCIe path's settings, device by device (issue 46): each GPU's memory BARs by
//! sysfs resource index (BAR1 is the second memory BAR: index 2 when BAR0 is 64-bit),
//! its resizable-BAR capability and memory size; for each RDMA NIC and each bridge on
//! a GPU–NIC path the device control fields and ATS, from config space
//! ([`pcicfg`](super::pcicfg)). A soft-RoCE device is mapped to the PCI function of
//! the network device it runs on. Snapshots keep `config` and `resource`, so `--root`
//! reads the same.

use super::gpu::Gpu;
use super::pcicfg::{self, ConfigFacts};
use super::pcie::distance;
use super::{pci, rdma::RdmaDevice};
use crate::host::Host;
use serde::Serialize;

/// `IORESOURCE_MEM`, `IORESOURCE_PREFETCH` and `IORESOURCE_MEM_64` of a `resource` line's flags.
const RES_MEM: u64 = 0x200;
const RES_PREFETCH: u64 = 0x2000;
const RES_MEM_64: u64 = 0x0010_0000;

/// One memory BAR of a device, from sysfs `resource`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bar {
    /// Line of `resource` (the sysfs resource index: `resource2`).
    pub index: u8,
    pub bytes: u64,
    pub mem64: bool,
    pub prefetchable: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuBars {
    pub gpu: String,
    /// The memory BARs, by sysfs resource index (on the H200: 0, 2 and 4).
    pub bars: Vec<Bar>,
    /// BAR1, the window through which a NIC reads and writes GPU memory: the second
    /// memory BAR. `None`: no resource table.
    pub bar1: Option<Bar>,
    /// From config space; empty where the device (or a hypervisor) shows none.
    pub resizable_bars: Vec<pcicfg::ResizableBar>,
    /// GPU memory, MiB, and where it was read.
    pub memory_mib: Option<u64>,
    pub memory_source: Option<String>,
}

impl GpuBars {
    pub fn bar1_mib(&self) -> Option<u64> {
        self.bar1.as_ref().map(|b| b.bytes >> 20)
    }
}

/// A PCI function an RDMA device uses; for a soft device, its netdev's.
#[derive(Debug, Clone, Serialize)]
pub struct NicFunction {
    pub nic: String,
    pub pci: String,
    #[serde(skip)]
    pub sysfs_path: String,
    /// The network device a soft device (rxe, siw) runs on, when mapped through it.
    pub via_netdev: Option<String>,
    /// The bridges above it, from the root port down.
    pub upstream: Vec<String>,
}

/// One device on a GPU–NIC path with its config-space facts.
#[derive(Debug, Clone, Serialize)]
pub struct PcieDevice {
    pub pci: String,
    /// `gpu`, `nic mlx5_0`, `bridge` (a device may be several).
    pub roles: Vec<String>,
    /// `None`: config space could not be read (needs root on a live system).
    pub config: Option<ConfigFacts>,
}

impl PcieDevice {
    pub fn role(&self) -> String {
        self.roles.join(", ")
    }
    pub fn is_nic(&self) -> bool {
        self.roles.iter().any(|r| r.starts_with("nic "))
    }
}

/// One GPU–NIC pair: its devices from the GPU to the NIC, bridges between.
#[derive(Debug, Clone, Serialize)]
pub struct DevPath {
    pub gpu: String,
    pub nic: String,
    pub nic_pci: String,
    /// The bridges between, in order.
    pub bridges: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct PcieDevFacts {
    pub gpus: Vec<GpuBars>,
    pub nics: Vec<NicFunction>,
    pub devices: Vec<PcieDevice>,
    pub paths: Vec<DevPath>,
    /// What `gdrprov-pcie.service` wrote at this boot and read back (`READBACK`).
    pub readback: Vec<Readback>,
}

impl PcieDevFacts {
    pub fn device(&self, pci: &str) -> Option<&PcieDevice> {
        self.devices.iter().find(|d| d.pci == pci)
    }
    /// The bridges above an RDMA NIC's function.
    pub fn above(&self, pci: &str) -> &[String] {
        self.nics
            .iter()
            .find(|n| n.pci == pci)
            .map_or(&[], |n| n.upstream.as_slice())
    }
}

/// Where the boot unit records each write and what it read back.
pub const READBACK: &str = "/run/gdrprov/pcie-readback";

/// One write of the boot unit: `PCI max-read-request WROTE devctl HEX`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readback {
    pub pci: String,
    /// MaxReadReq written, bytes.
    pub wrote: u32,
    /// MaxReadReq read back after the write; `None`: nothing could be read.
    pub read: Option<u32>,
}

impl Readback {
    pub fn kept(&self) -> bool {
        self.read == Some(self.wrote)
    }
}

pub fn parse_readback(text: &str) -> Vec<Readback> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.get(1) != Some(&"max-read-request") || !pci::is_address(w.first()?) {
                return None;
            }
            let read = w
                .get(4)
                .and_then(|h| u16::from_str_radix(h, 16).ok())
                .map(|ctl| pcicfg::size_code((ctl >> 12) & 7));
            Some(Readback {
                pci: w[0].to_string(),
                wrote: w.get(2)?.parse().ok()?,
                read,
            })
        })
        .collect()
}

/// Parses a sysfs `resource` table into its memory BARs (lines 0..=5).
pub fn parse_resource(text: &str) -> Vec<Bar> {
    text.lines()
        .take(6)
        .enumerate()
        .filter_map(|(i, l)| {
            let mut w = l
                .split_whitespace()
                .map(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok());
            let (start, end, flags) = (w.next()??, w.next()??, w.next()??);
            if flags & RES_MEM == 0 || end <= start {
                return None;
            }
            Some(Bar {
                index: i as u8,
                bytes: end - start + 1,
                mem64: flags & RES_MEM_64 != 0,
                prefetchable: flags & RES_PREFETCH != 0,
            })
        })
        .collect()
}

/// GPU memory by device ID, MiB as nvidia-smi shows it, for where CUDA was not asked.
fn memory_by_id(id: &str) -> Option<u64> {
    Some(match id {
        "0x2335" => 143_771,
        "0x233b" => 143_771,
        "0x2330" | "0x2331" | "0x2324" => 81_559,
        "0x2321" => 95_830,
        "0x20b2" | "0x20b3" | "0x20b5" => 81_920,
        "0x20b0" | "0x20f1" => 40_960,
        "0x26b9" | "0x26b5" => 46_068,
        "0x2901" => 183_359,
        _ => return None,
    })
}

fn config(host: &Host, pci: &str) -> Option<ConfigFacts> {
    let b = host.read_fact_bytes(&format!("/sys/bus/pci/devices/{pci}/config"), 4096)?;
    (b.len() >= 64).then(|| pcicfg::parse(&b))
}

fn gpu_bars(host: &Host, g: &Gpu, cfg: Option<&ConfigFacts>) -> GpuBars {
    let res = host.read_fact(&format!("/sys/bus/pci/devices/{}/resource", g.pci));
    let bars = res.as_deref().map(parse_resource).unwrap_or_default();
    let memory_mib = memory_by_id(&g.device_id);
    GpuBars {
        gpu: g.pci.clone(),
        bar1: bars.get(1).cloned(),
        bars,
        resizable_bars: cfg.map(|c| c.resizable_bars.clone()).unwrap_or_default(),
        memory_mib,
        memory_source: memory_mib.map(|_| format!("device ID {} (datasheet)", g.device_id)),
    }
}

fn upstream(path: &str) -> Vec<String> {
    let mut c = pci::chain(path);
    c.pop();
    c
}

/// The PCI function of each RDMA device; a soft one through its netdev's `device` link.
pub fn nic_functions(host: &Host, nics: &[RdmaDevice]) -> Vec<NicFunction> {
    let mut out = Vec::new();
    for n in nics {
        if let (Some(pci), Some(path)) = (&n.pci, &n.sysfs_path) {
            out.push(NicFunction {
                nic: n.name.clone(),
                pci: pci.clone(),
                sysfs_path: path.clone(),
                via_netdev: None,
                upstream: upstream(path),
            });
            continue;
        }
        let Some(netdev) = n.ports.iter().find_map(|p| p.netdev.clone()) else {
            continue;
        };
        let Some(path) = host.canonical(&format!("/sys/class/net/{netdev}/device")) else {
            continue;
        };
        // A virtio-net's `device` is `virtio0`, whose parent is the PCI function.
        let Some(pci) = pci::chain(&path).last().cloned() else {
            continue;
        };
        let cut = path.find(&pci).map_or(path.len(), |i| i + pci.len());
        out.push(NicFunction {
            nic: n.name.clone(),
            pci,
            upstream: upstream(&path[..cut]),
            sysfs_path: path[..cut].to_string(),
            via_netdev: Some(netdev),
        });
    }
    out
}

fn add(devices: &mut Vec<PcieDevice>, host: &Host, pci: &str, role: String) {
    if let Some(d) = devices.iter_mut().find(|d| d.pci == pci) {
        if !d.roles.contains(&role) {
            d.roles.push(role);
        }
        return;
    }
    devices.push(PcieDevice {
        pci: pci.to_string(),
        roles: vec![role],
        config: config(host, pci),
    });
}

pub fn probe(host: &Host, gpus: &[Gpu], nics: &[RdmaDevice]) -> PcieDevFacts {
    let mut f = PcieDevFacts {
        nics: nic_functions(host, nics),
        readback: host
            .read_fact(READBACK)
            .as_deref()
            .map(parse_readback)
            .unwrap_or_default(),
        ..PcieDevFacts::default()
    };
    for g in gpus {
        add(&mut f.devices, host, &g.pci, "gpu".into());
        let cfg = f.device(&g.pci).and_then(|d| d.config.clone());
        f.gpus.push(gpu_bars(host, g, cfg.as_ref()));
    }
    for n in f.nics.clone() {
        add(&mut f.devices, host, &n.pci, format!("nic {}", n.nic));
        for b in &n.upstream {
            add(&mut f.devices, host, b, "bridge".into());
        }
    }
    for g in gpus {
        for n in f.nics.clone() {
            let (_, _, between) = distance(&g.sysfs_path, &n.sysfs_path, None, None);
            for b in &between {
                add(&mut f.devices, host, b, "bridge".into());
            }
            f.paths.push(DevPath {
                gpu: g.pci.clone(),
                nic: n.nic.clone(),
                nic_pci: n.pci.clone(),
                bridges: between,
            });
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lent H200's resource table (driver 580 open, a Firecracker guest).
    const H200: &str = "0x0000104002000000 0x0000104002ffffff 0x000000000014220c\n\
        0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
        0x0000100000000000 0x0000103fffffffff 0x000000000014220c\n\
        0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
        0x0000104000000000 0x0000104001ffffff 0x000000000014220c\n\
        0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
        0x0000000000000000 0x0000000000000000 0x0000000000000000\n";

    #[test]
    fn bar1_is_the_second_memory_bar() {
        let bars = parse_resource(H200);
        let idx: Vec<u8> = bars.iter().map(|b| b.index).collect();
        assert_eq!(idx, [0, 2, 4]);
        assert_eq!(bars[1].bytes >> 20, 262_144);
        assert!(bars[1].mem64 && bars[1].prefetchable);
        assert_eq!(bars[0].bytes >> 20, 16);
        assert!(parse_resource("garbage\n0x1 0x0 0x200\n").is_empty());
    }

    #[test]
    fn the_units_read_back_is_parsed() {
        let r = parse_readback("0000:01:00.0 max-read-request 4096 devctl 2910\n0000:02:00.0 max-read-request 4096 devctl 5930\nx\n");
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].read, r[0].kept()), (Some(512), false));
        assert!(r[1].kept());
    }
}
