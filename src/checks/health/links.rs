//! PCIe link check: every GPU, RDMA NIC and bridge between them at its
//! maximum speed and width.

use super::HealthCheck;
use crate::facts::links::{LinkState, PcieLink, Role};
use crate::facts::Facts;

pub const NAME: &str = "pcie-links";

/// A GPU's link speed read while copies were running (from `bench copy`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct UnderLoad {
    pub address: String,
    pub current_speed: Option<String>,
}

fn role(r: Role) -> &'static str {
    match r {
        Role::Gpu => "GPU",
        Role::Nic => "NIC",
        Role::Bridge => "bridge",
    }
}

/// An idle NVIDIA GPU lowers its link speed to save power (nvidia-smi:
/// "PCIe Generation Max 5 Current 1"); the port right above it shows the same
/// link. Only a reading under load tells a slow link from an idle one.
fn may_be_idle(l: &PcieLink, facts: &Facts) -> bool {
    let is_gpu = |a: &String| facts.gpus.iter().any(|g| &g.pci == a);
    match l.role {
        Role::Gpu => true,
        Role::Bridge => {
            !l.serves.is_empty()
                && l.serves.iter().all(is_gpu)
                && facts.links.iter().any(|g| {
                    g.role == Role::Gpu
                        && l.serves.contains(&g.address)
                        && g.current_gts() == l.current_gts()
                })
        }
        Role::Nic => false,
    }
}

fn line(l: &PcieLink) -> String {
    let served = if l.role == Role::Bridge && !l.serves.is_empty() {
        format!(" (above {})", l.serves.join(", "))
    } else {
        String::new()
    };
    format!(
        "{} {}{}: {} at {} {}, maximum {} {}",
        role(l.role),
        l.address,
        served,
        l.current(),
        l.current_speed.as_deref().unwrap_or("?"),
        l.current_width
            .map(|w| format!("x{w}"))
            .unwrap_or("x?".into()),
        l.max_speed.as_deref().unwrap_or("?"),
        l.max_width.map(|w| format!("x{w}")).unwrap_or("x?".into()),
    )
}

const FIX_WIDTH: &str = "the card trained at fewer lanes than it has: reseat it, move it to a full-width (x16) slot, check the riser and its cable (a bent or dirty connector loses lanes), and check the BIOS's slot bifurcation setting (x16, not x8x8)";
const FIX_SPEED: &str = "the link trained below its maximum speed: set the slot's link speed to Auto (or the card's generation) in the BIOS, check that the slot and any riser/retimer support that generation, and reseat the card; a bridge whose own maximum is lower caps the link";

/// Trained at fewer lanes than it has. The width alone says so: a link whose
/// speed cannot be read (`Unknown`, as some GPUs and emulated ports report)
/// is still narrow at x8 of x16.
fn narrow(l: &PcieLink) -> bool {
    match l.state {
        LinkState::NarrowWidth | LinkState::LowSpeedAndWidth => true,
        LinkState::Unknown => matches!(
            (l.current_width, l.max_width),
            (Some(c), Some(m)) if c > 0 && c < m
        ),
        LinkState::Full | LinkState::LowSpeed => false,
    }
}

/// A link's line, with the bridge that caps it when one does.
fn line_capped(l: &PcieLink, facts: &Facts) -> String {
    match capped_by(l, facts) {
        Some(cap) => format!("{} ({cap})", line(l)),
        None => line(l),
    }
}

/// The links at their maximum, and how many could not be judged.
fn summary(facts: &Facts) -> String {
    let judged = facts
        .links
        .iter()
        .filter(|l| l.state != LinkState::Unknown)
        .count();
    let ends: Vec<String> = facts
        .links
        .iter()
        .filter(|l| l.role != Role::Bridge && l.state == LinkState::Full)
        .map(|l| format!("{} {} {}", role(l.role), l.address, l.current()))
        .collect();
    format!(
        "{judged} link(s) at their maximum{}{}",
        if ends.is_empty() {
            String::new()
        } else {
            format!(": {}", ends.join(", "))
        },
        match facts.links.len() - judged {
            0 => String::new(),
            n => format!("; {n} report no usable speed/width (virtual or emulated), not judged"),
        }
    )
}

/// The check; `under_load` are GPU link speeds read during `bench copy`.
pub fn check(facts: &Facts, under_load: &[UnderLoad]) -> HealthCheck {
    if facts.links.is_empty() {
        return HealthCheck::skip(
            NAME,
            if facts.gpus.is_empty() && facts.rdma_devices.iter().all(|d| d.is_soft()) {
                "no GPU or PCI RDMA NIC on this root".to_string()
            } else {
                "no PCIe link attributes in sysfs (a VM without PCIe link emulation, or an image root)"
                    .to_string()
            },
        );
    }
    let mut bad = Vec::new();
    let mut idle = Vec::new();
    let mut fixes: Vec<&str> = Vec::new();
    for l in facts.links.iter().filter(|l| l.degraded() || narrow(l)) {
        let narrow = narrow(l);
        if !narrow && may_be_idle(l, facts) {
            let gpu = if l.role == Role::Gpu {
                Some(l.address.as_str())
            } else {
                l.serves.first().map(String::as_str)
            };
            let loaded = gpu.and_then(|a| under_load.iter().find(|u| u.address == a));
            match loaded.and_then(|u| {
                u.current_speed
                    .as_deref()
                    .and_then(crate::facts::links::parse_speed)
            }) {
                Some(v) if l.max_gts().is_some_and(|m| v + 0.01 >= m) => continue,
                Some(v) => {
                    bad.push(format!("{} (under load: {v} GT/s)", line(l)));
                    fixes.push(FIX_SPEED);
                }
                None => idle.push(line_capped(l, facts)),
            }
            continue;
        }
        bad.push(line_capped(l, facts));
        fixes.push(if narrow { FIX_WIDTH } else { FIX_SPEED });
    }
    fixes.dedup();
    if !bad.is_empty() {
        return HealthCheck::fail(
            NAME,
            format!("{} degraded: {}", bad.len(), bad.join("; ")),
            fixes.join("; "),
        );
    }
    let summary = summary(facts);
    if !idle.is_empty() {
        return HealthCheck::warn(
            NAME,
            format!(
                "{summary}; below maximum speed, possibly idle power saving: {}",
                idle.join("; ")
            ),
            format!(
                "an idle NVIDIA GPU lowers its link speed; {} (or verify) reads it under load",
                crate::suggest::Suggest::new(crate::names::BENCH_COPY)
                    .shown(&crate::suggest::Given::none())
            ),
        );
    }
    HealthCheck::pass(NAME, summary)
}

/// When a device is slower than its own maximum because a bridge above it
/// cannot go faster, say so: the slot, not the card.
fn capped_by(l: &PcieLink, facts: &Facts) -> Option<String> {
    if l.role == Role::Bridge {
        return None;
    }
    let cur = l.current_gts()?;
    let b = facts.links.iter().find(|b| {
        b.role == Role::Bridge
            && b.serves.contains(&l.address)
            && b.max_gts().is_some_and(|m| (m - cur).abs() < 0.01)
            && l.max_gts().is_some_and(|m| m > cur + 0.01)
    })?;
    Some(format!(
        "bridge {} above it supports at most {}: the slot caps the link",
        b.address,
        b.max_speed.as_deref().unwrap_or("?")
    ))
}
