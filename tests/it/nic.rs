//! NIC and PCIe remediation on example roots: the MTU through systemd `.link`
//! files (eRDMA `auto`: 8500 with jumbo frames, 1400 without), /etc/nccl.conf
//! owned key by key, and the boot-time ACS unit on bare metal only.

use crate::common::*;
use crate::hostgen;
use crate::util::*;
use std::path::Path;

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn read(root: &Path, p: &str) -> String {
    std::fs::read_to_string(root.join(p.trim_start_matches('/'))).unwrap()
}

/// `verify PROFILE --format json --root ROOT`, and the check named NAME from its report.
fn verify_check(profile: &str, root: &str, name: &str) -> serde_json::Value {
    let out = run(&["verify", profile, "--format", "json", "--root", root]);
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    check_named(&rep, name)
}

fn plan_json(root: &Path, profiles: &[&str]) -> serde_json::Value {
    let mut args = vec!["plan"];
    args.extend(profiles);
    let r = s(root);
    args.extend(["--format", "json", "--root", &r]);
    let out = gdrprov().args(&args).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn erdma_auto_mtu_link_files_and_nccl_device_list() {
    let root = Root::example("alinux3-erdma");
    let r = s(&root);
    let v = plan_json(&root, &["erdma-cloud"]);
    let diff = |path: &str| -> String {
        v["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["path"] == path)
            .unwrap_or_else(|| panic!("no change for {path}: {v:#}"))["diff"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // erdma_0 → eth0 allows 9000: 8500; erdma_1 → eth1 allows 1500: 1400.
    let eth0 = diff("/etc/systemd/network/10-gdrprov-eth0.link");
    assert!(eth0.contains("+MACAddress=00:16:3e:0a:00:10"), "{eth0}");
    assert!(eth0.contains("+MTUBytes=8500"), "{eth0}");
    assert!(eth0.contains("+NamePolicy=kernel database onboard slot path"));
    let eth1 = diff("/etc/systemd/network/10-gdrprov-eth1.link");
    assert!(eth1.contains("+MACAddress=00:16:3e:0a:00:11"), "{eth1}");
    assert!(eth1.contains("+MTUBytes=1400"), "{eth1}");
    let nccl = diff("/etc/nccl.conf");
    assert!(nccl.contains("+NCCL_IB_HCA=erdma_0,erdma_1"), "{nccl}");
    assert!(nccl.contains("+NCCL_DMABUF_ENABLE=0"), "{nccl}");
    assert!(!nccl.contains("NCCL_PROTO"), "both MTUs are safe: {nccl}");

    ok(&["apply", "erdma-cloud", "-y", "--no-exec", "--root", &r]);
    assert!(read(&root, "/etc/systemd/network/10-gdrprov-eth1.link").contains("MTUBytes=1400\n"));
    // Idempotent, and verify reads the MTUs back from /sys/class/net.
    exits(
        0,
        &["plan", "erdma-cloud", "--detailed-exitcode", "--root", &r],
    );
    let mtu = verify_check("erdma-cloud", &r, "mtu");
    assert_eq!(mtu["status"], "pass", "{mtu:#}");
    assert_eq!(mtu["detail"], "eth0 8500, eth1 1400");
    // The netdev of the small one drifts: verify says so.
    std::fs::write(root.join("sys/class/net/eth1/mtu"), "1500\n").unwrap();
    let mtu = verify_check("erdma-cloud", &r, "mtu");
    assert_eq!(mtu["status"], "fail", "{mtu:#}");
    assert!(mtu["detail"]
        .as_str()
        .unwrap()
        .contains("eth1 has MTU 1500"));
}

#[test]
fn an_mtu_unsafe_for_ll128_leaves_it_out_with_the_reason() {
    let (t, root) = example_root("alinux3-erdma");
    let p = t.path().join("mtu9000.yaml");
    std::fs::write(
        &p,
        "extends: erdma-cloud\nnetwork:\n  mtu:\n    devices: { rdma: erdma_0 }\n    value: 9000\n",
    )
    .unwrap();
    ok(&["apply", &s(&p), "-y", "--no-exec", "--root", &s(&root)]);
    assert!(read(&root, "/etc/systemd/network/10-gdrprov-eth0.link").contains("MTUBytes=9000\n"));
    assert!(!root
        .join("etc/systemd/network/10-gdrprov-eth1.link")
        .exists());
    let conf = read(&root, "/etc/nccl.conf");
    assert!(conf.contains("\nNCCL_PROTO=Simple,LL\n"), "{conf}");
    assert!(
        conf.contains("# gdrprov: NCCL_PROTO: LL128 left out: the eRDMA MTU of eth0 (9000) is neither 8500 nor 1400"),
        "{conf}"
    );
    // Back to the plain profile: the protocol key goes, eth0 gets 8500.
    let out = ok(&[
        "apply",
        "erdma-cloud",
        "-y",
        "--no-exec",
        "--root",
        &s(&root),
    ]);
    assert!(
        stdout_of(&out).contains("remove NCCL_PROTO"),
        "{}",
        stdout_of(&out)
    );
    let conf = read(&root, "/etc/nccl.conf");
    assert!(
        !conf.contains("NCCL_PROTO") && !conf.contains("LL128"),
        "{conf}"
    );
    assert!(read(&root, "/etc/systemd/network/10-gdrprov-eth0.link").contains("MTUBytes=8500\n"));
}

#[test]
fn nccl_conf_keeps_the_users_lines_byte_for_byte() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = s(&root);
    let mine = "# site settings\nNCCL_DEBUG=INFO\nNCCL_NET_GDR_LEVEL=SYS\n\nNCCL_SOCKET_IFNAME=ens1 # keep\n";
    std::fs::write(root.join("etc/nccl.conf"), mine).unwrap();
    let pristine = snapshot(&root);
    let out = ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r]);
    assert!(
        stdout_of(&out).contains("take over NCCL_NET_GDR_LEVEL (set by hand to `SYS`"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(
        read(&root, "/etc/nccl.conf"),
        "# site settings\nNCCL_DEBUG=INFO\nNCCL_NET_GDR_LEVEL=PHB\n\nNCCL_SOCKET_IFNAME=ens1 # keep\nNCCL_DMABUF_ENABLE=1\n"
    );
    // Another profile: gdrprov changes only its keys; the user edits one of theirs meanwhile.
    let edited = read(&root, "/etc/nccl.conf").replace("NCCL_DEBUG=INFO", "NCCL_DEBUG=WARN");
    std::fs::write(root.join("etc/nccl.conf"), &edited).unwrap();
    ok(&[
        "apply",
        "legacy-peermem",
        "-y",
        "--no-exec",
        "--force",
        "--root",
        &r,
    ]);
    assert_eq!(
        read(&root, "/etc/nccl.conf"),
        "# site settings\nNCCL_DEBUG=WARN\nNCCL_NET_GDR_LEVEL=PHB\n\nNCCL_SOCKET_IFNAME=ens1 # keep\nNCCL_DMABUF_ENABLE=0\n"
    );
    std::fs::write(
        root.join("etc/nccl.conf"),
        read(&root, "/etc/nccl.conf").replace("NCCL_DEBUG=WARN", "NCCL_DEBUG=INFO"),
    )
    .unwrap();
    // Rolling everything back restores the user's file exactly.
    for _ in 0..2 {
        ok(&["rollback", "-y", "--no-exec", "--force", "--root", &r]);
    }
    // Every file as it was (directories gdrprov created may stay).
    let files = |m: std::collections::BTreeMap<String, (Vec<u8>, u32)>| {
        let mut m = without_state(m);
        m.retain(|k, _| !k.ends_with('/'));
        m
    };
    assert_same(&files(snapshot(&root)), &files(pristine), "rollback");
}

/// Bare metal: an H100 and a ConnectX-7 behind one switch, ACS redirect on
/// at the GPU's downstream port.
fn acs_node() -> hostgen::HostGen {
    let g = hostgen::h100_node(true, "575.57.08");
    g.acs(
        "0000:02:08.0",
        hostgen::ACS_SV | hostgen::ACS_RR | hostgen::ACS_CR,
    );
    g.acs("0000:01:00.0", 0);
    g.dir("/etc/systemd/system");
    g.file("/usr/bin/setpci", "");
    g
}

fn acs_profile(dir: &Path) -> String {
    let p = dir.join("acs.yaml");
    std::fs::write(&p, "extends: rdma-dmabuf\npcie:\n  acs: disable\n").unwrap();
    s(&p)
}

#[test]
fn acs_unit_on_bare_metal_names_exactly_the_blocking_bridges() {
    let g = acs_node();
    let root = g.finish().to_path_buf();
    let p = acs_profile(g.dir.path());
    let v = plan_json(&root, &[&p]);
    let changes = v["changes"].as_array().unwrap();
    let unit = changes
        .iter()
        .find(|c| c["path"] == "/etc/systemd/system/gdrprov-acs.service")
        .unwrap_or_else(|| panic!("{v:#}"));
    let d = unit["diff"].as_str().unwrap();
    assert!(
        d.contains("+ExecStart=/usr/bin/setpci -s 0000:02:08.0 ECAP_ACS+0x6.w=0000"),
        "{d}"
    );
    assert_eq!(
        d.matches("ExecStart=").count(),
        1,
        "only the blocking bridge: {d}"
    );
    assert!(d.contains("+WantedBy=multi-user.target"), "{d}");
    let cmd = changes
        .iter()
        .find(|c| c["kind"] == "run" && c["module"] == "pcie")
        .unwrap_or_else(|| panic!("{v:#}"));
    // An image root: the command runs chrooted into it.
    let argv: Vec<&str> = cmd["command"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(argv[0], "chroot", "{cmd}");
    assert_eq!(argv[2..], ["systemctl", "enable", "gdrprov-acs.service"]);
    // Verify reads the ACS control register back from config space.
    let acs = verify_check(&p, &s(&root), "acs");
    assert_eq!(acs["status"], "fail", "{acs:#}");
    assert!(
        acs["detail"]
            .as_str()
            .unwrap()
            .contains("0000:02:08.0 (SrcValid+ TransBlk- ReqRedir+ CmpltRedir+"),
        "{acs}"
    );
    // Once cleared (what the unit does at boot), the check passes.
    g.acs("0000:02:08.0", 0);
    let acs = verify_check(&p, &s(&root), "acs");
    assert_eq!(acs["status"], "pass", "{acs:#}");
}

#[test]
fn acs_is_never_touched_in_a_vm() {
    let g = acs_node();
    g.file(
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu vme hypervisor lahf_lm\n",
    );
    let root = g.finish().to_path_buf();
    let p = acs_profile(g.dir.path());
    let v = plan_json(&root, &[&p]);
    let text = v.to_string();
    assert!(!text.contains("gdrprov-acs.service"), "{v:#}");
    assert!(!text.contains("setpci"), "{v:#}");
    let w = v["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|w| {
            let w = w.as_str().unwrap();
            w.contains("virtual machine") && w.contains("ATS")
        }),
        "{v:#}"
    );
}

#[test]
fn acs_unit_passes_systemd_analyze_verify() {
    let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        eprintln!("systemd-analyze not installed (scripts/test.sh installs it): skipped");
        return;
    };
    assert!(out.status.success());
    let g = acs_node();
    let root = g.finish().to_path_buf();
    let p = acs_profile(g.dir.path());
    ok(&["apply", &p, "-y", "--no-exec", "--root", &s(&root)]);
    let unit = root.join("etc/systemd/system/gdrprov-acs.service");
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("gdrprov-acs.service");
    std::fs::copy(&unit, &copy).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .env("SYSTEMD_LOG_LEVEL", "warning")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let setpci = Path::new("/usr/bin/setpci").exists();
    // Without pciutils systemd says only that the command is missing.
    let relevant: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("gdrprov-acs"))
        .filter(|l| setpci || !l.contains("setpci"))
        .collect();
    assert!(
        relevant.is_empty() && (out.status.success() || !setpci),
        "systemd-analyze verify: {err}"
    );
}

