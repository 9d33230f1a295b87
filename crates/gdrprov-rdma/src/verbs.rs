//! RDMA devices and ports, over sideway (which loads libibverbs on the first verbs call through
//! rdma-mummy-sys: a missing library shows as an empty device list, so it is checked here first).
#![allow(
    unsafe_code,
    reason = "libibverbs loaded at run time (libloading) and registrations that probe dma-buf support"
)]

use std::sync::Arc;

use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::memory_region::RegisterMemoryRegionErrorKind;
use sideway::ibverbs::AccessFlags;

use crate::error::{errno_name, Error};
use crate::gid::{gid_to_string, select_gid, GidCandidate, GidKind};
use crate::HostView;

const IBV_PORT_ACTIVE: u32 = 4;
const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// The shared object the binding opens (same name rdma-mummy-sys uses).
pub const LIBIBVERBS: &str = "libibverbs.so.1";

/// Check that libibverbs can be loaded, without keeping it open.
pub fn ensure_libibverbs() -> Result<(), Error> {
    // SAFETY: loading libibverbs runs only its (side-effect-free) ELF constructors.
    match unsafe { libloading::Library::new(LIBIBVERBS) } {
        Ok(_) => Ok(()),
        Err(e) => {
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.to_string());
            Err(Error::LibibverbsMissing {
                detail: format!("cannot load {LIBIBVERBS} ({why})"),
            })
        }
    }
}

/// True when libibverbs exports `symbol`.
pub fn libibverbs_has(symbol: &str) -> bool {
    // SAFETY: as above; the symbol is only looked up, never called.
    unsafe {
        libloading::Library::new(LIBIBVERBS)
            .map(|lib| {
                let name = format!("{symbol}\0");
                lib.get::<*const ()>(name.as_bytes()).is_ok()
            })
            .unwrap_or(false)
    }
}

/// Names of the RDMA devices libibverbs sees; an error naming the cause (`host` explains it) when
/// there is none.
pub fn device_names(host: &dyn HostView) -> Result<Vec<String>, Error> {
    ensure_libibverbs()?;
    let list = DeviceList::new().map_err(|e| Error::NoRdmaDevice {
        why: match to_io(e).raw_os_error() {
            Some(code) => format!(
                "{} (ibv_get_device_list: {})",
                host.explain_no_device(),
                errno_name(code)
            ),
            None => host.explain_no_device(),
        },
    })?;
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    if names.is_empty() {
        return Err(Error::NoRdmaDevice {
            why: host.explain_no_device(),
        });
    }
    Ok(names)
}

/// Open a device by name.
pub fn open_device(host: &dyn HostView, name: &str) -> Result<Arc<DeviceContext>, Error> {
    let names = device_names(host)?;
    let list =
        DeviceList::new().map_err(|e| Error::verbs("ibv_get_device_list", name, to_io(e)))?;
    let dev = list
        .iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| Error::DeviceNotFound {
            name: name.to_string(),
            available: names.join(", "),
        })?;
    dev.open()
        .map_err(|e| Error::verbs("ibv_open_device", name, to_io(e)))
}

/// sideway's error as an io::Error with the OS error code when there is one.
pub(crate) fn to_io<E: std::error::Error>(e: E) -> std::io::Error {
    // sideway wraps io::Error in its own error types; keep the OS error when there is one.
    let mut source: Option<&(dyn std::error::Error + 'static)> = e.source();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if let Some(code) = io.raw_os_error() {
                return std::io::Error::from_raw_os_error(code);
            }
        }
        source = s.source();
    }
    std::io::Error::other(e.to_string())
}

/// What the benchmark needs to know of one port.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PortInfo {
    pub device: String,
    pub port: u8,
    pub state: String,
    pub link_layer: &'static str,
    pub lid: u16,
    #[serde(skip)]
    pub active_mtu_raw: u32,
    pub active_mtu: u32,
    /// Line rate in Gb/s (sysfs `rate`, else active speed × width).
    pub line_rate_gbps: Option<f64>,
    pub software: bool,
    pub gid_index: Option<u32>,
    pub gid: Option<String>,
    #[serde(skip)]
    pub gid_raw: Option<[u8; 16]>,
}

fn port_state_name(state: u32) -> &'static str {
    match state {
        0 => "NOP",
        1 => "DOWN",
        2 => "INIT",
        3 => "ARMED",
        4 => "ACTIVE",
        5 => "ACTIVE_DEFER",
        _ => "UNKNOWN",
    }
}

fn phys_state_name(state: u8) -> &'static str {
    match state {
        1 => "Sleep",
        2 => "Polling",
        3 => "Disabled",
        4 => "PortConfigurationTraining",
        5 => "LinkUp",
        6 => "LinkErrorRecovery",
        7 => "PhyTest",
        _ => "",
    }
}

