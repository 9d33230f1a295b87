//! The GPUs of a node as NVML sees them together, through the `nvml-wrapper` crate (which loads
//! libnvidia-ml at run time): per GPU each NVLink link the device has (a link whose state NVML
//! answers; the count comes from the device, never a constant), whether it is up, its version and
//! rate, what is at its far end (a GPU by PCI address, or an NVSwitch), its error counters; the
//! GPU's fabric state (NVSwitch systems); per ordered pair NVML's P2P status and the topology
//! level of their common ancestor. A function the installed driver lacks is written down in
//! `missing` (a finding), never a crash. The calls nvml-wrapper cannot make are in
//! [`crate::nvml_raw`].
//!
//! The whole answer is plain data (serde both ways) so that `inventory --snapshot` can keep it
//! and a snapshot replays it.

use nvml_wrapper::enum_wrappers::device::{P2pCapabilitiesIndex, P2pStatus, TopologyLevel};
use nvml_wrapper::enum_wrappers::nv_link::ErrorCounter;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;

use crate::nvml_raw;
use serde::{Deserialize, Serialize};

/// NVML's fields for a link's speed (scoped to the link) and the common speed of the active
/// links, in MB/s one way (`NVML_FI_DEV_NVLINK_GET_SPEED`, `NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON`).
const FI_NVLINK_GET_SPEED: u32 = 164;
const FI_NVLINK_SPEED_COMMON: u32 = 90;
/// `NVML_NVLINK_MAX_LINKS` of the headers the binding was made from; links past the device's
/// own count answer "not supported" and are left out.
const MAX_LINKS: u32 = 18;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinkErrors {
    pub replay: Option<u64>,
    pub recovery: Option<u64>,
    pub crc_flit: Option<u64>,
    pub crc_data: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NvLink {
    pub link: u32,
    pub up: bool,
    /// NVML's version value (`nvmlNvlinkVersion_t`: 6 is NVLink 4.0, 7 is 5.0; 1-4 on drivers
    /// that count 1.0 .. 4.0 directly) and the NVLink generation it names.
    pub version_raw: Option<u32>,
    pub generation: Option<String>,
    /// `gpu`, `switch`, `ibmnpu` or `unknown`.
    pub remote_type: Option<String>,
    /// The far end's PCI address (sysfs form) when it is a GPU NVML can name.
    pub remote_pci: Option<String>,
    /// `NVML_NVLINK_CAP_P2P_SUPPORTED`.
    pub p2p_capable: Option<bool>,
    pub errors: LinkErrors,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fabric {
    /// `not-supported`, `not-started`, `in-progress` or `completed`.
    pub state: String,
    /// NVML's return code of the registration once completed (0: success).
    pub status: Option<u32>,
    pub clique: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuNode {
    pub index: u32,
    pub name: String,
    /// sysfs form, `0000:3b:00.0`.
    pub pci: String,
    pub links: Vec<NvLink>,
    /// MB/s one way of an active link (NVML's field values).
    pub link_speed_mbps: Option<u64>,
    pub fabric: Option<Fabric>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairPath {
    pub a: u32,
    pub b: u32,
    /// NVML's P2P status for NVLink and for PCIe reads: `ok`, `chipset-not-supported`,
    /// `gpu-not-supported`, `topology-not-supported`, `disabled-by-regkey`, `not-supported`,
    /// `unknown`.
    pub nvlink: Option<String>,
    pub read: Option<String>,
    /// The closest common PCIe ancestor: `internal`, `single` (one switch), `multiple`,
    /// `hostbridge`, `node` (same NUMA node), `system`.
    pub common_ancestor: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeLinks {
    pub driver: Option<String>,
    pub gpus: Vec<GpuNode>,
    pub pairs: Vec<PairPath>,
    /// NVML functions this driver's library lacks (each a finding).
    pub missing: Vec<String>,
    /// Why NVML could not be asked at all.
    pub error: Option<String>,
}

/// The NVLink generation an NVML version value names.
pub fn generation(raw: u32, name: &str) -> Option<&'static str> {
    // Drivers of the nvmlNvlinkVersion_t enum (r535 and later) answer 6 for an H100's links;
    // older ones answered the major version itself. A Hopper/Blackwell name disambiguates 4.
    let hopper = ["H100", "H200", "H800", "H20", "GH200"]
        .iter()
        .any(|p| name.contains(p));
    Some(match raw {
        1 => "1.0",
        2 => "2.0",
        3 if hopper => "3.0",
        3 => "2.2",
        4 if hopper => "4.0",
        4 => "3.0",
        5 => "3.1",
        6 => "4.0",
        7 => "5.0",
        _ => return None,
    })
}

fn p2p_text(s: P2pStatus) -> String {
    match s {
        P2pStatus::Ok => "ok",
        P2pStatus::ChipsetNotSupported => "chipset-not-supported",
        P2pStatus::GpuNotSupported => "gpu-not-supported",
        P2pStatus::IohTopologyNotSupported => "topology-not-supported",
        P2pStatus::DisabledByRegkey => "disabled-by-regkey",
        P2pStatus::NotSupported => "not-supported",
        P2pStatus::Unknown => "unknown",
    }
    .to_string()
}

fn level_text(l: TopologyLevel) -> String {
    match l {
        TopologyLevel::Internal => "internal",
        TopologyLevel::Single => "single",
        TopologyLevel::Multiple => "multiple",
        TopologyLevel::HostBridge => "hostbridge",
        TopologyLevel::Node => "node",
        TopologyLevel::System => "system",
    }
    .to_string()
}

/// `00000000:3B:00.0` -> `0000:3b:00.0` (CUDA's and NVML's bus ids in sysfs form).
pub fn sysfs_pci(bus_id: &str) -> String {
    let s = bus_id.to_ascii_lowercase();
    match s.split_once(':') {
        Some((dom, rest)) if dom.len() > 4 => format!("{}:{rest}", &dom[dom.len() - 4..]),
        _ => s,
    }
}

/// Keeps Ok values; a missing symbol is noted once in `missing`, other errors give None.
struct Ask<'m> {
    missing: &'m mut Vec<String>,
}

impl Ask<'_> {
    fn ok<T>(&mut self, what: &str, r: Result<T, NvmlError>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(NvmlError::FailedToLoadSymbol(s)) => {
                let note = format!("{what} ({s})");
                if !self.missing.contains(&note) {
                    self.missing.push(note);
                }
                None
            }
            Err(_) => None,
        }
    }
}

/// Reads the whole node through NVML; never fails (`error` says why nothing was read).
pub fn read() -> NodeLinks {
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return NodeLinks {
                error: Some(format!(
                "NVML could not be started ({e}); libnvidia-ml.so.1 comes with the NVIDIA driver"
            )),
                ..NodeLinks::default()
            }
        }
    };
    let mut missing = Vec::new();
    let mut ask = Ask {
        missing: &mut missing,
    };
    let driver = ask.ok("nvmlSystemGetDriverVersion", nvml.sys_driver_version());
    let count = ask
        .ok("nvmlDeviceGetCount", nvml.device_count())
        .unwrap_or(0);
    let mut gpus = Vec::new();
    for i in 0..count {
        let Some(d) = ask.ok("nvmlDeviceGetHandleByIndex", nvml.device_by_index(i)) else {
            continue;
        };
        gpus.push(gpu(i, &d, &mut ask));
    }
    let mut pairs = Vec::new();
    for a in 0..count {
        for b in 0..count {
            if a == b {
                continue;
            }
            let (Ok(da), Ok(db), Ok(db2)) = (
                nvml.device_by_index(a),
                nvml.device_by_index(b),
                nvml.device_by_index(b),
            ) else {
                continue;
            };
            pairs.push(PairPath {
                a,
                b,
                nvlink: ask
                    .ok(
                        "nvmlDeviceGetP2PStatus",
                        da.p2p_status(&db, P2pCapabilitiesIndex::NvLink),
                    )
                    .map(p2p_text),
                read: ask
                    .ok(
                        "nvmlDeviceGetP2PStatus",
                        da.p2p_status(&db, P2pCapabilitiesIndex::Read),
                    )
                    .map(p2p_text),
                common_ancestor: ask
                    .ok(
                        "nvmlDeviceGetTopologyCommonAncestor",
                        da.topology_common_ancestor(db2),
                    )
                    .map(level_text),
            });
        }
    }
    NodeLinks {
        driver,
        gpus,
        pairs,
        missing,
        error: None,
    }
}

