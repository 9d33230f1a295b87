//! The kernel command line on copies of the example roots: the GRUB defaults
//! edit as bash reads it, ownership of added arguments, RHEL's grubby.

mod common;
use common::*;
use std::path::Path;

/// GRUB_CMDLINE_LINUX as bash computes it after sourcing the defaults (no
/// `set -e`: RHEL's defaults run `sed` on the host's /etc/system-release).
fn effective(root: &Path) -> Vec<String> {
    let script = r#". ./etc/default/grub; for f in ./etc/default/grub.d/*.cfg; do [ -e "$f" ] && . "$f"; done; printf '%s' "$GRUB_CMDLINE_LINUX""#;
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "bash could not source the result: {}",
        stderr_of(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn apply(root: &Path, profile: &str) -> std::process::Output {
    gdrprov()
        .args([
            "apply",
            profile,
            "-y",
            "--no-exec",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap()
}

#[test]
fn passthrough_on_intel_edits_grub_defaults_and_plans_update_grub() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--format", "json", "--root", &r])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "run")
        .map(|c| {
            c["command"]["argv"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        runs,
        ["/etc/default/grub", "update-grub"],
        "sh -n check then update-grub"
    );
    // Each reason once: the edit's reason names iommu=pt, so the running
    // kernel's lack of it is not a second reason in other words.
    let reasons = v["reboot_reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{reasons:?}");
    assert!(
        reasons[0].as_str().unwrap().contains("iommu=pt"),
        "{reasons:?}"
    );

    let out = apply(&root, "rdma-dmabuf");
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        effective(&root),
        [
            "console=tty1",
            "console=ttyS0,115200n8",
            "iommu=pt",
            "intel_iommu=on"
        ]
    );
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("var/lib/gdrprov/state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        state["kernel_args"],
        serde_json::json!(["iommu=pt", "intel_iommu=on"])
    );
    // Idempotent: the defaults are right; update-grub is owed: nothing to
    // write, but pending (exit 2), as plan without --no-exec says too.
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
        .code(2)
        .stdout(predicates::str::contains("Nothing to write"));
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--root", &r])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains("pending from an earlier --no-exec apply"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn amd_gets_no_intel_argument_and_rhel_gets_grubby() {
    let (_t, root) = example_root("rocky-9-a100");
    let out = gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            "--format",
            "json",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let text = v.to_string();
    assert!(
        !text.contains("intel_iommu"),
        "AMD host got intel_iommu: {text}"
    );
    let grubby: Vec<&serde_json::Value> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "run")
        .collect();
    assert_eq!(grubby.len(), 1, "{text}");
    let argv: Vec<&str> = grubby[0]["command"]["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        &argv[2..],
        ["grubby", "--update-kernel=ALL", "--args=iommu=pt"]
    );
    let out = apply(&root, "rdma-dmabuf");
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(effective(&root).ends_with(&["quiet".to_string(), "iommu=pt".to_string()]));
}

#[test]
fn cpu_vendor_override_for_image_builds() {
    let (_t, root) = example_root("rocky-9-a100");
    std::fs::remove_file(root.join("proc/cpuinfo")).unwrap();
    let out = gdrprov()
        .args(["plan", "rdma-dmabuf", "--root", root.to_str().unwrap()])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(
        text.contains("intel_iommu=on") && text.contains("CPU vendor is unknown"),
        "{text}"
    );
    let out = gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            "--cpu-vendor",
            "amd",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        !stdout_of(&out).contains("intel_iommu"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn only_arguments_gdrprov_added_are_removed_later() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    // The user already runs with iommu=pt; gdrprov adds only intel_iommu=on.
    let grub = root.join("etc/default/grub");
    let text = std::fs::read_to_string(&grub).unwrap().replace(
        "console=ttyS0,115200n8\"",
        "console=ttyS0,115200n8 iommu=pt\"",
    );
    std::fs::write(&grub, &text).unwrap();
    assert!(apply(&root, "rdma-dmabuf").status.success());
    assert_eq!(
        effective(&root),
        [
            "console=tty1",
            "console=ttyS0,115200n8",
            "iommu=pt",
            "intel_iommu=on"
        ]
    );
    // A profile without boot settings releases what gdrprov added, and only that.
    let out = apply(&root, "legacy-peermem");
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(&grub).unwrap(),
        text,
        "user's iommu=pt must stay, gdrprov's intel_iommu=on must go"
    );
}

#[test]
fn gds_replaces_passthrough_with_off() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    assert!(apply(&root, "rdma-dmabuf").status.success());
    let out = apply(&root, "gds-iommu-off");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let args = effective(&root);
    assert!(args.contains(&"iommu=off".to_string()), "{args:?}");
    assert!(
        !args
            .iter()
            .any(|a| a == "iommu=pt" || a == "intel_iommu=on"),
        "{args:?}"
    );
}

#[test]
fn rollback_restores_grub_defaults_byte_for_byte() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let pristine = snapshot(&root);
    assert!(apply(&root, "rdma-dmabuf").status.success());
    assert!(apply(&root, "gds-iommu-off").status.success());
    let out = gdrprov()
        .args([
            "rollback",
            "--generation",
            "1",
            "-y",
            "--no-exec",
            "--root",
            root.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(
        text.contains("Reboot required:")
            && text.contains(
                "the kernel command line restored by the rollback takes effect at the next boot"
            ),
        "a restored command line needs a reboot: {text}"
    );
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of both generations",
    );
}

#[test]
fn an_unsafe_grub_defaults_file_is_refused_untouched() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let grub = root.join("etc/default/grub");
    let text = std::fs::read_to_string(&grub).unwrap().replace(
        "GRUB_CMDLINE_LINUX=\"console",
        "GRUB_CMDLINE_LINUX=\"$(cat /etc/extra-args) console",
    );
    std::fs::write(&grub, text).unwrap();
    let before = snapshot(t.path());
    let out = apply(&root, "rdma-dmabuf");
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("etc/default/grub:") && err.contains("gdrprov will not edit"),
        "{err}"
    );
    assert_same(&snapshot(t.path()), &before, "refused apply");
}
