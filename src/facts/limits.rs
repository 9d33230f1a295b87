//! The locked-memory limit RDMA registration runs into: this process's
//! (`/proc/self/limits`) and what limits.conf and systemd configure.

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct LimitsFacts {
    /// Soft limit in bytes, or `unlimited`.
    pub memlock_soft: Option<String>,
    pub memlock_hard: Option<String>,
    /// `file: line` for every memlock setting found.
    pub configured: Vec<String>,
}

pub fn probe(host: &Host) -> LimitsFacts {
    let (mut soft, mut hard) = (None, None);
    if let Some(t) = host.read_fact("/proc/self/limits") {
        if let Some(l) = t.lines().find(|l| l.starts_with("Max locked memory")) {
            let w: Vec<&str> = l["Max locked memory".len()..].split_whitespace().collect();
            soft = w.first().map(|s| s.to_string());
            hard = w.get(1).map(|s| s.to_string());
        }
    }
    let mut configured = Vec::new();
    let mut files = vec!["/etc/security/limits.conf".to_string()];
    for f in host.list_dir("/etc/security/limits.d") {
        if f.ends_with(".conf") {
            files.push(format!("/etc/security/limits.d/{f}"));
        }
    }
    for f in &files {
        if let Some(t) = host.read_fact(f) {
            for l in t.lines() {
                let l = l.trim();
                if !l.starts_with('#') && l.split_whitespace().nth(2) == Some("memlock") {
                    configured.push(format!("{f}: {l}"));
                }
            }
        }
    }
    for f in ["/etc/systemd/system.conf"] {
        if let Some(t) = host.read_fact(f) {
            for l in t.lines() {
                if l.trim_start().starts_with("DefaultLimitMEMLOCK") {
                    configured.push(format!("{f}: {}", l.trim()));
                }
            }
        }
    }
    LimitsFacts {
        memlock_soft: soft,
        memlock_hard: hard,
        configured,
    }
}