#[test]
fn profile_errors_for_network_and_pcie() {
    let t = tempfile::tempdir().unwrap();
    let (_t2, root) = example_root("alinux3-erdma");
    for (yaml, msg) in [
        (
            "network:\n  mtu:\n    devices: { rdma: erdma_0 }\n    value: 10000\n",
            "out of range",
        ),
        (
            "network:\n  mtu:\n    devices: { rdma: erdma_0, name: eth0 }\n    value: auto\n",
            "exactly one of",
        ),
        (
            "network:\n  mtu:\n    devices: { pci: x }\n    value: auto\n",
            "network.mtu.devices: unknown key `pci`",
        ),
        ("pcie:\n  acs: off\n", "unknown variant"),
        ("nccl:\n  DEBUG: INFO\n", "not an NCCL setting"),
    ] {
        let p = t.path().join("bad.yaml");
        std::fs::write(&p, yaml).unwrap();
        let before = snapshot(&root);
        let out = run(&["apply", &s(&p), "-y", "--no-exec", "--root", &s(&root)]);
        assert_eq!(out.status.code(), Some(1), "{yaml}");
        assert!(stderr_of(&out).contains(msg), "{yaml}: {}", stderr_of(&out));
        assert_same(
            &snapshot(&root),
            &before,
            "a refused profile changed the root",
        );
    }
    // Two profiles applied together that want different MTUs.
    let a = t.path().join("a.yaml");
    let b = t.path().join("b.yaml");
    std::fs::write(
        &a,
        "network:\n  mtu:\n    devices: { rdma: \"erdma_*\" }\n    value: 8500\n",
    )
    .unwrap();
    std::fs::write(
        &b,
        "network:\n  mtu:\n    devices: { rdma: \"erdma_*\" }\n    value: 1400\n",
    )
    .unwrap();
    let out = run(&["plan", &s(&a), &s(&b), "--root", &s(&root)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("network.mtu"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn a_whole_nccl_conf_owned_before_becomes_key_by_key() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = s(&root);
    std::fs::write(root.join("etc/nccl.conf"), "NCCL_DEBUG=INFO\n").unwrap();
    let whole = t.path().join("whole.yaml");
    std::fs::write(
        &whole,
        "files:\n  - path: /etc/nccl.conf\n    content: \"x=1\\n\"\n",
    )
    .unwrap();
    ok(&["apply", &s(&whole), "-y", "--no-exec", "--root", &r]);
    assert_eq!(read(&root, "/etc/nccl.conf"), "x=1\n");
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r]);
    // The user's original line, then gdrprov's keys.
    assert_eq!(
        read(&root, "/etc/nccl.conf"),
        "NCCL_DEBUG=INFO\nNCCL_DMABUF_ENABLE=1\nNCCL_NET_GDR_LEVEL=PHB\n"
    );
    let state: serde_json::Value =
        serde_json::from_str(&read(&root, "/var/lib/gdrprov/state.json")).unwrap();
    assert!(state["files"].get("/etc/nccl.conf").is_none(), "{state:#}");
    gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            "--no-exec",
            "--detailed-exitcode",
            "--root",
            &r,
        ])
        .assert()
        // Files are done; the commands an apply --no-exec left are owed:
        // pending, as plan says without --no-exec too (docs/commands.md).
        .code(2)
        .stdout(predicates::str::contains("Nothing to write"));
}
