//! Issue 48, the RoCE fabric on the host, the GPU's own GPUDirect RDMA support and ACS
//! between two GPUs: doctor findings and verify checks on synthetic roots (a RoCE ConnectX
//! port, H100s), each with its evidence and fix. Each of these fails on the main before
//! issue 48: a RoCE port whose network device has MTU 1500 got no finding from doctor or
//! verify, nor did an NCCL_IB_GID_INDEX naming a link-local GID, a port without PFC or ECN,
//! a GPU whose CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED is 0, or ACS redirect between
//! two GPUs on one switch (only GPU-NIC paths were read).

use crate::common::*;
use crate::hostgen::{h100_node, HostGen};
use crate::util::*;
use serde_json::{json, Value};

const NIC: &str = "pci0000:00/0000:00:02.0/0000:05:00.0";

/// A RoCE port mlx5_0:1 on ens1np0 (MTU `mtu`): GID 0 link-local RoCE v1, GID 1 link-local
/// RoCE v2, GID 3 RoCE v2 ::ffff:10.0.2.15; `ibv_devinfo` gives the active MTU the kernel
/// derives from the network device's.
fn roce_host(mtu: u32) -> HostGen {
    let mut g = HostGen::new();
    g.ubuntu("24.04");
    g.rdma(
        "mlx5_0",
        Some(NIC),
        0,
        "mlx5_core",
        &[("ACTIVE", "Ethernet", "100 Gb/sec (2X HDR)", "ens1np0", mtu)],
    );
    let pd = format!("/sys/devices/{NIC}/infiniband/mlx5_0/ports/1");
    let ll = "fe80:0000:0000:0000:0e42:a1ff:fe12:3456\n";
    g.file(&format!("{pd}/gids/0"), ll);
    g.file(&format!("{pd}/gid_attrs/types/0"), "IB/RoCE v1\n");
    g.file(&format!("{pd}/gids/1"), ll);
    g.file(&format!("{pd}/gid_attrs/types/1"), "RoCE v2\n");
    g.file(
        &format!("{pd}/gids/3"),
        "0000:0000:0000:0000:0000:ffff:0a00:020f\n",
    );
    g.file(&format!("{pd}/gid_attrs/types/3"), "RoCE v2\n");
    let active = if mtu >= 4200 { "4096 (5)" } else { "1024 (3)" };
    g.command(
        &["ibv_devinfo"],
        &format!("hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{active}\n"),
    );
    g
}

/// PFC (through `dcb`, as iproute2 prints it) and ECN (sysfs) on ens1np0: on priority 3 when
/// `on`, nowhere otherwise.
fn lossless(g: &mut HostGen, on: bool) {
    let pfc: String = (0..8)
        .map(|p| format!(" {p}:{}", if on && p == 3 { "on" } else { "off" }))
        .collect();
    g.command(
        &["dcb", "pfc", "show", "dev", "ens1np0", "prio-pfc"],
        &format!("prio-pfc{pfc}\n"),
    );
    g.command(
        &["dcb", "app", "show", "dev", "ens1np0", "dscp-prio"],
        if on { "dscp-prio 26:3\n" } else { "" },
    );
    for kind in ["roce_np", "roce_rp"] {
        for p in 0..8 {
            let v = if on && p == 3 { "1\n" } else { "0\n" };
            g.file(&format!("/sys/class/net/ens1np0/ecn/{kind}/enable/{p}"), v);
        }
    }
}

fn doctor(root: &std::path::Path, profile: Option<&str>) -> Value {
    let r = root.display().to_string();
    let mut args = vec!["doctor", "--root", &r, "--format", "json"];
    args.extend(profile);
    json_of(&run(&args))
}

fn finding<'a>(report: &'a Value, id: &str) -> Option<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
}

fn verify(root: &std::path::Path, profile: &str) -> Value {
    let r = root.display().to_string();
    json_of(&run(&["verify", profile, "--root", &r, "--format", "json"]))
}

