//! Which boot runs, as planning and verify see it (issue 16): a trial boot
//! that runs owes no reboot, a trial GRUB fell back from is reported as not
//! booted, an extra entry chosen with `boot once` is not drift; and what
//! rollback removes. On copies of the example roots (`--no-exec`); the live
//! loop with real reboots is tests/vm/scenarios/03-trial-boot.sh.

use crate::common::*;
use crate::util::*;
use std::path::Path;

const ROOT_ARGS: &str =
    "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro";
const TRIAL_REASON: &str = "the next boot (only) uses boot entry gdrprov-trial";

fn r(root: &Path) -> &str {
    root.to_str().unwrap()
}

fn boot_state(root: &Path, cmdline: &str, next_entry: &str) {
    std::fs::write(
        root.join("proc/cmdline"),
        format!("{ROOT_ARGS} {cmdline}\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("boot/grub/grubenv"),
        format!("# GRUB Environment Block\nnext_entry={next_entry}\n"),
    )
    .unwrap();
}

/// `apply --trial --dry-run` (planned as verify plans during a trial): its
/// reboot reasons.
fn trial_reboot_reasons(root: &Path) -> String {
    let out = ok(&[
        "apply",
        "rdma-dmabuf",
        "--trial",
        "--dry-run",
        "--no-exec",
        "--format",
        "json",
        "--root",
        r(root),
    ]);
    json_of(&out)["reboot_reasons"].to_string()
}

fn verify(root: &Path) -> (Option<i32>, serde_json::Value) {
    let out = run(&[
        "verify",
        "rdma-dmabuf",
        "--format",
        "json",
        "--root",
        r(root),
    ]);
    (out.status.code(), json_of(&out))
}

fn trial_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("etc/grub.d")).unwrap();
    ok(&[
        "apply",
        "rdma-dmabuf",
        "--trial",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    (t, root)
}

#[test]
fn a_trial_is_owed_a_reboot_only_until_it_had_its_boot() {
    let (_t, root) = trial_root();
    let script = std::fs::read_to_string(root.join("etc/grub.d/42_gdrprov_gdrprov-trial")).unwrap();
    assert!(
        script.contains("entry_args='console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on gdrprov.trial=1'"),
        "the trial entry carries the marker: {script}"
    );

    // Armed (grub-reboot wrote next_entry), the old default runs.
    boot_state(
        &root,
        "console=tty1 console=ttyS0,115200n8",
        "gdrprov-trial",
    );
    assert!(trial_reboot_reasons(&root).contains(TRIAL_REASON));
    let (_, v) = verify(&root);
    assert_eq!(check_named(&v, "trial")["status"], "skip", "{v:#}");

    // The trial entry runs; GRUB cleared next_entry.
    boot_state(
        &root,
        "console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on gdrprov.trial=1",
        "",
    );
    let reasons = trial_reboot_reasons(&root);
    assert!(
        !reasons.contains("trial boot"),
        "the running trial owes no reboot: {reasons}"
    );
    let (_, v) = verify(&root);
    let c = check_named(&v, "trial");
    assert_eq!(c["status"], "pass", "{c}");
    assert!(c["detail"]
        .as_str()
        .unwrap()
        .contains("started from the trial entry gdrprov-trial"));

    // commit edits the default entry to what already runs: no reboot owed.
    let v = json_exits(0, &["commit", "--no-exec", "--root", r(&root)]);
    assert!(
        v["reboot_reasons"].as_array().unwrap().is_empty(),
        "the running kernel has the committed arguments: {v:#}"
    );
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(
        grub.contains("console=ttyS0,115200n8 iommu=pt intel_iommu=on\""),
        "{grub}"
    );
}

#[test]
fn a_trial_grub_fell_back_from_is_reported_as_not_booted() {
    let (_t, root) = trial_root();
    // GRUB used the one-shot boot, the trial kernel failed, the default runs.
    boot_state(&root, "console=tty1 console=ttyS0,115200n8", "");
    let reasons = trial_reboot_reasons(&root);
    assert!(
        !reasons.contains(TRIAL_REASON),
        "no stale 'the next boot uses': {reasons}"
    );
    let (code, v) = verify(&root);
    assert_eq!(code, Some(3), "not ready: {v:#}");
    let c = check_named(&v, "trial");
    assert_eq!(c["status"], "fail", "{c}");
    let detail = c["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("the trial entry gdrprov-trial did not boot")
            && detail.contains("nothing was committed"),
        "{detail}"
    );
    assert!(!v.to_string().contains(TRIAL_REASON), "{v:#}");
    // The marker file of the first-boot unit says the same.
    let dir = tempfile::tempdir().unwrap();
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root", r(&root), "--marker-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let failed = std::fs::read_to_string(dir.path().join("failed")).unwrap();
    assert!(
        failed.contains("FAIL trial: the trial entry gdrprov-trial did not boot"),
        "{failed}"
    );
}

/// The ubuntu root's grub.cfg after `rdma-dmabuf` + the gdrprov-gds entry.
const GRUB_CFG: &str = "set default=\"0\"
menuentry 'Ubuntu' --class ubuntu $menuentry_id_option 'gnulinux-simple-4f3c2a1e' {
\tlinux\t/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on
}
menuentry 'gdrprov: gdrprov-gds (iommu=off)' --class gnu-linux $menuentry_id_option 'gdrprov-gds' {
\tlinux\t/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8 iommu=off
}
";

#[test]
fn a_running_extra_entry_chosen_on_purpose_is_not_drift() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("etc/grub.d")).unwrap();
    let gds = t.path().join("my-gds.yaml");
    std::fs::write(
        &gds,
        "extends: gds-iommu-off\nboot: { entry: gdrprov-gds }\n",
    )
    .unwrap();
    let gds = gds.to_str().unwrap();
    ok(&[
        "apply",
        "rdma-dmabuf",
        gds,
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    std::fs::write(root.join("boot/grub/grub.cfg"), GRUB_CFG).unwrap();
    let plan = |root: &Path| {
        let out = ok(&[
            "plan",
            "rdma-dmabuf",
            gds,
            "--format",
            "json",
            "--root",
            r(root),
        ]);
        json_of(&out)
    };
    // `boot once gdrprov-gds`, rebooted: iommu=off runs on purpose.
    boot_state(&root, "console=tty1 console=ttyS0,115200n8 iommu=off", "");
    let v = plan(&root);
    assert!(
        !v["reboot_reasons"].to_string().contains("iommu=off"),
        "the running extra entry's own arguments are not drift: {v:#}"
    );
    assert!(
        v["warnings"]
            .to_string()
            .contains("extra boot entry gdrprov-gds"),
        "{v:#}"
    );
    // The default entry with iommu=off by hand (not an entry of the profile) is drift.
    std::fs::write(
        root.join("proc/cmdline"),
        format!("{ROOT_ARGS} console=tty1 console=ttyS0,115200n8 iommu=off intel_iommu=on\n"),
    )
    .unwrap();
    let v = plan(&root);
    assert!(
        v["reboot_reasons"]
            .to_string()
            .contains("iommu=off is on the running kernel command line but must go"),
        "{v:#}"
    );
}

#[test]
fn rollback_of_a_module_block_needs_no_reboot() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("block.yaml");
    std::fs::write(&p, "modules: { absent: [rdma_rxe] }\n").unwrap();
    ok(&[
        "apply",
        p.to_str().unwrap(),
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert!(root.join("etc/modprobe.d/gdrprov-blacklist.conf").exists());
    let v = json_exits(0, &["rollback", "-y", "--no-exec", "--root", r(&root)]);
    assert!(
        v["reboot_reasons"].as_array().unwrap().is_empty(),
        "modprobe reads modprobe.d at every run: {v:#}"
    );
    assert!(!root.join("etc/modprobe.d/gdrprov-blacklist.conf").exists());
    assert!(
        root.join("etc/modprobe.d").is_dir(),
        "a directory gdrprov did not create stays"
    );
}
