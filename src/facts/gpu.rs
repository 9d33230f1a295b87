//! NVIDIA GPUs from sysfs: PCI vendor 0x10de with a display (0x0300) or 3D
//! (0x0302) class. Name from the driver's `/proc/driver/nvidia/gpus` or a
//! table of data-centre parts; architecture from the device ID (or the
//! compute capability when the CUDA driver answered).

use super::pci::{self, PciDevice};
use crate::host::Host;
use serde::Serialize;

pub const NVIDIA: u16 = 0x10de;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arch {
    Kepler,
    Maxwell,
    Pascal,
    Volta,
    Turing,
    Ampere,
    Ada,
    Hopper,
    Blackwell,
    Unknown,
}

impl Arch {
    pub fn parse(s: &str) -> Option<Arch> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "kepler" => Arch::Kepler,
            "maxwell" => Arch::Maxwell,
            "pascal" => Arch::Pascal,
            "volta" => Arch::Volta,
            "turing" => Arch::Turing,
            "ampere" => Arch::Ampere,
            "ada" | "ada-lovelace" | "lovelace" => Arch::Ada,
            "hopper" => Arch::Hopper,
            "blackwell" => Arch::Blackwell,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Kepler => "Kepler",
            Arch::Maxwell => "Maxwell",
            Arch::Pascal => "Pascal",
            Arch::Volta => "Volta",
            Arch::Turing => "Turing",
            Arch::Ampere => "Ampere",
            Arch::Ada => "Ada",
            Arch::Hopper => "Hopper",
            Arch::Blackwell => "Blackwell",
            Arch::Unknown => "unknown",
        }
    }

    /// From the compute capability (`9.0`).
    pub fn from_compute_capability(major: i32, minor: i32) -> Arch {
        match (major, minor) {
            (3, _) => Arch::Kepler,
            (5, _) => Arch::Maxwell,
            (6, _) => Arch::Pascal,
            (7, 0) | (7, 2) => Arch::Volta,
            (7, _) => Arch::Turing,
            (8, 9) => Arch::Ada,
            (8, _) => Arch::Ampere,
            (9, _) => Arch::Hopper,
            (10..=12, _) => Arch::Blackwell,
            _ => Arch::Unknown,
        }
    }

    /// From the PCI device ID: NVIDIA allocates IDs in blocks per chip family.
    pub fn from_device_id(id: u16) -> Arch {
        match id {
            0x0fc0..=0x13bf => Arch::Kepler,
            0x13c0..=0x17ff => Arch::Maxwell,
            0x1b00..=0x1d7f => Arch::Pascal,
            0x1d80..=0x1dff => Arch::Volta,
            0x1e00..=0x1fff | 0x2180..=0x21ff => Arch::Turing,
            0x2080..=0x217f | 0x2200..=0x22ff | 0x2400..=0x25ff => Arch::Ampere,
            0x2300..=0x23ff => Arch::Hopper,
            0x2600..=0x28ff => Arch::Ada,
            0x2900..=0x2fff => Arch::Blackwell,
            _ => Arch::Unknown,
        }
    }
}

/// Names of data-centre parts by device ID (the driver's own name wins).
pub fn known_name(id: u16) -> Option<&'static str> {
    Some(match id {
        0x1db1 | 0x1db4 | 0x1db5 | 0x1db6 | 0x1df6 => "NVIDIA V100",
        0x1eb8 => "NVIDIA T4",
        0x20b0 | 0x20b2 | 0x20b3 => "NVIDIA A100-SXM4",
        0x20b5 | 0x20f1 => "NVIDIA A100 PCIe",
        0x20b7 => "NVIDIA A30",
        0x20f3 | 0x20f5 => "NVIDIA A800",
        0x2236 => "NVIDIA A10",
        0x2237 => "NVIDIA A10G",
        0x2321 => "NVIDIA H100 NVL",
        0x2324 => "NVIDIA H800",
        0x2329 => "NVIDIA H20",
        0x2330 => "NVIDIA H100 80GB HBM3",
        0x2331 => "NVIDIA H100 PCIe",
        0x2335 => "NVIDIA H200",
        0x233a => "NVIDIA H800 NVL",
        0x233b => "NVIDIA H200 NVL",
        0x2342 => "NVIDIA GH200",
        0x26b5 => "NVIDIA L40",
        0x26b9 => "NVIDIA L40S",
        0x27b8 => "NVIDIA L4",
        0x2901 => "NVIDIA B200",
        0x2941 => "NVIDIA GB200",
        _ => return None,
    })
}

