//! The RoCE fabric on this host, as checks that `verify` lists and `doctor` turns into
//! findings (issue 48): each RoCE port's MTU (its network device's, its active one, the
//! profile's wish), the GID `NCCL_IB_GID_INDEX` points at, lossless Ethernet (PFC, ECN, DSCP
//! trust) and the port's error counters over a verify run. They read only facts
//! ([`crate::facts::roce`]) and the profile; an entry that does not apply gives nothing.

use crate::checks::Check;
use crate::facts::gids::PortGids;
use crate::facts::net::glob;
use crate::facts::rdma::RdmaDevice;
use crate::facts::roce::{roce_mtu_for, RocePort};
use crate::facts::Facts;
use crate::profile::{Lossless, MtuSpec, MtuValue};
use std::collections::BTreeMap;

pub const MTU: &str = "roce-mtu";
pub const GID: &str = "roce-gid";
pub const LOSSLESS: &str = "roce-lossless";
pub const COUNTERS: &str = "roce-counters";

/// The fix of `roce-mtu` (the check's own, when the port runs below its largest MTU).
pub const MTU_FIX: &str = "give the RoCE network device jumbo frames (MTU 9000, at least 4200 for a 4096-byte RDMA MTU) on every host and switch port of the fabric: a profile's `network.mtu: { devices: { rdma: \"DEV\" }, value: 9000 }` sets and persists it";
/// The fix of `roce-mtu-profile`.
pub const MTU_PROFILE_FIX: &str = "set the MTU the profile wants (`gdrprov apply` with it sets and persists it) on this host and on every host and switch port of the fabric: RoCE peers whose MTUs differ fail with completion error 4 (local length) or drop";
/// The fix of `roce-lossless`.
pub const LOSSLESS_FIX: &str = "RoCE without PFC and without ECN is lossy: under congestion packets drop and NCCL sees retransmissions and completion error 12 (retries exceeded). Enable PFC on the RoCE priority (`dcb pfc set dev NETDEV prio-pfc 3:on`) with DSCP trust, and ECN (`echo 1 > /sys/class/net/NETDEV/ecn/roce_np/enable/3`, the same for roce_rp), matching the switches";
/// The fix of `roce-lossless-profile` (a port short of the profile's `network.lossless`).
pub const LOSSLESS_PROFILE_FIX: &str = "set PFC and ECN as the profile's network.lossless (and pfc-priority) wants, on this host and on the switches, the same on every node: PFC with `dcb pfc set dev NETDEV prio-pfc N:on` (or `mlnx_qos -i NETDEV --pfc`), ECN with `echo 1 > /sys/class/net/NETDEV/ecn/roce_np/enable/N` and roce_rp; or change the wish if the fabric is meant to differ";
/// The fix of `roce-counters`.
pub const COUNTERS_FIX: &str = "the fabric drops or reorders RoCE packets: check PFC/ECN (roce-lossless), the MTU along the path (roce-mtu), cables and switch port counters";

/// The RoCE ports the checks look at: eRDMA has its own MTU rule (8500 or 1400).
fn ports(facts: &Facts) -> Vec<(&RocePort, Option<&RdmaDevice>)> {
    facts
        .roce
        .ports
        .iter()
        .map(|p| (p, facts.rdma_devices.iter().find(|d| d.name == p.device)))
        .filter(|(_, d)| !d.is_some_and(|d| d.is_erdma()))
        .collect()
}

/// The MTU the profile's `network.mtu` wants on this port's network device, if it names it.
fn wish(spec: Option<&MtuSpec>, p: &RocePort, dev: Option<&RdmaDevice>) -> Option<MtuValue> {
    let spec = spec?;
    let nd = p.netdev.as_deref()?;
    let named = spec.devices.iter().any(|m| {
        m.rdma.as_deref().is_some_and(|r| glob(r, &p.device))
            || m.name.as_deref().is_some_and(|n| glob(n, nd))
            || m.driver.as_deref().is_some_and(|d| {
                dev.and_then(|x| x.driver.as_deref())
                    .is_some_and(|x| glob(d, x))
            })
    });
    named.then_some(spec.value)
}

