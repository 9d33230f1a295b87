//! The NVIDIA kernel driver: version and flavour (open kernel modules or
//! proprietary). From `/proc/driver/nvidia/version` on a running system, from
//! `modinfo` of an installed module in an image.

use super::util::{query_ok, version_in};
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    /// NVIDIA open GPU kernel modules (`Dual MIT/GPL`).
    Open,
    Proprietary,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct DriverFacts {
    /// e.g. `580.159.04`; `None`: no NVIDIA driver found.
    pub version: Option<String>,
    pub flavor: Flavor,
    /// Where it was read: `/proc/driver/nvidia/version` or `modinfo`.
    pub source: Option<String>,
}

impl DriverFacts {
    pub fn present(&self) -> bool {
        self.version.is_some()
    }
    /// The major version (`580`).
    pub fn major(&self) -> Option<u32> {
        self.version.as_deref()?.split('.').next()?.parse().ok()
    }
}

/// Parses line 1 of `/proc/driver/nvidia/version`.
pub fn parse_proc_version(text: &str) -> Option<(String, Flavor)> {
    let line = text.lines().find(|l| l.contains("Kernel Module"))?;
    let flavor = if line.contains("Open Kernel Module") {
        Flavor::Open
    } else {
        Flavor::Proprietary
    };
    let after = line.split("Kernel Module").nth(1)?;
    // "for x86_64  580.159.04  Release Build" / "  535.216.03  Thu ..."
    let version = after
        .split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))?;
    Some((version.to_string(), flavor))
}

pub fn probe(host: &Host, kernels: &[String]) -> DriverFacts {
    if let Some(text) = host.read_fact("/proc/driver/nvidia/version") {
        if let Some((version, flavor)) = parse_proc_version(&text) {
            return DriverFacts {
                version: Some(version),
                flavor,
                source: Some("/proc/driver/nvidia/version".into()),
            };
        }
    }
    // An image (or a host where the module is not loaded): ask modinfo about
    // the installed module, for the newest installed kernel.
    let mut argv_sets: Vec<Vec<String>> = kernels
        .iter()
        .rev()
        .map(|k| vec!["modinfo".into(), "-k".into(), k.clone(), "nvidia".into()])
        .collect();
    argv_sets.push(vec!["modinfo".into(), "nvidia".into()]);
    for argv in argv_sets {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let Some(out) = query_ok(host, &argv) else {
            continue;
        };
        let field = |k: &str| {
            out.lines().find_map(|l| {
                let (key, v) = l.split_once(':')?;
                (key.trim() == k).then(|| v.trim().to_string())
            })
        };
        let Some(version) = field("version").and_then(|v| version_in(&v)) else {
            continue;
        };
        let flavor = match field("license").as_deref() {
            Some("Dual MIT/GPL") => Flavor::Open,
            Some("NVIDIA") => Flavor::Proprietary,
            _ => Flavor::Unknown,
        };
        return DriverFacts {
            version: Some(version),
            flavor,
            source: Some(format!("`{}`", argv.join(" "))),
        };
    }
    DriverFacts {
        version: None,
        flavor: Flavor::Unknown,
        source: None,
    }
}

/// The newest CUDA driver API a driver branch supports (the CUDA release notes'
/// table of minimum driver versions), used when libcuda cannot be asked.
pub fn cuda_for_driver(major: u32) -> Option<&'static str> {
    const TABLE: &[(u32, &str)] = &[
        (580, "13.0"),
        (575, "12.9"),
        (570, "12.8"),
        (565, "12.7"),
        (560, "12.6"),
        (555, "12.5"),
        (550, "12.4"),
        (545, "12.3"),
        (535, "12.2"),
        (530, "12.1"),
        (525, "12.0"),
        (520, "11.8"),
        (515, "11.7"),
        (510, "11.6"),
        (495, "11.5"),
        (470, "11.4"),
        (465, "11.3"),
        (460, "11.2"),
        (455, "11.1"),
        (450, "11.0"),
    ];
    TABLE.iter().find(|(d, _)| major >= *d).map(|(_, c)| *c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_and_proprietary_are_told_apart() {
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \nGCC version: gcc 15\n";
        assert_eq!(
            parse_proc_version(open),
            Some(("580.159.04".into(), Flavor::Open))
        );
        let prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.216.03  Thu Oct 10 2024\n";
        assert_eq!(
            parse_proc_version(prop),
            Some(("535.216.03".into(), Flavor::Proprietary))
        );
        assert_eq!(cuda_for_driver(580), Some("13.0"));
        assert_eq!(cuda_for_driver(535), Some("12.2"));
        assert_eq!(cuda_for_driver(400), None);
    }
}
