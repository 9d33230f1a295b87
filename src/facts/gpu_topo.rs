//! The GPUs of the node together: NVLink links per GPU (expected = the links NVML answers for,
//! up, version, rate, far end, error counters), Fabric Manager state, per ordered pair NVML's
//! P2P status and common PCIe ancestor and CUDA's peer access; and from sysfs, which GPUs (and
//! NICs) share an upstream port (a PCIe switch's uplink, or only the host bridge).
//!
//! The NVML and CUDA answers are one recorded probe (`gpu-topology`): asked on a running system
//! by `inventory` and `doctor` (and `verify`), kept by `inventory --snapshot`, replayed from a
//! snapshot. The upstream ports come from the sysfs files the PCIe facts read.

use super::gpu::Gpu;
use super::links::{parse_speed, raw_gbytes, PcieLink, Role};
use super::pci;
use super::rdma::RdmaDevice;
use crate::host::Host;
use gdrprov_rdma::nvlink::NodeLinks;
use serde::{Deserialize, Serialize};

/// What CUDA says of one ordered GPU pair (CUDA ordinals).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PeerAccess {
    pub a: u32,
    pub b: u32,
    /// Their PCI addresses (sysfs form): how they are matched with NVML's GPUs.
    pub a_pci: String,
    pub b_pci: String,
    /// `cuDeviceCanAccessPeer(a, b)`.
    pub can_access: bool,
    /// `CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK` (0 = best).
    pub rank: Option<i32>,
}

/// The recorded answer of NVML and CUDA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LiveTopology {
    pub nvml: NodeLinks,
    pub peers: Vec<PeerAccess>,
    /// Why CUDA could not say (libcuda missing, no GPU).
    pub peers_error: Option<String>,
}

/// GPUs (and NICs) behind one port: the deepest bridge above two or more of them, or only their
/// host bridge.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SharedPort {
    /// `0000:00:01.0` (a bridge) or `pci0000:00` (a host bridge).
    pub port: String,
    /// `bridge` or `host-bridge`.
    pub kind: &'static str,
    pub gpus: Vec<String>,
    pub nics: Vec<String>,
    /// The port's own link (`Gen5 x16`) and its one-way rate in GB/s, where sysfs has it.
    pub link: Option<String>,
    pub link_gbs: Option<f64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuTopology {
    /// `None`: not asked (plan, an image root) or not recorded in this snapshot.
    pub live: Option<LiveTopology>,
    /// The Fabric Manager package installed in the root, and its version.
    pub fabric_manager: Option<(String, String)>,
    /// The NVSwitches this root sees as PCI functions (NVIDIA, class "bridge, other"; HGX
    /// A100/H100/H200 boards): where Fabric Manager must run. A virtual machine whose GPUs'
    /// NVLinks end at switches the host keeps sees none.
    pub nvswitches: Vec<String>,
    /// Whether the root lists PCI devices at all (an image root does not): without them no
    /// NVSwitch can be told.
    pub pci_listed: bool,
    /// Ports that two or more GPUs share (each GPU at most once, at its deepest shared port).
    pub shared: Vec<SharedPort>,
}

impl GpuTopology {
    /// The NVML reading, when there is one that answered.
    pub fn nvml(&self) -> Option<&NodeLinks> {
        self.live
            .as_ref()
            .map(|l| &l.nvml)
            .filter(|n| n.error.is_none())
    }

    /// Whether CUDA lets the GPU at PCI `a` reach the one at `b` (None: not asked).
    pub fn peer(&self, a: &str, b: &str) -> Option<&PeerAccess> {
        self.live
            .as_ref()?
            .peers
            .iter()
            .find(|p| p.a_pci == a && p.b_pci == b)
    }

    /// The shared port of the GPU at `pci`, if any.
    pub fn shared_port(&self, pci: &str) -> Option<&SharedPort> {
        self.shared.iter().find(|s| s.gpus.iter().any(|g| g == pci))
    }
}

/// Asks NVML and CUDA (running system only; a snapshot replays the recorded answer).
pub fn live_probe() -> LiveTopology {
    let nvml = gdrprov_rdma::nvlink::read();
    let inv = gdrprov_rdma::cuda::inventory::inventory();
    let pci = |i: u32| {
        inv.devices
            .iter()
            .find(|d| d.ordinal == i as i32)
            .and_then(|d| d.pci_bus_id.as_deref())
            .map(gdrprov_rdma::nvlink::sysfs_pci)
            .unwrap_or_default()
    };
    let (peers, peers_error) = match gdrprov_rdma::cuda::node::peer_matrix() {
        Ok(m) => (
            m.into_iter()
                .map(|(a, b, can_access, rank)| PeerAccess {
                    a,
                    b,
                    a_pci: pci(a),
                    b_pci: pci(b),
                    can_access,
                    rank,
                })
                .collect(),
            None,
        ),
        Err(e) => (Vec::new(), Some(e.to_string())),
    };
    LiveTopology {
        nvml,
        peers,
        peers_error,
    }
}

