//! Network interfaces as sysfs shows them, and which of them a profile's
//! `network.mtu.devices` names. The name resolution is pure (over the facts
//! gathered here), so planning and the gatherer agree on it.

use super::rdma::RdmaDevice;
use crate::host::Host;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One way of naming interfaces; exactly one key. `*` and `?` are wildcards.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NetMatch {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rdma: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl std::fmt::Display for NetMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match (&self.rdma, &self.driver, &self.name) {
            (Some(r), _, _) => write!(f, "rdma: {r}"),
            (_, Some(d), _) => write!(f, "driver: {d}"),
            (_, _, Some(n)) => write!(f, "name: {n}"),
            _ => f.write_str("(nothing)"),
        }
    }
}

/// One network interface as sysfs shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub mtu: Option<u32>,
    pub max_mtu: Option<u32>,
    pub address: Option<String>,
    pub driver: Option<String>,
}

/// What name resolution needs, and the details of the interfaces it named.
#[derive(Debug, Clone, Default)]
pub struct NetFacts {
    /// `/sys/class/net`, sorted.
    pub names: Vec<String>,
    /// Each interface's driver (the `device/driver` link), where one was asked for.
    pub drivers: BTreeMap<String, Option<String>>,
    /// `/sys/class/infiniband/DEV/device/net` for RDMA devices whose ports
    /// name no netdev.
    pub ib_net: BTreeMap<String, Vec<String>>,
    /// The interfaces the profile names, in detail.
    pub ifaces: BTreeMap<String, Iface>,
}

/// `*` and `?` wildcards (gdrprov_boot::wildcard).
pub fn glob(pattern: &str, s: &str) -> bool {
    gdrprov_boot::wildcard::matches(pattern, s)
}

/// The interface names the matches give, in order, without duplicates or `lo`.
pub fn resolve(net: &NetFacts, rdma: &[RdmaDevice], matches: &[NetMatch]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for m in matches {
        if let Some(r) = &m.rdma {
            for d in rdma.iter().filter(|d| glob(r, &d.name)) {
                let mut found: Vec<String> =
                    d.ports.iter().filter_map(|p| p.netdev.clone()).collect();
                if found.is_empty() {
                    found = net.ib_net.get(&d.name).cloned().unwrap_or_default();
                }
                names.extend(found);
            }
        }
        if let Some(n) = &m.name {
            names.extend(net.names.iter().filter(|x| glob(n, x)).cloned());
        }
        if let Some(drv) = &m.driver {
            names.extend(
                net.names
                    .iter()
                    .filter(|x| {
                        net.drivers
                            .get(*x)
                            .and_then(|d| d.as_deref())
                            .is_some_and(|d| glob(drv, d))
                    })
                    .cloned(),
            );
        }
    }
    let mut out: Vec<String> = Vec::new();
    for n in names {
        if n != "lo" && !out.contains(&n) {
            out.push(n);
        }
    }
    out
}

/// Reads what resolving `matches` needs, then the interfaces they name.
pub fn probe(host: &Host, rdma: &[RdmaDevice], matches: &[NetMatch]) -> NetFacts {
    let mut net = NetFacts {
        names: host.list_dir("/sys/class/net"),
        ..NetFacts::default()
    };
    if matches.iter().any(|m| m.driver.is_some()) {
        for n in &net.names {
            let d = host.link_name(&format!("/sys/class/net/{n}/device/driver"));
            net.drivers.insert(n.clone(), d);
        }
    }
    for m in matches {
        let Some(r) = &m.rdma else { continue };
        for d in rdma.iter().filter(|d| glob(r, &d.name)) {
            if d.ports.iter().all(|p| p.netdev.is_none()) && !net.ib_net.contains_key(&d.name) {
                let found = host.list_dir(&format!("/sys/class/infiniband/{}/device/net", d.name));
                net.ib_net.insert(d.name.clone(), found);
            }
        }
    }
    for n in resolve(&net, rdma, matches) {
        let i = iface(host, &n);
        net.ifaces.insert(n, i);
    }
    net
}

pub fn iface(host: &Host, name: &str) -> Iface {
    let base = format!("/sys/class/net/{name}");
    let num = |f: &str| {
        host.read_fact(&format!("{base}/{f}"))
            .and_then(|s| s.trim().parse::<u32>().ok())
    };
    let max_mtu = num("max_mtu").or_else(|| {
        // The kernel gives max_mtu only over netlink.
        if !host.is_live() && !host.is_snapshot() {
            return None;
        }
        let out = host.query(&["ip", "-d", "-j", "link", "show", "dev", name])?;
        let v: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
        v.get(0)?.get("max_mtu")?.as_u64().map(|n| n as u32)
    });
    Iface {
        name: name.to_string(),
        mtu: num("mtu"),
        max_mtu,
        address: host
            .read_fact(&format!("{base}/address"))
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|a| !a.is_empty() && a != "00:00:00:00:00:00"),
        driver: host.link_name(&format!("{base}/device/driver")),
    }
}
