//! The kernel modules a host cannot boot without: those driving the disk
//! of the root filesystem (from `/proc/self/mountinfo` and sysfs: the
//! partition's disk, the devices under a device-mapper or RAID volume, and
//! every driver on the way up to the PCI bus) and the network interface of
//! the default route (`/proc/net/route`, through bonds and bridges). Where
//! the root does not show them (an image), each says why it cannot tell.

use crate::host::Host;
use serde::Serialize;

/// The modules behind one device, or why they cannot be told.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drivers {
    /// What it is: `/ on /dev/nvme0n1p2`, `default route via eth0`.
    pub what: String,
    /// Loadable modules (sysfs `driver/module`), outermost device first;
    /// built-in drivers have none and cannot be blocked anyway.
    pub modules: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootDevices {
    /// The root filesystem's disk: its modules, or why they are unknown.
    pub root_disk: Result<Drivers, String>,
    /// The network interface of the default route.
    pub boot_nic: Result<Drivers, String>,
}

pub fn probe(host: &Host) -> BootDevices {
    BootDevices {
        root_disk: root_disk(host),
        boot_nic: boot_nic(host),
    }
}

/// `/` in mountinfo: its device number and source.
fn root_disk(host: &Host) -> Result<Drivers, String> {
    let info = host
        .read_fact("/proc/self/mountinfo")
        .ok_or_else(|| "the root shows no /proc/self/mountinfo".to_string())?;
    // The last mount on / is the one in effect.
    let line = info
        .lines()
        .rev()
        .find(|l| l.split_whitespace().nth(4) == Some("/"))
        .ok_or_else(|| "/proc/self/mountinfo has no mount on /".to_string())?;
    let fields: Vec<&str> = line.split_whitespace().collect();
    let dev = fields.get(2).copied().unwrap_or("");
    let after: Vec<&str> = line
        .split(" - ")
        .nth(1)
        .map(|t| t.split_whitespace().collect())
        .unwrap_or_default();
    let (fstype, source) = (
        after.first().copied().unwrap_or("?"),
        after.get(1).copied().unwrap_or("?"),
    );
    let sys = if dev.split(':').next().is_some_and(|maj| maj != "0") {
        format!("/sys/dev/block/{dev}")
    } else if let Some(name) = source.strip_prefix("/dev/").filter(|n| !n.contains('/')) {
        format!("/sys/class/block/{name}")
    } else {
        return Err(format!(
            "/ is {fstype} from {source}, not on a block device gdrprov can follow"
        ));
    };
    let dir = host
        .canonical(&sys)
        .ok_or_else(|| format!("{} does not exist on this root", sys))?;
    let mut modules = Vec::new();
    block_modules(host, &dir, 0, &mut modules);
    Ok(Drivers {
        what: format!("/ on {source}"),
        modules,
    })
}

/// The modules under a block device's sysfs directory: a partition's disk,
/// a dm/md volume's members, and the drivers up its device path.
fn block_modules(host: &Host, dir: &str, depth: usize, out: &mut Vec<String>) {
    if depth > 8 {
        return;
    }
    let disk = if host.exists(&format!("{dir}/partition")) {
        dir.rsplit_once('/').map_or(dir, |(p, _)| p)
    } else {
        dir
    };
    for slave in host.list_dir(&format!("{disk}/slaves")) {
        if let Some(d) = host.canonical(&format!("{disk}/slaves/{slave}")) {
            block_modules(host, &d, depth + 1, out);
        }
    }
    up_the_tree(host, disk, out);
}

/// Every `driver/module` from `dir` up to `/sys/devices`.
fn up_the_tree(host: &Host, dir: &str, out: &mut Vec<String>) {
    let mut at = dir.to_string();
    while at.starts_with("/sys/devices/") {
        if let Some(m) = host.link_name(&format!("{at}/driver/module")) {
            let m = super::kmod::norm(&m);
            if !out.contains(&m) {
                out.push(m);
            }
        }
        match at.rsplit_once('/') {
            Some((parent, _)) => at = parent.to_string(),
            None => break,
        }
    }
}

/// The interface of the IPv4 default route, and the modules under it.
fn boot_nic(host: &Host) -> Result<Drivers, String> {
    let routes = host
        .read_fact("/proc/net/route")
        .ok_or_else(|| "the root shows no /proc/net/route".to_string())?;
    let iface = routes
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.get(1) == Some(&"00000000") && f.get(7) == Some(&"00000000"))
        .and_then(|f| f.first().map(|s| s.to_string()))
        .ok_or_else(|| "/proc/net/route has no IPv4 default route".to_string())?;
    let mut modules = Vec::new();
    nic_modules(host, &iface, 0, &mut modules);
    Ok(Drivers {
        what: format!("the default route's interface {iface}"),
        modules,
    })
}

/// An interface's device drivers; for a bond, bridge or VLAN, its lower
/// interfaces'.
fn nic_modules(host: &Host, iface: &str, depth: usize, out: &mut Vec<String>) {
    if depth > 4 {
        return;
    }
    let base = format!("/sys/class/net/{iface}");
    for e in host.list_dir(&base) {
        if let Some(lower) = e.strip_prefix("lower_") {
            nic_modules(host, lower, depth + 1, out);
        }
    }
    for port in host.list_dir(&format!("{base}/brif")) {
        nic_modules(host, &port, depth + 1, out);
    }
    if let Some(dev) = host.canonical(&format!("{base}/device")) {
        up_the_tree(host, &dev, out);
    }
}

