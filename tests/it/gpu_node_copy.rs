//! Issue 35: "fine alone, slow together" replayed from a snapshot root. The root is the lent
//! 2x H200 machine's snapshot (`tests/fixtures/snapshots/device-h200x2`) with copy figures
//! recorded in it (`gpu-copy` in its probes: each GPU alone and both together), and, for the
//! PCIe switch case, both GPUs moved behind one switch port. `verify` and `doctor` judge the
//! recorded figures against the snapshot's own topology and must name the port the GPUs share.
//! The figures are those measured on the lent machines (bench/results/h200x4-node-calibration.txt:
//! 55.3 alone, 43-44 H2D / 33-35 D2H with every GPU at once).

use crate::common::*;
use crate::gpu_node_kit::{doctor_finding, edit_recorded, inventory, lent, verify};
use serde_json::{json, Value};
use std::path::Path;

const GPUS: [&str; 2] = ["0000:00:06.0", "0000:00:07.0"];
const SWITCH: &str = "0000:00:1c.0";

/// Records copy figures in the snapshot: per GPU (H2D alone, D2H alone, H2D together, D2H
/// together) in GB/s.
fn with_figures(root: &Path, figures: [(f64, f64, f64, f64); 2]) {
    let gpus: Vec<Value> = figures
        .iter()
        .enumerate()
        .map(|(i, (ha, da, ht, dt))| {
            json!({
                "index": i, "name": "NVIDIA H200", "pci": GPUS[i],
                "h2d_alone_gbs": ha, "d2h_alone_gbs": da,
                "h2d_together_gbs": ht, "d2h_together_gbs": dt
            })
        })
        .collect();
    edit_recorded(root, "probes.json", |v| {
        v["gpu-copy"] = json!({ "gpus": gpus })
    });
}

/// Moves both GPUs behind one PCIe switch port (`SWITCH`, Gen5 x16) in the snapshot's sysfs:
/// the port's directory with its link attributes, the GPUs' directories under it (their
/// `driver` links one level deeper), and the bus's links to the new places.
fn behind_one_switch(root: &Path) {
    let devices = root.join("sys/devices/pci0000:00");
    let port = devices.join(SWITCH);
    std::fs::create_dir_all(&port).unwrap();
    for (f, v) in [
        ("vendor", "0x10b5"),
        ("device", "0xc040"),
        ("class", "0x060400"),
        ("current_link_speed", "32.0 GT/s PCIe"),
        ("max_link_speed", "32.0 GT/s PCIe"),
        ("current_link_width", "16"),
        ("max_link_width", "16"),
        ("numa_node", "-1"),
    ] {
        std::fs::write(port.join(f), format!("{v}\n")).unwrap();
    }
    let bus = root.join("sys/bus/pci/devices");
    std::os::unix::fs::symlink(
        format!("../../../devices/pci0000:00/{SWITCH}"),
        bus.join(SWITCH),
    )
    .unwrap();
    for g in GPUS {
        std::fs::rename(devices.join(g), port.join(g)).unwrap();
        let driver = port.join(g).join("driver");
        let target = std::fs::read_link(&driver).unwrap();
        std::fs::remove_file(&driver).unwrap();
        std::os::unix::fs::symlink(Path::new("..").join(target), &driver).unwrap();
        std::fs::remove_file(bus.join(g)).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../devices/pci0000:00/{SWITCH}/{g}"),
            bus.join(g),
        )
        .unwrap();
    }
}