/// The topology: `live` as probed (or replayed), the shared ports from sysfs.
pub fn probe(
    live: Option<LiveTopology>,
    gpus: &[Gpu],
    nics: &[RdmaDevice],
    links: &[PcieLink],
) -> GpuTopology {
    GpuTopology {
        live,
        fabric_manager: None,
        nvswitches: Vec::new(),
        pci_listed: false,
        shared: shared_ports(gpus, nics, links),
    }
}

/// The PCI class of an NVSwitch (bridge, other), as the NVIDIA driver's nvswitch table matches it.
const NVSWITCH_CLASS: u32 = 0x0680;
const NVIDIA: u16 = 0x10de;

/// The NVSwitch PCI functions among `devices`.
pub fn nvswitches(devices: &[super::pci::PciDevice]) -> Vec<String> {
    devices
        .iter()
        .filter(|d| d.vendor == NVIDIA && d.class >> 8 == NVSWITCH_CLASS)
        .map(|d| d.address.clone())
        .collect()
}

/// Whether a Fabric Manager package version is the driver's: the upstream part
/// (`580.159.04` of `580.159.04-1` or `3:580.159.04-1.el9`) equals the driver's version.
pub fn fabric_manager_matches(package_version: &str, driver: &str) -> bool {
    let v = package_version
        .split_once(':')
        .map_or(package_version, |(_, v)| v);
    v.split('-').next() == Some(driver)
}

/// The Fabric Manager package of driver branch `major` (Debian/Ubuntu name it per branch,
/// `nvidia-fabricmanager-580`; RHEL `nvidia-fabric-manager`), asked only where the GPUs'
/// NVLinks end at NVSwitches.
pub fn fabric_manager(
    packages: &super::packages::Packages,
    major: Option<u32>,
) -> Option<(String, String)> {
    let branch = major.map(|m| format!("nvidia-fabricmanager-{m}"));
    let mut names: Vec<&str> = branch.iter().map(String::as_str).collect();
    names.extend(["nvidia-fabricmanager", "nvidia-fabric-manager"]);
    packages.version(&names)
}

impl GpuTopology {
    /// Whether any GPU's NVLink ends at an NVSwitch (an HGX board).
    pub fn nvswitch(&self) -> bool {
        self.nvml().is_some_and(|n| {
            n.gpus.iter().any(|g| {
                g.links
                    .iter()
                    .any(|l| l.remote_type.as_deref() == Some("switch"))
            })
        })
    }
}

fn shared_ports(gpus: &[Gpu], nics: &[RdmaDevice], links: &[PcieLink]) -> Vec<SharedPort> {
    let mut out: Vec<SharedPort> = Vec::new();
    for g in gpus {
        let chain = pci::chain(&g.sysfs_path);
        // The deepest bridge above this GPU that serves another GPU.
        let bridge = chain.iter().rev().skip(1).find(|b| {
            links.iter().any(|l| {
                &l.address == *b
                    && l.role == Role::Bridge
                    && l.serves
                        .iter()
                        .any(|s| s != &g.pci && gpus.iter().any(|o| &o.pci == s))
            })
        });
        let (port, kind) = match bridge {
            Some(b) => (b.clone(), "bridge"),
            None => {
                let Some(hb) = pci::host_bridge(&g.sysfs_path) else {
                    continue;
                };
                (hb, "host-bridge")
            }
        };
        if let Some(s) = out.iter_mut().find(|s| s.port == port) {
            s.gpus.push(g.pci.clone());
            continue;
        }
        let link = links.iter().find(|l| l.address == port);
        let gbs = link.and_then(|l| {
            Some(raw_gbytes(
                l.max_speed.as_deref().and_then(parse_speed)?,
                l.max_width?,
            ))
        });
        out.push(SharedPort {
            port,
            kind,
            gpus: vec![g.pci.clone()],
            nics: Vec::new(),
            link: link.map(|l| l.maximum()),
            link_gbs: gbs,
        });
    }
    out.retain(|s| s.gpus.len() > 1);
    for s in &mut out {
        for n in nics {
            let (Some(a), Some(p)) = (&n.pci, &n.sysfs_path) else {
                continue;
            };
            let under = if s.kind == "bridge" {
                pci::chain(p).contains(&s.port)
            } else {
                pci::host_bridge(p).as_deref() == Some(s.port.as_str())
            };
            if under && !s.nics.contains(a) {
                s.nics.push(a.clone());
            }
        }
    }
    out
}

