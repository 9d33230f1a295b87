//! The RDMA stack: MLNX_OFED / DOCA-OFED (`ofed_info -s`) or the
//! distribution's inbox rdma-core (package database), or nothing.

use super::packages::Packages;
use super::util::{query_ok, version_in};
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OfedKindFact {
    /// MLNX_OFED or DOCA-OFED.
    Mlnx,
    /// The distribution's rdma-core.
    Inbox,
    Absent,
}

#[derive(Debug, Clone, Serialize)]
pub struct OfedFacts {
    pub kind: OfedKindFact,
    /// `24.10-3.2.5.0` for MLNX_OFED; the rdma-core package version for inbox.
    pub version: Option<String>,
    /// What `ofed_info -s` printed, or the package that was found.
    pub evidence: Option<String>,
    /// MLNX_OFED/DOCA's `openibd` (its unit or SysV script), which reloads
    /// the RDMA stack and fails while `nvidia_peermem` holds `ib_core`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub openibd: Option<String>,
}

/// The unit gdrprov gives nvidia_peermem on an openibd host (its facts are
/// gathered for planning; modules/kmod.rs writes it).
pub const PEERMEM_UNIT_NAME: &str = "gdrprov-peermem.service";

/// Where the root has openibd, if it has.
pub const OPENIBD_PATHS: [&str; 4] = [
    "/etc/systemd/system/openibd.service",
    "/usr/lib/systemd/system/openibd.service",
    "/lib/systemd/system/openibd.service",
    "/etc/init.d/openibd",
];

/// `MLNX_OFED_LINUX-24.10-3.2.5.0:` or `OFED-internal-24.10-3.2.5:` (DOCA).
pub fn parse_ofed_info(s: &str) -> Option<String> {
    let line = s.lines().map(str::trim).find(|l| !l.is_empty())?;
    let rest = line
        .split_once("MLNX_OFED_LINUX-")
        .or_else(|| line.split_once("OFED-internal-"))
        .or_else(|| line.split_once("DOCA"))
        .map(|(_, r)| r)
        .unwrap_or(line);
    version_in(rest.trim_end_matches(':'))
}

pub fn probe(host: &Host, packages: &Packages) -> OfedFacts {
    let mut f = stack(host, packages);
    f.openibd = OPENIBD_PATHS
        .iter()
        .find(|p| host.exists(p))
        .map(|p| p.to_string());
    f
}

fn stack(host: &Host, packages: &Packages) -> OfedFacts {
    if let Some(out) = query_ok(host, &["ofed_info", "-s"]) {
        if let Some(v) = parse_ofed_info(&out) {
            return OfedFacts {
                kind: OfedKindFact::Mlnx,
                version: Some(v),
                evidence: Some(format!("ofed_info -s: {}", out.trim())),
                openibd: None,
            };
        }
    }
    // In an image nothing may run: ofed_info is a script with the version in it.
    if let Some(script) = host.read_fact("/usr/bin/ofed_info") {
        if let Some(line) = script
            .lines()
            .find(|l| l.contains("MLNX_OFED_LINUX-") || l.contains("OFED-internal-"))
        {
            if let Some(v) = parse_ofed_info(line.trim().trim_start_matches("echo").trim()) {
                return OfedFacts {
                    kind: OfedKindFact::Mlnx,
                    version: Some(v),
                    evidence: Some("/usr/bin/ofed_info".into()),
                    openibd: None,
                };
            }
        }
    }
    if let Some((pkg, v)) = packages.version(&["rdma-core", "libibverbs1", "libibverbs"]) {
        return OfedFacts {
            kind: OfedKindFact::Inbox,
            version: Some(v),
            evidence: Some(format!("package {pkg}")),
            openibd: None,
        };
    }
    for lib in [
        "/usr/lib/x86_64-linux-gnu/libibverbs.so.1",
        "/usr/lib/aarch64-linux-gnu/libibverbs.so.1",
        "/usr/lib64/libibverbs.so.1",
        "/lib/x86_64-linux-gnu/libibverbs.so.1",
    ] {
        if host.exists(lib) {
            return OfedFacts {
                kind: OfedKindFact::Inbox,
                version: None,
                evidence: Some(lib.to_string()),
                openibd: None,
            };
        }
    }
    OfedFacts {
        kind: OfedKindFact::Absent,
        version: None,
        evidence: None,
        openibd: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ofed_info_lines() {
        use super::parse_ofed_info as p;
        assert_eq!(
            p("MLNX_OFED_LINUX-24.10-3.2.5.0:\n").as_deref(),
            Some("24.10-3.2.5.0")
        );
        assert_eq!(
            p("OFED-internal-25.01-0.6.0:\n").as_deref(),
            Some("25.01-0.6.0")
        );
    }
}
