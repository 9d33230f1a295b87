//! Boot shapes besides GRUB's defaults. First: a host whose kernel command
//! line is set outside it. The root is `tests/fixtures/snapshots/device-h200`,
//! an `inventory --snapshot` of a GPU VM of the test devices' kind (Ubuntu
//! 24.04, kernel booted directly by Firecracker, no boot loader, no /etc/default/grub).

mod common;

use common::*;
use std::path::Path;

const BUILTINS: [&str; 4] = [
    "rdma-dmabuf",
    "legacy-peermem",
    "gds-iommu-off",
    "erdma-cloud",
];

fn direct_boot_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join("tests/fixtures/snapshots/device-h200"), &root);
    // Directories every Ubuntu has, which the snapshot did not record (no
    // probe reads them); rollback leaves the directories apply created.
    for d in ["etc/modprobe.d", "etc/modules-load.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    (t, root)
}

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    let mut c = gdrprov();
    c.args(args).arg("--root").arg(root);
    c.output().unwrap()
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout_of(out), stderr_of(out)))
}

#[test]
fn every_builtin_profile_gets_a_report_not_an_error() {
    let (_t, root) = direct_boot_root();
    let pristine = snapshot(&root);
    for p in BUILTINS {
        let out = run(&root, &["plan", p, "--force", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "plan {p}: {}", stderr_of(&out));
        let plan = json(&out);
        let has_boot = matches!(p, "rdma-dmabuf" | "gds-iommu-off");
        assert_eq!(
            plan["boot"]["manageable"] == false,
            has_boot,
            "plan {p}: {plan:#}"
        );
        if has_boot {
            assert_eq!(plan["boot"]["starter"], "hypervisor", "{p}");
            assert_eq!(plan["boot"]["satisfied"], false, "{p}");
        }

        let out = run(&root, &["doctor", p, "--format", "json"]);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "doctor {p}: {}",
            stderr_of(&out)
        );
        json(&out);

        let out = run(&root, &["verify", p, "--no-loopback", "--format", "json"]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "verify {p}: {}",
            stderr_of(&out)
        );
        let v = json(&out);
        for name in [
            "requirements",
            "configuration",
            "mtu",
            "acs",
            "reboot",
            "modules",
        ] {
            check_named(&v, name);
        }
        if has_boot {
            let b = check_named(&v, "boot");
            assert_eq!(b["status"], "fail", "{p}: {b}");
            assert!(
                b["detail"]
                    .as_str()
                    .unwrap()
                    .contains("hypervisor's kernel arguments"),
                "{b}"
            );
        }
    }
    assert_same(&snapshot(&root), &pristine, "plan, doctor and verify");
}

