//! Pure helpers over what the kernel shows in sysfs and /proc: the port's line rate, whether a
//! device is software RDMA, and why no RDMA device is visible. The readers take a host (the
//! host layer), so that tests run them on fixture trees.

use crate::facts::rdma::RDMA_DRIVERS;
use crate::host::Host;
use std::path::Path;

/// Parse the port `rate` file of sysfs (`/sys/class/infiniband/DEV/ports/N/rate`), e.g.
/// `"100 Gb/sec (4X EDR)"`, into Gb/s.
pub fn parse_rate_gbps(rate: &str) -> Option<f64> {
    let mut words = rate.split_whitespace();
    let number: f64 = words.next()?.parse().ok()?;
    let unit = words.next()?;
    let gbps = match unit {
        "Gb/sec" | "Gb/s" => number,
        "Mb/sec" | "Mb/s" => number / 1000.0,
        "Tb/sec" | "Tb/s" => number * 1000.0,
        _ => return None,
    };
    (gbps.is_finite() && gbps > 0.0).then_some(gbps)
}

/// Nominal per-lane data rate in Gb/s for `ibv_port_attr.active_speed` (or `active_speed_ex`).
pub fn lane_gbps(active_speed: u32) -> Option<f64> {
    Some(match active_speed {
        1 => 2.5,     // SDR
        2 => 5.0,     // DDR
        4 => 10.0,    // QDR
        8 => 10.0,    // FDR10
        16 => 14.0,   // FDR
        32 => 25.0,   // EDR
        64 => 50.0,   // HDR
        128 => 100.0, // NDR
        256 => 200.0, // XDR
        _ => return None,
    })
}

/// Number of lanes for `ibv_port_attr.active_width`.
pub fn width_lanes(active_width: u8) -> Option<u32> {
    Some(match active_width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => return None,
    })
}

/// Line rate in Gb/s from active speed × width, the way `ibv_devinfo`/sysfs compute it.
pub fn line_rate_from_speed_width(active_speed: u32, active_width: u8) -> Option<f64> {
    Some(lane_gbps(active_speed)? * f64::from(width_lanes(active_width)?))
}

/// Software RDMA devices (soft-RoCE `rxe`, soft-iWARP `siw`) have no meaningful line rate.
pub fn is_software_device(name: &str, vendor_id: u32) -> bool {
    // rxe reports vendor 0xffffff, siw 0x626d74 ("bmt").
    name.starts_with("rxe")
        || name.starts_with("siw")
        || vendor_id == 0x00ff_ffff
        || vendor_id == 0x0062_6d74
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

/// Read the port's sysfs rate file, if present.
pub fn read_port_rate(host: &Host, device: &str, port: u8) -> Option<f64> {
    let s = host.read_fact(&format!("/sys/class/infiniband/{device}/ports/{port}/rate"))?;
    parse_rate_gbps(s.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_in_sysfs_format() {
        assert_eq!(parse_rate_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(parse_rate_gbps("400 Gb/sec (4X NDR)"), Some(400.0));
        assert_eq!(parse_rate_gbps("25 Gb/sec (1X EDR)"), Some(25.0));
        assert_eq!(parse_rate_gbps("2.5 Gb/sec (1X SDR)"), Some(2.5));
        assert_eq!(parse_rate_gbps("200 Gb/sec (2X NDR)\n".trim()), Some(200.0));
        assert_eq!(parse_rate_gbps("garbage"), None);
        assert_eq!(parse_rate_gbps("0 Gb/sec (1X SDR)"), None);
        assert_eq!(parse_rate_gbps(""), None);
    }

    #[test]
    fn speed_times_width() {
        assert_eq!(line_rate_from_speed_width(32, 2), Some(100.0)); // 4X EDR
        assert_eq!(line_rate_from_speed_width(128, 2), Some(400.0)); // 4X NDR
        assert_eq!(line_rate_from_speed_width(32, 1), Some(25.0)); // 1X EDR
        assert_eq!(line_rate_from_speed_width(64, 2), Some(200.0)); // 4X HDR
        assert_eq!(line_rate_from_speed_width(128, 16), Some(200.0)); // 2X NDR
        assert_eq!(line_rate_from_speed_width(1, 8), Some(30.0)); // 12X SDR
        assert_eq!(line_rate_from_speed_width(3, 2), None);
        assert_eq!(line_rate_from_speed_width(32, 3), None);
    }

    #[test]
    fn software_devices() {
        assert!(is_software_device("rxe0", 0xffffff));
        assert!(is_software_device("siw_eth0", 0));
        assert!(is_software_device("roce_soft", 0xffffff));
        assert!(!is_software_device("mlx5_0", 0x02c9));
    }

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
