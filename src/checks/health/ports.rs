//! RDMA port check: state ACTIVE, the current rate against the port's width x
//! lane-speed maximum (InfiniBand), the link layer, and on RoCE a GID that
//! NCCL can use (RoCE v2 with an IPv4 or global IPv6 address).

use super::HealthCheck;
use crate::facts::rdma::{parse_rate, PortRate, RdmaDevice, RdmaPort};
use crate::facts::Facts;

pub const NAME: &str = "rdma-ports";

/// An InfiniBand HCA port has 4 lanes (a split port, 2).
pub const IB_MAX_WIDTH: u32 = 4;

/// `400 Gb/sec (4X NDR)` -> (400, 4, lane rate of NDR, "NDR"): what the width check needs.
fn width_and_lane(rate: &str) -> Option<(f64, u32, f64, String)> {
    let r: PortRate = parse_rate(rate)?;
    Some((r.gbps, r.width?, r.lane_gbps()?, r.speed?))
}

fn port_name(d: &RdmaDevice, p: &RdmaPort) -> String {
    format!("{}:{}", d.name, p.port)
}

const FIX_NARROW: &str = "the port trained at fewer lanes: reseat or replace the cable (a damaged lane drops the width), check the switch port; a port split on purpose (2X) is the only expected exception";

/// An InfiniBand port whose rate is below its 4X maximum because it trained at fewer lanes, said
/// as a problem.
fn narrow_ib(p: &RdmaPort, ll: &str, rate: &str) -> Option<String> {
    if ll != "InfiniBand" {
        return None;
    }
    let (gbps, width, lane, speed) = p.rate.as_deref().and_then(width_and_lane)?;
    let max = lane * f64::from(IB_MAX_WIDTH);
    (width < IB_MAX_WIDTH && gbps + 0.5 < max).then(|| {
        format!(
            "rate {rate} is {:.0}% of {IB_MAX_WIDTH}X {speed} ({max:.0} Gb/s)",
            100.0 * gbps / max
        )
    })
}

/// A port's state and physical state, as in "DOWN (physical: POLLING)".
fn state(p: &RdmaPort) -> String {
    format!(
        "{} (physical: {})",
        p.state.as_deref().unwrap_or("?"),
        p.phys_state.as_deref().unwrap_or("?")
    )
}

pub fn check(facts: &Facts) -> HealthCheck {
    let ports: Vec<(&RdmaDevice, &RdmaPort)> = facts
        .rdma_devices
        .iter()
        .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
        .collect();
    if ports.is_empty() {
        return HealthCheck::skip(NAME, "no RDMA device on this root");
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    let mut down = Vec::new();
    let mut fixes: Vec<&str> = Vec::new();
    for (d, p) in &ports {
        let name = port_name(d, p);
        let ll = p.link_layer.as_deref().unwrap_or("?");
        let rate = p.rate.as_deref().unwrap_or("?");
        if !p.is_active() {
            down.push(format!("{name} ({ll}) is {}", state(p)));
            continue;
        }
        let mut problems = Vec::new();
        if let Some(problem) = narrow_ib(p, ll, rate) {
            problems.push(problem);
            fixes.push(FIX_NARROW);
        }
        let gids = facts
            .roce_gids
            .iter()
            .find(|g| g.device == d.name && g.port == p.port);
        // eRDMA is not RoCE; a root without the GID table tells nothing.
        if ll == "Ethernet" && !d.is_erdma() && gids.is_some_and(|g| g.table) {
            match gids.and_then(|g| g.gids.iter().find(|x| x.usable_for_roce())) {
                Some(g) => problems_ok_gid(&mut ok, &name, ll, rate, g.index, &g.address()),
                None => {
                    problems.push(format!(
                        "no RoCE v2 GID with an IPv4 or global IPv6 address (netdev {})",
                        p.netdev.as_deref().unwrap_or("?")
                    ));
                    fixes.push("give the port's netdev an IP address (`ip addr add ... dev NETDEV`) and bring it up; RoCE v2 GIDs follow the netdev's addresses");
                }
            }
            if problems.is_empty() {
                continue;
            }
        }
        if problems.is_empty() {
            ok.push(format!("{name} ACTIVE {ll} {rate}"));
        } else {
            bad.push(format!(
                "{name} ACTIVE {ll} {rate}: {}",
                problems.join("; ")
            ));
        }
    }
    fixes.dedup();
    let active = ports.iter().filter(|(_, p)| p.is_active()).count();
    if active == 0 {
        bad.extend(down.iter().cloned());
        fixes.push("no port is ACTIVE: check the cable and the switch port (`ibstat`), that the subnet manager runs (InfiniBand: `sminfo`), and for RoCE that the netdev is up (`ip link set NETDEV up`)");
        down.clear();
    }
    if !bad.is_empty() {
        return HealthCheck::fail(NAME, bad.join("; "), fixes.join("; "));
    }
    if !down.is_empty() {
        return HealthCheck::warn(
            NAME,
            format!("{}; not active: {}", ok.join(", "), down.join("; ")),
            "a port that should carry traffic must be ACTIVE: check its cable and switch port",
        );
    }
    HealthCheck::pass(NAME, ok.join(", "))
}

fn problems_ok_gid(ok: &mut Vec<String>, name: &str, ll: &str, rate: &str, index: u32, addr: &str) {
    ok.push(format!(
        "{name} ACTIVE {ll} (RoCE) {rate}, GID {index} {addr}"
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(
            width_and_lane("400 Gb/sec (4X NDR)"),
            Some((400.0, 4, 100.0, "NDR".into()))
        );
        assert_eq!(
            width_and_lane("200 Gb/sec (2X NDR)"),
            Some((200.0, 2, 100.0, "NDR".into()))
        );
        assert_eq!(width_and_lane("10 Gb/sec"), None);
        assert_eq!(
            width_and_lane("200 Gb/sec (4X HDR)").map(|r| r.2),
            Some(50.0)
        );
    }
}