/// The error counters of every link of every GPU, again (the second read of a rate).
pub fn read_errors() -> Result<Vec<(u32, u32, LinkErrors)>, String> {
    let nvml = Nvml::init().map_err(|e| format!("NVML could not be started ({e})"))?;
    let mut missing = Vec::new();
    let mut ask = Ask {
        missing: &mut missing,
    };
    let mut out = Vec::new();
    for i in 0..nvml.device_count().map_err(|e| e.to_string())? {
        let Ok(d) = nvml.device_by_index(i) else {
            continue;
        };
        for l in 0..MAX_LINKS {
            let link = d.link_wrapper_for(l);
            if link.is_active().is_err() {
                continue;
            }
            out.push((i, l, errors(&link, &mut ask)));
        }
    }
    Ok(out)
}

fn errors(link: &nvml_wrapper::NvLink, ask: &mut Ask) -> LinkErrors {
    let mut c = |e| ask.ok("nvmlDeviceGetNvLinkErrorCounter", link.error_counter(e));
    LinkErrors {
        replay: c(ErrorCounter::DlReplay),
        recovery: c(ErrorCounter::DlRecovery),
        crc_flit: c(ErrorCounter::DlCrcFlit),
        crc_data: c(ErrorCounter::DlCrcData),
    }
}

