//! Issue 29, case 4: boot edits only where they take effect. The boot shape
//! is decided from what booted (`BOOT_IMAGE=` on `/proc/cmdline`, the
//! running kernel among the installed ones, kernels in /boot, systemd-boot's
//! EFI variables) as well as from the files present. The root is the real
//! H200 snapshot (`tests/fixtures/snapshots/device-h200`: Ubuntu 24.04, its
//! kernel booted directly by Firecracker, nothing in /boot) with Ubuntu's
//! `/etc/default/grub` in its image, as the real machine's image has it.

use crate::common::*;
use std::path::{Path, PathBuf};

const RUNNING: &str = "6.18.44-fc-v657-gpu";

/// Ubuntu 24.04's own /etc/default/grub (grub2-common).
const UBUNTU_GRUB: &str = "# If you change this file or any grub.d/*.cfg file, run 'update-grub' afterwards to update\n# /boot/grub/grub.cfg.\n\nGRUB_DEFAULT=0\nGRUB_TIMEOUT_STYLE=hidden\nGRUB_TIMEOUT=0\nGRUB_DISTRIBUTOR=`( . /etc/os-release; echo ${NAME:-Ubuntu} ) 2>/dev/null || echo Ubuntu`\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"\"\n";

fn h200_with_grub() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join("tests/fixtures/snapshots/device-h200"), &root);
    for d in ["etc/modprobe.d", "etc/modules-load.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    put(&root, "etc/default/grub", UBUNTU_GRUB);
    (t, root)
}

fn put(root: &Path, path: &str, content: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    gdrprov()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

#[test]
fn a_kernel_booted_from_outside_gets_no_grub_edit_even_with_grub_in_the_image() {
    let (_t, root) = h200_with_grub();
    let pristine = snapshot(&root);
    // plan: the boot part is a report of what the hypervisor must set.
    let out = run(
        &root,
        &["plan", "rdma-dmabuf", "--force", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let plan = json_of(&out);
    assert_eq!(plan["boot"]["manageable"], false, "{plan:#}");
    assert_eq!(plan["boot"]["starter"], "hypervisor");
    assert_eq!(plan["reboot_required"], false, "{plan:#}");
    assert_eq!(plan["pending_commands"], serde_json::json!([]), "{plan:#}");
    let why = plan["boot"]["evidence"].to_string();
    for said in [
        "was not started from this root",
        "no BOOT_IMAGE=",
        "/etc/default/grub is in the image",
    ] {
        assert!(why.contains(said), "{said}: {why}");
    }
    let paths: Vec<&str> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(!paths.iter().any(|p| p.contains("grub")), "{paths:?}");
    assert!(
        !plan["changes"].to_string().contains("grub-mkconfig"),
        "{plan:#}"
    );
    let text = stdout_of(&run(&root, &["plan", "rdma-dmabuf", "--force"]));
    assert!(
        !text.contains("grub-mkconfig") && !text.contains("update-grub"),
        "{text}"
    );
    assert!(!text.contains("reboot required"), "{text}");
    assert!(text.contains("hypervisor's kernel arguments"), "{text}");
    // doctor says why, and where to set the arguments.
    let out = run(&root, &["doctor", "rdma-dmabuf"]);
    let doc = stdout_of(&out);
    assert!(
        doc.contains("[boot-elsewhere]") && doc.contains("/etc/default/grub is in the image"),
        "{doc}"
    );
    // inventory: text and JSON.
    let inv = stdout_of(&run(&root, &["inventory"]));
    let boot = inv.lines().find(|l| l.starts_with("Boot:")).unwrap();
    assert!(
        boot.contains("by the hypervisor") && boot.contains("/etc/default/grub is in the image"),
        "{boot}"
    );
    let v = json_of(&run(&root, &["inventory", "--format", "json"]));
    let b = &v["facts"]["boot"];
    assert_eq!(b["kind"], "external", "{b:#}");
    assert_eq!(b["cmdline_home"]["kind"], "elsewhere");
    assert_eq!(b["cmdline_home"]["unused_loader"], "/etc/default/grub");
    assert_eq!(b["booted"]["kernel"], RUNNING);
    assert_eq!(b["booted"]["kernel_installed"], false);
    // boot list: no menu of a loader that does not boot the host.
    let out = run(&root, &["boot", "list"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("does not start this host's kernel"));
    assert_same(&snapshot(&root), &pristine, "plan, doctor, inventory");
    // apply: the boot part is never written; it needs saying so.
    let out = run(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    assert!(stderr_of(&out).contains("--boot-elsewhere"));
    assert_same(&snapshot(&root), &pristine, "refused apply");
    let args = [
        "apply",
        "rdma-dmabuf",
        "-y",
        "--no-exec",
        "--force",
        "--boot-elsewhere",
    ];
    let out = run(&root, &[&args[..], &["--format", "json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report = json_of(&out);
    assert_eq!(report["reboot_required"], false, "{report:#}");
    assert_eq!(
        report["pending_commands"],
        serde_json::json!([]),
        "{report:#}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/default/grub")).unwrap(),
        UBUNTU_GRUB
    );
}

/// What a test does to the root to give it one sign of its boot loader.
type Sign<'a> = Box<dyn Fn(&Path) + 'a>;

/// One fact that a boot loader on the root started the kernel is enough:
/// then the GRUB files are in use and edited, as before.
#[test]
fn any_sign_of_a_boot_loader_on_the_root_keeps_the_grub_edit() {
    let line =
        std::fs::read_to_string(repo().join("tests/fixtures/snapshots/device-h200/proc/cmdline"))
            .unwrap();
    let guid = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
    let loader_info: Vec<u8> = [7u8, 0, 0, 0]
        .into_iter()
        .chain(
            "systemd-boot 257"
                .encode_utf16()
                .chain([0])
                .flat_map(u16::to_le_bytes),
        )
        .collect();
    let signs: Vec<(&str, Sign)> = vec![
        (
            "BOOT_IMAGE=",
            Box::new(|r: &Path| {
                put(
                    r,
                    "proc/cmdline",
                    &format!("BOOT_IMAGE=/boot/vmlinuz-{RUNNING} {line}"),
                )
            }),
        ),
        (
            "the running kernel installed",
            Box::new(|r: &Path| put(r, &format!("lib/modules/{RUNNING}/modules.dep"), "")),
        ),
        (
            "a kernel in /boot",
            Box::new(|r: &Path| put(r, "boot/vmlinuz-6.8.0-45-generic", "")),
        ),
        (
            "systemd-boot's LoaderInfo",
            Box::new(move |r: &Path| {
                let p = r.join(format!("sys/firmware/efi/efivars/LoaderInfo-{guid}"));
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(p, &loader_info).unwrap();
            }),
        ),
        (
            "an image root (no /proc/cmdline)",
            Box::new(|r: &Path| std::fs::remove_file(r.join("proc/cmdline")).unwrap()),
        ),
    ];
    for (sign, make) in signs {
        let (_t, root) = h200_with_grub();
        make(&root);
        let out = run(
            &root,
            &["plan", "rdma-dmabuf", "--force", "--format", "json"],
        );
        assert_eq!(out.status.code(), Some(0), "{sign}: {}", stderr_of(&out));
        let plan = json_of(&out);
        assert!(plan["boot"].is_null(), "{sign}: {plan:#}");
        assert!(
            plan["changes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["path"] == "/etc/default/grub"),
            "{sign}: {plan:#}"
        );
        assert!(
            plan["changes"].to_string().contains("grub-mkconfig"),
            "{sign}: {plan:#}"
        );
    }
}
