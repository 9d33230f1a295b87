//! The RoCE fabric as the host sets it, per RoCE port (an RDMA port whose link layer is
//! Ethernet): the port's active and maximum MTU beside its network device's MTU (read once,
//! in [`super::rdma`]), ECN for RoCE (`/sys/class/net/DEV/ecn/roce_np|roce_rp/enable/PRIO`,
//! mlx5), PFC per priority and DSCP trust through DCB netlink (iproute2's `dcb`), the port's
//! error counters (`hw_counters`), and `NCCL_IB_GID_INDEX` as NCCL will read it (its
//! environment first, then `/etc/nccl.conf`).
//!
//! Where a setting has no kernel interface on this host (no `dcb`, a driver without DCB
//! netlink), it is `None` and the checks say that only the vendor's tool can read it.

use super::rdma::RdmaDevice;
use super::util::{query_ok, read_trim};
use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The `hw_counters` that say a RoCE fabric drops or reorders: retransmissions,
/// out-of-sequence packets, timeouts (mlx5's names, then rxe's; other drivers have a subset).
pub const ERROR_COUNTERS: &[&str] = &[
    "out_of_sequence",
    "packet_seq_err",
    "local_ack_timeout_err",
    "implied_nak_seq_err",
    "rnr_nak_retry_err",
    "req_transport_retries_exceeded",
    "roce_adp_retrans",
    "roce_adp_retrans_to",
    "roce_slow_restart",
    "rp_cnp_handled",
    "np_cnp_sent",
    "np_ecn_marked_roce_packets",
    // rdma_rxe's (soft-RoCE).
    "out_of_seq_request",
    "rcvd_seq_err",
    "retry_exceeded_err",
    "completer_retry_err",
];

/// One RoCE port's fabric settings.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RocePort {
    pub device: String,
    pub port: u32,
    pub netdev: Option<String>,
    /// The network device's MTU (the `rdma_devices` fact, not read again).
    pub netdev_mtu: Option<u32>,
    /// The port's active MTU (`ibv_devinfo`: 256 to 4096): what RDMA sends.
    pub active_mtu: Option<u32>,
    /// The port's largest MTU (`ibv_devinfo`).
    pub max_mtu: Option<u32>,
    /// Priorities with ECN on as notification point (receiver), `None` where the driver has no
    /// `ecn/roce_np` in sysfs.
    pub ecn_np: Option<Vec<u8>>,
    /// Priorities with ECN on as reaction point (sender, DCQCN).
    pub ecn_rp: Option<Vec<u8>>,
    /// Priorities with PFC on (`dcb pfc show`), `None` when DCB netlink could not be asked.
    pub pfc: Option<Vec<u8>>,
    /// Whether the port trusts DSCP (DCB APP entries with the dscp selector, `dcb app show`).
    pub dscp_trust: Option<bool>,
    /// The [`ERROR_COUNTERS`] the port has.
    pub counters: BTreeMap<String, u64>,
}

/// A setting NCCL reads and where it came from.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NcclSetting {
    pub value: String,
    /// `environment` or `/etc/nccl.conf`.
    pub source: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RoceFacts {
    pub ports: Vec<RocePort>,
    /// `NCCL_IB_GID_INDEX`, environment first, then `/etc/nccl.conf` (as NCCL reads them).
    pub nccl_gid_index: Option<NcclSetting>,
    /// When the counters were read, for the deltas over a verify run.
    #[serde(skip)]
    pub read_at: Option<std::time::Instant>,
}

/// The environment variables NCCL reads that the checks look at, recorded as a probe so a
/// snapshot replays them (an image root has none).
pub const NCCL_ENV: &[&str] = &["NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"];

/// NCCL's settings from this process's environment (the job's, when run inside it).
pub fn nccl_env(host: &Host) -> BTreeMap<String, String> {
    host.probe("nccl-env", || {
        NCCL_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect::<BTreeMap<String, String>>()
    })
    .unwrap_or_default()
}

/// `KEY` as NCCL reads it: the environment wins over `/etc/nccl.conf`.
pub fn nccl_setting(host: &Host, env: &BTreeMap<String, String>, key: &str) -> Option<NcclSetting> {
    if let Some(v) = env.get(key) {
        return Some(NcclSetting {
            value: v.trim().to_string(),
            source: "environment".into(),
        });
    }
    let conf = host.read_fact("/etc/nccl.conf")?;
    conf_value(&conf, key).map(|v| NcclSetting {
        value: v,
        source: "/etc/nccl.conf".into(),
    })
}

/// The last `KEY=VALUE` line of an nccl.conf text.
pub fn conf_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
        .next_back()
}

pub fn probe(host: &Host, devices: &[RdmaDevice]) -> RoceFacts {
    let mut ports = Vec::new();
    for d in devices {
        for p in d
            .ports
            .iter()
            .filter(|p| p.link_layer.as_deref() == Some("Ethernet"))
        {
            ports.push(RocePort {
                device: d.name.clone(),
                port: p.port,
                netdev: p.netdev.clone(),
                netdev_mtu: p.mtu,
                counters: counters(host, &d.name, p.port),
                ..RocePort::default()
            });
        }
    }
    if ports.is_empty() {
        return RoceFacts::default();
    }
    if let Some(out) = query_ok(host, &["ibv_devinfo"]) {
        let mtus = parse_devinfo(&out);
        for p in &mut ports {
            if let Some((active, max)) = mtus.get(&(p.device.clone(), p.port)) {
                (p.active_mtu, p.max_mtu) = (*active, *max);
            }
        }
    }
    for p in &mut ports {
        let Some(nd) = p.netdev.clone() else { continue };
        p.ecn_np = ecn(host, &nd, "roce_np");
        p.ecn_rp = ecn(host, &nd, "roce_rp");
        p.pfc =
            query_ok(host, &["dcb", "pfc", "show", "dev", &nd, "prio-pfc"]).map(|o| parse_pfc(&o));
        p.dscp_trust = query_ok(host, &["dcb", "app", "show", "dev", &nd, "dscp-prio"])
            .map(|o| o.contains("dscp-prio") && o.split_whitespace().any(|w| w.contains(':')));
    }
    let env = nccl_env(host);
    RoceFacts {
        ports,
        nccl_gid_index: nccl_setting(host, &env, "NCCL_IB_GID_INDEX"),
        read_at: Some(std::time::Instant::now()),
    }
}