#[derive(Debug, Clone, Serialize)]
pub struct Gpu {
    /// PCI address, `0000:3b:00.0`.
    pub pci: String,
    /// PCI device ID, `0x2330`.
    pub device_id: String,
    pub name: Option<String>,
    pub arch: Arch,
    /// How the architecture was found: `compute-capability` or `device-id`.
    pub arch_source: &'static str,
    pub numa_node: Option<i64>,
    /// Sysfs path with every bridge above it.
    pub sysfs_path: String,
    /// Bound kernel driver (`nvidia`, `vfio-pci`, `nouveau`).
    pub driver: Option<String>,
    /// The P2P memory the GPU's driver registered with the kernel's PCI P2PDMA
    /// (`/sys/bus/pci/devices/ADDR/p2pmem/`); `None`: none registered.
    pub p2pmem: Option<P2pMem>,
}

/// `p2pmem/` of a PCI function. The kernel creates it (drivers/pci/p2pdma.c:
/// `pci_p2pdma_add_resource` calls `pci_p2pdma_setup`, which adds the sysfs group
/// `p2pmem` with `size`, `available` and `published`) when a driver registers a BAR as
/// P2P memory, so a GPU without it has none that an NVMe drive could DMA into through
/// P2PDMA, whatever cufile.json says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct P2pMem {
    /// Bytes registered (`size`).
    pub size: Option<u64>,
    /// Bytes not yet handed out (`available`).
    pub available: Option<u64>,
    /// Whether the driver published it for other drivers to find (`published`).
    pub published: Option<bool>,
}

impl P2pMem {
    /// Read from `/sys/bus/pci/devices/ADDR/p2pmem/` (recorded by `inventory --snapshot`,
    /// so `--root` reads it the same); `None` when the kernel shows none.
    pub fn probe(host: &Host, address: &str) -> Option<P2pMem> {
        let dir = format!("/sys/bus/pci/devices/{address}/p2pmem");
        let num = |f: &str| {
            super::util::read_int(host, &format!("{dir}/{f}")).and_then(|v| u64::try_from(v).ok())
        };
        let m = P2pMem {
            size: num("size"),
            available: num("available"),
            published: num("published").map(|v| v != 0),
        };
        (m.size.is_some() || m.available.is_some() || m.published.is_some()).then_some(m)
    }
}

impl Gpu {
    pub fn from_pci(host: &Host, d: &PciDevice) -> Gpu {
        let info = host.read_fact(&format!(
            "/proc/driver/nvidia/gpus/{}/information",
            d.address
        ));
        let model = info.as_deref().and_then(|t| {
            t.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "Model").then(|| v.trim().to_string())
            })
        });
        Gpu {
            pci: d.address.clone(),
            device_id: format!("{:#06x}", d.device),
            name: model.or_else(|| known_name(d.device).map(String::from)),
            arch: Arch::from_device_id(d.device),
            arch_source: "device-id",
            numa_node: d.numa_node,
            sysfs_path: d.sysfs_path.clone(),
            driver: d.driver.clone(),
            p2pmem: P2pMem::probe(host, &d.address),
        }
    }
}

pub fn probe(host: &Host, devices: &[PciDevice]) -> Vec<Gpu> {
    devices
        .iter()
        .filter(|d| d.vendor == NVIDIA && matches!(d.class >> 8, 0x0300 | 0x0302))
        .map(|d| Gpu::from_pci(host, d))
        .collect()
}

/// True for a PCI address like `0000:3b:00.0`.
pub fn is_pci_address(s: &str) -> bool {
    pci::is_address(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_from_ids_and_capabilities() {
        assert_eq!(Arch::from_device_id(0x2330), Arch::Hopper);
        assert_eq!(Arch::from_device_id(0x2335), Arch::Hopper);
        assert_eq!(Arch::from_device_id(0x20b0), Arch::Ampere);
        assert_eq!(Arch::from_device_id(0x1eb8), Arch::Turing);
        assert_eq!(Arch::from_device_id(0x1db4), Arch::Volta);
        assert_eq!(Arch::from_device_id(0x26b9), Arch::Ada);
        assert_eq!(Arch::from_device_id(0x2901), Arch::Blackwell);
        assert_eq!(Arch::from_compute_capability(9, 0), Arch::Hopper);
        assert_eq!(Arch::from_compute_capability(7, 5), Arch::Turing);
        assert_eq!(Arch::from_compute_capability(8, 9), Arch::Ada);
        assert!(Arch::Turing < Arch::Hopper && Arch::Volta < Arch::Turing);
    }
}
