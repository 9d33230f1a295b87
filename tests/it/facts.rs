//! Every probe and every doctor finding on fixture roots (built by
//! `hostgen`, with recorded command outputs so nothing runs), on the example
//! roots, and on the snapshot taken with `inventory --snapshot` on the device
//! machine (H200, open driver 580, no RDMA NIC).

use crate::common::*;
use crate::hostgen::*;
use crate::util::*;
use gdrprov::facts::gpu::Arch;
use gdrprov::facts::iommu::IommuState;
use gdrprov::facts::nvidia::Flavor;
use gdrprov::facts::ofed::OfedKindFact;
use gdrprov::facts::pcie::Distance;
use gdrprov::facts::{Depth, Facts};
use gdrprov::host::Host;
use serde_json::{json, Value};
use std::path::Path;

fn facts(root: &Path) -> Facts {
    Facts::gather_with(&Host::open(root, true).unwrap(), None, Depth::WithCuda)
}

/// `gdrprov doctor` as JSON, with its exit code.
fn doctor(root: &Path, args: &[&str]) -> (i32, Value) {
    let mut cmd = gdrprov();
    cmd.args(["--format", "json", "doctor", "--root"])
        .arg(root)
        .args(args);
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout_of(&out), stderr_of(&out)));
    (out.status.code().unwrap_or(-1), v)
}

fn ids(report: &Value, severity: &str) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == severity)
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn finding<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no finding {id} in {report:#}"))
}