#[test]
fn a_roce_port_on_a_1500_byte_netdev_is_named_by_doctor_and_verify() {
    let g = roce_host(1500);
    let root = g.finish();
    let d = doctor(root, None);
    let f = finding(&d, "roce-mtu").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "warn");
    let ev = f["evidence"].as_str().unwrap();
    assert!(
        ev.contains("mlx5_0:1 active MTU 1024 of 4096, network device ens1np0 MTU 1500"),
        "{ev}"
    );
    assert!(f["fix"].as_str().unwrap().contains("MTU 9000"), "{f}");
    let v = verify(root, "rdma-dmabuf");
    let c = check_named(&v, "roce-mtu");
    assert_eq!(c["status"], "warn", "{c}");
    // Jumbo frames: the port runs at its largest MTU, nothing to say.
    let g = roce_host(9000);
    let root = g.finish();
    assert!(finding(&doctor(root, None), "roce-mtu").is_none());
    assert_eq!(
        check_named(&verify(root, "rdma-dmabuf"), "roce-mtu")["status"],
        "pass"
    );
}

#[test]
fn a_netdev_mtu_unlike_the_profiles_fails_naming_both() {
    let g = roce_host(9000);
    let root = g.finish();
    let p = root.join("mtu.yaml");
    std::fs::write(
        &p,
        "extends: rdma-dmabuf\nnetwork: { mtu: { devices: { rdma: \"mlx5_*\" }, value: 4200 } }\n",
    )
    .unwrap();
    let p = p.to_str().unwrap();
    let d = doctor(root, Some(p));
    let f = finding(&d, "roce-mtu-profile").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "error");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("network device ens1np0 MTU 9000; the profile's network.mtu wants 4200"),
        "{f}"
    );
    assert!(f["cause"].as_str().unwrap().contains("completion error 4"));
    let c = check_named(&verify(root, p), "roce-mtu");
    assert_eq!(c["status"], "fail", "{c}");
}

#[test]
fn nccl_ib_gid_index_on_a_link_local_gid_is_an_error_naming_the_routable_one() {
    let g = roce_host(9000);
    g.file("/etc/nccl.conf", "NCCL_IB_GID_INDEX=1\n");
    let root = g.finish();
    let d = doctor(root, None);
    let f = finding(&d, "roce-gid").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "error");
    let ev = f["evidence"].as_str().unwrap();
    assert!(
        ev.starts_with("NCCL_IB_GID_INDEX=1 (/etc/nccl.conf): mlx5_0:1 GID 1 is fe80::e42:a1ff:fe12:3456 (RoCE v2): link-local"),
        "{ev}"
    );
    assert!(ev.contains("routable: 3 ::ffff:10.0.2.15"), "{ev}");
    assert!(f["cause"].as_str().unwrap().contains("completion error 12"));
    assert_eq!(
        check_named(&verify(root, "rdma-dmabuf"), "roce-gid")["status"],
        "fail"
    );
    // The routable index, or none at all: NCCL's own choice.
    g.file("/etc/nccl.conf", "NCCL_IB_GID_INDEX=3\n");
    let c = check_named(&verify(g.finish(), "rdma-dmabuf"), "roce-gid");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(c["evidence"]
        .as_str()
        .unwrap()
        .contains("GID 3 ::ffff:10.0.2.15"));
    g.file("/etc/nccl.conf", "NCCL_DMABUF_ENABLE=1\n");
    let root = g.finish();
    assert!(finding(&doctor(root, None), "roce-gid").is_none());
}

#[test]
fn a_roce_port_without_pfc_or_ecn_is_lossy_and_one_with_them_passes() {
    let mut g = roce_host(9000);
    let root = g.finish();
    // No DCB answer and no ECN in sysfs: only the vendor's tool can say.
    let c = check_named(&verify(root, "rdma-dmabuf"), "roce-lossless");
    assert_eq!(c["status"], "skip", "{c}");
    assert!(c["evidence"].as_str().unwrap().contains("mlnx_qos"), "{c}");
    lossless(&mut g, false);
    let root = g.finish();
    let d = doctor(root, None);
    let f = finding(&d, "roce-lossless").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "warn");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("PFC on priorities none, ECN notification point on none"),
        "{f}"
    );
    lossless(&mut g, true);
    let c = check_named(&verify(g.finish(), "rdma-dmabuf"), "roce-lossless");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(
        c["evidence"].as_str().unwrap().contains(
            "PFC on priorities 3, ECN notification point on 3, reaction point on 3, DSCP trusted"
        ),
        "{c}"
    );
}