#[test]
fn apply_without_the_boot_part_needs_the_flag_and_rolls_back_byte_for_byte() {
    let (_t, root) = direct_boot_root();
    let pristine = snapshot(&root);
    for p in BUILTINS {
        if matches!(p, "rdma-dmabuf" | "gds-iommu-off") {
            let before = snapshot(&root);
            let out = run(&root, &["apply", p, "-y", "--no-exec", "--force"]);
            assert_eq!(out.status.code(), Some(1), "{p}");
            let err = stderr_of(&out);
            assert!(
                err.contains("not manageable on this host") && err.contains("--boot-elsewhere"),
                "{err}"
            );
            assert_same(&snapshot(&root), &before, "refused apply");
        }
        let out = run(
            &root,
            &[
                "apply",
                p,
                "-y",
                "--no-exec",
                "--force",
                "--boot-elsewhere",
                "--format",
                "json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{p}: {}", stderr_of(&out));
        let report = json(&out);
        // gds-iommu-off wants nothing but the IOMMU off: no file to write.
        assert_eq!(report["changed"], p != "gds-iommu-off", "{p}: {report:#}");
        // Nothing of the boot part was recorded as owned.
        let state = std::fs::read_to_string(root.join("var/lib/gdrprov/state.json")).unwrap();
        let state: serde_json::Value = serde_json::from_str(&state).unwrap();
        assert!(
            state["kernel_args"].as_array().is_none_or(|a| a.is_empty()),
            "{state:#}"
        );
        // The files match; only the command line is owed, and says so.
        let out = run(&root, &["plan", p, "--force", "--detailed-exitcode"]);
        let want = if matches!(p, "rdma-dmabuf" | "gds-iommu-off") {
            4
        } else {
            0
        };
        assert_eq!(out.status.code(), Some(want), "{p}: {}", stdout_of(&out));
        if report["changed"] == true {
            let out = run(&root, &["rollback", "-y", "--no-exec"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        }
        assert_same(
            &without_state(snapshot(&root)),
            &without_state(pristine.clone()),
            &format!("rollback of {p}"),
        );
    }
}

#[test]
fn a_command_line_already_set_elsewhere_passes() {
    let (_t, root) = direct_boot_root();
    let cmdline = root.join("proc/cmdline");
    let line = std::fs::read_to_string(&cmdline).unwrap();
    std::fs::write(&cmdline, format!("iommu=pt intel_iommu=on {line}")).unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf", "--format", "json"]);
    assert_eq!(json(&out)["boot"]["satisfied"], true);
    // No flag needed: nothing of the boot part is owed.
    let out = run(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = json(&run(
        &root,
        &["verify", "rdma-dmabuf", "--no-loopback", "--format", "json"],
    ));
    assert_eq!(check_named(&v, "boot")["status"], "pass", "{v:#}");
    assert_eq!(check_named(&v, "configuration")["status"], "pass", "{v:#}");
    // gds wants the opposite: iommu=pt must go, and verify says where.
    let v = json(&run(
        &root,
        &[
            "verify",
            "gds-iommu-off",
            "--no-loopback",
            "--format",
            "json",
        ],
    ));
    let b = check_named(&v, "boot");
    assert!(
        b["detail"].as_str().unwrap().contains("remove iommu=pt"),
        "{b}"
    );
}

#[test]
fn boot_entries_and_trial_are_refused_on_such_a_host() {
    let (t, root) = direct_boot_root();
    let p = t.path().join("p.yaml");
    std::fs::write(&p, "boot:\n  iommu: \"off\"\n  entry: gds\n").unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("boot.entry (gds)"),
        "{}",
        stderr_of(&out)
    );
    let out = run(&root, &["apply", "rdma-dmabuf", "--trial", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("--trial"), "{}", stderr_of(&out));
}

#[test]
fn verify_reports_every_check_when_the_grub_defaults_cannot_be_read() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let grub = root.join("etc/default/grub");
    let mut text = std::fs::read(&grub).unwrap();
    text.extend_from_slice(b"GRUB_X=\"a\0b\"\n");
    std::fs::write(&grub, text).unwrap();
    let out = run(
        &root,
        &["verify", "rdma-dmabuf", "--no-loopback", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let v = json(&out);
    let c = check_named(&v, "configuration");
    assert_eq!(c["status"], "fail");
    assert!(c["detail"].as_str().unwrap().contains("NUL byte"), "{c}");
    for name in [
        "requirements",
        "mtu",
        "acs",
        "reboot",
        "modules",
        "loopback",
    ] {
        check_named(&v, name);
    }
}

// ---- arm64: an Ubuntu 24.04 GH200 (Grace Hopper) root with GRUB for EFI ----

fn grub_args(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("GRUB_CMDLINE_LINUX="))
        .unwrap()
        .trim_matches('"')
        .to_string()
}

#[test]
fn grace_facts_and_doctor_read_the_arm64_root() {
    let (_t, root) = example_root("ubuntu-24.04-gh200");
    let inv = json(&run(&root, &["inventory", "--format", "json"]));
    let f = if inv["facts"].is_object() {
        &inv["facts"]
    } else {
        &inv
    };
    assert_eq!(f["arch"]["arch"], "aarch64", "{:#}", f["arch"]);
    assert_eq!(f["arch"]["cpu"], "Arm Neoverse-V2 (NVIDIA Grace)");
    assert_eq!(f["gpus"][0]["name"], "NVIDIA GH200 480GB");
    assert_eq!(f["gpus"][0]["arch"], "hopper");
    // Found under /usr/lib/aarch64-linux-gnu.
    assert_eq!(f["nccl"]["version"], "2.23.4");
    let out = run(&root, &["doctor", "rdma-dmabuf"]);
    let text = stdout_of(&out);
    assert!(
        text.contains("(aarch64, Arm Neoverse-V2 (NVIDIA Grace))"),
        "{text}"
    );
}

#[test]
fn grace_gets_iommu_passthrough_1_and_rolls_back_byte_for_byte() {
    let (_t, root) = example_root("ubuntu-24.04-gh200");
    let pristine = snapshot(&root);
    let out = run(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        grub_args(&root),
        "console=ttyAMA0,115200n8 init_on_alloc=0 iommu.passthrough=1"
    );
    // GDS on Grace: translation on, passthrough off; the argument gdrprov
    // added for rdma-dmabuf goes, the user's stay.
    let out = run(&root, &["apply", "gds-iommu-off", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("`boot.iommu: off` is `iommu.passthrough=0`"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(
        grub_args(&root),
        "console=ttyAMA0,115200n8 init_on_alloc=0 iommu.passthrough=0"
    );
    for _ in 0..2 {
        let out = run(&root, &["rollback", "-y", "--no-exec"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of both applies",
    );
}

#[test]
fn grace_refuses_unsafe_and_contradictory_arguments_unchanged() {
    let (t, root) = example_root("ubuntu-24.04-gh200");
    let before = snapshot(&root);
    for (yaml, why) in [
        (
            "boot:\n  cmdline:\n    present: [\"x=$(reboot)\"]\n",
            "dollar sign",
        ),
        (
            "boot:\n  iommu: passthrough\n  cmdline:\n    present: [iommu.passthrough=0]\n",
            "iommu.passthrough=0",
        ),
    ] {
        let p = t.path().join("p.yaml");
        std::fs::write(&p, yaml).unwrap();
        let out = run(&root, &["apply", p.to_str().unwrap(), "-y", "--no-exec"]);
        assert_eq!(out.status.code(), Some(1), "{yaml}");
        assert!(stderr_of(&out).contains(why), "{}", stderr_of(&out));
        assert_same(&snapshot(&root), &before, yaml);
    }
}

#[test]
fn arch_override_for_an_image_whose_root_cannot_tell() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    std::fs::remove_file(root.join("proc/cpuinfo")).unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf"]);
    let text = stdout_of(&out);
    assert!(
        text.contains(
            "+GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on\""
        ) && text.contains("--arch aarch64"),
        "{text}"
    );
    let out = run(&root, &["plan", "rdma-dmabuf", "--arch", "arm64"]);
    let text = stdout_of(&out);
    assert!(
        text.contains(
            "+GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 iommu.passthrough=1\""
        ) && !text.contains("CPU vendor is unknown"),
        "{text}"
    );
    // An x86 vendor that is neither Intel nor AMD is said, not guessed silently.
    let out = run(&root, &["plan", "rdma-dmabuf", "--cpu-vendor", "other"]);
    assert!(
        stdout_of(&out).contains("neither GenuineIntel nor AuthenticAMD"),
        "{}",
        stdout_of(&out)
    );
}
