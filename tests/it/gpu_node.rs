//! Issue 35: the whole GPU node. The root is the snapshot of the lent 2x H200 machine
//! (`tests/fixtures/snapshots/device-h200x2`, taken by `inventory --snapshot` there: NVML's
//! NVLink links, fabric state and GPU pairs and CUDA's peer access are its `gpu-topology`
//! probe). A healthy machine cannot be made to lose an NVLink, so each fault is that snapshot
//! with one recorded fact changed, judged by `doctor`, `verify` and `inventory`.

use crate::common::*;
use crate::gpu_node_kit::{doctor_finding, inventory, root_with, verify, with_package};
use serde_json::Value;

fn links(t: &mut Value, gpu: usize) -> &mut Vec<Value> {
    t["nvml"]["gpus"][gpu]["links"].as_array_mut().unwrap()
}

/// Every link ends at an NVSwitch, as the lent machine recorded (HGX board, switches outside the
/// VM); kept explicit so that each fault test states its whole premise.
fn switched(t: &mut Value) {
    for g in 0..2 {
        for l in links(t, g) {
            l["remote_type"] = "switch".into();
        }
    }
}

#[test]
fn the_healthy_snapshot_passes_and_shows_its_topology() {
    // Unchanged: what the lent machine recorded.
    let (_t, root) = root_with(|_| {});
    let v = verify(&root);
    let nv = check_named(&v, "nvlink");
    assert_eq!(nv["status"], "pass", "{nv}");
    let ev = nv["evidence"].as_str().unwrap();
    assert!(
        ev.contains("GPU 0 (0000:00:06.0): 18 of 18 up, NVLink 4.0"),
        "{ev}"
    );
    assert!(ev.contains("read once"), "{ev}");
    let p2p = check_named(&v, "gpu-p2p");
    assert_eq!(p2p["status"], "pass", "{p2p}");
    assert!(
        p2p["evidence"]
            .as_str()
            .unwrap()
            .contains("0->1 nvlink x18"),
        "{p2p}"
    );
    let fab = check_named(&v, "gpu-fabric");
    assert_eq!(fab["status"], "pass", "{fab}");
    assert!(
        fab["evidence"]
            .as_str()
            .unwrap()
            .contains("no Fabric Manager package in this root"),
        "{fab}"
    );
    // Measured checks need the running system.
    assert_eq!(check_named(&v, "copy-bandwidth")["status"], "skip");
    for id in ["nvlink", "gpu-p2p", "gpu-fabric"] {
        assert!(doctor_finding(&root, id).is_none(), "{id}");
    }
    let text = inventory(&root);
    assert!(text.contains("GPU topology:"), "{text}");
    assert!(
        text.contains("GPU 1 NVIDIA H200 (0000:00:07.0): NVLink 18 of 18 up, NVLink 4.0"),
        "{text}"
    );
    assert!(
        text.contains("GPU 0 -> GPU 1: peer access yes, path nvlink (18 links)"),
        "{text}"
    );
    assert!(
        text.contains("host bridge pci0000:00 shared by GPUs 0000:00:06.0, 0000:00:07.0"),
        "{text}"
    );
}

#[test]
fn a_link_down_names_the_gpu_and_the_link() {
    let (_t, root) = root_with(|t| {
        switched(t);
        links(t, 1)[5]["up"] = false.into();
    });
    let c = check_named(&verify(&root), "nvlink");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("GPU 1 (0000:00:07.0): NVLink link(s) [5] down of the 18 it has"),
        "{c}"
    );
    let f = doctor_finding(&root, "nvlink").expect("a doctor finding");
    assert_eq!(f["severity"], "error");
    // The pair's NVLink floor counts the links up: 17.
    let inv = inventory(&root);
    assert!(
        inv.contains("GPU 0 -> GPU 1: peer access yes, path nvlink (17 links)"),
        "{inv}"
    );
}

#[test]
fn expected_links_come_from_the_device_not_a_constant() {
    // A 12-link GPU (H100 PCIe): NVML answers for 12 links; all up is whole.
    let (_t, root) = root_with(|t| {
        for g in 0..2 {
            links(t, g).truncate(12);
        }
    });
    let c = check_named(&verify(&root), "nvlink");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(
        c["evidence"].as_str().unwrap().contains("12 of 12 up"),
        "{c}"
    );
}

