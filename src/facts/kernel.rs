//! The running kernel and the kernels installed in the root.

use super::util::read_trim;
use crate::host::Host;
use crate::versions;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelFacts {
    /// `/proc/sys/kernel/osrelease`: the running kernel (absent in an image).
    pub running: Option<String>,
    /// Kernels with modules in `/lib/modules` or an image in `/boot`, oldest first.
    pub installed: Vec<String>,
}

impl KernelFacts {
    /// The kernel requirements are checked against: the running one, or in an
    /// image the newest installed one (the one it will boot).
    pub fn effective(&self) -> Option<&str> {
        self.running
            .as_deref()
            .or_else(|| self.installed.last().map(String::as_str))
    }
}

pub fn probe(host: &Host) -> KernelFacts {
    let running = read_trim(host, "/proc/sys/kernel/osrelease");
    let mut installed: Vec<String> = host
        .list_dir("/lib/modules")
        .into_iter()
        .filter(|k| k.chars().next().is_some_and(|c| c.is_ascii_digit()))
        .collect();
    for f in host.list_dir_prefix("/boot", "vmlinuz-") {
        if let Some(k) = f.strip_prefix("vmlinuz-") {
            if k.chars().next().is_some_and(|c| c.is_ascii_digit())
                && !installed.iter().any(|i| i == k)
            {
                installed.push(k.to_string());
            }
        }
    }
    installed.sort_by(|a, b| versions::compare(a, b));
    KernelFacts { running, installed }
}