fn gpu(index: u32, d: &Device, ask: &mut Ask) -> GpuNode {
    let name = ask.ok("nvmlDeviceGetName", d.name()).unwrap_or_default();
    let pci = ask
        .ok("nvmlDeviceGetPciInfo", d.pci_info())
        .map(|p| sysfs_pci(&p.bus_id))
        .unwrap_or_default();
    let mut links = Vec::new();
    for l in 0..MAX_LINKS {
        let link = d.link_wrapper_for(l);
        let up = match link.is_active() {
            Ok(up) => up,
            Err(NvmlError::FailedToLoadSymbol(s)) => {
                ask.ok::<()>(
                    "nvmlDeviceGetNvLinkState",
                    Err(NvmlError::FailedToLoadSymbol(s)),
                );
                break;
            }
            // Not a link of this device (NOT_SUPPORTED / INVALID_ARGUMENT).
            Err(_) => continue,
        };
        let version_raw = ask.ok("nvmlDeviceGetNvLinkVersion", link.version());
        let remote_type = remote_type(d, l, ask);
        let remote_pci = ask
            .ok(
                "nvmlDeviceGetNvLinkRemotePciInfo_v2",
                link.remote_pci_info(),
            )
            .map(|p| sysfs_pci(&p.bus_id))
            .filter(|p| !p.starts_with("ffff"));
        links.push(NvLink {
            link: l,
            up,
            generation: version_raw
                .and_then(|v| generation(v, &name))
                .map(String::from),
            version_raw,
            remote_type,
            remote_pci,
            p2p_capable: ask.ok(
                "nvmlDeviceGetNvLinkCapability",
                link.has_capability(nvml_wrapper::enum_wrappers::nv_link::Capability::P2p),
            ),
            errors: errors(&link, ask),
        });
    }
    GpuNode {
        index,
        name,
        pci,
        link_speed_mbps: links
            .iter()
            .find(|l| l.up)
            .and_then(|l| speed(d, l.link, ask)),
        links,
        fabric: fabric(d, ask),
    }
}

