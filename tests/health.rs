//! The readiness checks of issue 19 (src/checks/health) on realistic fixture roots:
//! PCIe links (a Gen5 x16 GPU trained at x8, one at 16 GT/s, a healthy one, a
//! bridge that reports "Unknown"), kernel logs with Xid and AER lines as the
//! driver and the kernel print them, RDMA ports (half rate, RoCE GIDs),
//! GPU<->NIC affinity; through `doctor`, `verify` and `inventory`, and the
//! copy benchmark on this machine, which has no libcuda.

mod common;
mod hostgen;

use common::*;
use gdrprov::checks::health::{self, Outcome};
use gdrprov::facts::links::LinkState;
use gdrprov::facts::{Depth, Facts};
use gdrprov::host::Host;
use hostgen::*;
use serde_json::Value;
use std::path::Path;

const SW: &str = "pci0000:00/0000:00:01.0/0000:01:00.0";
const GEN5: &str = "32.0 GT/s PCIe";
const GEN4: &str = "16.0 GT/s PCIe";

/// Writes a device's link attributes as sysfs has them.
fn link(g: &HostGen, path: &str, cur: &str, cur_w: u32, max: &str, max_w: u32) {
    let d = format!("/sys/devices/{path}");
    g.file(&format!("{d}/current_link_speed"), format!("{cur}\n"));
    g.file(&format!("{d}/current_link_width"), format!("{cur_w}\n"));
    g.file(&format!("{d}/max_link_speed"), format!("{max}\n"));
    g.file(&format!("{d}/max_link_width"), format!("{max_w}\n"));
}

/// The H100 node of hostgen with every link at Gen5 x16, the root port
/// reporting "Unknown" speed (as emulated ports do).
fn node(gpu: (&str, u32)) -> HostGen {
    let g = h100_node(true, "575.51.03");
    link(
        &g,
        &format!("{SW}/0000:02:08.0/0000:03:00.0"),
        gpu.0,
        gpu.1,
        GEN5,
        16,
    );
    link(
        &g,
        &format!("{SW}/0000:02:10.0/0000:04:00.0"),
        GEN5,
        16,
        GEN5,
        16,
    );
    link(&g, SW, GEN5, 16, GEN5, 16);
    link(&g, &format!("{SW}/0000:02:08.0"), gpu.0, gpu.1, GEN5, 16);
    link(&g, &format!("{SW}/0000:02:10.0"), GEN5, 16, GEN5, 16);
    link(&g, "pci0000:00/0000:00:01.0", "Unknown", 16, "Unknown", 16);
    g
}

fn facts(root: &Path) -> Facts {
    Facts::gather_with(&Host::open(root, true).unwrap(), None, Depth::Files)
}

fn check(f: &Facts, name: &str) -> health::HealthCheck {
    health::from_facts(f)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap()
}

fn doctor(root: &Path) -> Value {
    let out = gdrprov()
        .args(["--format", "json", "doctor", "--root"])
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)))
}

fn finding(report: &Value, id: &str) -> Option<Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .cloned()
}

#[test]
fn healthy_links_are_not_flagged_and_unknown_speeds_not_judged() {
    let g = node((GEN5, 16));
    let f = facts(g.finish());
    let gpu = f
        .links
        .iter()
        .find(|l| l.address == "0000:03:00.0")
        .unwrap();
    assert_eq!(gpu.state, LinkState::Full);
    assert_eq!(gpu.current(), "Gen5 x16");
    let rp = f
        .links
        .iter()
        .find(|l| l.address == "0000:00:01.0")
        .unwrap();
    assert_eq!(rp.state, LinkState::Unknown);
    assert_eq!(rp.serves.len(), 2, "{rp:?}");
    let c = check(&f, "pcie-links");
    assert_eq!(c.status, Outcome::Pass, "{c:?}");
    assert!(
        c.evidence.contains("GPU 0000:03:00.0 Gen5 x16"),
        "{}",
        c.evidence
    );
    assert!(
        c.evidence.contains("1 report no usable speed"),
        "{}",
        c.evidence
    );
    assert!(finding(&doctor(g.finish()), "pcie-links").is_none());
}

