//! RDMA devices from `/sys/class/infiniband`: ports, state, link layer
//! (InfiniBand or RoCE), rate, the netdev behind each port and its MTU.

use super::pci;
use super::util::{read_int, read_trim};
use crate::host::Host;
use serde::Serialize;

/// NIC drivers that have an RDMA half: (core driver, its RDMA driver).
/// Soft devices (rxe, siw) are their own RDMA driver.
pub const RDMA_DRIVERS: &[(&str, &str)] = &[
    ("mlx5_core", "mlx5_ib"),
    ("mlx4_core", "mlx4_ib"),
    ("bnxt_en", "bnxt_re"),
    ("ice", "irdma"),
    ("i40e", "irdma"),
    ("qede", "qedr"),
    ("erdma", "erdma"),
    ("efa", "efa"),
    ("hns3", "hns_roce_hw_v2"),
    ("ionic", "ionic_rdma"),
    ("rdma_rxe", "rdma_rxe"),
    ("siw", "siw"),
];

#[derive(Debug, Clone, Serialize)]
pub struct RdmaPort {
    pub port: u32,
    /// `ACTIVE`, `DOWN`, `INIT`, ... (the text after `4: `).
    pub state: Option<String>,
    pub phys_state: Option<String>,
    /// `InfiniBand` or `Ethernet` (RoCE, iWARP, eRDMA).
    pub link_layer: Option<String>,
    /// `400 Gb/sec (4X NDR)`.
    pub rate: Option<String>,
    pub rate_gbps: Option<f64>,
    pub netdev: Option<String>,
    /// The netdev's MTU.
    pub mtu: Option<u32>,
}