/// What kind of driver a module is, from where `modules.dep` of the root's
/// kernels keeps it: `storage` or `network`; `None` when neither or unknown.
pub fn driver_class(host: &Host, module: &str) -> Option<&'static str> {
    let want = super::kmod::norm(module);
    for k in host.list_dir("/lib/modules") {
        let Some(dep) = host.read_fact(&format!("/lib/modules/{k}/modules.dep")) else {
            continue;
        };
        for line in dep.lines() {
            let path = line.split(':').next().unwrap_or("");
            let stem = path.rsplit('/').next().unwrap_or("").split(".ko").next();
            if stem.map(super::kmod::norm).as_deref() != Some(want.as_str()) {
                continue;
            }
            const STORAGE: &[&str] = &[
                "/drivers/nvme/",
                "/drivers/scsi/",
                "/drivers/ata/",
                "/drivers/block/",
                "/drivers/md/",
                "/drivers/mmc/",
                "/fs/",
            ];
            if STORAGE.iter().any(|d| path.contains(d)) {
                return Some("storage");
            }
            if path.contains("/drivers/net/") {
                return Some("network");
            }
        }
    }
    None
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    fn write(root: &Path, p: &str, text: &str) {
        let f = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }

    fn link(root: &Path, p: &str, target: &str) {
        let f = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        symlink(target, f).unwrap();
    }

    /// An NVMe root partition and a bonded mlx5 NIC, as sysfs shows them.
    fn host_tree() -> tempfile::TempDir {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(
            r,
            "/proc/self/mountinfo",
            "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n",
        );
        let pci = "/sys/devices/pci0000:00/0000:00:04.0";
        write(
            r,
            &format!("{pci}/nvme/nvme0/nvme0n1/nvme0n1p2/partition"),
            "2\n",
        );
        link(
            r,
            "/sys/dev/block/259:2",
            &format!("{pci}/nvme/nvme0/nvme0n1/nvme0n1p2"),
        );
        link(r, &format!("{pci}/driver"), "/sys/bus/pci/drivers/nvme");
        link(r, "/sys/bus/pci/drivers/nvme/module", "/sys/module/nvme");
        std::fs::create_dir_all(r.join("sys/module/nvme")).unwrap();
        std::fs::create_dir_all(r.join("sys/module/mlx5_core")).unwrap();
        write(r, "/proc/net/route", "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\nbond0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\n");
        let nic = "/sys/devices/pci0000:00/0000:00:05.0";
        std::fs::create_dir_all(r.join(&nic[1..]).join("net/eth0")).unwrap();
        link(r, "/sys/class/net/eth0", &format!("{nic}/net/eth0"));
        link(r, &format!("{nic}/net/eth0/device"), nic);
        link(
            r,
            &format!("{nic}/driver"),
            "/sys/bus/pci/drivers/mlx5_core",
        );
        link(
            r,
            "/sys/bus/pci/drivers/mlx5_core/module",
            "/sys/module/mlx5_core",
        );
        std::fs::create_dir_all(r.join("sys/devices/virtual/net/bond0")).unwrap();
        link(r, "/sys/class/net/bond0", "/sys/devices/virtual/net/bond0");
        link(
            r,
            "/sys/devices/virtual/net/bond0/lower_eth0",
            "/sys/class/net/eth0",
        );
        t
    }

    #[test]
    fn the_root_disk_and_the_boot_nic_are_followed_to_their_modules() {
        let t = host_tree();
        let host = Host::open(t.path(), true).unwrap();
        let b = probe(&host);
        let disk = b.root_disk.unwrap();
        assert_eq!(disk.modules, vec!["nvme"]);
        assert_eq!(disk.what, "/ on /dev/nvme0n1p2");
        let nic = b.boot_nic.unwrap();
        assert_eq!(nic.modules, vec!["mlx5_core"]);
        assert!(nic.what.contains("bond0"), "{}", nic.what);
    }

    #[test]
    fn an_image_says_it_cannot_tell() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::open(t.path(), true).unwrap();
        let b = probe(&host);
        assert!(b.root_disk.unwrap_err().contains("mountinfo"));
        assert!(b.boot_nic.unwrap_err().contains("/proc/net/route"));
        write(
            t.path(),
            "/proc/self/mountinfo",
            "1 0 0:31 / / rw - overlay overlay rw\n",
        );
        let e = probe(&host).root_disk.unwrap_err();
        assert!(e.contains("overlay"), "{e}");
    }

    #[test]
    fn module_classes_come_from_modules_dep() {
        let t = tempfile::tempdir().unwrap();
        write(t.path(), "/lib/modules/6.1.0/modules.dep", "kernel/drivers/nvme/host/nvme.ko:\nkernel/drivers/net/ethernet/mellanox/mlx5/core/mlx5_core.ko.xz:\nupdates/dkms/nvidia-peermem.ko:\n");
        let host = Host::open(t.path(), true).unwrap();
        assert_eq!(driver_class(&host, "nvme"), Some("storage"));
        assert_eq!(driver_class(&host, "mlx5-core"), Some("network"));
        assert_eq!(driver_class(&host, "nvidia_peermem"), None);
    }
}