#[test]
fn a_gpu_without_gpudirect_rdma_is_named_before_any_nic_tries() {
    let mut g = h100_node(true, "575.57.08");
    g.cuda(
        "12.9",
        json!([{"ordinal": 0, "name": "NVIDIA GeForce RTX 4090", "pci_bus_id": "00000000:03:00.0", "compute_capability": "8.9", "dmabuf_supported": true, "gpudirect_rdma": false}]),
    );
    let root = g.finish();
    let d = doctor(root, Some("rdma-dmabuf"));
    let f = finding(&d, "gpu-no-gpudirect-rdma").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "error");
    assert!(f["evidence"]
        .as_str()
        .unwrap()
        .contains("CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0 on CUDA device 0 (NVIDIA GeForce RTX 4090"));
    let r = root.display().to_string();
    let inv = stdout_of(&run(&["inventory", "--root", &r]));
    assert!(inv.contains("GPUDirect RDMA NOT supported (CUDA)"), "{inv}");
    // An H100 that says 1: no finding.
    g.cuda(
        "12.9",
        json!([{"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:03:00.0", "compute_capability": "9.0", "dmabuf_supported": true, "gpudirect_rdma": true}]),
    );
    let d = doctor(g.finish(), Some("rdma-dmabuf"));
    assert!(finding(&d, "gpu-no-gpudirect-rdma").is_none());
}

#[test]
fn acs_between_two_gpus_on_one_switch_is_named_not_only_gpu_to_nic() {
    let g = HostGen::new();
    g.ubuntu("22.04").kernel("5.15.0-119-generic");
    let sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
    g.h100(&format!("{sw}/0000:02:08.0/0000:03:00.0"), 0);
    g.h100(&format!("{sw}/0000:02:10.0/0000:04:00.0"), 0);
    // A third GPU under another root port: not behind the switch, not a pair here.
    g.h100("pci0000:00/0000:00:02.0/0000:05:00.0", 0);
    g.acs("0000:02:10.0", 0x1d); // SrcValid ReqRedir CmpltRedir UpstreamFwd
    let d = doctor(g.finish(), Some("rdma-dmabuf"));
    let f: Vec<&Value> = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "acs-gpu-pair")
        .collect();
    assert_eq!(f.len(), 1, "{d:#}");
    assert_eq!(f[0]["severity"], "error");
    assert_eq!(
        f[0]["title"],
        "ACS redirects peer-to-peer traffic between GPUs 0000:03:00.0 and 0000:04:00.0"
    );
    assert!(
        f[0]["evidence"]
            .as_str()
            .unwrap()
            .starts_with("bridge 0000:02:10.0 (below their common bridge 0000:01:00.0, PIX): ACSCtl SrcValid+ TransBlk- ReqRedir+ CmpltRedir+"),
        "{}",
        f[0]
    );
    g.acs("0000:02:10.0", 0x01);
    let d = doctor(g.finish(), Some("rdma-dmabuf"));
    assert!(finding(&d, "acs-gpu-pair").is_none());
}

/// `peermem-register` applies where a peer-memory module is loaded (or wanted) with a GPU and
/// an RDMA device; off the running system it says so. The registration itself needs a GPU and
/// a NIC in one machine, which neither the development machine, the VM testbed (no GPU) nor
/// the lent GPU machine (no NIC) has: that path is bench::peermem, untested here.
#[test]
fn a_loaded_peer_memory_module_is_put_to_the_test_where_a_nic_exists() {
    let g = h100_node(false, "535.183.01");
    g.modules(&[
        "nvidia",
        "nvidia_peermem",
        "mlx5_core",
        "mlx5_ib",
        "ib_uverbs",
        "ib_core",
    ]);
    let v = verify(g.finish(), "legacy-peermem");
    let c = check_named(&v, "peermem-register");
    assert_eq!(c["status"], "skip", "{c}");
    assert!(
        c["evidence"]
            .as_str()
            .unwrap()
            .contains("is not the running system"),
        "{c}"
    );
    // No peer-memory module loaded or wanted: the entry does not apply.
    let g = h100_node(true, "575.57.08");
    let v = verify(g.finish(), "rdma-dmabuf");
    assert!(v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["name"] != "peermem-register"));
}