impl RdmaPort {
    pub fn is_active(&self) -> bool {
        self.state.as_deref() == Some("ACTIVE")
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RdmaDevice {
    pub name: String,
    /// Kernel driver of the PCI function (`mlx5_core`, `erdma`); `rdma_rxe`/`siw` for soft devices.
    pub driver: Option<String>,
    /// PCI address; `None` for soft devices (rxe, siw).
    pub pci: Option<String>,
    pub sysfs_path: Option<String>,
    pub numa_node: Option<i64>,
    pub ports: Vec<RdmaPort>,
}

impl RdmaDevice {
    pub fn is_erdma(&self) -> bool {
        self.driver.as_deref() == Some("erdma") || self.name.starts_with("erdma")
    }
    pub fn is_soft(&self) -> bool {
        self.pci.is_none()
    }
}

/// A port's `rate` file as sysfs writes it: `400 Gb/sec (4X NDR)`.
#[derive(Debug, Clone, PartialEq)]
pub struct PortRate {
    /// The rate in Gb/s (`Mb/sec` and `Tb/sec` converted).
    pub gbps: f64,
    /// The lanes in the parenthesis (`4X` -> 4), when there is one.
    pub width: Option<u32>,
    /// The speed name in the parenthesis (`NDR`), when there is one.
    pub speed: Option<String>,
}

impl PortRate {
    /// Per-lane data rate in Gb/s of the speed name, as the kernel writes it.
    pub fn lane_gbps(&self) -> Option<f64> {
        Some(match self.speed.as_deref()? {
            "SDR" => 2.5,
            "DDR" => 5.0,
            "QDR" | "FDR10" => 10.0,
            "FDR" => 14.0625,
            "EDR" => 25.0,
            "HDR" => 50.0,
            "NDR" => 100.0,
            "XDR" => 200.0,
            _ => return None,
        })
    }
}

/// The one parser of a port's sysfs `rate` (`/sys/class/infiniband/DEV/ports/N/rate`):
/// `"100 Gb/sec (4X EDR)"` -> 100 Gb/s, 4 lanes, EDR. None without a number and a unit, or for a
/// rate that is not a finite positive number.
pub fn parse_rate(rate: &str) -> Option<PortRate> {
    let mut words = rate.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    let gbps = match words.next()? {
        "Gb/sec" | "Gb/s" => number,
        "Mb/sec" | "Mb/s" => number / 1000.0,
        "Tb/sec" | "Tb/s" => number * 1000.0,
        _ => return None,
    };
    if !(gbps.is_finite() && gbps > 0.0) {
        return None;
    }
    let inner = rate
        .split_once('(')
        .map(|(_, r)| r.trim().trim_end_matches(')'));
    let (width, speed) = match inner.and_then(|i| i.split_once(' ')) {
        Some((w, s)) => (
            w.trim_end_matches('X').parse().ok(),
            Some(s.trim().to_string()).filter(|s| !s.is_empty()),
        ),
        None => (None, None),
    };
    Some(PortRate { gbps, width, speed })
}

/// A port's line rate in Gb/s from its sysfs `rate` file, if present and readable.
pub fn read_port_rate(host: &Host, device: &str, port: u8) -> Option<f64> {
    let s = host.read_fact(&format!("/sys/class/infiniband/{device}/ports/{port}/rate"))?;
    parse_rate(s.trim()).map(|r| r.gbps)
}

fn after_colon(s: Option<String>) -> Option<String> {
    s.map(|v| match v.split_once(':') {
        Some((_, r)) => r.trim().to_string(),
        None => v,
    })
}

pub fn probe(host: &Host) -> Vec<RdmaDevice> {
    let mut out = Vec::new();
    for name in host.list_dir("/sys/class/infiniband") {
        let dir = format!("/sys/class/infiniband/{name}");
        let dev_link = format!("{dir}/device");
        let pci_path = host.canonical(&dev_link);
        let pci_addr = pci_path
            .as_deref()
            .and_then(|p| p.rsplit('/').next())
            .filter(|a| pci::is_address(a))
            .map(String::from);
        let driver = host.link_name(&format!("{dev_link}/driver")).or_else(|| {
            if name.starts_with("rxe") {
                Some("rdma_rxe".into())
            } else if name.starts_with("siw") {
                Some("siw".into())
            } else {
                None
            }
        });
        let numa_node = pci_addr
            .as_ref()
            .and_then(|_| read_int(host, &format!("{dev_link}/numa_node")))
            .filter(|n| *n >= 0);
        let pci_netdevs = if pci_addr.is_some() {
            host.list_dir(&format!("{dev_link}/net"))
        } else {
            Vec::new()
        };
        let mut ports = Vec::new();
        for p in host.list_dir(&format!("{dir}/ports")) {
            let Ok(num) = p.parse::<u32>() else { continue };
            let pd = format!("{dir}/ports/{p}");
            let rate = read_trim(host, &format!("{pd}/rate"));
            let rate_gbps = rate.as_deref().and_then(parse_rate).map(|r| r.gbps);
            let netdev = read_trim(host, &format!("{pd}/gid_attrs/ndevs/0"))
                .or_else(|| pci_netdevs.get((num as usize).saturating_sub(1)).cloned())
                .or_else(|| pci_netdevs.first().cloned());
            let mtu = netdev
                .as_ref()
                .and_then(|n| read_int(host, &format!("/sys/class/net/{n}/mtu")))
                .map(|m| m as u32);
            ports.push(RdmaPort {
                port: num,
                state: after_colon(read_trim(host, &format!("{pd}/state"))),
                phys_state: after_colon(read_trim(host, &format!("{pd}/phys_state"))),
                link_layer: read_trim(host, &format!("{pd}/link_layer")),
                rate,
                rate_gbps,
                netdev,
                mtu,
            });
        }
        ports.sort_by_key(|p| p.port);
        out.push(RdmaDevice {
            name,
            driver,
            pci: pci_addr,
            sysfs_path: pci_path,
            numa_node,
            ports,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_sysfs_format() {
        let gbps = |s: &str| parse_rate(s).map(|r| r.gbps);
        assert_eq!(gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(gbps("25 Gb/sec (1X EDR)"), Some(25.0));
        assert_eq!(gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(gbps("200 Gb/sec (2X NDR)\n".trim()), Some(200.0));
        assert_eq!(gbps("garbage"), None);
        assert_eq!(gbps("0 Gb/sec (1X SDR)"), None);
        assert_eq!(gbps(""), None);
    }

    #[test]
    fn width_and_speed() {
        let r = parse_rate("400 Gb/sec (4X NDR)").unwrap();
        assert_eq!((r.width, r.speed.as_deref()), (Some(4), Some("NDR")));
        let r = parse_rate("200 Gb/sec (2X NDR)").unwrap();
        assert_eq!((r.width, r.speed.as_deref()), (Some(2), Some("NDR")));
        let r = parse_rate("10 Gb/sec").unwrap();
        assert_eq!((r.gbps, r.width, r.speed), (10.0, None, None));
        assert_eq!(
            parse_rate("50 Gb/sec (1X HDR)").unwrap().lane_gbps(),
            Some(50.0)
        );
        assert_eq!(parse_rate("10 Gb/sec").unwrap().lane_gbps(), None);
    }
}
