//! Distribution (`/etc/os-release`) and CPU vendor (`/proc/cpuinfo`).

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuVendor {
    Intel,
    Amd,
    Other,
    Unknown,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OsFamily {
    /// Debian, Ubuntu: /etc/default/grub + update-grub.
    Debian,
    /// RHEL, Rocky, Alma, Alibaba Cloud Linux, Fedora: BLS entries + grubby.
    Rhel,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct OsRelease {
    pub id: Option<String>,
    pub version_id: Option<String>,
    pub pretty_name: Option<String>,
    pub family: OsFamily,
}

pub fn os_release(host: &Host) -> OsRelease {
    let text = host
        .read_fact("/etc/os-release")
        .or_else(|| host.read_fact("/usr/lib/os-release"))
        .unwrap_or_default();
    let get = |key: &str| -> Option<String> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string())
        })
    };
    let id = get("ID");
    let like = get("ID_LIKE").unwrap_or_default();
    let words: Vec<&str> = id
        .iter()
        .map(String::as_str)
        .chain(like.split_whitespace())
        .collect();
    let family = if words.iter().any(|w| matches!(*w, "debian" | "ubuntu")) {
        OsFamily::Debian
    } else if words.iter().any(|w| {
        matches!(
            *w,
            "rhel" | "fedora" | "centos" | "rocky" | "almalinux" | "alinux" | "anolis"
        )
    }) {
        OsFamily::Rhel
    } else {
        OsFamily::Unknown
    };
    OsRelease {
        id,
        version_id: get("VERSION_ID"),
        pretty_name: get("PRETTY_NAME"),
        family,
    }
}

pub fn cpu_vendor(host: &Host) -> CpuVendor {
    let Some(info) = host.read_fact("/proc/cpuinfo") else {
        return CpuVendor::Unknown;
    };
    let vendor = info.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "vendor_id").then(|| v.trim().to_string())
    });
    match vendor.as_deref() {
        Some("GenuineIntel") => CpuVendor::Intel,
        Some("AuthenticAMD") | Some("HygonGenuine") => CpuVendor::Amd,
        Some(_) => CpuVendor::Other,
        None => CpuVendor::Unknown,
    }
}