/// `lossless(g, true)` with PFC and ECN (both points) on priority 3 only; `ecn_only` drops PFC.
fn lossless_on_3(g: &mut HostGen, ecn_only: bool) {
    lossless(g, true);
    if ecn_only {
        let off: String = (0..8).map(|p| format!(" {p}:off")).collect();
        g.command(
            &["dcb", "pfc", "show", "dev", "ens1np0", "prio-pfc"],
            &format!("prio-pfc{off}\n"),
        );
    }
}

/// A profile extending rdma-dmabuf with `network: { NET }`, written into the root.
fn net_profile(root: &std::path::Path, name: &str, net: &str) -> String {
    let p = root.join(format!("{name}.yaml"));
    std::fs::write(&p, format!("extends: rdma-dmabuf\nnetwork: {{ {net} }}\n")).unwrap();
    p.to_str().unwrap().to_string()
}

/// Issue 48: lossless Ethernet is named against the profile's wish (`network.lossless`,
/// `pfc-priority`), not only against the fixed rule "neither PFC nor ECN".
#[test]
fn pfc_on_the_wrong_priority_fails_naming_both_the_port_and_the_wish() {
    let mut g = roce_host(9000);
    lossless_on_3(&mut g, false);
    let root = g.finish();
    let p = net_profile(root, "prio5", "lossless: pfc, pfc-priority: 5");
    let d = doctor(root, Some(&p));
    let f = finding(&d, "roce-lossless-profile").unwrap_or_else(|| panic!("{d:#}"));
    assert_eq!(f["severity"], "error");
    let ev = f["evidence"].as_str().unwrap();
    assert!(
        ev.contains("mlx5_0:1 (ens1np0): PFC on priorities 3"),
        "{ev}"
    );
    assert!(
        ev.ends_with("the profile's network.lossless wants pfc on priority 5"),
        "{ev}"
    );
    assert!(f["fix"].as_str().unwrap().contains("prio-pfc N:on"), "{f}");
    let c = check_named(&verify(root, &p), "roce-lossless");
    assert_eq!(c["status"], "fail", "{c}");
    // On priority 3, as the port has it: passes.
    let p = net_profile(root, "prio3", "lossless: pfc-and-ecn, pfc-priority: 3");
    let c = check_named(&verify(root, &p), "roce-lossless");
    assert_eq!(c["status"], "pass", "{c}");
}

#[test]
fn ecn_only_fails_a_wish_for_pfc_and_passes_one_for_ecn() {
    let mut g = roce_host(9000);
    lossless_on_3(&mut g, true);
    let root = g.finish();
    // The built-in rule: ECN alone is enough, nothing to say.
    assert!(finding(&doctor(root, Some("rdma-dmabuf")), "roce-lossless").is_none());
    let p = net_profile(root, "pfc", "lossless: pfc");
    let d = doctor(root, Some(&p));
    let f = finding(&d, "roce-lossless-profile").unwrap_or_else(|| panic!("{d:#}"));
    let ev = f["evidence"].as_str().unwrap();
    assert!(
        ev.contains("PFC on priorities none, ECN notification point on 3, reaction point on 3"),
        "{ev}"
    );
    assert!(
        ev.ends_with("the profile's network.lossless wants pfc"),
        "{ev}"
    );
    let c = check_named(&verify(root, &p), "roce-lossless");
    assert_eq!(c["status"], "fail", "{c}");
    let p = net_profile(root, "ecn", "lossless: ecn");
    assert!(finding(&doctor(root, Some(&p)), "roce-lossless-profile").is_none());
    let c = check_named(&verify(root, &p), "roce-lossless");
    assert_eq!(c["status"], "pass", "{c}");
    // `off`: not checked at all.
    let p = net_profile(root, "off", "lossless: off");
    let c = check_named(&verify(root, &p), "roce-lossless");
    assert_eq!(c["status"], "skip", "{c}");
}

#[test]
fn a_bad_lossless_wish_is_rejected_with_one_clear_message() {
    let g = roce_host(9000);
    let root = g.finish();
    for (net, says) in [
        ("lossless: lossy", "pfc-and-ecn"),
        ("lossless: pfc, pfc-priority: 9", "give 0 to 7"),
        (
            "lossless: ecn, pfc-priority: 3",
            "only with `lossless: pfc`",
        ),
    ] {
        let p = net_profile(root, "bad", net);
        let out = run(&["profile", "validate", &p]);
        assert!(!out.status.success(), "{net}");
        let err = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert!(err.contains(says), "{net}: {err}");
    }
}