/// `roce-mtu`: the network device's MTU against the profile's wish (fails when it differs:
/// peers along the path disagree, NCCL's completion error 4, local length), and the port's
/// active MTU against its maximum (warns: a 1500-byte network device leaves RDMA 1024 bytes).
pub fn mtu(facts: &Facts, spec: Option<&MtuSpec>) -> Option<Check> {
    let ports = ports(facts);
    if ports.is_empty() {
        return None;
    }
    let (mut bad, mut warn, mut ok) = (Vec::new(), Vec::new(), Vec::new());
    for (p, dev) in ports {
        let nd = p.netdev.as_deref().unwrap_or("?");
        let Some(nm) = p.netdev_mtu else {
            warn.push(format!(
                "{}:{}: the MTU of its network device {nd} is unknown",
                p.device, p.port
            ));
            continue;
        };
        let (active, how) = match p.active_mtu {
            Some(a) => (a, "active MTU"),
            None => (roce_mtu_for(nm), "active MTU (from the network device's)"),
        };
        let max = p.max_mtu.unwrap_or(4096);
        let what = format!(
            "{}:{} {how} {active} of {max}, network device {nd} MTU {nm}",
            p.device, p.port
        );
        match wish(spec, p, dev) {
            Some(MtuValue::Bytes(w)) if w != nm => {
                bad.push(format!("{what}; the profile's network.mtu wants {w}"));
                continue;
            }
            Some(MtuValue::Auto) if nm != 8500 && nm != 1400 => {
                bad.push(format!(
                    "{what}; the profile's network.mtu (auto) wants 8500 or 1400"
                ));
                continue;
            }
            _ => {}
        }
        if active < max && active < 4096 {
            warn.push(format!("{what}: RDMA sends {active}-byte packets"));
        } else {
            ok.push(what);
        }
    }
    Some(if !bad.is_empty() {
        bad.extend(warn);
        Check::fail(MTU, bad.join("; "), MTU_PROFILE_FIX)
    } else if !warn.is_empty() {
        warn.extend(ok);
        Check::warn(MTU, warn.join("; "), MTU_FIX)
    } else {
        Check::pass(MTU, ok.join("; "))
    })
}

/// `roce-gid`: the RoCE v2 GIDs NCCL can route with (not link-local) and whether
/// `NCCL_IB_GID_INDEX` (its environment, else /etc/nccl.conf) points at one on every port.
pub fn gid(facts: &Facts) -> Option<Check> {
    let tables: Vec<&PortGids> = facts.roce_gids.iter().filter(|t| t.table).collect();
    if tables.is_empty() {
        return None;
    }
    let routable = |t: &PortGids| -> Vec<String> {
        t.gids
            .iter()
            .filter(|g| g.usable_for_roce())
            .map(|g| format!("{} {}", g.index, g.address()))
            .collect()
    };
    let Some(set) = &facts.roce.nccl_gid_index else {
        let each: Vec<String> = tables
            .iter()
            .map(|t| {
                format!(
                    "{}:{} routable RoCE v2 GID {}",
                    t.device,
                    t.port,
                    or_none(routable(t))
                )
            })
            .collect();
        return Some(Check::pass(
            GID,
            format!(
                "NCCL_IB_GID_INDEX is not set: NCCL picks a RoCE v2 GID itself; {}",
                each.join("; ")
            ),
        ));
    };
    let (mut bad, mut ok) = (Vec::new(), Vec::new());
    let index: Option<u32> = set.value.parse().ok();
    for t in &tables {
        let at = index.and_then(|i| t.gids.iter().find(|g| g.index == i));
        let name = format!("{}:{}", t.device, t.port);
        match at {
            Some(g) if g.usable_for_roce() => ok.push(format!(
                "{name} GID {} {} ({})",
                g.index,
                g.address(),
                g.kind.as_deref().unwrap_or("?")
            )),
            Some(g) => bad.push(format!(
                "{name} GID {} is {} ({}): link-local or RoCE v1, not routable; routable: {}",
                g.index,
                g.address(),
                g.kind.as_deref().unwrap_or("?"),
                or_none(routable(t))
            )),
            None => bad.push(format!(
                "{name} has no GID {}; routable: {}",
                set.value,
                or_none(routable(t))
            )),
        }
    }
    let head = format!("NCCL_IB_GID_INDEX={} ({})", set.value, set.source);
    Some(if bad.is_empty() {
        Check::pass(GID, format!("{head}: {}", ok.join("; ")))
    } else {
        Check::fail(
            GID,
            format!("{head}: {}", bad.join("; ")),
            format!("set NCCL_IB_GID_INDEX to the routable RoCE v2 GID's index in {} (the same on every node), or remove it so that NCCL (2.21 and later) picks one; a wrong GID gives completion error 12 (retries exceeded) and ibv_modify_qp timeouts", set.source),
        )
    })
}

