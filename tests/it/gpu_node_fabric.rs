//! Issue 35, Fabric Manager: `services.fabric-manager` planned, applied and rolled back. The root
//! is the snapshot of the lent 2x H200 machine (`tests/fixtures/snapshots/device-h200x2`): its
//! GPUs' NVLinks end at NVSwitches the VM's host keeps, so nothing is planned there and the plan
//! says why. No NVSwitch board is lent, so the board that has one is that snapshot with a MOCK
//! NVSwitch PCI function added (NVIDIA, class "bridge, other", as an HGX H100/H200 shows its
//! switches) and MOCK stand-in unit files for nvidia-fabricmanager and nvidia-persistenced;
//! `systemctl` itself is the real one, copied into the root and run chrooted there by apply and
//! rollback, as on any image root.

use crate::common::*;
use crate::reliability::{install_with_libs, is_root};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

const WANTS: &str = "etc/systemd/system/multi-user.target.wants";
const FM: &str = "nvidia-fabricmanager.service";
const PD: &str = "nvidia-persistenced.service";

/// The lent machine's snapshot in a temporary directory, with a profile file beside it.
fn lent() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = crate::gpu_node_kit::lent();
    for (name, mode) in [("required", "required"), ("auto", "auto"), ("off", "off")] {
        std::fs::write(
            t.path().join(format!("{name}.yaml")),
            format!("services: {{ fabric-manager: {mode} }}\n"),
        )
        .unwrap();
    }
    (t, root)
}

/// The lent snapshot made an NVSwitch board (MOCK: no such board is lent): one NVSwitch PCI
/// function at 0000:00:08.0, stand-in units, and the real systemctl where it can run (root).
fn mock_nvswitch_board() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = lent();
    let dev = root.join("sys/devices/pci0000:00/0000:00:08.0");
    std::fs::create_dir_all(&dev).unwrap();
    for (f, v) in [
        ("vendor", "0x10de"),
        ("device", "0x22a3"),
        ("class", "0x068000"),
    ] {
        std::fs::write(dev.join(f), format!("{v}\n")).unwrap();
    }
    std::os::unix::fs::symlink(
        "../../../devices/pci0000:00/0000:00:08.0",
        root.join("sys/bus/pci/devices/0000:00:08.0"),
    )
    .unwrap();
    let units = root.join("usr/lib/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    for u in [FM, PD] {
        std::fs::write(
            units.join(u),
            "# MOCK stand-in for the unit NVIDIA's package installs\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
        )
        .unwrap();
    }
    if is_root() {
        install_with_libs(&root, "/usr/bin/systemctl", "/usr/bin/systemctl");
    }
    (t, root)
}

/// dpkg-query's recorded answer for the Fabric Manager package of branch 580: installed at
/// `version` (the lent machine recorded "not installed").
fn with_fabric_manager(root: &Path, version: &str) {
    crate::gpu_node_kit::with_package(root, "nvidia-fabricmanager-580", version);
}

/// `systemctl enable UNIT` run in the root by someone else (before gdrprov).
fn enabled_by_hand(root: &Path, unit: &str) {
    let st = std::process::Command::new("chroot")
        .arg(root)
        .args(["systemctl", "enable", unit])
        .output()
        .unwrap();
    assert!(st.status.success(), "{}", stderr_of(&st));
    assert!(root.join(WANTS).join(unit).is_symlink());
}

