//! GID selection: which GID index a RoCE QP should use.

use std::net::Ipv6Addr;

/// What a GID table entry is, as far as choosing one goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GidKind {
    /// InfiniBand, or RoCE v1 on an Ethernet port (the two share a type code).
    IbOrRoceV1,
    RoceV2,
}

/// One populated GID table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GidCandidate {
    pub index: u32,
    pub raw: [u8; 16],
    pub kind: GidKind,
}

/// True for an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), the form RoCE uses for IPv4.
pub fn is_ipv4_mapped(raw: &[u8; 16]) -> bool {
    raw[..10].iter().all(|&b| b == 0) && raw[10] == 0xff && raw[11] == 0xff
}

fn is_link_local(raw: &[u8; 16]) -> bool {
    raw[0] == 0xfe && raw[1] & 0xc0 == 0x80
}

/// Render a GID as an address (`::ffff:10.0.2.15`, `fe80::...`).
pub fn gid_to_string(raw: &[u8; 16]) -> String {
    let addr = Ipv6Addr::from(*raw);
    match addr.to_ipv4_mapped() {
        Some(v4) => format!("::ffff:{v4}"),
        None => addr.to_string(),
    }
}

/// Choose the GID index. On InfiniBand the port GID (index 0). On RoCE, in order of preference:
/// RoCE v2 with an IPv4-mapped address (what NCCL and perftest users pick), RoCE v2 global IPv6,
/// any RoCE v2, then RoCE v1. Zero entries are never chosen.
pub fn select_gid(ethernet: bool, gids: &[GidCandidate]) -> Option<u32> {
    let usable: Vec<&GidCandidate> = gids
        .iter()
        .filter(|g| g.raw.iter().any(|&b| b != 0))
        .collect();
    if !ethernet {
        return usable.iter().min_by_key(|g| g.index).map(|g| g.index);
    }
    let rank = |g: &GidCandidate| match (g.kind, is_ipv4_mapped(&g.raw), is_link_local(&g.raw)) {
        (GidKind::RoceV2, true, _) => 0,
        (GidKind::RoceV2, false, false) => 1,
        (GidKind::RoceV2, false, true) => 2,
        (GidKind::IbOrRoceV1, true, _) => 3,
        (GidKind::IbOrRoceV1, _, _) => 4,
    };
    usable
        .iter()
        .min_by_key(|g| (rank(g), g.index))
        .map(|g| g.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    fn c(index: u32, s: &str, kind: GidKind) -> GidCandidate {
        GidCandidate {
            index,
            raw: gid(s),
            kind,
        }
    }

    #[test]
    fn roce_prefers_v2_ipv4() {
        // A typical mlx5 RoCE table: v1/v2 link-local, v1/v2 IPv4, v1/v2 global IPv6.
        let table = [
            c(0, "fe80::ba59:9fff:fe12:3456", GidKind::IbOrRoceV1),
            c(1, "fe80::ba59:9fff:fe12:3456", GidKind::RoceV2),
            c(2, "::ffff:192.168.1.10", GidKind::IbOrRoceV1),
            c(3, "::ffff:192.168.1.10", GidKind::RoceV2),
            c(4, "2001:db8::10", GidKind::IbOrRoceV1),
            c(5, "2001:db8::10", GidKind::RoceV2),
        ];
        assert_eq!(select_gid(true, &table), Some(3));
        assert_eq!(select_gid(true, &table[..3]), Some(1));
        assert_eq!(select_gid(true, &[table[0], table[2], table[4]]), Some(2));
        assert_eq!(
            select_gid(true, &[table[0], table[1], table[4], table[5]]),
            Some(5)
        );
    }

    #[test]
    fn rxe_table() {
        // soft-RoCE: index 0 link-local (v2), index 1 the IPv4 address (v2).
        let table = [
            c(0, "fe80::5054:ff:fe12:3456", GidKind::RoceV2),
            c(1, "::ffff:10.0.2.15", GidKind::RoceV2),
        ];
        assert_eq!(select_gid(true, &table), Some(1));
        assert_eq!(gid_to_string(&table[1].raw), "::ffff:10.0.2.15");
    }

    #[test]
    fn infiniband_uses_port_gid_and_skips_zero() {
        let table = [
            c(0, "fe80::248a:703:49:d4c0", GidKind::IbOrRoceV1),
            c(1, "::", GidKind::IbOrRoceV1),
        ];
        assert_eq!(select_gid(false, &table), Some(0));
        assert_eq!(select_gid(true, &[c(0, "::", GidKind::RoceV2)]), None);
        assert_eq!(select_gid(false, &[]), None);
        assert!(is_ipv4_mapped(&gid("::ffff:1.2.3.4")));
        assert!(!is_ipv4_mapped(&gid("::1.2.3.4")));
    }
}
