//! Whether the root runs on bare metal, in a VM or in a container; `when:`
//! conditions in profiles read it. (The architecture has its own fact,
//! `facts::arch`, which also serves the IOMMU arguments.)

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VirtFact {
    /// Bare metal: the CPU and firmware show no hypervisor.
    None,
    Vm,
    Container,
    /// Nothing of the machine could be read (an image root without /proc).
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct PlatformFacts {
    pub virtualization: VirtFact,
    /// Why `virtualization` is what it is.
    pub virtualization_source: Option<String>,
}

impl PlatformFacts {
    pub fn unknown() -> PlatformFacts {
        PlatformFacts {
            virtualization: VirtFact::Unknown,
            virtualization_source: None,
        }
    }
}

/// The marker a container runtime leaves (docker, podman, systemd-nspawn,
/// which writes its manager's name into /run/systemd/container). Both the
/// virtualization fact and the boot shape (who starts the kernel) read it.
pub fn container_marker(host: &Host) -> Option<String> {
    for f in ["/.dockerenv", "/run/.containerenv"] {
        if host.exists(f) {
            return Some(format!("{f} exists"));
        }
    }
    host.read_fact("/run/systemd/container")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .map(|m| format!("/run/systemd/container says `{m}`"))
}

fn virtualization(host: &Host) -> (VirtFact, Option<String>) {
    if let Some(why) = container_marker(host) {
        return (VirtFact::Container, Some(why));
    }
    if let Some(why) = super::planning::hypervisor(host) {
        return (VirtFact::Vm, Some(why));
    }
    if host.read_fact("/proc/cpuinfo").is_some() {
        return (
            VirtFact::None,
            Some("no hypervisor flag in /proc/cpuinfo, no VM vendor in DMI".into()),
        );
    }
    (VirtFact::Unknown, None)
}

pub fn probe(host: &Host) -> PlatformFacts {
    let (virtualization, virtualization_source) = virtualization(host);
    PlatformFacts {
        virtualization,
        virtualization_source,
    }
}
