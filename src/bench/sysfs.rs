//! What the bench needs to know of the host, read through the host layer (so that tests run it
//! on fixture trees) and handed to the gdrprov-rdma crate as its [`HostView`]: a port's line
//! rate, why no RDMA device is visible, whether nvidia_peermem is loaded.

use crate::facts::rdma::{read_port_rate, RDMA_DRIVERS};
use crate::host::Host;
use gdrprov_rdma::HostView;
use std::path::Path;

/// The running system, as the bench sees it: each answer opens `/` through the host layer.
pub struct LiveHost;

impl HostView for LiveHost {
    fn port_rate_gbps(&self, device: &str, port: u8) -> Option<f64> {
        Host::open(Path::new("/"), true)
            .ok()
            .and_then(|host| read_port_rate(&host, device, port))
    }

    fn explain_no_device(&self) -> String {
        diagnose_running_system()
    }

    fn nvidia_peermem_loaded(&self) -> bool {
        Host::open(Path::new("/"), true).is_ok_and(|host| host.exists("/sys/module/nvidia_peermem"))
    }

    fn fd_info(&self, fd: std::os::fd::RawFd) -> Option<String> {
        Host::open(Path::new("/"), true)
            .ok()?
            .read_fact(&format!("/proc/self/fdinfo/{fd}"))
    }
}

/// RDMA devices the kernel shows under `/sys/class/infiniband`, sorted; None if the folder is absent.
pub fn kernel_rdma_devices(host: &Host) -> Option<Vec<String>> {
    let dir = "/sys/class/infiniband";
    host.exists(dir).then(|| host.list_dir(dir))
}

/// [`diagnose_no_device`] on the running system.
pub fn diagnose_running_system() -> String {
    match Host::open(Path::new("/"), true) {
        Ok(host) => diagnose_no_device(&host),
        Err(e) => e.to_string(),
    }
}

/// Explain why libibverbs sees no RDMA device, from the kernel's view of the host.
pub fn diagnose_no_device(host: &Host) -> String {
    let (_, modules) = crate::facts::kmod::loaded(host);
    let has = |m: &str| modules.iter().any(|x| x == m);
    let class = kernel_rdma_devices(host);
    if let Some(devs) = class.as_ref().filter(|d| !d.is_empty()) {
        return format!(
            "the kernel has RDMA device(s) {} but libibverbs found none: its user-space provider is missing \
             (install ibverbs-providers / rdma-core, or the OFED user-space)",
            devs.join(", ")
        );
    }
    let class_state = if class.is_some() {
        "/sys/class/infiniband is empty"
    } else {
        "/sys/class/infiniband is absent"
    };
    for (core, ib) in RDMA_DRIVERS {
        if has(core) && core == ib {
            return format!("{core} loaded but {class_state}: create a device (`rdma link add <name> type {} netdev <nic>`)", core.trim_start_matches("rdma_"));
        }
        if has(core) && !has(ib) {
            return format!(
                "{core} loaded but {ib} is not, and {class_state}: load it (`modprobe {ib}`)"
            );
        }
        if has(core) && has(ib) {
            return format!(
                "{core} and {ib} loaded but {class_state}: the NIC may run in Ethernet-only mode or RDMA is disabled in its firmware (check `mlxconfig`/`devlink dev param`), or the device is bound to vfio"
            );
        }
    }
    let ib_core = if has("ib_core") {
        " (ib_core is loaded)"
    } else {
        ""
    };
    format!(
        "no RDMA NIC driver is loaded{ib_core} and {class_state}. On a host without an RDMA NIC, a soft-RoCE \
         device can stand in for tests: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <nic>`"
    )
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    fn fixture(modules: &str, class: Option<&[&str]>) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/modules"), modules).unwrap();
        if let Some(devs) = class {
            std::fs::create_dir_all(dir.path().join("sys/class/infiniband")).unwrap();
            for d in devs {
                std::fs::create_dir_all(dir.path().join("sys/class/infiniband").join(d)).unwrap();
            }
        }
        dir
    }

    /// The fdinfo the rdma crate asks for (a dma-buf's size and exporter) comes through the host
    /// layer: here of a pipe, which every process can make.
    #[test]
    fn fd_info_is_read_through_the_host_layer() {
        use std::os::fd::AsRawFd;
        let (r, _w) = nix::unistd::pipe().unwrap();
        let info = LiveHost.fd_info(r.as_raw_fd()).unwrap();
        assert!(info.contains("pos:") && info.contains("flags:"), "{info}");
        assert!(LiveHost.fd_info(-1).is_none());
    }

    #[test]
    fn diagnosis_names_the_cause() {
        let d = fixture(
            "mlx5_core 2056192 1 mlx5_ib, Live 0x0\nib_core 1 0 - Live 0x0\n",
            Some(&[]),
        );
        let why = diagnose_no_device(&Host::open(d.path(), true).unwrap());
        assert!(why.contains("mlx5_core loaded but mlx5_ib is not"), "{why}");
        assert!(why.contains("/sys/class/infiniband is empty"), "{why}");

        let d = fixture("mlx5_ib 1 0 - Live 0x0\nmlx5_core 1 0 - Live 0x0\n", None);
        let why = diagnose_no_device(&Host::open(d.path(), true).unwrap());
        assert!(
            why.contains("mlx5_core and mlx5_ib loaded but /sys/class/infiniband is absent"),
            "{why}"
        );

        let d = fixture("nvidia 1 0 - Live 0x0\n", None);
        let why = diagnose_no_device(&Host::open(d.path(), true).unwrap());
        assert!(why.contains("no RDMA NIC driver is loaded"), "{why}");
        assert!(why.contains("rdma_rxe"), "{why}");

        let d = fixture("rdma_rxe 1 0 - Live 0x0\n", Some(&[]));
        let why = diagnose_no_device(&Host::open(d.path(), true).unwrap());
        assert!(
            why.contains("rdma_rxe loaded but /sys/class/infiniband is empty"),
            "{why}"
        );
        assert!(why.contains("rdma link add"), "{why}");

        let d = fixture("mlx5_core 1 0 - Live 0x0\n", Some(&["mlx5_0"]));
        let why = diagnose_no_device(&Host::open(d.path(), true).unwrap());
        assert!(why.contains("mlx5_0") && why.contains("provider"), "{why}");
    }
}