#[test]
fn healthy_h100_node_every_probe() {
    let g = h100_node(true, "575.51.03");
    let f = facts(g.finish());
    assert_eq!(f.os.id.as_deref(), Some("ubuntu"));
    assert_eq!(f.kernel.running.as_deref(), Some("5.15.0-119-generic"));
    assert_eq!(f.kernel.installed, ["5.15.0-119-generic"]);
    assert_eq!(f.nvidia_driver.version.as_deref(), Some("575.51.03"));
    assert_eq!(f.nvidia_driver.flavor, Flavor::Open);
    assert_eq!(f.gpus.len(), 1);
    assert_eq!(f.gpus[0].pci, "0000:03:00.0");
    assert_eq!(f.gpus[0].arch, Arch::Hopper);
    assert_eq!(f.gpus[0].arch_source, "compute-capability");
    assert_eq!(f.gpus[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(f.cuda.driver_api.as_deref(), Some("12.9"));
    assert_eq!(f.cuda.toolkit.as_deref(), Some("12.4.131"));
    assert_eq!(
        f.cuda_device(&f.gpus[0]).unwrap().dmabuf_supported,
        Some(true)
    );
    assert_eq!(f.ofed.kind, OfedKindFact::Mlnx);
    assert_eq!(f.ofed.version.as_deref(), Some("24.10-3.2.5.0"));
    assert_eq!(f.perftest.version.as_deref(), Some("6.26"));
    assert_eq!(f.perftest.cuda_dmabuf, Some(true));
    assert_eq!(f.nccl.version.as_deref(), Some("2.23.4"));
    assert!(!f.erdma.present());
    assert_eq!(f.rdma_devices.len(), 1);
    let r = &f.rdma_devices[0];
    assert_eq!(r.driver.as_deref(), Some("mlx5_core"));
    assert_eq!(r.pci.as_deref(), Some("0000:04:00.0"));
    assert_eq!(r.numa_node, Some(0));
    let p = &r.ports[0];
    assert!(p.is_active());
    assert_eq!(p.link_layer.as_deref(), Some("InfiniBand"));
    assert_eq!(p.rate_gbps, Some(400.0));
    assert_eq!((p.netdev.as_deref(), p.mtu), (Some("ib0"), Some(4092)));
    assert_eq!(f.iommu.state, IommuState::Passthrough);
    assert!(f.modules.is_loaded("mlx5_ib"));
    assert_eq!(f.modules.source, "/proc/modules");
    assert_eq!(f.limits.memlock_soft.as_deref(), Some("unlimited"));
    assert_eq!(f.pcie.len(), 1);
    assert_eq!(f.pcie[0].distance, Distance::PIX);
    assert_eq!(f.pcie[0].common_bridge.as_deref(), Some("0000:01:00.0"));
    assert!(f.pcie[0].acs_blocking().is_empty());
    assert!(f.pcie[0].bridges.iter().all(|b| b.control.is_none()));

    let (code, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert_eq!(code, 0, "{rep:#}");
    assert!(ids(&rep, "error").is_empty(), "{rep:#}");
    assert!(
        rep["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "ok"),
        "{rep:#}"
    );
    let out = gdrprov()
        .args(["inventory", "--root"])
        .arg(g.finish())
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(text.contains("575.51.03 open kernel modules"), "{text}");
    assert!(
        text.contains("GPU 0000:03:00.0 <-> mlx5_0 (0000:04:00.0): PIX under 0000:01:00.0"),
        "{text}"
    );
}

#[test]
fn proprietary_535_is_refused_for_dmabuf_and_fits_peermem() {
    let g = h100_node(false, "535.216.03");
    g.modules(&["nvidia", "mlx5_core", "mlx5_ib", "nvidia_peermem"]);
    g.file("/sys/module/nvidia_peermem/version", "535.216.03\n");
    let root = g.finish().to_path_buf();
    let f = facts(&root);
    assert_eq!(f.nvidia_driver.flavor, Flavor::Proprietary);
    assert_eq!(f.nvidia_driver.version.as_deref(), Some("535.216.03"));
    let (code, rep) = doctor(&root, &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    let errors = ids(&rep, "error");
    assert!(
        errors.contains(&"requirement-nvidia-driver-flavor".to_string()),
        "{errors:?}"
    );
    assert!(
        errors.contains(&"cuda-dmabuf-unsupported".to_string()),
        "{errors:?}"
    );
    assert!(finding(&rep, "requirement-nvidia-driver-flavor")["fix"]
        .as_str()
        .unwrap()
        .contains("nvidia-driver-535-open"));
    assert!(finding(&rep, "cuda-dmabuf-unsupported")["evidence"]
        .as_str()
        .unwrap()
        .contains("DMA_BUF_SUPPORTED = 0"));
    let (code, rep) = doctor(&root, &["legacy-peermem"]);
    assert_eq!(code, 0, "{rep:#}");
    // Without a profile: legacy-peermem fits, rdma-dmabuf does not.
    let (_, rep) = doctor(&root, &[]);
    assert_eq!(rep["best_fit"], "legacy-peermem", "{rep:#}");
    // plan refuses, naming the failure; --force goes ahead with a warning.
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("nvidia-driver flavor is proprietary, the profile requires open"),
        "{err}"
    );
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--force", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("requirement (forced)"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn kernel_5_4_with_old_proprietary_driver_lists_every_failure_at_once() {
    let mut g = HostGen::new();
    g.ubuntu("20.04")
        .kernel("5.4.0-216-generic")
        .driver("470.256.02", false);
    g.h100("pci0000:00/0000:00:02.0/0000:05:00.0", 0);
    g.cuda("11.4", json!([{"ordinal": 0, "pci_bus_id": "0000:05:00.0", "compute_capability": "9.0", "dmabuf_supported": false}]));
    let root = g.finish().to_path_buf();
    let out = gdrprov()
        .args(["apply", "rdma-dmabuf", "--yes", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    for want in [
        "kernel is 5.4.0-216-generic, the profile requires >= 5.12",
        "nvidia-driver is 470.256.02, the profile requires >= 515",
        "nvidia-driver flavor is proprietary",
        "cuda is 11.4, the profile requires >= 11.7",
    ] {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    assert!(!root.join("etc/nccl.conf").exists());
    let (_, rep) = doctor(&root, &["rdma-dmabuf"]);
    assert!(finding(&rep, "requirement-kernel")["cause"]
        .as_str()
        .unwrap()
        .contains("5.12"));
}

#[test]
fn both_peermem_modules_loaded() {
    let g = h100_node(true, "575.51.03");
    g.modules(&[
        "nvidia",
        "mlx5_core",
        "mlx5_ib",
        "nvidia_peermem",
        "nv_peer_mem",
    ]);
    let (code, rep) = doctor(g.finish(), &["legacy-peermem"]);
    assert_eq!(code, 3);
    assert!(ids(&rep, "error").contains(&"peermem-both-loaded".to_string()));
    let (_, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert!(ids(&rep, "warn").contains(&"peermem-loaded-dmabuf".to_string()));
}

#[test]
fn peermem_invalid_argument_from_the_kernel_log_and_old_nccl() {
    let mut g = h100_node(false, "535.216.03");
    std::fs::remove_file(g.root.join("usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4")).unwrap();
    g.file("/usr/lib/x86_64-linux-gnu/libnccl.so.2.19.3", "");
    g.command(
        &["dmesg", "--level=err,warn"],
        "[   12.1] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -2)\n[   13.0] unrelated line\n",
    );
    let (code, rep) = doctor(g.finish(), &["legacy-peermem"]);
    assert_eq!(code, 3);
    let f = finding(&rep, "peermem-invalid-argument");
    assert!(f["evidence"].as_str().unwrap().contains("Unknown symbol"));
    assert!(f["cause"].as_str().unwrap().contains("built before"));
    assert_eq!(finding(&rep, "requirement-nccl")["severity"], "warn");
    // erdma-cloud wants nvidia_peermem too but has no nccl requirement: the diagnostic says it.
    let (_, rep) = doctor(g.finish(), &["erdma-cloud"]);
    assert!(
        ids(&rep, "warn").contains(&"nccl-old-peermem".to_string()),
        "{rep:#}"
    );
}

#[test]
fn peermem_symbol_mismatch_in_an_image_roots_kern_log_is_named() {
    // One kernel-log reader: an image root's var/log/kern.log serves the
    // doctor's module rules as well as the health checks.
    let g = h100_node(false, "535.216.03");
    g.file(
        "/var/log/kern.log",
        "Nov 22 01:00:00 n kernel: [   65.412027] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\nNov 22 01:00:00 n kernel: [   65.412031] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n",
    );
    let (code, rep) = doctor(g.finish(), &["legacy-peermem"]);
    assert_eq!(code, 3, "{rep:#}");
    let f = finding(&rep, "peermem-symbol-mismatch");
    assert_eq!(f["severity"], "error");
    assert!(f["evidence"]
        .as_str()
        .unwrap()
        .contains("disagrees about version of symbol ib_register_peer_memory_client"));
    let out = gdrprov()
        .args(["doctor", "legacy-peermem", "--root"])
        .arg(g.finish())
        .output()
        .unwrap();
    assert!(stdout_of(&out).contains("Blocked by: peermem-symbol-mismatch"));
}

#[test]
fn erdma_node_with_mtu_1500() {
    let mut g = HostGen::new();
    g.file("/etc/os-release", "ID=alinux\nID_LIKE=\"rhel fedora centos anolis\"\nVERSION_ID=3\nPRETTY_NAME=\"Alibaba Cloud Linux 3\"\n");
    g.kernel("5.10.134-16.3.al8.x86_64")
        .driver("550.127.05", true);
    g.modules(&["nvidia", "erdma", "nvidia_peermem", "ib_core"]);
    g.h100("pci0000:00/0000:00:07.0", 0);
    g.rdma(
        "erdma_0",
        Some("pci0000:00/0000:00:08.0"),
        0,
        "erdma",
        &[("ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)", "eth0", 1500)],
    );
    g.rdma(
        "erdma_1",
        Some("pci0000:00/0000:00:09.0"),
        0,
        "erdma",
        &[("ACTIVE", "Ethernet", "100 Gb/sec (4X EDR)", "eth1", 8500)],
    );
    g.command(&["eadm", "ver"], "eadm version: 2.1.3\n");
    let root = g.finish().to_path_buf();
    let f = facts(&root);
    assert_eq!(f.erdma.version.as_deref(), Some("2.1.3"));
    assert!(f.erdma.module_loaded);
    assert!(f.rdma_devices.iter().all(|d| d.is_erdma()));
    assert_eq!(f.pcie[0].distance, Distance::PHB);
    let (code, rep) = doctor(&root, &["erdma-cloud"]);
    assert_eq!(code, 3);
    let errs: Vec<_> = rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["id"] == "erdma-mtu")
        .collect();
    assert_eq!(errs.len(), 1, "{rep:#}");
    assert!(errs[0]["evidence"]
        .as_str()
        .unwrap()
        .contains("eth0 MTU 1500"));
}

#[test]
fn acs_on_a_bridge_between_gpu_and_nic() {
    let g = h100_node(true, "575.51.03");
    g.acs("0000:02:08.0", ACS_SV | ACS_RR | ACS_CR | ACS_UF);
    g.acs("0000:02:10.0", ACS_SV);
    let f = facts(g.finish());
    let path = &f.pcie[0];
    let blocking: Vec<_> = path
        .acs_blocking()
        .iter()
        .map(|b| b.bridge.clone())
        .collect();
    assert_eq!(blocking, ["0000:02:08.0"]);
    assert!(path
        .bridges
        .iter()
        .any(|b| b.bridge == "0000:02:10.0" && b.control == Some(ACS_SV)));
    let (code, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    let acs = finding(&rep, "acs-enabled");
    assert!(
        acs["evidence"]
            .as_str()
            .unwrap()
            .contains("ReqRedir+ CmpltRedir+"),
        "{acs}"
    );
    assert!(acs["fix"]
        .as_str()
        .unwrap()
        .contains("setpci -s 0000:02:08.0"));
}

#[test]
fn gpu_and_nic_on_different_numa_nodes() {
    let g = HostGen::new();
    g.ubuntu("24.04")
        .kernel("6.8.0-45-generic")
        .driver("580.65.06", true);
    g.modules(&["nvidia", "mlx5_core", "mlx5_ib"]);
    g.h100("pci0000:00/0000:00:01.0/0000:01:00.0", 0);
    g.rdma(
        "mlx5_0",
        Some("pci0000:80/0000:80:01.0/0000:81:00.0"),
        1,
        "mlx5_core",
        &[(
            "ACTIVE",
            "Ethernet",
            "200 Gb/sec (4X HDR)",
            "ens1f0np0",
            9000,
        )],
    );
    let f = facts(g.finish());
    assert_eq!(f.pcie[0].distance, Distance::SYS);
    assert_eq!((f.pcie[0].gpu_numa, f.pcie[0].nic_numa), (Some(0), Some(1)));
    let (_, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    // One finding for the distance (issue 45): verify's check, by its name.
    assert!(finding(&rep, "gpu-nic-affinity")["evidence"]
        .as_str()
        .unwrap()
        .contains("SYS, NUMA 0/1"));
    assert!(finding(&rep, "gpu-nic-affinity")["title"]
        .as_str()
        .unwrap()
        .contains("another CPU socket"));
    assert!(rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .all(|f| f["id"] != "gpu-nic-far"));
}

#[test]
fn ports_down_mlx5_without_rdma_device_and_old_perftest() {
    let mut g = h100_node(true, "575.51.03");
    g.rdma(
        "mlx5_1",
        Some("pci0000:00/0000:00:03.0/0000:06:00.0"),
        0,
        "mlx5_core",
        &[("DOWN", "InfiniBand", "10 Gb/sec (4X SDR)", "ib1", 4092)],
    );
    g.command(&["ib_write_bw", "--version"], " Version: 5.93\n");
    g.command(
        &["ib_write_bw", "--help"],
        "Usage:\n  --use_cuda=<cuda device id>\n",
    );
    let (_, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    // One port is up: the other is a warning.
    assert_eq!(finding(&rep, "rdma-port-not-active")["severity"], "warn");
    assert_eq!(finding(&rep, "requirement-perftest")["severity"], "warn");

    let mut g = HostGen::new();
    g.ubuntu("22.04")
        .kernel("5.15.0-119-generic")
        .driver("575.51.03", true);
    g.modules(&["nvidia", "mlx5_core"]);
    g.h100("pci0000:00/0000:00:04.0", 0);
    g.command(&["ib_write_bw", "--help"], "Usage:\n");
    let (code, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    assert_eq!(ids(&rep, "error"), ["mlx5-no-rdma-device"], "{rep:#}");
    assert!(ids(&rep, "warn").contains(&"perftest-no-dmabuf".to_string()));

    let g = h100_node(true, "575.51.03");
    std::fs::remove_dir_all(g.root.join("sys/class/infiniband")).unwrap();
    g.dir("/sys/class/infiniband");
    g.rdma(
        "mlx5_0",
        Some("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0"),
        0,
        "mlx5_core",
        &[("INIT", "InfiniBand", "400 Gb/sec (4X NDR)", "ib0", 4092)],
    );
    let (_, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert_eq!(finding(&rep, "rdma-port-not-active")["severity"], "error");
}

#[test]
fn iommu_mode_against_the_profile() {
    let g = h100_node(true, "575.51.03");
    let (code, rep) = doctor(g.finish(), &["gds-iommu-off"]);
    assert_eq!(code, 3);
    assert_eq!(finding(&rep, "iommu-mode")["severity"], "error");
    g.file("/sys/kernel/iommu_groups/12/type", "DMA-FQ\n");
    let (_, rep) = doctor(g.finish(), &["rdma-dmabuf"]);
    assert_eq!(finding(&rep, "iommu-mode")["severity"], "warn");
}

#[test]
fn nccl_log_lines_map_to_findings() {
    let g = h100_node(true, "575.51.03");
    let log = g.dir.path().join("nccl.log");
    std::fs::write(
        &log,
        "node1:1:1 [0] NCCL INFO NET/IB : No device found.\n\
         node1:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module or not supported by GPU)\n\
         node1:1:1 [0] NCCL INFO DMA-BUF is available on GPU device 0\n\
         modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument\n",
    )
    .unwrap();
    let (code, rep) = doctor(
        g.finish(),
        &["rdma-dmabuf", "--nccl-log", log.to_str().unwrap()],
    );
    assert_eq!(code, 3);
    let f = finding(&rep, "nccl-gdr-disabled");
    assert!(f["evidence"].as_str().unwrap().contains("nccl.log:2:"));
    assert!(
        f["fix"].as_str().unwrap().contains("NCCL_DMABUF_ENABLE=1"),
        "{f}"
    );
    assert_eq!(finding(&rep, "nccl-no-ib-device")["severity"], "error");
    assert_eq!(finding(&rep, "nccl-dmabuf-available")["severity"], "info");
    assert!(finding(&rep, "peermem-invalid-argument")["evidence"]
        .as_str()
        .unwrap()
        .contains("nccl.log:4:"));
    let out = run(&["doctor", "--nccl-log", "/nonexistent/nccl.log"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("/nonexistent/nccl.log"));
}

#[test]
fn an_empty_root_is_all_absent_and_nothing_fails() {
    let t = tempfile::tempdir().unwrap();
    let f = facts(t.path());
    assert!(f.gpus.is_empty() && f.rdma_devices.is_empty() && f.pcie.is_empty());
    assert!(!f.nvidia_driver.present());
    assert_eq!(f.ofed.kind, OfedKindFact::Absent);
    assert!(f.cuda.driver_api.is_none() && f.cuda.runtime.is_none());
    assert_eq!(f.modules.source, "absent");
    assert_eq!(f.iommu.state, IommuState::Unknown);
    let out = gdrprov()
        .args(["--format", "json", "inventory", "--root"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    // An image proves nothing absent: requirements are unknown, not failed.
    let (code, rep) = doctor(t.path(), &["rdma-dmabuf"]);
    assert_eq!(code, 0, "{rep:#}");
    assert!(
        rep["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "unknown"),
        "{rep:#}"
    );
}

#[test]
fn snapshot_of_a_fixture_gives_the_same_facts() {
    let g = h100_node(true, "575.51.03");
    g.acs("0000:02:08.0", ACS_RR);
    let before = serde_json::to_value(facts(g.finish())).unwrap();
    let snap = g.dir.path().join("snap");
    let out = gdrprov()
        .args(["inventory", "--snapshot"])
        .arg(&snap)
        .arg("--root")
        .arg(g.finish())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("gives the same facts"),
        "{}",
        stdout_of(&out)
    );
    let after = serde_json::to_value(facts(&snap)).unwrap();
    assert_eq!(before, after);
    // sysfs links were recreated, not flattened.
    assert!(
        std::fs::symlink_metadata(snap.join("sys/class/infiniband/mlx5_0"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // A second snapshot into the same directory is refused.
    let out = gdrprov()
        .args(["inventory", "--snapshot"])
        .arg(&snap)
        .arg("--root")
        .arg(g.finish())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("not empty"));
}

#[test]
fn device_snapshot_h200_open_580_no_rdma_nic() {
    let root = repo().join("tests/fixtures/snapshots/device-h200");
    let f = facts(&root);
    assert!(f.snapshot);
    assert_eq!(f.nvidia_driver.flavor, Flavor::Open);
    assert!(f
        .nvidia_driver
        .version
        .as_deref()
        .unwrap()
        .starts_with("580."));
    assert_eq!(f.gpus.len(), 1);
    assert_eq!(f.gpus[0].arch, Arch::Hopper);
    assert_eq!(f.gpus[0].name.as_deref(), Some("NVIDIA H200"));
    assert_eq!(f.cuda.driver_api.as_deref(), Some("13.0"));
    assert_eq!(
        f.cuda_device(&f.gpus[0]).unwrap().dmabuf_supported,
        Some(true)
    );
    assert!(f.rdma_devices.is_empty());
    // The same facts the device machine printed.
    let run: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo().join("tests/fixtures/snapshots/device-h200-run/inventory.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut now = serde_json::to_value(&f).unwrap();
    let mut then = run["facts"].clone();
    for k in ["live", "snapshot", "observed"] {
        now.as_object_mut().unwrap().remove(k);
        then.as_object_mut().unwrap().remove(k);
    }
    // Facts added after that run (issue 19): absent from its inventory.json.
    for k in ["links", "roce_gids", "kernel_events"] {
        assert!(then.get(k).is_none());
        now.as_object_mut().unwrap().remove(k);
    }
    // The platform fact (issue 20), from the recorded /proc/cpuinfo: a Firecracker guest.
    assert!(then.get("platform").is_none());
    let platform = now.as_object_mut().unwrap().remove("platform").unwrap();
    assert!(
        platform.get("arch").is_none(),
        "one home for the architecture: facts.arch"
    );
    assert_eq!(platform["virtualization"], "vm");
    // Boot facts added after the recording (which boot runs: trial marker,
    // next_entry, running entry) are absent from it; on this host they are
    // empty, which is checked here, and the rest must match.
    let boot = now["boot"].as_object_mut().unwrap();
    for (k, empty) in [
        ("next_entry", Value::Null),
        ("running_entry", Value::Null),
        ("trial_running", Value::Bool(false)),
    ] {
        assert_eq!(boot.remove(k), Some(empty), "{k}");
    }
    // Also newer: the architecture, and where the command line is set
    // (outside: Firecracker boots the kernel directly).
    assert_eq!(
        boot.remove("cmdline_home").unwrap()["starter"],
        "hypervisor"
    );
    // And what booted it (issue 29): a kernel not installed on the root, no
    // boot loader's mark on the command line.
    assert_eq!(
        boot.remove("booted").unwrap(),
        serde_json::json!({"kernel": "6.18.44-fc-v657-gpu", "kernel_installed": false, "boot_kernels": []})
    );
    assert_eq!(
        now.as_object_mut().unwrap().remove("arch").unwrap()["arch"],
        "x86_64"
    );
    // And the EFA fact: no EFA device on this host.
    assert_eq!(
        now.as_object_mut().unwrap().remove("efa").unwrap(),
        serde_json::json!({"devices": [], "module_version": null})
    );
    // And the RoCE fabric (issue 48): no RoCE port, NCCL_IB_GID_INDEX not set.
    assert_eq!(
        now.as_object_mut().unwrap().remove("roce").unwrap(),
        serde_json::json!({"ports": [], "nccl_gid_index": null})
    );
    // And module signing and gdrcopy (issue 48): no EFI on this VM, and the
    // snapshot recorded no modinfo of the out-of-tree modules.
    assert_eq!(
        now.as_object_mut().unwrap().remove("signing").unwrap(),
        serde_json::json!({"secure_boot": "no-efi", "lockdown": null, "sig_enforce": null, "modules": [], "modinfo": false})
    );
    assert_eq!(
        now.as_object_mut().unwrap().remove("gdrcopy").unwrap(),
        serde_json::json!({"loaded": false, "version": null, "installed": null, "device": false})
    );
    // And the GPUDirect Storage facts (issue 47): this snapshot predates them (no libcufile
    // listing was recorded); tests/fixtures/snapshots/device-h200-gds has them.
    let gds = now.as_object_mut().unwrap().remove("gds").unwrap();
    assert!(gds["libcufile"].is_null(), "{gds:#}");
    // And the GPU topology (issue 35): this one-GPU snapshot predates its recording.
    assert_eq!(
        now.as_object_mut().unwrap().remove("gpu_topology").unwrap(),
        serde_json::json!({"live": null, "fabric_manager": null, "nvswitches": [], "pci_listed": true, "shared": []})
    );
    // And the PCIe settings and driver parameters (issue 46): this snapshot predates
    // them (it kept no config space, resource table or params); device-h200-pcie has them.
    let pcie = now.as_object_mut().unwrap().remove("pcie_devices").unwrap();
    assert_eq!(pcie["gpus"][0]["bar1"], Value::Null);
    assert_eq!(pcie["devices"][0]["config"], Value::Null);
    let params = now
        .as_object_mut()
        .unwrap()
        .remove("nvidia_params")
        .unwrap();
    assert_eq!(params["source"], Value::Null);
    // And the kernel's P2PDMA view of each GPU (issue 47, `p2pmem/`): none on this H200.
    for g in now["gpus"].as_array_mut().unwrap() {
        let p2pmem = g.as_object_mut().unwrap().remove("p2pmem");
        assert_eq!(p2pmem, Some(Value::Null));
    }
    assert_eq!(now, then);
    let (code, rep) = doctor(&root, &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    assert_eq!(ids(&rep, "error"), ["no-rdma-device"], "{rep:#}");
    assert!(ids(&rep, "info").contains(&"cuda-dmabuf-supported".to_string()));
    let out = gdrprov()
        .args(["doctor", "rdma-dmabuf", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains("Blocked by: no-rdma-device"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn example_roots_still_plan_the_demo() {
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--root"])
        .arg(repo().join("examples/hosts/ubuntu-22.04-h100"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
}

/// Every example host and recorded snapshot, by name.
fn all_roots() -> Vec<std::path::PathBuf> {
    let mut roots = Vec::new();
    for dir in ["examples/hosts", "tests/fixtures/snapshots"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                roots.push(p);
            }
        }
    }
    roots.sort();
    roots
}

#[test]
fn doctor_and_plan_give_one_verdict_on_every_root() {
    // The H100 shape has no efa or erdma module: plan refuses both, and
    // doctor (with or without the profile) says they are blocked, and why.
    let ubuntu = repo().join("examples/hosts/ubuntu-22.04-h100");
    let (code, rep) = doctor(&ubuntu, &["efa"]);
    assert_eq!(code, 3, "{rep:#}");
    let f = finding(&rep, "requirement-module-efa");
    assert_eq!(f["severity"], "error");
    assert!(f["evidence"]
        .as_str()
        .unwrap()
        .contains("kernel module `efa` does not exist for kernel 5.15.0-119-generic"));
    let profiles = [
        "rdma-dmabuf",
        "legacy-peermem",
        "gds-iommu-off",
        "erdma-cloud",
        "efa",
    ];
    for root in all_roots() {
        let (code, general) = doctor(&root, &[]);
        let fits = general["fits"].as_array().unwrap();
        // Without a profile the verdict is that of the fits shown.
        assert_eq!(
            code == 3,
            general["best_fit"].is_null(),
            "{root:?}: {general:#}"
        );
        for p in profiles {
            let fit = fits.iter().find(|f| f["profile"] == p).unwrap();
            let plan = gdrprov()
                .args(["plan", p, "--root"])
                .arg(&root)
                .output()
                .unwrap();
            let refused = stderr_of(&plan).contains("does not meet the profile's requirements");
            let (code, one) = doctor(&root, &[p]);
            // A requirement that stops plan is an error finding of doctor.
            let failed_hard = one["requirements"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["status"] == "failed" && r["severity"] == "error");
            assert_eq!(refused, failed_hard, "{root:?} {p}: {}", stderr_of(&plan));
            if refused {
                assert_eq!(fit["fits"], false, "{root:?} {p}: {general:#}");
                assert_eq!(code, 3, "{root:?} {p}: {one:#}");
            }
            // The same evaluation with and without the profile.
            assert_eq!(fit["fits"], code == 0, "{root:?} {p}: {one:#}");
            assert_eq!(
                fit["blocked_by"],
                serde_json::json!(ids(&one, "error")),
                "{root:?} {p}"
            );
        }
        let text = stdout_of(
            &gdrprov()
                .args(["doctor", "--root"])
                .arg(&root)
                .output()
                .unwrap(),
        );
        if text.contains("blocked by") {
            assert!(
                !text.contains("nothing stands in the way"),
                "{root:?}:\n{text}"
            );
        }
        if text.contains(" fits (") {
            assert!(!text.contains("\nBlocked by:"), "{root:?}:\n{text}");
        }
    }
}

#[test]
fn a_failed_health_check_blocks_every_profile_alike() {
    // A fatal Xid in the kernel log: doctor's general finding and every
    // profile's fit agree (no "fits" beside "Blocked by: kernel-log").
    let g = h100_node(true, "575.51.03");
    g.file(
        "/var/log/kern.log",
        "Nov 22 01:00:00 n kernel: [ 1234.5] NVRM: Xid (PCI:0000:03:00): 79, pid=2437, name=python3, GPU has fallen off the bus.\n",
    );
    let (code, rep) = doctor(g.finish(), &[]);
    assert_eq!(code, 3, "{rep:#}");
    assert!(ids(&rep, "error").contains(&"kernel-log".to_string()));
    for f in rep["fits"].as_array().unwrap() {
        assert_eq!(f["fits"], false, "{f:#}");
        assert!(f["blocked_by"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i == "kernel-log"));
    }
    assert!(rep["best_fit"].is_null());
}

#[test]
fn example_roots_show_healthy_hosts() {
    let ubuntu = repo().join("examples/hosts/ubuntu-22.04-h100");
    let (code, rep) = doctor(&ubuntu, &["rdma-dmabuf"]);
    assert_eq!(code, 0, "{rep:#}");
    assert!(
        ids(&rep, "error").is_empty() && ids(&rep, "warn").is_empty(),
        "{rep:#}"
    );
    let (_, rep) = doctor(&ubuntu, &[]);
    assert_eq!(rep["best_fit"], "rdma-dmabuf");
    let f = facts(&ubuntu);
    assert_eq!(f.gpus[0].arch, Arch::Hopper);
    assert_eq!(f.pcie[0].distance, Distance::PIX);
    assert!(f.pcie[0].bridges.iter().all(|b| b.control == Some(0)));
    assert_eq!(f.ofed.version.as_deref(), Some("24.10-3.2.5.0"));
    assert_eq!(
        f.cuda.driver_api_source.as_deref(),
        Some("inferred from the driver branch")
    );

    let alinux = repo().join("examples/hosts/alinux3-erdma");
    let (code, rep) = doctor(&alinux, &["erdma-cloud"]);
    assert_eq!(code, 0, "{rep:#}");
    let (code, rep) = doctor(&alinux, &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    assert_eq!(ids(&rep, "error"), ["requirement-kernel"]);
    let (_, rep) = doctor(&ubuntu, &["erdma-cloud"]);
    assert!(
        ids(&rep, "error").contains(&"requirement-erdma".to_string()),
        "{rep:#}"
    );
}

#[test]
fn vm_snapshot_debian_soft_roce() {
    let root = repo().join("tests/fixtures/snapshots/vm-softroce");
    let f = facts(&root);
    assert!(f.snapshot && f.observed);
    assert_eq!(f.os.id.as_deref(), Some("debian"));
    assert_eq!(f.kernel.running.as_deref(), Some("6.1.0-56-amd64"));
    assert_eq!(f.boot.kind, gdrprov::facts::boot::BootLoaderKind::GrubBios);
    assert!(f.gpus.is_empty() && !f.nvidia_driver.present());
    assert_eq!(f.ofed.kind, OfedKindFact::Inbox);
    assert_eq!(f.perftest.version.as_deref(), Some("6.06"));
    assert_eq!(f.perftest.cuda_dmabuf, Some(false));
    assert_eq!(f.rdma_devices.len(), 1);
    let rxe = &f.rdma_devices[0];
    assert_eq!(
        (rxe.name.as_str(), rxe.driver.as_deref()),
        ("rxe0", Some("rdma_rxe"))
    );
    assert!(rxe.is_soft());
    assert!(rxe.ports[0].is_active());
    assert_eq!(rxe.ports[0].link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(
        (rxe.ports[0].netdev.as_deref(), rxe.ports[0].mtu),
        (Some("enp0s1"), Some(1500))
    );
    assert!(f.modules.is_loaded("rdma_rxe"));
    assert!(f.modules.is_blocked("kvm"));
    // /lib -> /usr/lib: the same modprobe.d file is read once.
    assert_eq!(
        f.modules
            .blocked
            .iter()
            .filter(|b| b.module == "arkfb")
            .count(),
        1
    );
    let (code, rep) = doctor(&root, &["rdma-dmabuf"]);
    assert_eq!(code, 3);
    assert_eq!(ids(&rep, "error"), ["no-gpu"], "{rep:#}");
    assert!(ids(&rep, "warn").contains(&"requirement-perftest".to_string()));
    let (_, rep) = doctor(&root, &["legacy-peermem"]);
    assert!(
        ids(&rep, "error").contains(&"requirement-ofed-kind".to_string()),
        "{rep:#}"
    );
    // The guest's own answer, from the run that took the snapshot.
    let guest = std::fs::read_to_string(
        repo().join("tests/fixtures/snapshots/vm-softroce-run/inventory.txt"),
    )
    .unwrap();
    assert!(guest.contains("rxe0 (rdma_rxe, soft device"), "{guest}");
}

/// Facts gathered on `root` by a recording host, with what it recorded.
fn recorded_facts(root: &Path) -> (Facts, gdrprov::host::Recording) {
    let host = Host::open(root, false).unwrap().recording();
    let f = Facts::gather(&host, None);
    (f, host.recorded().unwrap())
}

#[test]
fn probes_start_no_process_for_tools_the_root_lacks() {
    // The example roots hold no programs: every probe command (nvcc,
    // ofed_info, ib_write_bw, dpkg-query, rpm, eadm, modinfo) is absent, and
    // learning that starts no process.
    for name in ["ubuntu-22.04-h100", "rocky-9-a100", "alinux3-erdma"] {
        let (_, rec) = recorded_facts(&repo().join("examples/hosts").join(name));
        assert!(rec.spawned.is_empty(), "{name}: {:?}", rec.spawned);
        assert!(
            rec.commands
                .iter()
                .any(|c| c.argv[0] == "ib_write_bw" && !c.ran),
            "{name}: the absent tool is still recorded as absent"
        );
    }
    // Snapshots answer from their recording: nothing runs, same answers.
    for name in ["device-h200", "vm-softroce"] {
        let root = repo().join("tests/fixtures/snapshots").join(name);
        let (f, rec) = recorded_facts(&root);
        assert!(rec.spawned.is_empty(), "{name}: {:?}", rec.spawned);
        assert_eq!(f.ofed.kind, OfedKindFact::Inbox, "{name}");
    }
}

#[test]
fn package_versions_are_read_from_dpkgs_status_file() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let write = |p: &str, s: &str| {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    write("etc/os-release", "ID=debian\nVERSION_ID=12\n");
    write(
        "var/lib/dpkg/status",
        "Package: rdma-core\nStatus: install ok installed\nVersion: 44.0-2\n\n\
         Package: perftest\nStatus: deinstall ok config-files\nVersion: 4.5-0.20\n\n\
         Package: libnccl2\nStatus: install ok installed\nArchitecture: amd64\nVersion: 2.23.4-1+cuda12.6\n",
    );
    let (f, rec) = recorded_facts(&root);
    assert!(rec.spawned.is_empty(), "{:?}", rec.spawned);
    assert_eq!(f.ofed.kind, OfedKindFact::Inbox);
    assert_eq!(f.ofed.version.as_deref(), Some("44.0-2"));
    assert_eq!(f.ofed.evidence.as_deref(), Some("package rdma-core"));
    // Removed, its configuration kept: not installed.
    assert!(!f.perftest.installed);
    assert_eq!(f.nccl.version.as_deref(), Some("2.23.4"));

    // A snapshot keeps the answers, not the database, and replays them.
    let snap = t.path().join("snap");
    let out = gdrprov()
        .args(["inventory", "--snapshot"])
        .arg(&snap)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(!snap.join("var/lib/dpkg/status").exists());
    let again = facts(&snap);
    assert_eq!(
        serde_json::to_value(&again).unwrap()["ofed"],
        serde_json::to_value(&f).unwrap()["ofed"]
    );
    assert_eq!(again.nccl.version.as_deref(), Some("2.23.4"));
    assert!(!again.perftest.installed);
}

#[test]
fn plan_on_an_example_root_starts_no_process() {
    if !have("strace") {
        return;
    }
    // Every process gdrprov itself starts, counted by the kernel's view (execve).
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("strace.log");
    for (name, profile) in [
        ("ubuntu-22.04-h100", "rdma-dmabuf"),
        ("rocky-9-a100", "rdma-dmabuf"),
        ("alinux3-erdma", "erdma-cloud"),
    ] {
        let st = std::process::Command::new("strace")
            .args(["-f", "-qq", "-e", "trace=execve", "-o"])
            .arg(&log)
            .arg(env!("CARGO_BIN_EXE_gdrprov"))
            .args(["plan", profile, "--root"])
            .arg(repo().join("examples/hosts").join(name))
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "{name}");
        let text = std::fs::read_to_string(&log).unwrap();
        let execs: Vec<&str> = text.lines().filter(|l| l.contains("execve(")).collect();
        assert_eq!(execs.len(), 1, "{name}: gdrprov alone, but: {execs:#?}");
    }
}