fn gd(root: &Path, args: &[&str]) -> Output {
    gdrprov()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn profile(root: &Path, name: &str) -> String {
    root.parent()
        .unwrap()
        .join(format!("{name}.yaml"))
        .display()
        .to_string()
}

fn plan_json(root: &Path, name: &str) -> (Option<i32>, Value) {
    let out = gd(root, &["plan", &profile(root, name), "--format", "json"]);
    (out.status.code(), json_of(&out))
}

/// Each run command as `systemctl ...` (the chroot prefix taken off).
fn commands(v: &Value) -> Vec<String> {
    v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "run")
        .map(|c| {
            let argv: Vec<&str> = c["command"]["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            argv[2..].join(" ")
        })
        .collect()
}

#[test]
fn the_lent_machine_skips_fabric_manager_and_says_why() {
    let (_t, root) = lent();
    let (code, v) = plan_json(&root, "required");
    assert_eq!(code, Some(0), "{v:#}");
    assert!(v["changes"].as_array().unwrap().is_empty(), "{v:#}");
    let f = &v["fabric_manager"];
    assert_eq!(f["setting"], "required", "{v:#}");
    assert_eq!(f["action"], "skip");
    let why = f["why"].as_str().unwrap();
    assert!(
        why.contains("NVLinks end at NVSwitches (NVML) that are not PCI devices of this container")
            && why.contains("Fabric Manager runs where the switches are, on the host"),
        "{why}"
    );
    // The same in words, and the built-in RDMA profile (auto) says it too.
    let out = gd(&root, &["plan", &profile(&root, "auto")]);
    assert!(
        stdout_of(&out).contains("fabric-manager (auto): skip: no NVSwitch here"),
        "{}",
        stdout_of(&out)
    );
    let out = gd(&root, &["plan", "rdma-dmabuf", "--format", "json"]);
    assert_eq!(json_of(&out)["fabric_manager"]["action"], "skip");
    // Left alone: not a word.
    assert!(plan_json(&root, "off").1.get("fabric_manager").is_none());
}

#[test]
fn gpus_without_nvswitch_skip_it_as_a_board_without_one() {
    let (_t, root) = lent();
    // Both GPUs linked to each other directly: nothing ends at a switch.
    let p = root.join(".gdrprov-snapshot/probes.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    for g in v["gpu-topology"]["nvml"]["gpus"].as_array_mut().unwrap() {
        for l in g["links"].as_array_mut().unwrap() {
            l["remote_type"] = "gpu".into();
        }
    }
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    let (_, v) = plan_json(&root, "required");
    let why = v["fabric_manager"]["why"].as_str().unwrap();
    assert!(why.starts_with("no NVSwitch on this board"), "{why}");
}

#[test]
fn mock_nvswitch_board_without_fabric_manager_is_refused_and_nothing_changes() {
    let (_t, root) = mock_nvswitch_board();
    std::fs::remove_file(root.join("usr/lib/systemd/system").join(FM)).unwrap();
    let before = snapshot(&root);
    let p = profile(&root, "required");
    for args in [vec!["plan", &p], vec!["apply", &p, "-y"]] {
        let out = gd(&root, &args);
        let cmd = args[0];
        assert_eq!(out.status.code(), Some(1), "{cmd}: {}", stdout_of(&out));
        let e = stderr_of(&out);
        assert!(
            e.contains("NVSwitch board: 1 NVSwitch(es) (0000:00:08.0), and no Fabric Manager in this root; gdrprov installs nothing: install nvidia-fabricmanager-580 580.159.04 (the driver's version)")
                && e.contains("(nothing was changed)"),
            "{e}"
        );
    }
    assert_same(&snapshot(&root), &before, "a refused apply");
    // auto: a warning, nothing planned.
    let (code, v) = plan_json(&root, "auto");
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["fabric_manager"]["action"], "warn");
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("gdrprov installs nothing"));
}