#[test]
fn gpu_trained_at_x8_fails_naming_device_values_and_causes() {
    let g = node((GEN5, 8));
    let f = facts(g.finish());
    let c = check(&f, "pcie-links");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence
            .contains("GPU 0000:03:00.0: Gen5 x8 at 32.0 GT/s PCIe x8, maximum 32.0 GT/s PCIe x16"),
        "{}",
        c.evidence
    );
    // The switch port above sees the same link.
    assert!(
        c.evidence
            .contains("bridge 0000:02:08.0 (above 0000:03:00.0)"),
        "{}",
        c.evidence
    );
    assert!(!c.evidence.contains("0000:04:00.0:"), "{}", c.evidence);
    let fix = c.fix.unwrap();
    assert!(
        fix.contains("reseat") && fix.contains("riser") && fix.contains("BIOS"),
        "{fix}"
    );
    let d = doctor(g.finish());
    let x = finding(&d, "pcie-links").unwrap();
    assert_eq!(x["severity"], "error");
    // inventory shows the links.
    let out = gdrprov()
        .args(["inventory", "--root"])
        .arg(g.finish())
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(
        text.contains("Gpu 0000:03:00.0: Gen5 x8 (maximum Gen5 x16)  DEGRADED"),
        "{text}"
    );
    assert!(
        text.contains("Nic 0000:04:00.0: Gen5 x16 (maximum Gen5 x16)\n"),
        "{text}"
    );
}

#[test]
fn gpu_at_x8_of_x16_fails_when_its_speed_cannot_be_read() {
    let g = node(("Unknown", 8));
    let f = facts(g.finish());
    let c = check(&f, "pcie-links");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence.contains("GPU 0000:03:00.0: ? x8 at Unknown x8"),
        "{}",
        c.evidence
    );
    assert!(c.fix.unwrap().contains("riser"));
    let x = finding(&doctor(g.finish()), "pcie-links").unwrap();
    assert_eq!(x["severity"], "error");
}

#[test]
fn gpu_at_16_gts_is_idle_or_slow_and_a_nic_at_16_gts_fails() {
    // An NVIDIA GPU at 16 GT/s of 32 may be idle (power saving): a warning
    // until a reading under load decides.
    let g = node((GEN4, 16));
    let f = facts(g.finish());
    let c = check(&f, "pcie-links");
    assert_eq!(c.status, Outcome::Warn, "{c:?}");
    assert!(c.evidence.contains("possibly idle"), "{}", c.evidence);
    let slow = [health::links::UnderLoad {
        address: "0000:03:00.0".into(),
        current_speed: Some(GEN4.into()),
    }];
    let c = health::links::check(&f, &slow);
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(c.evidence.contains("under load: 16 GT/s"), "{}", c.evidence);
    let fast = [health::links::UnderLoad {
        address: "0000:03:00.0".into(),
        current_speed: Some(GEN5.into()),
    }];
    assert_eq!(health::links::check(&f, &fast).status, Outcome::Pass);
    // A NIC does not idle its link down: 16 GT/s of 32 fails at once.
    let g = node((GEN5, 16));
    link(
        &g,
        &format!("{SW}/0000:02:10.0/0000:04:00.0"),
        GEN4,
        16,
        GEN5,
        16,
    );
    let c = check(&facts(g.finish()), "pcie-links");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence.contains("NIC 0000:04:00.0: Gen4 x16"),
        "{}",
        c.evidence
    );
    assert!(c.evidence.starts_with("1 degraded: "), "{}", c.evidence);
    assert!(!c.evidence.contains("caps the link"), "{}", c.evidence);
    // The same NIC in a Gen4 slot: the port above says so.
    link(&g, &format!("{SW}/0000:02:10.0"), GEN4, 16, GEN4, 16);
    let c = check(&facts(g.finish()), "pcie-links");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence.contains(
            "(bridge 0000:02:10.0 above it supports at most 16.0 GT/s PCIe: the slot caps the link)"
        ),
        "{}",
        c.evidence
    );
    assert!(c.evidence.starts_with("1 degraded: "), "{}", c.evidence);
}