#[test]
fn a_pair_without_peer_access_is_named_with_its_cause_and_fix() {
    let (_t, root) = root_with(|t| {
        switched(t);
        t["peers"][0]["can_access"] = false.into();
        t["nvml"]["pairs"][0]["read"] = "topology-not-supported".into();
        t["nvml"]["pairs"][0]["nvlink"] = "topology-not-supported".into();
    });
    let c = check_named(&verify(&root), "gpu-p2p");
    assert_eq!(c["status"], "fail", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(ev.contains("GPU 0 -> GPU 1: no peer access"), "{ev}");
    assert!(ev.contains("ACS redirect"), "{ev}");
    assert!(ev.contains("through host memory"), "{ev}");
    assert!(c["fix"].as_str().unwrap().contains("iommu=pt"), "{c}");
    let f = doctor_finding(&root, "gpu-p2p").expect("a doctor finding");
    assert_eq!(f["severity"], "error");
    // The other direction still has it.
    assert!(!ev.contains("GPU 1 -> GPU 0"), "{ev}");
}

#[test]
fn p2p_disabled_by_the_driver_says_so() {
    let (_t, root) = root_with(|t| {
        for p in t["peers"].as_array_mut().unwrap() {
            p["can_access"] = false.into();
        }
        for p in t["nvml"]["pairs"].as_array_mut().unwrap() {
            p["read"] = "disabled-by-regkey".into();
        }
    });
    let c = check_named(&verify(&root), "gpu-p2p");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(
        c["evidence"].as_str().unwrap().contains("registry key"),
        "{c}"
    );
    assert!(
        c["fix"].as_str().unwrap().contains("NVreg_RegistryDwords"),
        "{c}"
    );
}

#[test]
fn fabric_manager_not_running_on_an_nvswitch_board() {
    let (_t, root) = root_with(|t| {
        switched(t);
        t["nvml"]["gpus"][0]["fabric"] = serde_json::json!({
            "state": "not-started", "status": null, "clique": null
        });
    });
    let c = check_named(&verify(&root), "gpu-fabric");
    assert_eq!(c["status"], "fail", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(
        ev.contains("GPU 0 (0000:00:06.0): fabric not-started"),
        "{ev}"
    );
    assert!(ev.contains("system not yet initialized"), "{ev}");
    assert!(
        c["fix"].as_str().unwrap().contains("nvidia-fabricmanager"),
        "{c}"
    );
    assert!(doctor_finding(&root, "gpu-fabric").is_some());
}

#[test]
fn gpus_linked_directly_need_no_fabric_manager() {
    let (_t, root) = root_with(|t| {
        for (g, peer) in [(0, "0000:00:07.0"), (1, "0000:00:06.0")] {
            for l in links(t, g) {
                l["remote_type"] = "gpu".into();
                l["remote_pci"] = peer.into();
            }
        }
    });
    let v = verify(&root);
    let c = check_named(&v, "gpu-fabric");
    assert_eq!(c["status"], "skip", "{c}");
    assert!(
        c["evidence"].as_str().unwrap().contains("no NVSwitch"),
        "{c}"
    );
    assert!(check_named(&v, "gpu-p2p")["evidence"]
        .as_str()
        .unwrap()
        .contains("nvlink x18"));
}

#[test]
fn a_function_the_driver_lacks_is_a_finding_not_a_crash() {
    let (_t, root) = root_with(|t| {
        t["nvml"]["missing"] =
            serde_json::json!(["nvmlDeviceGetNvLinkErrorCounter (not in this driver)"]);
    });
    let c = check_named(&verify(&root), "nvlink");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["evidence"]
        .as_str()
        .unwrap()
        .contains("lacks nvmlDeviceGetNvLinkErrorCounter"));
}

#[test]
fn nvml_that_could_not_start_skips_with_the_reason() {
    let (_t, root) = root_with(|t| {
        t["nvml"] = serde_json::json!({
            "driver": null, "gpus": [], "pairs": [], "missing": [],
            "error": "NVML could not be started (libnvidia-ml.so.1 not found)"
        });
    });
    let v = verify(&root);
    for name in ["nvlink", "gpu-fabric"] {
        let c = check_named(&v, name);
        assert_eq!(c["status"], "skip", "{c}");
        assert!(
            c["evidence"].as_str().unwrap().contains("libnvidia-ml"),
            "{c}"
        );
    }
}

#[test]
fn fabric_manager_of_another_version_than_the_driver_is_refused() {
    let (_t, root) = root_with(switched);
    with_package(&root, "nvidia-fabricmanager-580", "570.86.15-1");
    let c = check_named(&verify(&root), "gpu-fabric");
    assert_eq!(c["status"], "fail", "{c}");
    let ev = c["evidence"].as_str().unwrap();
    assert!(
        ev.contains("nvidia-fabricmanager-580 570.86.15-1 is not the driver's version 580.159.04"),
        "{ev}"
    );
    // The driver's own version passes, and says so.
    let (_t, root) = root_with(switched);
    with_package(&root, "nvidia-fabricmanager-580", "580.159.04-1");
    let c = check_named(&verify(&root), "gpu-fabric");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(c["evidence"]
        .as_str()
        .unwrap()
        .contains("580.159.04-1, the driver's version"));
}
