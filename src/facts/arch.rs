//! The CPU architecture of a root: `/proc/cpuinfo` (live systems and
//! snapshots), else the running kernel's on a live system, else the ELF header of the root's own
//! shell, else dpkg's architecture. It decides the IOMMU arguments (x86:
//! `iommu=pt`; arm64: `iommu.passthrough=1`).

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Arch {
    #[serde(rename = "x86_64")]
    X86_64,
    #[serde(rename = "aarch64")]
    Aarch64,
    /// Another architecture (ppc64le, s390x, riscv64, ...).
    #[serde(rename = "other")]
    Other,
    #[serde(rename = "unknown")]
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchFacts {
    pub arch: Arch,
    /// Where it came from, for people.
    pub source: String,
    /// An arm64 CPU named by its implementer and part (`Arm Neoverse-V2`,
    /// the cores of NVIDIA Grace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
}

impl ArchFacts {
    /// `--arch`: the user's word over the root's.
    pub fn override_with(&mut self, arch: Option<Arch>) {
        if let Some(a) = arch {
            self.arch = a;
            self.source = "--arch".into();
        }
    }
}

/// The shells whose ELF header names the root's architecture.
const ELF_PROBES: [&str; 4] = ["/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/bash"];

pub fn probe(host: &Host) -> ArchFacts {
    let cpuinfo = host.read_fact("/proc/cpuinfo");
    let cpu = cpuinfo.as_deref().and_then(arm_cpu);
    // /proc/cpuinfo first, live too: a snapshot records it, so a replay of a
    // live host's snapshot gives the same fact, source included.
    if let Some(arch) = cpuinfo.as_deref().and_then(from_cpuinfo) {
        return ArchFacts {
            arch,
            source: "/proc/cpuinfo".into(),
            cpu,
        };
    }
    if host.is_live() {
        let arch = match std::env::consts::ARCH {
            "x86_64" => Arch::X86_64,
            "aarch64" => Arch::Aarch64,
            _ => Arch::Other,
        };
        return ArchFacts {
            arch,
            source: "the running system".into(),
            cpu,
        };
    }
    for p in ELF_PROBES {
        if let Some(arch) = host.read_fact_bytes(p, 64).as_deref().and_then(from_elf) {
            return ArchFacts {
                arch,
                source: format!("the ELF header of {p}"),
                cpu,
            };
        }
    }
    // Not logged as a file read (as in facts::packages): the database is
    // larger than a snapshot copies, and a snapshot has /proc/cpuinfo.
    let status = host
        .read("/var/lib/dpkg/status")
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned());
    if let Some(arch) = status.as_deref().and_then(from_dpkg_status) {
        return ArchFacts {
            arch,
            source: "dpkg's architecture (/var/lib/dpkg/status)".into(),
            cpu,
        };
    }
    ArchFacts {
        arch: Arch::Unknown,
        source: "nothing in the root tells (no /proc/cpuinfo, shell or dpkg status)".into(),
        cpu,
    }
}

fn cpuinfo_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn from_cpuinfo(text: &str) -> Option<Arch> {
    if cpuinfo_field(text, "vendor_id").is_some() {
        Some(Arch::X86_64)
    } else if cpuinfo_field(text, "CPU implementer").is_some() {
        Some(Arch::Aarch64)
    } else {
        None
    }
}

/// `CPU implementer : 0x41` + `CPU part : 0xd4f` is Arm's Neoverse-V2, the
/// core of NVIDIA Grace.
fn arm_cpu(text: &str) -> Option<String> {
    let imp = cpuinfo_field(text, "CPU implementer")?;
    let part = cpuinfo_field(text, "CPU part").unwrap_or("?");
    let name = match (imp, part) {
        ("0x41", "0xd4f") => "Arm Neoverse-V2 (NVIDIA Grace)".to_string(),
        ("0x41", "0xd40") => "Arm Neoverse-V1".to_string(),
        ("0x41", "0xd0c") => "Arm Neoverse-N1".to_string(),
        ("0x41", "0xd49") => "Arm Neoverse-N2".to_string(),
        ("0x41", p) => format!("Arm core part {p}"),
        (i, p) => format!("arm64 implementer {i} part {p}"),
    };
    Some(name)
}

/// The ELF header's machine field (EM_X86_64 62, EM_AARCH64 183).
fn from_elf(b: &[u8]) -> Option<Arch> {
    if b.len() < 20 || &b[..4] != b"\x7fELF" {
        return None;
    }
    let pair = [b[18], b[19]];
    let machine = match b[5] {
        1 => u16::from_le_bytes(pair),
        2 => u16::from_be_bytes(pair),
        _ => return None,
    };
    Some(match machine {
        62 => Arch::X86_64,
        183 => Arch::Aarch64,
        _ => Arch::Other,
    })
}

/// The architecture of the `dpkg` package itself: dpkg's native one.
fn from_dpkg_status(text: &str) -> Option<Arch> {
    let stanza = text
        .split("\n\n")
        .find(|s| s.lines().any(|l| l == "Package: dpkg"))?;
    let arch = stanza
        .lines()
        .find_map(|l| l.strip_prefix("Architecture: "))?;
    Some(match arch.trim() {
        "amd64" => Arch::X86_64,
        "arm64" => Arch::Aarch64,
        _ => Arch::Other,
    })
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    #[test]
    fn cpuinfo_names_the_architecture_and_grace() {
        let grace = "processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n";
        assert_eq!(from_cpuinfo(grace), Some(Arch::Aarch64));
        assert_eq!(
            arm_cpu(grace).as_deref(),
            Some("Arm Neoverse-V2 (NVIDIA Grace)")
        );
        assert_eq!(
            from_cpuinfo("vendor_id\t: GenuineIntel\n"),
            Some(Arch::X86_64)
        );
        assert_eq!(from_cpuinfo("processor : 0\n"), None);
    }

    #[test]
    fn elf_header_machine() {
        let mut h = vec![0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[5] = 1;
        h[18] = 183;
        assert_eq!(from_elf(&h), Some(Arch::Aarch64));
        h[18] = 62;
        assert_eq!(from_elf(&h), Some(Arch::X86_64));
        assert_eq!(from_elf(b"#!/bin/sh\n"), None);
        // The real binary this test runs as.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let want = if cfg!(target_arch = "x86_64") {
            Arch::X86_64
        } else if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::Other
        };
        assert_eq!(from_elf(&me[..64]), Some(want));
    }

    #[test]
    fn dpkg_status_architecture() {
        let s = "Package: bash\nArchitecture: arm64\n\nPackage: dpkg\nStatus: install ok installed\nArchitecture: arm64\nVersion: 1.22.6\n";
        assert_eq!(from_dpkg_status(s), Some(Arch::Aarch64));
        assert_eq!(from_dpkg_status("Package: bash\n"), None);
    }
}
