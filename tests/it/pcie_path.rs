//! Issue 46: the PCIe path's settings on degraded roots, one per finding (BAR1 256 MiB,
//! MaxReadReq 512, a bridge at MaxPayload 128, relaxed ordering off, ATS off in a VM with
//! ACS), each in doctor with its fix and in verify's `pcie-path`; and the snapshot the
//! lent H200 machine took, whose BAR1 and device control replay as read there.

use crate::common::*;
use crate::hostgen::*;
use serde_json::Value;
use std::path::Path;

/// Device Control fields of a PCIe capability at 0x60 (version 2), encodings as in the spec.
struct Dev {
    mps_cap: u16,
    mps: u16,
    mrrs: u16,
    ro: bool,
    ats: Option<bool>,
    acs: Option<u16>,
}

const GOOD: Dev = Dev {
    mps_cap: 2,
    mps: 1,
    mrrs: 5,
    ro: true,
    ats: None,
    acs: None,
};

fn config(d: &Dev) -> Vec<u8> {
    let mut c = config_space(0x15b3, 0x101d, d.acs);
    c[6] = 0x10;
    c[0x34] = 0x60;
    c[0x60] = 0x10;
    c[0x62..0x64].copy_from_slice(&2u16.to_le_bytes());
    c[0x64..0x68].copy_from_slice(&u32::from(d.mps_cap).to_le_bytes());
    let ctl = (d.mps << 5) | (d.mrrs << 12) | if d.ro { 0x10 } else { 0 };
    c[0x68..0x6a].copy_from_slice(&ctl.to_le_bytes());
    if let Some(on) = d.ats {
        // Link ATS at 0x200 from the last capability (AER at 0x100, or ACS at 0x148).
        let last = if d.acs.is_some() { 0x148 } else { 0x100 };
        let h = u32::from_le_bytes([c[last], c[last + 1], c[last + 2], c[last + 3]]);
        c[last..last + 4].copy_from_slice(&((h & 0xfffff) | (0x200 << 20)).to_le_bytes());
        c[0x200..0x204].copy_from_slice(&(0x000fu32 | (1 << 16)).to_le_bytes());
        let ctl: u16 = if on { 0x8000 } else { 0 };
        c[0x206..0x208].copy_from_slice(&ctl.to_le_bytes());
    }
    c
}

/// Writes a device's config space (any device `pci` made).
fn set(g: &HostGen, addr: &str, d: &Dev) {
    let t = std::fs::read_link(g.root.join(format!("sys/bus/pci/devices/{addr}"))).unwrap();
    let dir = g.root.join(t.strip_prefix("/").unwrap());
    std::fs::write(dir.join("config"), config(d)).unwrap();
}

/// The H100 node with every device on its path set as a healthy host has it, and the
/// GPU's resource table with BAR1 of `bar1_mib`.
fn node(bar1_mib: u64) -> HostGen {
    let g = h100_node(true, "575.51.03");
    for a in [
        "0000:00:01.0",
        "0000:01:00.0",
        "0000:02:08.0",
        "0000:02:10.0",
    ] {
        set(&g, a, &GOOD);
    }
    set(&g, "0000:03:00.0", &GOOD);
    set(&g, "0000:04:00.0", &GOOD);
    let end = 0x2000_0000_0000u64 + (bar1_mib << 20) - 1;
    let res = format!(
        "0x00000000c0000000 0x00000000c0ffffff 0x0000000000040200\n\
         0x0000000000000000 0x0000000000000000 0x0000000000000000\n\
         0x0000200000000000 {end:#018x} 0x000000000014220c\n"
    );
    let t = std::fs::read_link(g.root.join("sys/bus/pci/devices/0000:03:00.0")).unwrap();
    std::fs::write(
        g.root.join(t.strip_prefix("/").unwrap()).join("resource"),
        res,
    )
    .unwrap();
    g
}

fn in_a_vm(g: &HostGen) {
    g.file(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu hypervisor\n",
    );
}

fn doctor(root: &Path) -> Value {
    let out = gdrprov()
        .args(["--format", "json", "doctor", "rdma-dmabuf", "--root"])
        .arg(root)
        .output()
        .unwrap();
    json_of(&out)
}

fn pcie_path(root: &Path, profile: &str) -> Value {
    let out = gdrprov()
        .args([
            "--format",
            "json",
            "verify",
            profile,
            "--no-loopback",
            "--root",
        ])
        .arg(root)
        .output()
        .unwrap();
    check_named(&json_of(&out), "pcie-path")
}