/// What is at the far end of a link (through [`crate::nvml_raw`]: nvml-wrapper 0.13's
/// `remote_device_type` always says "unknown").
fn remote_type(d: &Device, link: u32, ask: &mut Ask) -> Option<String> {
    let t = ask.ok(
        "nvmlDeviceGetNvLinkRemoteDeviceType",
        nvml_raw::remote_device_type(d, link),
    )??;
    Some(
        match t {
            sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_GPU => "gpu",
            sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_IBMNPU => "ibmnpu",
            sys::nvmlIntNvLinkDeviceType_enum_NVML_NVLINK_DEVICE_TYPE_SWITCH => "switch",
            _ => "unknown",
        }
        .to_string(),
    )
}

/// A link's speed in MB/s one way: `NVML_FI_DEV_NVLINK_GET_SPEED` scoped to the link, else the
/// links' common speed (through [`crate::nvml_raw`]: nvml-wrapper's field API cannot set the
/// scope).
fn speed(d: &Device, link: u32, ask: &mut Ask) -> Option<u64> {
    for (field, scope) in [(FI_NVLINK_GET_SPEED, link), (FI_NVLINK_SPEED_COMMON, 0)] {
        let got = ask.ok(
            "nvmlDeviceGetFieldValues",
            nvml_raw::field_value(d, field, scope),
        )?;
        if let Some(x) = got.filter(|x| *x > 0) {
            return Some(x);
        }
    }
    None
}

fn fabric(d: &Device, ask: &mut Ask) -> Option<Fabric> {
    let (state, status, clique) =
        ask.ok("nvmlDeviceGetGpuFabricInfo", nvml_raw::fabric_info(d))??;
    let state = match state {
        sys::NVML_GPU_FABRIC_STATE_NOT_SUPPORTED => "not-supported",
        sys::NVML_GPU_FABRIC_STATE_NOT_STARTED => "not-started",
        sys::NVML_GPU_FABRIC_STATE_IN_PROGRESS => "in-progress",
        sys::NVML_GPU_FABRIC_STATE_COMPLETED => "completed",
        _ => "unknown",
    };
    Some(Fabric {
        state: state.to_string(),
        status: (state == "completed").then_some(status),
        clique: (state == "completed").then_some(clique),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generations_and_names() {
        assert_eq!(generation(6, "NVIDIA H200"), Some("4.0"));
        assert_eq!(generation(4, "NVIDIA H100 80GB HBM3"), Some("4.0"));
        assert_eq!(generation(4, "NVIDIA A100-SXM4-80GB"), Some("3.0"));
        assert_eq!(generation(7, "NVIDIA B200"), Some("5.0"));
        assert_eq!(generation(0, "x"), None);
        assert_eq!(sysfs_pci("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(p2p_text(P2pStatus::DisabledByRegkey), "disabled-by-regkey");
        assert_eq!(level_text(TopologyLevel::HostBridge), "hostbridge");
    }

    #[test]
    fn round_trips_as_json() {
        let n = NodeLinks {
            driver: Some("580.159.04".into()),
            gpus: vec![GpuNode {
                index: 0,
                name: "NVIDIA H200".into(),
                pci: "0000:00:06.0".into(),
                links: vec![NvLink {
                    link: 0,
                    up: true,
                    version_raw: Some(6),
                    generation: Some("4.0".into()),
                    remote_type: Some("switch".into()),
                    ..NvLink::default()
                }],
                link_speed_mbps: Some(26562),
                fabric: Some(Fabric {
                    state: "completed".into(),
                    status: Some(0),
                    clique: Some(0),
                }),
            }],
            ..NodeLinks::default()
        };
        let back: NodeLinks = serde_json::from_str(&serde_json::to_string(&n).unwrap()).unwrap();
        assert_eq!(back, n);
    }
}
