//! RDMA devices, ports and queue pairs, over sideway (which loads libibverbs at run time through
//! rdma-mummy-sys: a missing library shows as an empty device list, so it is checked here first).

use std::path::Path;
use std::sync::Arc;

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::BasicCompletionQueue;
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairAttribute, QueuePairState};
use sideway::ibverbs::AccessFlags;

use super::error::BenchError;
use super::gid::{gid_to_string, select_gid, GidCandidate, GidKind};
use super::sysfs;

const IBV_PORT_ACTIVE: u32 = 4;
const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// The shared object the binding opens (same name rdma-mummy-sys uses).
pub const LIBIBVERBS: &str = "libibverbs.so.1";

/// Check that libibverbs can be loaded, without keeping it open.
pub fn ensure_libibverbs() -> Result<(), BenchError> {
    // SAFETY: loading libibverbs runs only its (side-effect-free) ELF constructors.
    match unsafe { libloading::Library::new(LIBIBVERBS) } {
        Ok(_) => Ok(()),
        Err(e) => {
            let why = std::error::Error::source(&e)
                .map(|s| s.to_string())
                .unwrap_or_else(|| e.to_string());
            Err(BenchError::LibibverbsMissing {
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

/// Names of the RDMA devices libibverbs sees; an error naming the cause when there is none.
pub fn device_names() -> Result<Vec<String>, BenchError> {
    ensure_libibverbs()?;
    let list = DeviceList::new().map_err(|e| BenchError::NoRdmaDevice {
        why: match to_io(e).raw_os_error() {
            Some(code) => format!(
                "{} (ibv_get_device_list: {})",
                sysfs::diagnose_running_system(),
                super::error::errno_name(code)
            ),
            None => sysfs::diagnose_running_system(),
        },
    })?;
    let names: Vec<String> = list.iter().map(|d| d.name()).collect();
    if names.is_empty() {
        return Err(BenchError::NoRdmaDevice {
            why: sysfs::diagnose_running_system(),
        });
    }
    Ok(names)
}

/// Open a device by name.
pub fn open_device(name: &str) -> Result<Arc<DeviceContext>, BenchError> {
    let names = device_names()?;
    let list =
        DeviceList::new().map_err(|e| BenchError::verbs("ibv_get_device_list", name, to_io(e)))?;
    let dev = list
        .iter()
        .find(|d| d.name() == name)
        .ok_or_else(|| BenchError::DeviceNotFound {
            name: name.to_string(),
            available: names.join(", "),
        })?;
    dev.open()
        .map_err(|e| BenchError::verbs("ibv_open_device", name, to_io(e)))
}

fn to_io<E: std::error::Error>(e: E) -> std::io::Error {
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

pub(crate) fn io_of<E: std::error::Error>(e: E) -> std::io::Error {
    to_io(e)
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

fn mtu_enum(raw: u32) -> Mtu {
    match raw {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

/// Number of physical ports and the vendor id of an opened device.
pub fn device_ports(ctx: &DeviceContext, name: &str) -> Result<(u8, u32), BenchError> {
    let attr = ctx
        .query_device()
        .map_err(|e| BenchError::verbs("ibv_query_device", name, to_io(e)))?;
    Ok((
        attr.attr.orig_attr.phys_port_cnt,
        attr.attr.orig_attr.vendor_id,
    ))
}

/// Query a port; `gid_index` overrides the GID choice on RoCE.
pub fn query_port(
    ctx: &DeviceContext,
    name: &str,
    port: u8,
    gid_index: Option<u32>,
) -> Result<PortInfo, BenchError> {
    let (count, vendor) = device_ports(ctx, name)?;
    if port == 0 || port > count {
        return Err(BenchError::PortNotFound {
            device: name.to_string(),
            port,
            count,
        });
    }
    let attr = ctx
        .query_port(port)
        .map_err(|e| BenchError::verbs("ibv_query_port", name, to_io(e)))?;
    let a = attr.attr;
    let ethernet = a.link_layer == IBV_LINK_LAYER_ETHERNET;
    let speed = if a.active_speed_ex != 0 {
        a.active_speed_ex
    } else {
        u32::from(a.active_speed)
    };
    let line_rate = crate::host::Host::open(Path::new("/"), true)
        .ok()
        .and_then(|host| sysfs::read_port_rate(&host, name, port))
        .or_else(|| sysfs::line_rate_from_speed_width(speed, a.active_width));
    let mut info = PortInfo {
        device: name.to_string(),
        port,
        state: port_state_name(a.state).to_string(),
        link_layer: if ethernet { "Ethernet" } else { "InfiniBand" },
        lid: a.lid,
        active_mtu_raw: a.active_mtu,
        active_mtu: mtu_bytes(a.active_mtu),
        line_rate_gbps: line_rate,
        software: sysfs::is_software_device(name, vendor),
        gid_index: None,
        gid: None,
        gid_raw: None,
    };
    if a.state != IBV_PORT_ACTIVE {
        return Ok(info);
    }
    let mut gids = Vec::new();
    let len = u32::try_from(a.gid_tbl_len).unwrap_or(0).min(256);
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
    let chosen = match gid_index {
        Some(i) => {
            let g = gids
                .iter()
                .find(|g| g.index == i && g.raw.iter().any(|&b| b != 0))
                .ok_or_else(|| BenchError::NoGid {
                    device: name.to_string(),
                    port,
                    detail: format!(" at index {i} (entry empty or absent)"),
                })?;
            Some(g.index)
        }
        None => select_gid(ethernet, &gids),
    };
    if let Some(i) = chosen {
        if let Some(g) = gids.iter().find(|g| g.index == i) {
            info.gid_index = Some(i);
            info.gid = Some(gid_to_string(&g.raw));
            info.gid_raw = Some(g.raw);
        }
    }
    if ethernet && info.gid_index.is_none() {
        return Err(BenchError::NoGid {
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
    device: Option<&str>,
    port: Option<u8>,
    gid_index: Option<u32>,
) -> Result<(Arc<DeviceContext>, PortInfo), BenchError> {
    let names = device_names()?;
    let candidates: Vec<String> = match device {
        Some(d) => {
            if !names.iter().any(|n| n == d) {
                return Err(BenchError::DeviceNotFound {
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
        let ctx = open_device(name)?;
        let (count, _) = device_ports(&ctx, name)?;
        let ports: Vec<u8> = match port {
            Some(p) => vec![p],
            None => (1..=count).collect(),
        };
        for p in ports {
            let info = query_port(&ctx, name, p, gid_index)?;
            if info.state == "ACTIVE" {
                return Ok((ctx, info));
            }
            if port.is_some() {
                let attr = ctx
                    .query_port(p)
                    .map_err(|e| BenchError::verbs("ibv_query_port", name, to_io(e)))?;
                let phys = phys_state_name(attr.attr.phys_state);
                return Err(BenchError::PortNotActive {
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
    Err(BenchError::NoActivePort {
        summary: seen.join(", "),
    })
}

/// One end of the loopback: an opened device, its port and a protection domain.
pub struct Side {
    pub ctx: Arc<DeviceContext>,
    pub pd: Arc<ProtectionDomain>,
    pub port: PortInfo,
}

impl Side {
    pub fn new(ctx: Arc<DeviceContext>, port: PortInfo) -> Result<Side, BenchError> {
        let pd = ctx
            .alloc_pd()
            .map_err(|e| BenchError::verbs("ibv_alloc_pd", &port.device, to_io(e)))?;
        Ok(Side { ctx, pd, port })
    }

    pub fn create_cq(&self, cqe: u32) -> Result<Arc<BasicCompletionQueue>, BenchError> {
        let mut b = self.ctx.create_cq_builder();
        b.setup_cqe(cqe);
        b.build()
            .map_err(|e| BenchError::verbs("ibv_create_cq", &self.port.device, to_io(e)))
    }
}

/// A connected pair of RC QPs: `send` on the first side writes into memory of the second side.
pub struct QpPair {
    pub send: BasicQueuePair,
    pub recv: BasicQueuePair,
}

fn make_qp(
    side: &Side,
    cq: &Arc<BasicCompletionQueue>,
    depth: u32,
) -> Result<BasicQueuePair, BenchError> {
    let mut b = side.pd.create_qp_builder();
    b.setup_send_cq(Arc::clone(cq))
        .setup_recv_cq(Arc::clone(cq))
        .setup_max_send_wr(depth)
        .setup_max_recv_wr(1)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(0);
    let mut qp = b
        .build()
        .map_err(|e| BenchError::verbs("ibv_create_qp", &side.port.device, to_io(e)))?;
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::Init)
        .setup_pkey_index(0)
        .setup_port(side.port.port)
        .setup_access_flags(
            AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead,
        );
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(INIT)", &side.port.device, to_io(e)))?;
    Ok(qp)
}

fn connect(
    qp: &mut BasicQueuePair,
    local: &Side,
    remote: &PortInfo,
    remote_qpn: u32,
    psn: u32,
) -> Result<(), BenchError> {
    let dev = &local.port.device;
    let mtu = local.port.active_mtu_raw.min(remote.active_mtu_raw).max(1);
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::ReadyToReceive)
        .setup_path_mtu(mtu_enum(mtu))
        .setup_dest_qp_num(remote_qpn)
        .setup_rq_psn(psn)
        .setup_max_dest_read_atomic(1)
        .setup_min_rnr_timer(12);
    let mut ah = AddressHandleAttribute::new();
    ah.setup_port(local.port.port)
        .setup_service_level(0)
        .setup_dest_lid(remote.lid);
    if local.port.link_layer == "Ethernet" {
        let (Some(gid), Some(src)) = (remote.gid_raw, local.port.gid_index) else {
            return Err(BenchError::NoGid {
                device: dev.clone(),
                port: local.port.port,
                detail: String::new(),
            });
        };
        let src = u8::try_from(src)
            .map_err(|_| BenchError::InvalidArgument(format!("GID index {src} > 255")))?;
        ah.setup_grh(&Gid { raw: gid }, 0, src, 64, 0);
    }
    attr.setup_address_vector(&ah);
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(RTR)", dev, to_io(e)))?;
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::ReadyToSend)
        .setup_sq_psn(psn)
        .setup_timeout(14)
        .setup_retry_cnt(7)
        .setup_rnr_retry(7)
        .setup_max_read_atomic(1);
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(RTS)", dev, to_io(e)))?;
    Ok(())
}

/// Create `n` QP pairs between two sides (which may be the same device and port) and connect
/// each pair to itself in-process: no out-of-band exchange is needed.
pub fn connect_pairs(
    a: &Side,
    b: &Side,
    a_cq: &Arc<BasicCompletionQueue>,
    b_cq: &Arc<BasicCompletionQueue>,
    n: u32,
    depth: u32,
) -> Result<Vec<QpPair>, BenchError> {
    let mut pairs = Vec::new();
    for i in 0..n {
        let mut send = make_qp(a, a_cq, depth)?;
        let mut recv = make_qp(b, b_cq, 1)?;
        let psn = 0x1000 + i * 0x100;
        connect(&mut send, a, &b.port, recv.qp_number(), psn)?;
        connect(&mut recv, b, &a.port, send.qp_number(), psn)?;
        pairs.push(QpPair { send, recv });
    }
    Ok(pairs)
}