fn or_none(v: Vec<String>) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Priorities as `3,4`, or `none`.
fn prios(v: &[u8]) -> String {
    let s: Vec<String> = v.iter().map(|p| p.to_string()).collect();
    if s.is_empty() {
        "none".into()
    } else {
        s.join(",")
    }
}

/// How one port stands against the lossless wish.
#[derive(PartialEq)]
enum Stand {
    Met,
    Short,
    Unknown,
}

/// What a port's lossless settings are, as far as the kernel shows them.
fn lossless_what(p: &RocePort) -> String {
    let nd = p.netdev.as_deref().unwrap_or("?");
    let mut parts = Vec::new();
    match &p.pfc {
        Some(v) => parts.push(format!("PFC on priorities {}", prios(v))),
        None => parts.push("PFC unknown (DCB netlink did not answer through `dcb`)".into()),
    }
    match (&p.ecn_np, &p.ecn_rp) {
        (None, None) => parts.push("ECN for RoCE unknown (no ecn/roce_np in sysfs)".into()),
        (np, rp) => parts.push(format!(
            "ECN notification point on {}, reaction point on {}",
            np.as_deref().map_or("?".into(), prios),
            rp.as_deref().map_or("?".into(), prios)
        )),
    }
    match p.dscp_trust {
        Some(true) => parts.push("DSCP trusted".into()),
        Some(false) => parts.push("DSCP not trusted (PCP)".into()),
        None => {}
    }
    format!("{}:{} ({nd}): {}", p.device, p.port, parts.join(", "))
}

/// One port against the wish (`None`: the built-in rule, PFC or ECN, either will do).
fn lossless_stand(p: &RocePort, want: Option<Lossless>, prio: Option<u8>) -> Stand {
    // PFC: on the wished priority, else on any; ECN: both points on some priority.
    let pfc = p
        .pfc
        .as_ref()
        .map(|v| prio.map_or(!v.is_empty(), |q| v.contains(&q)));
    let ecn = match (&p.ecn_np, &p.ecn_rp) {
        (None, None) => None,
        (np, rp) => Some(
            !np.as_ref().is_some_and(|v| v.is_empty())
                && !rp.as_ref().is_some_and(|v| v.is_empty()),
        ),
    };
    let all = |v: &[Option<bool>]| -> Stand {
        if v.contains(&Some(false)) {
            Stand::Short
        } else if v.contains(&None) {
            Stand::Unknown
        } else {
            Stand::Met
        }
    };
    match want.unwrap_or(Lossless::Any) {
        Lossless::Pfc => all(&[pfc]),
        Lossless::Ecn => all(&[ecn]),
        Lossless::PfcAndEcn => all(&[pfc, ecn]),
        Lossless::Any | Lossless::Off => match (pfc, ecn) {
            (Some(true), _) | (_, Some(true)) => Stand::Met,
            (None, None) => Stand::Unknown,
            // Today's rule: lossy only when both are known to be off.
            (Some(false), Some(false)) => Stand::Short,
            _ if want.is_some() => Stand::Unknown,
            _ => Stand::Met,
        },
    }
}