fn mtu_bytes(raw: u32) -> u32 {
    match raw {
        1 => 256,
        2 => 512,
        3 => 1024,
        4 => 2048,
        5 => 4096,
        _ => 0,
    }
}

pub(crate) fn mtu_enum(raw: u32) -> Mtu {
    match raw {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

/// Number of physical ports and the vendor id of an opened device.
pub fn device_ports(ctx: &DeviceContext, name: &str) -> Result<(u8, u32), Error> {
    let attr = ctx
        .query_device()
        .map_err(|e| Error::verbs("ibv_query_device", name, to_io(e)))?;
    Ok((
        attr.attr.orig_attr.phys_port_cnt,
        attr.attr.orig_attr.vendor_id,
    ))
}

/// A port's GID table: the first `len` entries that can be read, each with its kind.
fn gid_table(ctx: &DeviceContext, port: u8, len: u32) -> Vec<GidCandidate> {
    let mut gids = Vec::new();
    for index in 0..len {
        if let Ok(g) = ctx.query_gid(port, index) {
            // 0: IB or RoCE v1, 1: RoCE v2 (libibverbs' sysfs GID type).
            let kind = match ctx.query_gid_type(port, index) {
                Ok(1) => GidKind::RoceV2,
                _ => GidKind::IbOrRoceV1,
            };
            gids.push(GidCandidate {
                index,
                raw: g.raw,
                kind,
            });
        }
    }
    gids
}

/// The GID to use: the index asked for (it must be set), else the best of the table.
fn chosen_gid(
    gids: &[GidCandidate],
    gid_index: Option<u32>,
    ethernet: bool,
    name: &str,
    port: u8,
) -> Result<Option<u32>, Error> {
    Ok(match gid_index {
        Some(i) => {
            let g = gids
                .iter()
                .find(|g| g.index == i && g.raw.iter().any(|&b| b != 0))
                .ok_or_else(|| Error::NoGid {
                    device: name.to_string(),
                    port,
                    detail: format!(" at index {i} (entry empty or absent)"),
                })?;
            Some(g.index)
        }
        None => select_gid(ethernet, gids),
    })
}

/// Query a port; `gid_index` overrides the GID choice on RoCE; `host` gives the line rate.
pub fn query_port(
    host: &dyn HostView,
    ctx: &DeviceContext,
    name: &str,
    port: u8,
    gid_index: Option<u32>,
) -> Result<PortInfo, Error> {
    let (count, vendor) = device_ports(ctx, name)?;
    if port == 0 || port > count {
        return Err(Error::PortNotFound {
            device: name.to_string(),
            port,
            count,
        });
    }
    let attr = ctx
        .query_port(port)
        .map_err(|e| Error::verbs("ibv_query_port", name, to_io(e)))?;
    let a = attr.attr;
    let ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET;
    let speed = if a.active_speed_ex != 0 {
        a.active_speed_ex
    } else {
        u32::from(a.active_speed)
    };
    let line_rate = host
        .port_rate_gbps(name, port)
        .or_else(|| line_rate_from_speed_width(speed, a.active_width));
    let mut info = PortInfo {
        device: name.to_string(),
        port,
        state: port_state_name(a.state).to_string(),
        link_layer: if ethernet { "Ethernet" } else { "InfiniBand" },
        lid: a.lid,
        active_mtu_raw: a.active_mtu,
        active_mtu: mtu_bytes(a.active_mtu),
        line_rate_gbps: line_rate,
        software: is_software_device(name, vendor),
        gid_index: None,
        gid: None,
        gid_raw: None,
    };
    if a.state != IBV_PORT_ACTIVE {
        return Ok(info);
    }
    let len = u32::try_from(a.gid_tbl_len).unwrap_or(0).min(256);
    let gids = gid_table(ctx, port, len);
    let chosen = chosen_gid(&gids, gid_index, ethernet, name, port)?;
    if let Some(i) = chosen {
        if let Some(g) = gids.iter().find(|g| g.index == i) {
            info.gid_index = Some(i);
            info.gid = Some(gid_to_string(&g.raw));
            info.gid_raw = Some(g.raw);
        }
    }
    if ethernet && info.gid_index.is_none() {
        return Err(Error::NoGid {
            device: name.to_string(),
            port,
            detail: ": a RoCE port needs an IP address on its netdev (`ip addr add ... dev <nic>`)"
                .to_string(),
        });
    }
    Ok(info)
}

/// Pick and check the port: the named one (must be ACTIVE), or the first ACTIVE port of the named
/// device, or the first ACTIVE port of any device.
pub fn select_port(
    host: &dyn HostView,
    device: Option<&str>,
    port: Option<u8>,
    gid_index: Option<u32>,
) -> Result<(Arc<DeviceContext>, PortInfo), Error> {
    let names = device_names(host)?;
    let candidates: Vec<String> = match device {
        Some(d) => {
            if !names.iter().any(|n| n == d) {
                return Err(Error::DeviceNotFound {
                    name: d.to_string(),
                    available: names.join(", "),
                });
            }
            vec![d.to_string()]
        }
        None => names,
    };
    let mut seen = Vec::new();
    for name in &candidates {
        let ctx = open_device(host, name)?;
        let (count, _) = device_ports(&ctx, name)?;
        let ports: Vec<u8> = match port {
            Some(p) => vec![p],
            None => (1..=count).collect(),
        };
        for p in ports {
            let info = query_port(host, &ctx, name, p, gid_index)?;
            if info.state == "ACTIVE" {
                return Ok((ctx, info));
            }
            if port.is_some() {
                let attr = ctx
                    .query_port(p)
                    .map_err(|e| Error::verbs("ibv_query_port", name, to_io(e)))?;
                let phys = phys_state_name(attr.attr.phys_state);
                return Err(Error::PortNotActive {
                    device: name.clone(),
                    port: p,
                    state: info.state,
                    phys: if phys.is_empty() {
                        String::new()
                    } else {
                        format!(", physical state {phys}")
                    },
                });
            }
            seen.push(format!("{name}:{p} {}", info.state));
        }
    }
    Err(Error::NoActivePort {
        summary: seen.join(", "),
    })
}

/// Nominal per-lane data rate in Gb/s for `ibv_port_attr.active_speed` (or `active_speed_ex`).
pub fn lane_gbps(active_speed: u32) -> Option<f64> {
    Some(match active_speed {
        1 => 2.5,     // SDR
        2 => 5.0,     // DDR
        4 => 10.0,    // QDR
        8 => 10.0,    // FDR10
        16 => 14.0,   // FDR
        32 => 25.0,   // EDR
        64 => 50.0,   // HDR
        128 => 100.0, // NDR
        256 => 200.0, // XDR
        _ => return None,
    })
}

/// Number of lanes for `ibv_port_attr.active_width`.
pub fn width_lanes(active_width: u8) -> Option<u32> {
    Some(match active_width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => return None,
    })
}

/// Line rate in Gb/s from active speed × width, the way `ibv_devinfo`/sysfs compute it.
pub fn line_rate_from_speed_width(active_speed: u32, active_width: u8) -> Option<f64> {
    Some(lane_gbps(active_speed)? * f64::from(width_lanes(active_width)?))
}

/// Software RDMA devices (soft-RoCE `rxe`, soft-iWARP `siw`) have no meaningful line rate.
pub fn is_software_device(name: &str, vendor_id: u32) -> bool {
    // rxe reports vendor 0xffffff, siw 0x626d74 ("bmt").
    name.starts_with("rxe")
        || name.starts_with("siw")
        || vendor_id == 0x00ff_ffff
        || vendor_id == 0x0062_6d74
}

/// NCCL's dma-buf probe on an opened device: `ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd = -1, 0)` can only
/// fail, and its errno tells whether the driver looked at the fd (EBADF: dma-buf MRs supported).
/// `Ok(None)`: the call accepted fd -1 (unexpected).
pub fn reg_dmabuf_mr_errno(ctx: &Arc<DeviceContext>, name: &str) -> Result<Option<i32>, Error> {
    let pd = ctx
        .alloc_pd()
        .map_err(|e| Error::verbs("ibv_alloc_pd", name, to_io(e)))?;
    // SAFETY: fd -1 is never a valid dma-buf: the call can only fail; a zero-length MR is never used.
    let res = unsafe { pd.reg_dmabuf_mr(0, 0, 0, -1, AccessFlags::LocalWrite) };
    Ok(match res {
        Ok(_mr) => None,
        Err(e) => Some(match e.0 {
            RegisterMemoryRegionErrorKind::Ibverbs(io) => io.raw_os_error().unwrap_or(0),
            _ => 0,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speed_times_width() {
        assert_eq!(line_rate_from_speed_width(32, 2), Some(100.0)); // 4X EDR
        assert_eq!(line_rate_from_speed_width(128, 2), Some(400.0)); // 4X NDR
        assert_eq!(line_rate_from_speed_width(32, 1), Some(25.0)); // 1X EDR
        assert_eq!(line_rate_from_speed_width(64, 2), Some(200.0)); // 4X HDR
        assert_eq!(line_rate_from_speed_width(128, 16), Some(200.0)); // 2X NDR
        assert_eq!(line_rate_from_speed_width(1, 8), Some(30.0)); // 12X SDR
        assert_eq!(line_rate_from_speed_width(3, 2), None);
        assert_eq!(line_rate_from_speed_width(32, 3), None);
    }

    #[test]
    fn software_devices() {
        assert!(is_software_device("rxe0", 0xffffff));
        assert!(is_software_device("siw_eth0", 0));
        assert!(is_software_device("roce_soft", 0xffffff));
        assert!(!is_software_device("mlx5_0", 0x02c9));
    }
}