fn finding(rep: &Value, id: &str) -> Option<Value> {
    rep["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .cloned()
}

fn text(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or_default().to_string()
}

#[test]
fn a_healthy_path_passes_with_what_was_read() {
    let g = node(131_072);
    let root = g.finish();
    let c = pcie_path(root, "rdma-dmabuf");
    assert_eq!(c["status"], "pass", "{c:#}");
    assert!(text(&c, "evidence").contains("BAR1 131072 MiB"), "{c:#}");
    assert!(
        text(&c, "evidence").contains("nic mlx5_0 0000:04:00.0: MaxReadReq 4096"),
        "{c:#}"
    );
    let rep = doctor(root);
    for id in [
        "bar1-small",
        "max-read-request-low",
        "max-payload-path",
        "relaxed-ordering-off",
        "ats-off",
    ] {
        assert!(finding(&rep, id).is_none(), "{id}: {rep:#}");
    }
}

#[test]
fn bar1_of_256_mib_names_the_bios_or_the_hypervisor() {
    let g = node(256);
    let root = g.finish();
    let f = finding(&doctor(root), "bar1-small").unwrap();
    assert_eq!(f["severity"], "error");
    assert!(
        text(&f, "evidence").contains("gpu 0000:03:00.0: BAR1 (sysfs resource 2) 256 MiB"),
        "{f:#}"
    );
    assert!(text(&f, "fix").contains("Above 4G Decoding"), "{f:#}");
    let c = pcie_path(root, "rdma-dmabuf");
    assert_eq!(c["status"], "fail", "{c:#}");
    in_a_vm(&g);
    let f = finding(&doctor(root), "bar1-small").unwrap();
    assert!(text(&f, "fix").contains("pci=realloc"), "{f:#}");
}

#[test]
fn max_read_request_512_on_the_nic() {
    let g = node(131_072);
    set(&g, "0000:04:00.0", &Dev { mrrs: 2, ..GOOD });
    let root = g.finish();
    let f = finding(&doctor(root), "max-read-request-low").unwrap();
    assert!(
        text(&f, "title").contains("nic mlx5_0 0000:04:00.0: MaxReadReq 512 is below 4096"),
        "{f:#}"
    );
    // rdma-dmabuf sets pcie.max-read-request: 4096, so verify fails; its fix is the profile's unit.
    let c = pcie_path(root, "rdma-dmabuf");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(text(&c, "fix").contains("gdrprov-pcie.service"), "{c:#}");
}

#[test]
fn a_bridge_at_max_payload_128_below_both_ends() {
    let g = node(131_072);
    set(&g, "0000:02:10.0", &Dev { mps: 0, ..GOOD });
    let root = g.finish();
    let f = finding(&doctor(root), "max-payload-path").unwrap();
    assert!(
        text(&f, "evidence").starts_with("bridge 0000:02:10.0: Device Control MaxPayload 128"),
        "{f:#}"
    );
    assert!(text(&f, "fix").contains("pci=pcie_bus_perf"), "{f:#}");
    assert_eq!(pcie_path(root, "rdma-dmabuf")["status"], "warn");
}

#[test]
fn relaxed_ordering_off_warns_and_names_the_firmware_tool() {
    let g = node(131_072);
    set(&g, "0000:04:00.0", &Dev { ro: false, ..GOOD });
    let root = g.finish();
    let f = finding(&doctor(root), "relaxed-ordering-off").unwrap();
    assert_eq!(f["severity"], "warn");
    assert!(text(&f, "fix").contains("mlxconfig"), "{f:#}");
    assert_eq!(pcie_path(root, "rdma-dmabuf")["status"], "warn");
}

#[test]
fn ats_off_in_a_vm_with_acs_comes_and_goes() {
    let g = node(131_072);
    in_a_vm(&g);
    let acs = Some(ACS_SV | ACS_RR | ACS_CR | ACS_UF);
    set(&g, "0000:02:10.0", &Dev { acs, ..GOOD });
    set(
        &g,
        "0000:04:00.0",
        &Dev {
            ats: Some(false),
            ..GOOD
        },
    );
    let root = g.finish();
    let f = finding(&doctor(root), "ats-off").unwrap();
    assert!(
        text(&f, "evidence")
            .contains("ATS capability at 0x200, Enable-; ACS redirect on 0000:02:10.0"),
        "{f:#}"
    );
    assert!(text(&f, "fix").contains("ATS_ENABLED=true"), "{f:#}");
    assert_eq!(pcie_path(root, "rdma-dmabuf")["status"], "fail");
    set(
        &g,
        "0000:04:00.0",
        &Dev {
            ats: Some(true),
            ..GOOD
        },
    );
    assert!(finding(&doctor(root), "ats-off").is_none());
    // On bare metal ATS is not asked for.
    set(
        &g,
        "0000:04:00.0",
        &Dev {
            ats: Some(false),
            ..GOOD
        },
    );
    g.file(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\n",
    );
    assert!(finding(&doctor(root), "ats-off").is_none());
}

#[test]
fn the_lent_h200_snapshot_replays_bar1_and_device_control() {
    let root = repo().join("tests/fixtures/snapshots/device-h200-pcie");
    let out = gdrprov()
        .args(["inventory", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let inv = stdout_of(&out);
    // nvidia-smi there: "BAR1 Memory Usage / Total: 262144 MiB", FB 143771 MiB.
    assert!(
        inv.contains("GPU 0000:00:06.0: BAR1 (resource 2) 262144 MiB, memory 143771 MiB"),
        "{inv}"
    );
    assert!(
        inv.contains("memory BARs 0: 16 MiB, 2: 262144 MiB, 4: 32 MiB"),
        "{inv}"
    );
    assert!(
        inv.contains("MaxPayload 256 (capable 256), MaxReadReq 4096, relaxed ordering on"),
        "{inv}"
    );
    assert!(
        inv.contains("EnablePCIERelaxedOrderingMode 0, EnableResizableBar 0"),
        "{inv}"
    );
    let c = pcie_path(&root, "rdma-dmabuf");
    assert_eq!(c["status"], "pass", "{c:#}");
    // The same facts the machine printed live (tests/fixtures/snapshots/device-h200-pcie-run).
    let live: Value = serde_json::from_str(
        &std::fs::read_to_string(
            repo().join("tests/fixtures/snapshots/device-h200-pcie-run/inventory.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let out = gdrprov()
        .args(["--format", "json", "inventory", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    let replayed = json_of(&out);
    for k in ["pcie_devices", "nvidia_params"] {
        assert_eq!(replayed["facts"][k], live["facts"][k], "{k}");
    }
}

#[test]
fn max_read_request_is_planned_applied_and_rolled_back_byte_for_byte() {
    let g = node(131_072);
    set(&g, "0000:04:00.0", &Dev { mrrs: 2, ..GOOD });
    g.dir("/etc/systemd/system");
    g.file("/usr/bin/setpci", "");
    let root = g.finish().to_path_buf();
    let r = root.display().to_string();
    let pristine = snapshot(&root);
    let out = gdrprov()
        .args(["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let unit_path = root.join("etc/systemd/system/gdrprov-pcie.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/bin/setpci -s 0000:04:00.0 CAP_EXP+0x8.w=5000:7000\n"),
        "{unit}"
    );
    assert!(
        unit.contains(
            "max-read-request 4096 devctl $$(/usr/bin/setpci -s 0000:04:00.0 CAP_EXP+0x8.w)"
        ),
        "{unit}"
    );
    assert!(
        !unit.contains("0000:03:00.0"),
        "the GPU is not a NIC: {unit}"
    );
    // Applied again: the unit is as planned (the enable it owes is the only change left).
    let out = gdrprov()
        .args(["--format", "json", "plan", "rdma-dmabuf", "--root", &r])
        .output()
        .unwrap();
    let plan = json_of(&out);
    assert!(
        !plan["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["path"] == "/etc/systemd/system/gdrprov-pcie.service"),
        "{plan:#}"
    );
    // The unit ran at boot and read 128 back (a hypervisor that owns the register):
    // verify names the write as not kept and fails with that cause.
    set(&g, "0000:04:00.0", &Dev { mrrs: 0, ..GOOD });
    g.file(
        "/run/gdrprov/pcie-readback",
        "0000:04:00.0 max-read-request 4096 devctl 0030\n",
    );
    let c = pcie_path(&root, "rdma-dmabuf");
    assert_eq!(c["status"], "fail", "{c:#}");
    assert!(
        text(&c, "evidence")
            .contains("not kept: gdrprov-pcie.service wrote 4096 at boot and read back 128"),
        "{c:#}"
    );
    std::fs::remove_file(root.join("run/gdrprov/pcie-readback")).unwrap();
    std::fs::remove_dir(root.join("run/gdrprov")).unwrap();
    set(&g, "0000:04:00.0", &Dev { mrrs: 2, ..GOOD });
    let out = gdrprov()
        .args(["rollback", "-y", "--no-exec", "--force", "--root", &r])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let files = |m: std::collections::BTreeMap<String, (Vec<u8>, u32)>| {
        let mut m = without_state(m);
        m.retain(|k, _| !k.ends_with('/'));
        m
    };
    assert_same(&files(snapshot(&root)), &files(pristine), "rollback");
}

#[test]
fn cloud_profiles_leave_max_read_request_alone() {
    let g = node(131_072);
    set(&g, "0000:04:00.0", &Dev { mrrs: 2, ..GOOD });
    let root = g.finish();
    for p in ["erdma-cloud", "efa"] {
        let out = gdrprov()
            .args(["--format", "json", "plan", p, "--root"])
            .arg(root)
            .output()
            .unwrap();
        assert!(!stdout_of(&out).contains("gdrprov-pcie.service"), "{p}");
    }
}
