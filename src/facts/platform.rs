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

const VM_VENDORS: &[&str] = &[
    "QEMU",
    "KVM",
    "Amazon EC2",
    "Alibaba Cloud",
    "Microsoft Corporation",
    "Google",
    "VMware",
    "innotek",
    "Xen",
    "OpenStack",
    "Red Hat",
    "Nutanix",
];

/// Why the root looks like a virtual machine, if it does.
pub fn hypervisor(host: &Host) -> Option<String> {
    if let Some(t) = host.read_fact("/sys/hypervisor/type") {
        let t = t.trim();
        if !t.is_empty() {
            return Some(format!("/sys/hypervisor/type is `{t}`"));
        }
    }
    if let Some(cpu) = host.read_fact("/proc/cpuinfo") {
        if cpu
            .lines()
            .any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
        {
            return Some("the CPU flags in /proc/cpuinfo include `hypervisor`".into());
        }
    }
    for f in ["sys_vendor", "product_name"] {
        if let Some(v) = host.read_fact(&format!("/sys/class/dmi/id/{f}")) {
            let v = v.trim();
            if VM_VENDORS.iter().any(|x| v.contains(x)) {
                return Some(format!("DMI {f} is `{v}`"));
            }
        }
    }
    None
}

fn virtualization(host: &Host) -> (VirtFact, Option<String>) {
    if let Some(why) = container_marker(host) {
        return (VirtFact::Container, Some(why));
    }
    if let Some(why) = hypervisor(host) {
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
