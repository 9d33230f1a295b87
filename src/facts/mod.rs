//! Read-only probes of a root. Each copes with its subject being absent and
//! says so; none of them fails.

mod os;

pub use os::{CpuVendor, OsFamily, OsRelease};

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub os: OsRelease,
    pub cpu_vendor: CpuVendor,
    /// The running kernel's command line (`/proc/cmdline` in the root).
    pub proc_cmdline: Option<String>,
    /// Whether the root is the running system.
    pub live: bool,
}

impl Facts {
    pub fn gather(host: &Host, cpu_override: Option<CpuVendor>) -> Facts {
        Facts {
            os: os::os_release(host),
            cpu_vendor: cpu_override.unwrap_or_else(|| os::cpu_vendor(host)),
            proc_cmdline: host.read_fact("/proc/cmdline").map(|s| s.trim().to_string()),
            live: host.is_live(),
        }
    }
}