#[test]
fn gpus_behind_one_switch_slow_together_name_the_switch_port() {
    let (_t, root) = lent();
    behind_one_switch(&root);
    // Alone at full speed; together below their share of the Gen5 x16 uplink
    // (0.75 x 63.0 / 2 = 23.6 GB/s each).
    with_figures(&root, [(55.3, 55.2, 21.0, 17.4), (55.4, 55.3, 20.8, 17.1)]);
    let inv = inventory(&root);
    assert!(
        inv.contains("PCIe port 0000:00:1c.0 shared by GPUs 0000:00:06.0, 0000:00:07.0 (uplink Gen5 x16, 63.0 GB/s)"),
        "{inv}"
    );
    let v = verify(&root);
    let c = check_named(&v, "copy-bandwidth");
    assert_eq!(c["status"], "fail", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(
        ev.contains("GPU 0 (0000:00:06.0) is fine alone and slow together"),
        "{ev}"
    );
    assert!(
        ev.contains("it shares PCIe port 0000:00:1c.0 (shared by 2 GPUs)"),
        "{ev}"
    );
    assert!(ev.contains("uplink of PCIe port 0000:00:1c.0"), "{ev}");
    assert!(ev.contains("recorded in the snapshot"), "{ev}");
    let conc = &v["health"]["concurrent"];
    assert_eq!(conc["verdict"], "fail", "{conc}");
    assert_eq!(
        conc["gpus"][1]["shared_port"],
        "PCIe port 0000:00:1c.0 (shared by 2 GPUs)"
    );
    let f = doctor_finding(&root, "copy-bandwidth").expect("a doctor finding");
    assert_eq!(f["severity"], "error", "{f}");
    assert!(
        f.to_string()
            .contains("PCIe port 0000:00:1c.0 (shared by 2 GPUs)"),
        "{f}"
    );
    // `verify --snapshot` keeps the figures it judged (here those of this snapshot; on a
    // running system those it measured): the new snapshot judges the same.
    let again = root.parent().unwrap().join("again");
    let out = gdrprov()
        .args(["verify", "gds-iommu-off", "--format", "json", "--root"])
        .arg(&root)
        .arg("--snapshot")
        .arg(&again)
        .output()
        .unwrap();
    assert_eq!(
        check_named(&json_of(&out), "copy-bandwidth")["status"],
        "fail"
    );
    let probes = std::fs::read_to_string(again.join(".gdrprov-snapshot/probes.json")).unwrap();
    assert!(probes.contains("\"gpu-copy\""), "{probes}");
    let c = check_named(&verify(&again), "copy-bandwidth");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("it shares PCIe port 0000:00:1c.0 (shared by 2 GPUs)"),
        "{c}"
    );
}

#[test]
fn the_same_switch_at_its_fair_share_passes() {
    // The port's figures split fairly (27.5 each of about 55): sharing is not a fault.
    let (_t, root) = lent();
    behind_one_switch(&root);
    with_figures(&root, [(55.3, 55.2, 27.6, 27.4), (55.4, 55.3, 27.5, 27.3)]);
    let c = check_named(&verify(&root), "copy-bandwidth");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("floor 48.0 alone / 23.6 together"),
        "{c}"
    );
    assert!(doctor_finding(&root, "copy-bandwidth").is_none());
}

#[test]
fn the_lent_machines_drop_together_behind_the_host_bridge_is_named() {
    // The topology as recorded: both GPUs on the root bus, sharing only the host bridge, whose
    // rate sysfs does not give; the 4x H200 machine's figures all at once (43-44 H2D, 33-35 D2H).
    let (_t, root) = lent();
    with_figures(&root, [(55.3, 55.3, 43.6, 34.1), (55.3, 55.2, 43.9, 33.8)]);
    let c = check_named(&verify(&root), "copy-bandwidth");
    assert_eq!(c["status"], "warn", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(
        ev.contains("GPU 1 (0000:00:07.0) is fine alone and slow together (H2D 55.3 alone / 43.9 together, D2H 55.2 alone / 33.8 together GB/s); it shares host bridge pci0000:00 (shared by 2 GPUs)"),
        "{ev}"
    );
    let f = doctor_finding(&root, "copy-bandwidth").expect("a doctor finding");
    assert_eq!(f["severity"], "warn", "{f}");
    assert!(f.to_string().contains("host bridge pci0000:00"), "{f}");
    // Without recorded figures nothing is judged: the check skips, doctor says nothing.
    let (_t, root) = lent();
    assert_eq!(
        check_named(&verify(&root), "copy-bandwidth")["status"],
        "skip"
    );
    assert!(doctor_finding(&root, "copy-bandwidth").is_none());
}

#[test]
fn slow_even_alone_is_not_blamed_on_the_port() {
    let (_t, root) = lent();
    behind_one_switch(&root);
    with_figures(&root, [(30.2, 29.8, 21.0, 17.4), (55.4, 55.3, 27.5, 27.3)]);
    let c = check_named(&verify(&root), "copy-bandwidth");
    assert_eq!(c["status"], "fail", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(
        ev.contains("GPU 0 (0000:00:06.0) is slow even alone"),
        "{ev}"
    );
    assert!(!ev.contains("GPU 1 (0000:00:07.0) is"), "{ev}");
}