/// The topology of the running system alone (what `bench copy --concurrent` and `bench p2p`
/// judge by), without the rest of the facts.
pub fn of_running_system() -> GpuTopology {
    let Ok(host) = Host::open(std::path::Path::new("/"), true) else {
        return GpuTopology::default();
    };
    let devices = pci::devices(&host);
    let gpus = super::gpu::probe(&host, &devices);
    let nics = super::rdma::probe(&host);
    let links = super::links::probe(&host, &gpus, &nics);
    probe(Some(live_probe()), &gpus, &nics, &links)
}

/// The host layer's recorded probe, on a running system or a snapshot.
pub fn recorded(host: &Host) -> Option<LiveTopology> {
    host.probe("gpu-topology", live_probe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::gpu::Arch;
    use crate::facts::links::LinkState;

    fn gpu(pci: &str, path: &str) -> Gpu {
        Gpu {
            pci: pci.into(),
            device_id: "0x2335".into(),
            name: Some("NVIDIA H200".into()),
            arch: Arch::Hopper,
            arch_source: "device-id",
            numa_node: None,
            sysfs_path: format!("/sys/devices/{path}"),
            driver: Some("nvidia".into()),
            p2pmem: None,
        }
    }

    fn bridge(addr: &str, serves: &[&str]) -> PcieLink {
        PcieLink {
            address: addr.into(),
            role: Role::Bridge,
            serves: serves.iter().map(|s| s.to_string()).collect(),
            current_speed: Some("32.0 GT/s PCIe".into()),
            max_speed: Some("32.0 GT/s PCIe".into()),
            current_width: Some(16),
            max_width: Some(16),
            state: LinkState::Full,
        }
    }

    #[test]
    fn fabric_manager_matches_the_driver_by_its_upstream_version() {
        assert!(fabric_manager_matches("580.159.04-1", "580.159.04"));
        assert!(fabric_manager_matches("3:580.159.04-1.el9", "580.159.04"));
        assert!(fabric_manager_matches("580.159.04", "580.159.04"));
        assert!(!fabric_manager_matches("570.86.15-1", "580.159.04"));
        // A prefix is not the version.
        assert!(!fabric_manager_matches("580.159.041-1", "580.159.04"));
    }

    #[test]
    fn nvswitches_are_nvidia_bridges_not_gpus() {
        let dev = |address: &str, vendor: u16, class: u32| crate::facts::pci::PciDevice {
            address: address.into(),
            vendor,
            device: 0x22a3,
            class,
            numa_node: None,
            sysfs_path: String::new(),
            driver: None,
        };
        let found = nvswitches(&[
            dev("0000:05:00.0", 0x10de, 0x068000),
            dev("0000:18:00.0", 0x10de, 0x030200),
            dev("0000:00:01.0", 0x8086, 0x068000),
        ]);
        assert_eq!(found, ["0000:05:00.0"]);
    }

    #[test]
    fn gpus_directly_on_the_root_share_only_the_host_bridge() {
        // The lent 4x H200 virtual machine: every GPU sits on the root bus.
        let g: Vec<Gpu> = (6..10)
            .map(|d| {
                let a = format!("0000:00:{d:02x}.0");
                gpu(&a, &format!("pci0000:00/{a}"))
            })
            .collect();
        let s = shared_ports(&g, &[], &[]);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].port, "pci0000:00");
        assert_eq!(s[0].kind, "host-bridge");
        assert_eq!(s[0].gpus.len(), 4);
        assert_eq!(s[0].link_gbs, None);
    }

    #[test]
    fn two_gpus_behind_one_switch_share_its_uplink() {
        let sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
        let a = gpu("0000:03:00.0", &format!("{sw}/0000:02:08.0/0000:03:00.0"));
        let b = gpu("0000:04:00.0", &format!("{sw}/0000:02:10.0/0000:04:00.0"));
        let c = gpu("0000:81:00.0", "pci0000:80/0000:80:01.0/0000:81:00.0");
        let links = vec![
            bridge("0000:01:00.0", &["0000:03:00.0", "0000:04:00.0"]),
            bridge("0000:00:01.0", &["0000:03:00.0", "0000:04:00.0"]),
            bridge("0000:02:08.0", &["0000:03:00.0"]),
            bridge("0000:02:10.0", &["0000:04:00.0"]),
            bridge("0000:80:01.0", &["0000:81:00.0"]),
        ];
        let s = shared_ports(&[a, b, c], &[], &links);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].port, "0000:01:00.0");
        assert_eq!(s[0].gpus, vec!["0000:03:00.0", "0000:04:00.0"]);
        assert!((s[0].link_gbs.unwrap() - 63.0).abs() < 0.1);
        assert_eq!(s[0].link.as_deref(), Some("Gen5 x16"));
    }
}
