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
    let n = &cx.desired.doc.network;
    roce::lossless(cx.facts, n.lossless, n.pfc_priority)
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

/// `peermem-register`: on the running system, where a peer-memory module is loaded or the
/// profile loads one, and there is a GPU and an RDMA device: 2 MiB of GPU 0's memory
/// registered with plain ibv_reg_mr (the path nvidia_peermem serves, not dma-buf).
pub(super) fn peermem_register(cx: &Cx) -> Option<Check> {
    const NAME: &str = "peermem-register";
    let modules = ["nvidia_peermem", "nv_peer_mem"];
    let present = &cx.desired.doc.modules.present;
    let wanted = modules
        .iter()
        .any(|m| cx.facts.modules.is_loaded(m) || present.iter().any(|p| p == m));
    if !wanted || cx.facts.gpus.is_empty() || cx.facts.rdma_devices.is_empty() || cx.efa_only() {
        return None;
    }
    if !cx.host.is_live() {
        return Some(cx.not_running(NAME));
    }
    Some(
        match crate::bench::peermem::probe(cx.device.0.as_deref(), 0) {
            Ok(p) if p.registered => Check::pass(
                NAME,
                format!(
                    "GPU {} ({}) on {}: {}",
                    p.gpu, p.gpu_name, p.device, p.detail
                ),
            ),
            Ok(p) => Check::fail(
                NAME,
                format!(
                    "GPU {} ({}) on {}: GPU memory cannot be registered through peer memory: {}",
                    p.gpu, p.gpu_name, p.device, p.detail
                ),
                crate::bench::peermem::FIX,
            ),
            Err(e) => Check::skip(NAME, format!("could not try the registration: {e}")),
        },
    )
}
