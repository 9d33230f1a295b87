//! The machine under the root: CPU architecture and whether it runs in a VM
//! or a container. `when:` conditions in profiles read these.

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ArchFact {
    X86_64,
    Aarch64,
    Unknown,
}

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
    pub arch: ArchFact,
    /// Where `arch` was read.
    pub arch_source: Option<String>,
    pub virtualization: VirtFact,
    /// Why `virtualization` is what it is.
    pub virtualization_source: Option<String>,
}

impl PlatformFacts {
    pub fn unknown() -> PlatformFacts {
        PlatformFacts {
            arch: ArchFact::Unknown,
            arch_source: None,
            virtualization: VirtFact::Unknown,
            virtualization_source: None,
        }
    }
}

/// The architecture from `/proc/cpuinfo`, else from the root's dynamic
/// loader (an image root has no /proc).
fn arch(host: &Host) -> (ArchFact, Option<String>) {
    if let Some(cpu) = host.read_fact("/proc/cpuinfo") {
        if let Some(a) = arch_of_cpuinfo(&cpu) {
            return (a, Some("/proc/cpuinfo".into()));
        }
    }
    for (path, a) in [
        ("/lib64/ld-linux-x86-64.so.2", ArchFact::X86_64),
        ("/usr/lib/x86_64-linux-gnu", ArchFact::X86_64),
        ("/lib/ld-linux-aarch64.so.1", ArchFact::Aarch64),
        ("/usr/lib/aarch64-linux-gnu", ArchFact::Aarch64),
    ] {
        if host.exists(path) {
            return (a, Some(path.into()));
        }
    }
    (ArchFact::Unknown, None)
}

/// x86 lists `vendor_id` and `flags`; arm64 lists `CPU architecture: 8` and `Features`.
pub fn arch_of_cpuinfo(text: &str) -> Option<ArchFact> {
    let key = |l: &str| l.split(':').next().unwrap_or("").trim().to_string();
    if text.lines().any(|l| key(l) == "CPU architecture") {
        return Some(ArchFact::Aarch64);
    }
    if text
        .lines()
        .any(|l| key(l) == "vendor_id" || key(l) == "flags")
    {
        return Some(ArchFact::X86_64);
    }
    None
}

fn virtualization(host: &Host) -> (VirtFact, Option<String>) {
    for f in ["/.dockerenv", "/run/.containerenv"] {
        if host.exists(f) {
            return (VirtFact::Container, Some(format!("{f} exists")));
        }
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
    let (arch, arch_source) = arch(host);
    let (virtualization, virtualization_source) = virtualization(host);
    PlatformFacts {
        arch,
        arch_source,
        virtualization,
        virtualization_source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_names_the_architecture() {
        let x86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme\n";
        let arm =
            "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd\nCPU architecture: 8\n";
        assert_eq!(arch_of_cpuinfo(x86), Some(ArchFact::X86_64));
        assert_eq!(arch_of_cpuinfo(arm), Some(ArchFact::Aarch64));
        assert_eq!(arch_of_cpuinfo(""), None);
    }
}
