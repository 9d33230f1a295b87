//! Kernel modules and services on copies of the example roots, with kmod's
//! own `modprobe` reading the result.

use crate::common::*;
use crate::util::*;
use std::process::Command;

fn modprobe_available() -> bool {
    Command::new("modprobe").arg("--version").output().is_ok()
}

#[test]
fn absent_modules_are_blocked_as_kmod_reads_them_then_rolled_back() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let pristine = snapshot(&root);
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r]);
    let conf = std::fs::read_to_string(root.join("etc/modprobe.d/gdrprov-blacklist.conf")).unwrap();
    for m in ["nvidia_peermem", "nv_peer_mem"] {
        assert!(conf.contains(&format!("blacklist {m}\n")), "{conf}");
        assert!(
            conf.contains(&format!("install {m} /bin/false\n")),
            "{conf}"
        );
    }
    assert!(
        modprobe_available(),
        "kmod's modprobe is needed: scripts/test.sh installs it"
    );
    let dir = root.join("etc/modprobe.d");
    let out = Command::new("modprobe")
        .arg("-C")
        .arg(&dir)
        .arg("-c")
        .output()
        .unwrap();
    let cfg = String::from_utf8_lossy(&out.stdout);
    assert!(
        cfg.lines().any(|l| l == "blacklist nvidia_peermem"),
        "{cfg}"
    );
    assert!(
        cfg.lines()
            .any(|l| l == "install nvidia_peermem /bin/false"),
        "{cfg}"
    );
    // The user's own file is still read alongside ours.
    assert!(cfg.lines().any(|l| l == "blacklist nouveau"), "{cfg}");
    let out = Command::new("modprobe")
        .arg("-C")
        .arg(&dir)
        .args(["-n", "-v", "nvidia_peermem"])
        .output()
        .unwrap();
    let dry = String::from_utf8_lossy(&out.stdout);
    assert!(
        dry.trim() == "install /bin/false",
        "modprobe -n does not resolve to /bin/false: {dry:?}"
    );

    // Idempotent, and rollback restores every byte.
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
    ok(&["rollback", "-y", "--no-exec", "--root", &r]);
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback",
    );
}

#[test]
fn present_modules_persist_in_modules_load_d() {
    let root = Root::example("rocky-9-a100");
    let r = root.display().to_string();
    ok(&["apply", "legacy-peermem", "-y", "--no-exec", "--root", &r]);
    let load = std::fs::read_to_string(root.join("etc/modules-load.d/gdrprov.conf")).unwrap();
    let modules: Vec<&str> = load
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(modules, ["nvidia_peermem"]);
    assert!(!root.join("etc/modprobe.d/gdrprov-blacklist.conf").exists());
    exits(
        0,
        &[
            "plan",
            "legacy-peermem",
            "--detailed-exitcode",
            "--root",
            &r,
        ],
    );
}

#[test]
fn switching_profiles_removes_the_files_of_the_old_one() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.display().to_string();
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r]);
    ok(&["apply", "legacy-peermem", "-y", "--no-exec", "--root", &r]);
    assert!(
        !root.join("etc/modprobe.d/gdrprov-blacklist.conf").exists(),
        "old block list left behind"
    );
    assert!(root.join("etc/modules-load.d/gdrprov.conf").exists());
}

#[test]
fn options_go_to_their_own_file() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("p.yaml");
    std::fs::write(&p, "modules:\n  options:\n    nvidia: \"NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords=PeerMappingOverride=1\"\n").unwrap();
    ok(&[
        "apply",
        p.to_str().unwrap(),
        "-y",
        "--root",
        root.to_str().unwrap(),
    ]);
    let dir = root.join("etc/modprobe.d");
    let out = Command::new("modprobe")
        .arg("-C")
        .arg(&dir)
        .arg("-c")
        .output()
        .unwrap();
    let cfg = String::from_utf8_lossy(&out.stdout);
    assert!(
        cfg.lines().any(|l| l == "options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords=PeerMappingOverride=1"),
        "{cfg}"
    );
}

#[test]
fn a_module_missing_for_the_kernel_names_its_package_and_changes_nothing() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let before = snapshot(t.path());
    let out = run(&[
        "apply",
        "erdma-cloud",
        "-y", // Past the requirements gate (eRDMA is absent), to the module check.
        "--force",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("`erdma` does not exist for kernel 5.15.0-119-generic")
            && err.contains("eRDMA driver package"),
        "{err}"
    );
    assert_same(&snapshot(t.path()), &before, "refused apply");
}

#[test]
fn old_drivers_get_nv_peer_mem_instead_of_nvidia_peermem() {
    let root = Root::example("ubuntu-22.04-h100");
    std::fs::write(
        root.join("proc/driver/nvidia/version"),
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  460.106.00  Tue Sep 28 12:05:58 UTC 2021\n",
    )
    .unwrap();
    let dep = root.join("lib/modules/5.15.0-119-generic/modules.dep");
    let mut text = std::fs::read_to_string(&dep).unwrap();
    text.push_str("updates/dkms/nv_peer_mem.ko: updates/dkms/nvidia.ko\n");
    std::fs::write(&dep, text).unwrap();
    ok(&[
        "apply",
        "legacy-peermem",
        "-y",
        "--root",
        root.to_str().unwrap(),
    ]);
    let load = std::fs::read_to_string(root.join("etc/modules-load.d/gdrprov.conf")).unwrap();
    assert!(
        load.lines().any(|l| l == "nv_peer_mem") && !load.contains("\nnvidia_peermem"),
        "{load}"
    );
}

#[test]
fn conflicting_service_is_disabled_and_no_exec_keeps_it_pending() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.display().to_string();
    std::fs::create_dir_all(root.join("lib/systemd/system")).unwrap();
    std::fs::write(
        root.join("lib/systemd/system/nv_peer_mem.service"),
        "[Service]\nExecStart=/bin/true\n",
    )
    .unwrap();
    std::fs::create_dir_all(root.join("etc/systemd/system/multi-user.target.wants")).unwrap();
    std::os::unix::fs::symlink(
        "/lib/systemd/system/nv_peer_mem.service",
        root.join("etc/systemd/system/multi-user.target.wants/nv_peer_mem.service"),
    )
    .unwrap();
    let out = run(&["plan", "legacy-peermem", "--format", "json", "--root", &r]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cmds: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "run")
        .map(|c| {
            c["command"]["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        cmds,
        [format!("chroot {r} systemctl disable nv_peer_mem.service")],
        "image roots get no --now"
    );

    // --no-exec: files written, the command owed and remembered.
    let out = ok(&["apply", "legacy-peermem", "-y", "--no-exec", "--root", &r]);
    assert!(
        stdout_of(&out).contains("Pending commands"),
        "{}",
        stdout_of(&out)
    );
    let out = run(&["plan", "legacy-peermem", "--root", &r]);
    let text = stdout_of(&out);
    assert!(
        text.contains("pending from an earlier --no-exec apply"),
        "{text}"
    );
    assert!(
        text.contains("systemctl disable nv_peer_mem.service"),
        "{text}"
    );
}