/// The profile's wish, in words: `pfc on priority 5`.
fn wish_words(want: Lossless, prio: Option<u8>) -> String {
    match prio {
        Some(p) => format!("{} on priority {p}", want.word()),
        None => want.word().to_string(),
    }
}

/// `roce-lossless`: PFC per priority, ECN for RoCE and DSCP trust through the kernel's
/// interfaces, against the profile's `network.lossless` wish (and `pfc-priority`): a port
/// short of it fails, naming both. Without a wish, a port with neither PFC nor ECN warns.
/// Says where only the vendor's tool can read them.
pub fn lossless(facts: &Facts, want: Option<Lossless>, prio: Option<u8>) -> Option<Check> {
    let ports = ports(facts);
    if ports.is_empty() {
        return None;
    }
    if want == Some(Lossless::Off) {
        return Some(Check::skip(
            LOSSLESS,
            "the profile's network.lossless is off: PFC and ECN are not checked",
        ));
    }
    let (mut lossy, mut ok, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for (p, _) in ports {
        let what = lossless_what(p);
        match lossless_stand(p, want, prio) {
            Stand::Unknown => unknown.push(what),
            Stand::Short => lossy.push(what),
            Stand::Met => ok.push(what),
        }
    }
    const VENDOR: &str = "the kernel shows no PFC or ECN setting for it (a soft-RoCE device, a driver without DCB netlink, or no iproute2 `dcb`): only the vendor's tool reads them there (`mlnx_qos -i NETDEV`, `niccli`, `bnxt_en`'s `lldptool`)";
    if lossy.is_empty() && ok.is_empty() {
        return Some(Check::skip(
            LOSSLESS,
            format!("{}: {VENDOR}", unknown.join("; ")),
        ));
    }
    let mut all = lossy.clone();
    all.extend(ok);
    all.extend(
        unknown
            .iter()
            .map(|u| format!("{u} (only the vendor's tool reads it)")),
    );
    let all = all.join("; ");
    Some(match want {
        _ if lossy.is_empty() => Check::pass(LOSSLESS, all),
        None => Check::warn(LOSSLESS, all, LOSSLESS_FIX),
        Some(w) => Check::fail(
            LOSSLESS,
            format!(
                "{all}; the profile's network.lossless wants {}",
                wish_words(w, prio)
            ),
            LOSSLESS_PROFILE_FIX,
        ),
    })
}

/// The error counters that grew between two readings: `device:port counter +N`.
pub fn counter_deltas(
    before: &[RocePort],
    after: &[(String, u32, BTreeMap<String, u64>)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (dev, port, now) in after {
        let Some(b) = before.iter().find(|p| &p.device == dev && p.port == *port) else {
            continue;
        };
        for (name, v) in now {
            let was = b.counters.get(name).copied().unwrap_or(*v);
            if *v > was {
                out.push(format!("{dev}:{port} {name} +{}", v - was));
            }
        }
    }
    out
}

/// `roce-counters`: the retransmission, out-of-sequence and timeout counters over the run.
pub fn counters_check(
    before: &[RocePort],
    after: &[(String, u32, BTreeMap<String, u64>)],
    seconds: f64,
) -> Option<Check> {
    if after.iter().all(|(_, _, c)| c.is_empty()) {
        return None;
    }
    let grew = counter_deltas(before, after);
    let names: Vec<String> = after.iter().map(|(d, p, _)| format!("{d}:{p}")).collect();
    Some(if grew.is_empty() {
        Check::pass(
            COUNTERS,
            format!("no retransmission, out-of-sequence or timeout counter grew on {} over {seconds:.0} s", names.join(", ")),
        )
    } else {
        Check::warn(
            COUNTERS,
            format!("over {seconds:.0} s of verify: {}", grew.join(", ")),
            COUNTERS_FIX,
        )
    })
}