#[test]
fn mock_nvswitch_board_with_another_fabric_manager_version_is_refused_or_warned() {
    let (_t, root) = mock_nvswitch_board();
    with_fabric_manager(&root, "570.86.15-1");
    let before = snapshot(&root);
    let out = gd(
        &root,
        &[
            "apply",
            &profile(&root, "required"),
            "-y",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(v["error"]["kind"], "refused", "{v:#}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("nvidia-fabricmanager-580 570.86.15-1 is not the driver's version 580.159.04")
            && m.contains("system not yet initialized")
            && m.contains("install nvidia-fabricmanager-580 580.159.04"),
        "{m}"
    );
    assert_same(&snapshot(&root), &before, "a refused apply");
    let (code, v) = plan_json(&root, "auto");
    assert_eq!(code, Some(0), "{v:#}");
    assert!(commands(&v).is_empty(), "{v:#}");
    assert_eq!(v["fabric_manager"]["action"], "warn");
    assert!(v["warnings"][0]
        .as_str()
        .unwrap()
        .contains("is not the driver's version 580.159.04"));
}

#[test]
fn mock_nvswitch_board_plans_both_units_in_json() {
    let (_t, root) = mock_nvswitch_board();
    with_fabric_manager(&root, "580.159.04-1");
    let (code, v) = plan_json(&root, "auto");
    assert_eq!(code, Some(0), "{v:#}");
    assert_eq!(v["changed"], true);
    // An image root (no running system): enabled, not started.
    assert_eq!(
        commands(&v),
        [
            format!("systemctl enable {PD}"),
            format!("systemctl enable {FM}")
        ]
    );
    let f = &v["fabric_manager"];
    assert_eq!(f["action"], "enable", "{v:#}");
    assert_eq!(f["nvswitches"], serde_json::json!(["0000:00:08.0"]));
    assert_eq!(f["package"], "nvidia-fabricmanager-580 580.159.04-1");
    assert_eq!(f["driver"], "580.159.04");
    assert!(v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["kind"] != "run" || c["module"] == "fabric-manager"));
}

#[test]
fn mock_nvswitch_board_apply_enables_what_was_not_and_rollback_disables_only_that() {
    if !is_root() {
        eprintln!("SKIPPED: running systemctl chrooted into the root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = mock_nvswitch_board();
    with_fabric_manager(&root, "580.159.04-1");
    // nvidia-persistenced was enabled before gdrprov came: it stays enabled through rollback.
    let wants = root.join(WANTS);
    enabled_by_hand(&root, PD);
    let before = without_state(snapshot(&root));
    let p = profile(&root, "required");

    let out = gd(&root, &["apply", &p, "-y", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert_eq!(commands(&v), [format!("systemctl enable {FM}")], "{v:#}");
    assert!(
        wants.join(FM).is_symlink(),
        "systemctl enable made the link"
    );

    // Applied again: nothing to do.
    let (code, again) = plan_json(&root, "required");
    assert_eq!(code, Some(0), "{again:#}");
    assert!(again["changes"].as_array().unwrap().is_empty());
    assert_eq!(again["fabric_manager"]["action"], "ready");
    let out = gd(&root, &["apply", &p, "-y", "--format", "json"]);
    assert_eq!(json_of(&out)["outcome"]["generation"], Value::Null);

    let out = gd(&root, &["rollback", "-y", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        commands(&json_of(&out)),
        [format!("systemctl disable {FM}")]
    );
    assert!(
        wants.join(PD).is_symlink(),
        "what gdrprov did not enable stays"
    );
    assert_same(
        &without_state(snapshot(&root)),
        &before,
        "rollback puts the root back",
    );
}

#[test]
fn a_disabled_service_is_enabled_again_by_rollback() {
    if !is_root() {
        eprintln!("SKIPPED: running systemctl chrooted into the root needs root (CI runs as root)");
        return;
    }
    let (t, root) = mock_nvswitch_board();
    let wants = root.join(WANTS);
    enabled_by_hand(&root, PD);
    let before = without_state(snapshot(&root));
    let p = t.path().join("off.yaml");
    std::fs::write(&p, format!("services: {{ disabled: [{PD}] }}\n")).unwrap();
    let p = p.display().to_string();
    let out = gd(&root, &["apply", &p, "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(!wants.join(PD).is_symlink());
    let out = gd(&root, &["rollback", "-y", "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(commands(&json_of(&out)), [format!("systemctl enable {PD}")]);
    assert_same(
        &without_state(snapshot(&root)),
        &before,
        "rollback enables it again",
    );
}

#[test]
fn profiles_together_required_beats_auto_off_contradicts_and_extends_overrides() {
    let (t, root) = lent();
    // rdma-dmabuf says auto; with required beside it, required.
    let out = gd(
        &root,
        &[
            "plan",
            "rdma-dmabuf",
            &profile(&root, "required"),
            "--format",
            "json",
        ],
    );
    assert_eq!(json_of(&out)["fabric_manager"]["setting"], "required");
    // off beside it contradicts it: refused, both named.
    let out = gd(&root, &["plan", "rdma-dmabuf", &profile(&root, "off")]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr_of(&out);
    assert!(
        e.contains("services.fabric-manager") && e.contains("auto") && e.contains("off"),
        "{e}"
    );
    // A child profile's off wins over what it extends.
    let child = t.path().join("child.yaml");
    std::fs::write(
        &child,
        "extends: rdma-dmabuf\nservices: { fabric-manager: off }\n",
    )
    .unwrap();
    let out = gd(
        &root,
        &["plan", child.to_str().unwrap(), "--format", "json"],
    );
    assert!(json_of(&out).get("fabric_manager").is_none());
    // A value that is not one of the three: the profile is refused, naming them.
    std::fs::write(&child, "services: { fabric-manager: yes }\n").unwrap();
    let out = gd(&root, &["plan", child.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr_of(&out);
    assert!(
        e.contains("fabric-manager") && e.contains("required"),
        "{e}"
    );
}

#[test]
fn a_failed_enable_undoes_the_enable_that_ran_before_it() {
    if !is_root() {
        eprintln!("SKIPPED: running systemctl chrooted into the root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = mock_nvswitch_board();
    with_fabric_manager(&root, "580.159.04-1");
    // Fabric Manager masked by hand: the real `systemctl enable` of it fails, after
    // nvidia-persistenced's enable succeeded.
    let etc = root.join("etc/systemd/system");
    std::os::unix::fs::symlink("/dev/null", etc.join(FM)).unwrap();
    let before = without_state(snapshot(&root));
    let out = gd(&root, &["apply", &profile(&root, "required"), "-y"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let e = stderr_of(&out);
    assert!(
        e.contains("systemctl enable nvidia-fabricmanager.service") && e.contains("put back"),
        "{e}"
    );
    assert!(
        !root.join(WANTS).join(PD).is_symlink(),
        "persistenced's enable undone"
    );
    assert_same(
        &without_state(snapshot(&root)),
        &before,
        "a failed apply leaves the root as it was",
    );
}

#[test]
fn recover_after_a_kill_undoes_the_enable_that_ran() {
    if !is_root() {
        eprintln!("SKIPPED: running systemctl chrooted into the root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = mock_nvswitch_board();
    with_fabric_manager(&root, "580.159.04-1");
    let before = without_state(snapshot(&root));
    // Killed (abort) right after its first step, nvidia-persistenced's enable.
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", "1")
        .args(["apply", &profile(&root, "required"), "-y", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    assert!(root.join(WANTS).join(PD).is_symlink(), "the first step ran");
    let out = gd(&root, &["recover", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_same(
        &without_state(snapshot(&root)),
        &before,
        "recover undoes the enable the killed apply had run",
    );
}
