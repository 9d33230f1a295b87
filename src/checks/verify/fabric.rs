//! verify's RoCE fabric entries (`roce-mtu`, `roce-gid`, `roce-lossless`, `roce-counters`):
//! the checks of [`crate::checks::roce`] on the context gathered once.

use super::cx::Cx;
use crate::checks::roce;
use crate::checks::Check;

pub(super) fn roce_mtu(cx: &Cx) -> Option<Check> {
    roce::mtu(cx.facts, cx.desired.doc.network.mtu.as_ref())
}

pub(super) fn roce_gid(cx: &Cx) -> Option<Check> {
    roce::gid(cx.facts)
}

pub(super) fn roce_lossless(cx: &Cx) -> Option<Check> {
    roce::lossless(cx.facts)
}

/// The error counters read again after the loopback and the pair check ran (running system
/// only): what grew over verify's run.
pub(super) fn roce_counters(cx: &Cx) -> Option<Check> {
    if !cx.host.is_live() {
        return None;
    }
    let before = &cx.facts.roce.ports;
    let after: Vec<_> = before
        .iter()
        .map(|p| {
            let now = crate::facts::roce::counters(cx.host, &p.device, p.port);
            (p.device.clone(), p.port, now)
        })
        .collect();
    let secs = cx
        .facts
        .roce
        .read_at
        .map_or(0.0, |t| t.elapsed().as_secs_f64());
    roce::counters_check(before, &after, secs)
}
