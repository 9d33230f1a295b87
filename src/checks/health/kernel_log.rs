//! Kernel log check: fatal Xids, uncorrected AER errors, links that went down
//! and port module (cable/transceiver) errors fail; a non-fatal Xid, corrected
//! AER errors and links that came back are warnings.

use super::HealthCheck;
use crate::facts::kernlog::{EventKind, KernelEvent, KernelLog};
use crate::facts::Facts;

pub const NAME: &str = "kernel-log";

/// Most lines quoted in the evidence.
const QUOTE: usize = 5;

fn quote(events: &[&KernelEvent]) -> String {
    let mut v: Vec<String> = events
        .iter()
        .take(QUOTE)
        .map(|e| format!("`{}`", e.line))
        .collect();
    if events.len() > QUOTE {
        v.push(format!("and {} more", events.len() - QUOTE));
    }
    v.join(", ")
}

/// A device of interest: a GPU, an RDMA NIC, or a bridge above one.
fn ours(facts: &Facts, dev: Option<&str>) -> bool {
    let Some(d) = dev else { return false };
    facts.gpus.iter().any(|g| g.pci == d)
        || facts
            .rdma_devices
            .iter()
            .any(|n| n.pci.as_deref() == Some(d))
        || facts.links.iter().any(|l| l.address == d)
}

/// Links that went down: still down now (the last event of the device), and
/// those that came back.
fn links(events: &[KernelEvent]) -> (Vec<&KernelEvent>, Vec<&KernelEvent>) {
    let mut still_down: Vec<&KernelEvent> = Vec::new();
    let mut flapped: Vec<&KernelEvent> = Vec::new();
    for e in events.iter().filter(|e| e.kind == EventKind::LinkDown) {
        let last = events
            .iter()
            .rev()
            .find(|x| {
                matches!(x.kind, EventKind::LinkDown | EventKind::LinkUp) && x.device == e.device
            })
            .map(|x| x.kind);
        if last == Some(EventKind::LinkDown) {
            if !still_down.iter().any(|x| x.device == e.device) {
                still_down.push(e);
            }
        } else {
            flapped.push(e);
        }
    }
    (still_down, flapped)
}

/// The log's events of one kind, split into (serious, not serious).
fn of_kind(log: &KernelLog, k: EventKind) -> (Vec<&KernelEvent>, Vec<&KernelEvent>) {
    log.events
        .iter()
        .filter(|e| e.kind == k)
        .partition(|e| e.serious)
}

/// What fails the check: each problem, and its fix.
fn failures(facts: &Facts, log: &KernelLog) -> (Vec<String>, Vec<&'static str>) {
    let (fatal_xid, _) = of_kind(log, EventKind::Xid);
    let (aer_bad, _) = of_kind(log, EventKind::Aer);
    let (module_bad, _) = of_kind(log, EventKind::PortModule);
    let (still_down, _) = links(&log.events);
    let mut bad = Vec::new();
    let mut fixes = Vec::new();
    if !fatal_xid.is_empty() {
        let codes: Vec<String> = fatal_xid
            .iter()
            .filter_map(|e| e.xid.map(|x| x.to_string()))
            .collect();
        bad.push(format!(
            "{} fatal Xid error(s) ({}): {}",
            fatal_xid.len(),
            codes.join(", "),
            quote(&fatal_xid)
        ));
        fixes.push("a fatal Xid (79: fallen off the bus, 48/63/64/94/95: ECC and row remapping, 74: NVLink, 119/120: GSP) needs the GPU reset or the node rebooted; if it returns, drain the node and have the GPU/baseboard replaced (look the Xid up in NVIDIA's Xid catalogue)");
    }
    if !aer_bad.is_empty() {
        bad.push(format!(
            "{} uncorrected PCIe AER error(s): {}",
            aer_bad.len(),
            quote(&aer_bad)
        ));
        fixes.push("uncorrected PCIe errors point at the card, slot, riser or retimer: reseat the device, update the BIOS and the card's firmware, and replace the part if they recur");
    }
    let down_ours: Vec<&KernelEvent> = still_down
        .iter()
        .copied()
        .filter(|e| ours(facts, e.device.as_deref()) || e.line.contains("mlx5_core"))
        .collect();
    if !down_ours.is_empty() {
        bad.push(format!("link down and not back up: {}", quote(&down_ours)));
        fixes.push("check the cable, the switch port and `ibstat`/`ip link`; for a PCIe slot (pciehp) the device dropped off the bus: reseat it");
    }
    if !module_bad.is_empty() {
        bad.push(format!("NIC port module error(s): {}", quote(&module_bad)));
        fixes.push("a cable or transceiver error: reseat or replace the cable/transceiver (`mlxlink -d DEV -m` shows the module)");
    }
    (bad, fixes)
}

/// What only warns: non-fatal Xids, corrected AER errors, links that came back.
fn warnings(log: &KernelLog) -> Vec<String> {
    let (_, other_xid) = of_kind(log, EventKind::Xid);
    let (_, aer_corr) = of_kind(log, EventKind::Aer);
    let (_, flapped) = links(&log.events);
    let mut notes = Vec::new();
    if !other_xid.is_empty() {
        notes.push(format!(
            "{} non-fatal Xid(s) (application faults such as 13, 31, 43): {}",
            other_xid.len(),
            quote(&other_xid)
        ));
    }
    if !aer_corr.is_empty() {
        notes.push(format!(
            "{} corrected PCIe AER error(s): {}",
            aer_corr.len(),
            quote(&aer_corr)
        ));
    }
    if !flapped.is_empty() {
        notes.push(format!(
            "{} link flap(s), back up now: {}",
            flapped.len(),
            quote(&flapped)
        ));
    }
    notes
}

pub fn check(facts: &Facts) -> HealthCheck {
    let Some(log) = &facts.kernel_events else {
        return HealthCheck::skip(
            NAME,
            if facts.live {
                "the kernel ring buffer could not be read (/dev/kmsg needs root)"
            } else {
                "no kernel log in this root (var/log/kern.log, var/log/messages) and no recorded one"
            },
        );
    };
    let (mut bad, fixes) = failures(facts, log);
    let notes = warnings(log);
    let source = format!("{} ({} lines)", log.source, log.lines);
    if !bad.is_empty() {
        if !notes.is_empty() {
            bad.push(format!("also {}", notes.join("; ")));
        }
        return HealthCheck::fail(
            NAME,
            format!("{source}: {}", bad.join("; ")),
            fixes.join("; "),
        );
    }
    if !notes.is_empty() {
        return HealthCheck::warn(
            NAME,
            format!("{source}: {}", notes.join("; ")),
            "corrected errors and flaps that recur mean a marginal link: watch the counts, reseat or replace the cable/card if they grow",
        );
    }
    HealthCheck::pass(
        NAME,
        format!("{source}: no Xid, AER, link-down or port module errors"),
    )
}
