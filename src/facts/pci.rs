//! PCI devices from `/sys/bus/pci/devices`, with their place in the tree.

use super::util::{read_int, read_trim};
use crate::host::Host;

#[derive(Debug, Clone)]
pub struct PciDevice {
    pub address: String,
    pub vendor: u16,
    pub device: u16,
    /// 24-bit class code, `0x030200` for a 3D controller.
    pub class: u32,
    pub numa_node: Option<i64>,
    /// `/sys/devices/pci0000:00/0000:00:01.0/.../0000:3b:00.0`.
    pub sysfs_path: String,
    pub driver: Option<String>,
}

/// `dddd:bb:dd.f`.
pub fn is_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

pub fn device(host: &Host, address: &str) -> Option<PciDevice> {
    let dir = format!("/sys/bus/pci/devices/{address}");
    let vendor = read_int(host, &format!("{dir}/vendor"))?;
    let device = read_int(host, &format!("{dir}/device")).unwrap_or(0);
    let class = read_int(host, &format!("{dir}/class")).unwrap_or(0);
    let numa_node = read_int(host, &format!("{dir}/numa_node")).filter(|n| *n >= 0);
    let sysfs_path = host.canonical(&dir).unwrap_or(dir.clone());
    let driver = host.link_name(&format!("{dir}/driver"));
    Some(PciDevice {
        address: address.to_string(),
        vendor: vendor as u16,
        device: device as u16,
        class: class as u32,
        numa_node,
        sysfs_path,
        driver,
    })
}

/// Every PCI device, in address order.
pub fn devices(host: &Host) -> Vec<PciDevice> {
    host.list_dir("/sys/bus/pci/devices")
        .iter()
        .filter(|a| is_address(a))
        .filter_map(|a| device(host, a))
        .collect()
}

/// The PCI addresses on a device's sysfs path, from the root port down to the
/// device itself.
pub fn chain(sysfs_path: &str) -> Vec<String> {
    sysfs_path
        .split('/')
        .filter(|c| is_address(c))
        .map(String::from)
        .collect()
}

/// The host bridge a device hangs off (`pci0000:00`).
pub fn host_bridge(sysfs_path: &str) -> Option<String> {
    sysfs_path
        .split('/')
        .find(|c| c.starts_with("pci") && c.contains(':'))
        .map(String::from)
}

/// A sysfs value read from the PCI device directory, for callers outside.
pub fn attr(host: &Host, address: &str, name: &str) -> Option<String> {
    read_trim(host, &format!("/sys/bus/pci/devices/{address}/{name}"))
}