#[test]
fn virtual_functions_are_not_judged() {
    let g = node((GEN5, 16));
    // The NIC is a VF: its link attributes (when present) are meaningless.
    g.link(
        &format!("/sys/devices/{SW}/0000:02:10.0/0000:04:00.0/physfn"),
        &format!("/sys/devices/{SW}/0000:02:08.0/0000:03:00.0"),
    );
    link(
        &g,
        &format!("{SW}/0000:02:10.0/0000:04:00.0"),
        "Unknown",
        0,
        GEN5,
        16,
    );
    let f = facts(g.finish());
    assert!(f.links.iter().all(|l| l.address != "0000:04:00.0"));
    assert_eq!(check(&f, "pcie-links").status, Outcome::Pass);
}

const XID79: &str = "Nov 22 03:14:07 gpu-node-17 kernel: [183512.334121] NVRM: Xid (PCI:0000:03:00): 79, pid=2437, name=python3, GPU has fallen off the bus.\n";
const XID13: &str = "Nov 22 03:10:01 gpu-node-17 kernel: [183266.101010] NVRM: Xid (PCI:0000:03:00): 13, pid=2437, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 0, SM 0): Out Of Range Address\n";
const AER_FATAL: &str = "Nov 22 03:14:06 gpu-node-17 kernel: [183511.900002] pcieport 0000:02:08.0: AER: Uncorrected (Fatal) error received: 0000:03:00.0\nNov 22 03:14:06 gpu-node-17 kernel: [183511.900010] nvidia 0000:03:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible, (Unregistered Agent ID)\n";
const AER_CORR: &str = "Nov 22 02:00:00 gpu-node-17 kernel: [179000.000001] pcieport 0000:02:10.0: AER: Corrected error received: 0000:04:00.0\nNov 22 02:00:00 gpu-node-17 kernel: [179000.000009] mlx5_core 0000:04:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)\n";
const FLAP: &str = "Nov 22 01:00:00 gpu-node-17 kernel: [175000.1] mlx5_core 0000:04:00.0 ibp4s0: Link down\nNov 22 01:00:03 gpu-node-17 kernel: [175003.2] mlx5_core 0000:04:00.0 ibp4s0: Link up\n";
const NOISE: &str = "Nov 22 00:00:01 gpu-node-17 kernel: [1.0] EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode.\n";

#[test]
fn kernel_log_xid_and_aer_lines_as_printed() {
    let g = node((GEN5, 16));
    g.file(
        "/var/log/kern.log",
        format!("{NOISE}{AER_CORR}{FLAP}{XID13}{AER_FATAL}{XID79}"),
    );
    let f = facts(g.finish());
    let log = f.kernel_events.as_ref().unwrap();
    assert_eq!(log.source, "/var/log/kern.log");
    assert_eq!(log.lines, 9);
    let c = check(&f, "kernel-log");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence.contains("1 fatal Xid error(s) (79)"),
        "{}",
        c.evidence
    );
    assert!(
        c.evidence.contains("GPU has fallen off the bus"),
        "{}",
        c.evidence
    );
    assert!(
        c.evidence.contains("2 uncorrected PCIe AER error(s)"),
        "{}",
        c.evidence
    );
    assert!(c.evidence.contains("1 non-fatal Xid"), "{}", c.evidence);
    assert!(
        c.evidence.contains("2 corrected PCIe AER"),
        "{}",
        c.evidence
    );
    assert!(
        c.evidence.contains("1 link flap(s), back up now"),
        "{}",
        c.evidence
    );
    let d = doctor(g.finish());
    assert_eq!(finding(&d, "kernel-log").unwrap()["severity"], "error");
}

