//! The populated GID table entries of every RoCE (Ethernet link layer) port,
//! from `/sys/class/infiniband/DEV/ports/N/gids/*` and `gid_attrs/types/*`:
//! without an IPv4 or global IPv6 RoCE v2 GID there is nothing NCCL can use.

use super::rdma::RdmaDevice;
use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Gid {
    pub index: u32,
    /// As sysfs writes it: `0000:0000:0000:0000:0000:ffff:0a00:020f`.
    pub gid: String,
    /// `RoCE v2`, `IB/RoCE v1`.
    pub kind: Option<String>,
}

impl Gid {
    fn bytes(&self) -> Option<[u8; 16]> {
        let mut out = [0u8; 16];
        let groups: Vec<&str> = self.gid.split(':').collect();
        if groups.len() != 8 {
            return None;
        }
        for (i, g) in groups.iter().enumerate() {
            let v = u16::from_str_radix(g, 16).ok()?;
            out[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
        }
        Some(out)
    }
    /// RoCE v2 (or, where the device gives no GID types, any kind) with an
    /// IPv4-mapped or a global IPv6 address.
    pub fn usable_for_roce(&self) -> bool {
        let Some(b) = self.bytes() else { return false };
        let v2 = self.kind.as_deref().is_none_or(|k| k.contains("v2"));
        let link_local = b[0] == 0xfe && b[1] & 0xc0 == 0x80;
        v2 && b.iter().any(|&x| x != 0) && !link_local
    }
    pub fn address(&self) -> String {
        self.bytes()
            .map(|b| {
                let a = std::net::Ipv6Addr::from(b);
                match a.to_ipv4_mapped() {
                    Some(v4) => format!("::ffff:{v4}"),
                    None => a.to_string(),
                }
            })
            .unwrap_or_else(|| self.gid.clone())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PortGids {
    pub device: String,
    pub port: u32,
    /// Whether the root has the GID table at all (an older snapshot does not).
    pub table: bool,
    pub gids: Vec<Gid>,
}

pub fn probe(host: &Host, devices: &[RdmaDevice]) -> Vec<PortGids> {
    let mut out = Vec::new();
    for d in devices {
        for p in d
            .ports
            .iter()
            .filter(|p| p.link_layer.as_deref() == Some("Ethernet"))
        {
            let dir = format!("/sys/class/infiniband/{}/ports/{}", d.name, p.port);
            let names = host.list_dir(&format!("{dir}/gids"));
            let mut idx: Vec<u32> = names.iter().filter_map(|n| n.parse().ok()).collect();
            idx.sort_unstable();
            let mut gids = Vec::new();
            for i in idx.into_iter().take(256) {
                let Some(gid) = read_trim(host, &format!("{dir}/gids/{i}")) else {
                    continue;
                };
                if gid.chars().all(|c| c == '0' || c == ':') {
                    continue;
                }
                let kind = read_trim(host, &format!("{dir}/gid_attrs/types/{i}"));
                gids.push(Gid {
                    index: i,
                    gid,
                    kind,
                });
            }
            out.push(PortGids {
                device: d.name.clone(),
                port: p.port,
                table: !names.is_empty(),
                gids,
            });
        }
    }
    out
}
