//! The built-in `efa` profile on a root shaped like an AWS p5 host after the
//! EFA installer (libfabric and fi_info in /opt/amazon/efa, aws-ofi-nccl in
//! /opt/amazon/ofi-nccl, the efa module in the kernel's index, one EFA
//! device `rdmap79s0` in sysfs).

use crate::common::*;
use crate::util::*;
use std::os::unix::fs::symlink;
use std::path::Path;

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn p5_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let dep = root.join("lib/modules/5.15.0-119-generic/modules.dep");
    let mut text = std::fs::read_to_string(&dep).unwrap();
    text.push_str("kernel/drivers/infiniband/hw/efa/efa.ko: kernel/drivers/infiniband/core/ib_uverbs.ko kernel/drivers/infiniband/core/ib_core.ko\n");
    std::fs::write(&dep, text).unwrap();
    write(&root, "/opt/amazon/efa/bin/fi_info", "#!/bin/sh\n");
    write(&root, "/opt/amazon/ofi-nccl/lib/libnccl-net.so", "");
    write(
        &root,
        "/etc/ld.so.conf.d/000_efa.conf",
        "/opt/amazon/efa/lib\n",
    );
    // The EFA device instead of the example's ConnectX.
    std::fs::remove_file(root.join("sys/class/infiniband/mlx5_0")).unwrap();
    let pci = "/sys/devices/pci0000:4e/0000:4e:00.0/0000:4f:00.0";
    let dev = format!("{pci}/infiniband/rdmap79s0");
    write(&root, &format!("{dev}/ports/1/state"), "4: ACTIVE\n");
    write(&root, &format!("{dev}/ports/1/phys_state"), "5: LinkUp\n");
    write(&root, &format!("{dev}/ports/1/link_layer"), "Unspecified\n");
    write(
        &root,
        &format!("{dev}/ports/1/rate"),
        "100 Gb/sec (4X EDR)\n",
    );
    write(&root, &format!("{pci}/numa_node"), "0\n");
    std::fs::create_dir_all(root.join("sys/bus/pci/drivers/efa")).unwrap();
    symlink(
        "/sys/bus/pci/drivers/efa",
        root.join(format!("{}/driver", &pci[1..])),
    )
    .unwrap();
    symlink(pci, root.join(format!("{}/device", &dev[1..]))).unwrap();
    symlink(&dev, root.join("sys/class/infiniband/rdmap79s0")).unwrap();
    (t, root)
}

#[test]
fn efa_profile_plans_the_module_dmabuf_and_libfabric_settings() {
    let (_t, root) = p5_root();
    let r = root.to_str().unwrap();
    ok(&["apply", "efa", "-y", "--root", r]);
    let load = std::fs::read_to_string(root.join("etc/modules-load.d/gdrprov.conf")).unwrap();
    assert!(load.ends_with("\nefa\n"));
    let block =
        std::fs::read_to_string(root.join("etc/modprobe.d/gdrprov-blacklist.conf")).unwrap();
    assert!(block.contains("blacklist efa_nv_peermem\ninstall efa_nv_peermem /bin/false\n"));
    let nccl = std::fs::read_to_string(root.join("etc/nccl.conf")).unwrap();
    for line in [
        "FI_PROVIDER=efa\n",
        "FI_EFA_USE_DEVICE_RDMA=1\n",
        "NCCL_DMABUF_ENABLE=1\n",
    ] {
        assert!(nccl.contains(line), "{nccl}");
    }
}

#[test]
fn verify_on_efa_checks_the_devices_not_the_rc_loopback() {
    let (_t, root) = p5_root();
    let r = root.to_str().unwrap();
    let out = run(&["verify", "efa", "--format", "json", "--root", r]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout_of(&out), stderr_of(&out)));
    let check = |name: &str| check_named(&v, name);
    assert_eq!(check("efa-devices")["status"], "pass", "{v:#}");
    assert_eq!(check("efa-devices")["detail"], "rdmap79s0 port 1 ACTIVE");
    // Not the running system: fi_info cannot run here.
    assert_eq!(check("efa-fi-info")["status"], "skip");

    // The port goes down: verify fails and names it.
    std::fs::write(
        root.join(
            "sys/devices/pci0000:4e/0000:4e:00.0/0000:4f:00.0/infiniband/rdmap79s0/ports/1/state",
        ),
        "1: DOWN\n",
    )
    .unwrap();
    let out = run(&["verify", "efa", "--format", "json", "--root", r]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = check_named(&v, "efa-devices");
    assert_eq!(c["status"], "fail");
    assert!(c["detail"]
        .as_str()
        .unwrap()
        .contains("rdmap79s0 (port 1 DOWN)"));
    assert!(!out.status.success());
}

#[test]
fn efa_is_refused_on_a_host_with_no_efa_device_as_erdma_cloud_is_without_erdma() {
    // The module is in the kernel's index (distribution kernels ship efa.ko),
    // but the host has no EFA device: `modprobe efa` would load a driver for
    // nothing. Before, the plan wrote modules-load.d and the NCCL keys.
    let (_t, root) = p5_root();
    std::fs::remove_file(root.join("sys/class/infiniband/rdmap79s0")).unwrap();
    let r = root.to_str().unwrap();
    let before = snapshot(&root);
    for profile in ["efa", "erdma-cloud"] {
        let out = run(&["apply", profile, "-y", "--root", r]);
        assert_eq!(out.status.code(), Some(1), "{profile}: {}", stderr_of(&out));
        let err = stderr_of(&out);
        assert!(
            err.contains("does not meet the profile's requirements")
                && err.contains("is absent, the profile requires present")
                && err.contains("nothing was changed"),
            "{profile}: {err}"
        );
    }
    assert!(stderr_of(
        &gdrprov()
            .args(["plan", "efa", "--root", r])
            .output()
            .unwrap()
    )
    .contains("efa is absent, the profile requires present (an EFA device"));
    assert_same(&before, &snapshot(&root), "a refused apply");
    // --force goes ahead, as with every requirement.
    ok(&["plan", "efa", "--force", "--root", r]);
}