#[test]
fn kernel_log_warnings_only_and_clean_and_absent() {
    let g = node((GEN5, 16));
    g.file("/var/log/messages", format!("{NOISE}{AER_CORR}{XID13}"));
    let c = check(&facts(g.finish()), "kernel-log");
    assert_eq!(c.status, Outcome::Warn, "{c:?}");
    let g = node((GEN5, 16));
    g.file("/var/log/kern.log", NOISE);
    let c = check(&facts(g.finish()), "kernel-log");
    assert_eq!(c.status, Outcome::Pass, "{c:?}");
    let g = node((GEN5, 16));
    let c = check(&facts(g.finish()), "kernel-log");
    assert_eq!(c.status, Outcome::Skip, "{c:?}");
    // A NIC link that went down and stayed down fails.
    let g = node((GEN5, 16));
    g.file(
        "/var/log/kern.log",
        "Nov 22 01:00:00 n kernel: [1.0] mlx5_core 0000:04:00.0 ibp4s0: Link down\n",
    );
    assert_eq!(
        check(&facts(g.finish()), "kernel-log").status,
        Outcome::Fail
    );
}

#[test]
fn rdma_port_at_half_rate_fails_and_full_rate_passes() {
    let g = node((GEN5, 16));
    let f = facts(g.finish());
    let c = check(&f, "rdma-ports");
    assert_eq!(c.status, Outcome::Pass, "{c:?}");
    assert!(c
        .evidence
        .contains("mlx5_0:1 ACTIVE InfiniBand 400 Gb/sec (4X NDR)"));
    let g = node((GEN5, 16));
    g.file(
        "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0/infiniband/mlx5_0/ports/1/rate",
        "200 Gb/sec (2X NDR)\n",
    );
    let c = check(&facts(g.finish()), "rdma-ports");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(
        c.evidence.contains("is 50% of 4X NDR (400 Gb/s)"),
        "{}",
        c.evidence
    );
    assert!(c.fix.unwrap().contains("cable"));
}

#[test]
fn roce_port_needs_a_routable_roce_v2_gid() {
    let g = HostGen::new();
    g.ubuntu("24.04");
    let nic = "pci0000:00/0000:00:02.0/0000:05:00.0";
    g.rdma(
        "mlx5_0",
        Some(nic),
        0,
        "mlx5_core",
        &[("ACTIVE", "Ethernet", "100 Gb/sec (2X HDR)", "ens1np0", 9000)],
    );
    let pd = format!("/sys/devices/{nic}/infiniband/mlx5_0/ports/1");
    // Only the link-local GID: not usable.
    g.file(
        &format!("{pd}/gids/0"),
        "fe80:0000:0000:0000:0e42:a1ff:fe12:3456\n",
    );
    g.file(&format!("{pd}/gid_attrs/types/0"), "IB/RoCE v1\n");
    g.file(
        &format!("{pd}/gids/1"),
        "fe80:0000:0000:0000:0e42:a1ff:fe12:3456\n",
    );
    g.file(&format!("{pd}/gid_attrs/types/1"), "RoCE v2\n");
    g.file(
        &format!("{pd}/gids/2"),
        "0000:0000:0000:0000:0000:0000:0000:0000\n",
    );
    let c = check(&facts(g.finish()), "rdma-ports");
    assert_eq!(c.status, Outcome::Fail, "{c:?}");
    assert!(c.evidence.contains("no RoCE v2 GID"), "{}", c.evidence);
    g.file(
        &format!("{pd}/gids/3"),
        "0000:0000:0000:0000:0000:ffff:0a00:020f\n",
    );
    g.file(&format!("{pd}/gid_attrs/types/3"), "RoCE v2\n");
    let c = check(&facts(g.finish()), "rdma-ports");
    assert_eq!(c.status, Outcome::Pass, "{c:?}");
    assert!(
        c.evidence.contains("GID 3 ::ffff:10.0.2.15"),
        "{}",
        c.evidence
    );
}

#[test]
fn affinity_warns_when_the_best_nic_is_on_the_other_socket() {
    let g = node((GEN5, 16));
    let c = check(&facts(g.finish()), "gpu-nic-affinity");
    assert_eq!(c.status, Outcome::Pass, "{c:?}");
    assert!(
        c.evidence
            .contains("GPU 0000:03:00.0 -> mlx5_0 (0000:04:00.0) PIX, NUMA 0/0"),
        "{}",
        c.evidence
    );
    let g = HostGen::new();
    g.ubuntu("22.04");
    g.h100("pci0000:00/0000:00:01.0/0000:03:00.0", 0);
    g.rdma(
        "mlx5_0",
        Some("pci0000:80/0000:80:01.0/0000:81:00.0"),
        1,
        "mlx5_core",
        &[("ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)", "ib0", 4092)],
    );
    let f = facts(g.finish());
    let c = check(&f, "gpu-nic-affinity");
    assert_eq!(c.status, Outcome::Warn, "{c:?}");
    assert!(c.evidence.contains("SYS, NUMA 0/1"), "{}", c.evidence);
    assert_eq!(
        finding(&doctor(g.finish()), "gpu-nic-affinity").unwrap()["severity"],
        "warn"
    );
}