/// The [`ERROR_COUNTERS`] of one port (read again after a verify run for the deltas).
pub fn counters(host: &Host, device: &str, port: u32) -> BTreeMap<String, u64> {
    let dir = format!("/sys/class/infiniband/{device}/ports/{port}/hw_counters");
    let have = host.list_dir(&dir);
    ERROR_COUNTERS
        .iter()
        .filter(|c| have.iter().any(|h| h == *c))
        .filter_map(|c| {
            let v = read_trim(host, &format!("{dir}/{c}"))?.parse().ok()?;
            Some((c.to_string(), v))
        })
        .collect()
}

/// `/sys/class/net/DEV/ecn/KIND/enable/PRIO` = 1: the priorities with ECN on.
fn ecn(host: &Host, netdev: &str, kind: &str) -> Option<Vec<u8>> {
    let dir = format!("/sys/class/net/{netdev}/ecn/{kind}/enable");
    let prios = host.list_dir(&dir);
    if prios.is_empty() {
        return None;
    }
    let mut on: Vec<u8> = prios
        .iter()
        .filter_map(|p| p.parse::<u8>().ok())
        .filter(|p| read_trim(host, &format!("{dir}/{p}")).as_deref() == Some("1"))
        .collect();
    on.sort_unstable();
    Some(on)
}

/// `prio-pfc 0:off 1:off 2:off 3:on ...` (dcb-pfc(8)): the priorities with PFC on.
pub fn parse_pfc(out: &str) -> Vec<u8> {
    out.split_whitespace()
        .filter_map(|w| w.split_once(':'))
        .filter(|(_, v)| *v == "on")
        .filter_map(|(p, _)| p.parse().ok())
        .collect()
}

/// `ibv_devinfo`: (device, port) -> (active MTU, max MTU) in bytes.
pub fn parse_devinfo(out: &str) -> BTreeMap<(String, u32), (Option<u32>, Option<u32>)> {
    let mut map = BTreeMap::new();
    let (mut dev, mut port) = (None::<String>, None::<u32>);
    let num = |l: &str| l.split(':').nth(1)?.split_whitespace().next()?.parse().ok();
    for l in out.lines().map(str::trim) {
        if let Some(d) = l.strip_prefix("hca_id:") {
            (dev, port) = (Some(d.trim().to_string()), None);
        } else if let Some(p) = l.strip_prefix("port:") {
            port = p.trim().parse().ok();
        } else if let (Some(d), Some(p)) = (&dev, port) {
            let e: &mut (Option<u32>, Option<u32>) = map.entry((d.clone(), p)).or_default();
            if l.starts_with("active_mtu:") {
                e.0 = num(l);
            } else if l.starts_with("max_mtu:") {
                e.1 = num(l);
            }
        }
    }
    map.retain(|_, v| v.0.is_some() || v.1.is_some());
    map
}

/// The IB MTU a RoCE port gets from its network device's MTU (the kernel's `iboe_get_mtu`:
/// the Ethernet MTU less the RoCE headers, rounded down to an IB MTU).
pub fn roce_mtu_for(netdev_mtu: u32) -> u32 {
    // GRH 40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4.
    let room = netdev_mtu.saturating_sub(96);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|m| room >= *m)
        .unwrap_or(256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devinfo_gives_each_ports_mtus() {
        let out = "hca_id:\trxe0\n\ttransport:\t\t\tInfiniBand (0)\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t1024 (3)\n\nhca_id:\tmlx5_1\n\t\tport:\t1\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t4096 (5)\n";
        let m = parse_devinfo(out);
        assert_eq!(m[&("rxe0".to_string(), 1)], (Some(1024), Some(4096)));
        assert_eq!(m[&("mlx5_1".to_string(), 1)], (Some(4096), Some(4096)));
    }

    #[test]
    fn pfc_and_conf_and_the_kernels_mtu_rule() {
        assert_eq!(
            parse_pfc("prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:on 7:off\n"),
            [3, 6]
        );
        assert!(parse_pfc("prio-pfc 0:off 1:off").is_empty());
        let conf = "NCCL_IB_GID_INDEX=1\n# NCCL_IB_GID_INDEX=5\nNCCL_IB_GID_INDEX = 3\n";
        assert_eq!(conf_value(conf, "NCCL_IB_GID_INDEX").as_deref(), Some("3"));
        assert_eq!(conf_value(conf, "NCCL_IB_HCA"), None);
        assert_eq!(roce_mtu_for(1500), 1024);
        assert_eq!(roce_mtu_for(9000), 4096);
        assert_eq!(roce_mtu_for(4200), 4096);
        assert_eq!(roce_mtu_for(4000), 2048);
    }
}