#[test]
fn verify_on_a_root_reports_every_check_and_the_metrics() {
    let g = node((GEN5, 8));
    g.file("/var/log/kern.log", XID79);
    let root = g.finish();
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--format", "json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
    assert_eq!(check_named(&v, "pcie-links")["status"], "fail");
    assert_eq!(check_named(&v, "kernel-log")["status"], "fail");
    assert_eq!(check_named(&v, "rdma-ports")["status"], "pass");
    assert_eq!(check_named(&v, "gpu-nic-affinity")["status"], "pass");
    for name in ["copy-bandwidth", "gpu-health"] {
        let c = check_named(&v, name);
        assert_eq!(c["status"], "skip");
        assert_eq!(c["detail"], "not the running system");
    }
    let h = &v["health"]["checks"];
    let links = h
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "pcie-links")
        .unwrap();
    assert!(links["fix"].as_str().unwrap().contains("reseat"));
    assert_eq!(v["ready"], false);
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--format", "prometheus", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(text.contains("gdrprov_pcie_link_degraded{device=\"0000:03:00.0\",role=\"gpu\",current=\"Gen5 x8\",maximum=\"Gen5 x16\"} 1"), "{text}");
    assert!(
        text.contains("gdrprov_pcie_link_degraded{device=\"0000:04:00.0\",role=\"nic\""),
        "{text}"
    );
    assert!(
        text.contains("gdrprov_check_ok{check=\"kernel-log\""),
        "{text}"
    );
}

#[test]
fn a_warning_stays_a_warning_in_verify() {
    let g = node((GEN5, 16));
    g.file("/var/log/kern.log", format!("{NOISE}{AER_CORR}{XID13}"));
    let root = g.finish();
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--format", "json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr_of(&out)));
    let c = check_named(&v, "kernel-log");
    assert_eq!(c["status"], "warn", "{c:#}");
    assert!(
        c["detail"].as_str().unwrap().starts_with("warning: "),
        "{c:#}"
    );
    assert!(
        c["fix"].as_str().unwrap().contains("marginal link"),
        "{c:#}"
    );
    // A warning alone never makes the host not ready: only failures count.
    let failed: Vec<&Value> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .collect();
    assert_eq!(v["ready"], failed.is_empty(), "{v:#}");
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root"])
        .arg(root)
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains("  warn  kernel-log     warning: "),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn bench_copy_without_libcuda_names_it_and_does_not_panic() {
    if Path::new("/usr/lib/x86_64-linux-gnu/libcuda.so.1").exists() {
        eprintln!("libcuda present: this test is for hosts without it");
        return;
    }
    let out = gdrprov().args(["bench", "copy"]).output().unwrap();
    let err = stderr_of(&out);
    assert_ne!(out.status.code(), Some(0));
    assert_ne!(out.status.code(), Some(101), "panicked: {err}");
    assert!(err.contains("libcuda"), "{err}");
    // The verify check turns the same error into a skip with the reason.
    let g = node((GEN5, 16));
    let f = facts(g.finish());
    let (c, loads, r) = health::copy::run(&f);
    assert_eq!(c.status, Outcome::Skip, "{c:?}");
    assert!(c.evidence.contains("libcuda"), "{}", c.evidence);
    assert!(loads.is_empty() && r.is_none());
    // NVML is absent here too: skipped with the reason.
    let n = health::nvml::read();
    let c = health::nvml::check(n.as_ref().map_err(String::as_str));
    assert_eq!(c.status, Outcome::Skip);
    assert!(c.evidence.contains("libnvidia-ml.so.1"), "{}", c.evidence);
}
