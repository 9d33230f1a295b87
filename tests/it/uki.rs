//! Issue 29, case 6: a Debian 13 host that boots a unified kernel image
//! through systemd-boot 257 (`layout=uki`, the UKIs in `$ESP/EFI/Linux`,
//! the kernels at `/boot/vmlinuz-VERSION` only). gdrprov rebuilds the UKI
//! from the kernel where Debian keeps it, and lists the type #2 entries in
//! `boot list` and `inventory` as `bootctl list` does. The host tree:
//! `hostgen::debian13_uki`.

use crate::common::*;
use crate::hostgen::{debian13_uki, UKI_ARGS, UKI_MID};
use std::path::Path;

const OLD: &str = "6.12.41+deb13-amd64";
const NEW: &str = "6.12.57+deb13-amd64";

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    gdrprov()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

#[test]
fn the_uki_is_rebuilt_from_the_kernel_in_boot_and_rolled_back() {
    let g = debian13_uki();
    let root = g.root.clone();
    let pristine = snapshot(&root);
    let args = ["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"];
    let out = run(&root, &[&args[..], &["--format", "json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let report = json_of(&out);
    let pending = report["pending_commands"].to_string();
    for v in [OLD, NEW] {
        let want = format!(r#""kernel-install","add","{v}","/boot/vmlinuz-{v}""#);
        assert!(pending.contains(&want), "{want}: {pending}");
    }
    assert_eq!(report["reboot_required"], true, "{report:#}");
    assert_eq!(
        std::fs::read_to_string(root.join("etc/kernel/cmdline")).unwrap(),
        format!("{UKI_ARGS} iommu=pt intel_iommu=on\n")
    );
    let out = run(&root, &["rollback", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback on the UKI host",
    );
    // Without any kernel image the refusal names both places looked at.
    for v in [OLD, NEW] {
        std::fs::remove_file(root.join(format!("boot/vmlinuz-{v}"))).unwrap();
    }
    let out = run(&root, &args);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("/usr/lib/modules/VERSION/vmlinuz nor /boot/vmlinuz-VERSION"),
        "{err}"
    );
}

#[test]
fn boot_list_shows_the_ukis_as_bootctl_does() {
    let g = debian13_uki();
    let root = &g.root;
    let v = json_of(&run(root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["loader"], "systemd-boot (/boot/efi)", "{v:#}");
    let (new, old) = (
        format!("{UKI_MID}-{NEW}.efi"),
        format!("{UKI_MID}-{OLD}.efi"),
    );
    // systemd-boot's order: same sort key (debian) and version (13 (trixie)),
    // then the id compared as a version, newest first; the first boots.
    assert_eq!(v["default"], new.as_str());
    let e = &v["entries"];
    assert_eq!(e.as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(e[0]["id"], new.as_str());
    assert_eq!(e[1]["id"], old.as_str());
    assert_eq!(e[0]["title"], "Debian GNU/Linux 13 (trixie)");
    assert_eq!(
        (
            &e[0]["default"],
            &e[0]["running"],
            &e[1]["default"],
            &e[1]["running"]
        ),
        (
            &serde_json::json!(true),
            &serde_json::json!(true),
            &serde_json::json!(false),
            &serde_json::json!(false)
        )
    );
    let want: Vec<String> = format!("{UKI_ARGS} systemd.machine_id={UKI_MID}")
        .split(' ')
        .map(String::from)
        .collect();
    assert_eq!(e[0]["args"], serde_json::json!(want));
    let text = stdout_of(&run(root, &["boot", "list"]));
    assert!(
        text.starts_with(&format!(
            "{new}  [default, running]\n    Debian GNU/Linux 13 (trixie)\n"
        )),
        "{text}"
    );
    // Without LoaderEntrySelected, the running UKI is the one whose
    // built-in command line is /proc/cmdline.
    let var = "sys/firmware/efi/efivars/LoaderEntrySelected-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";
    std::fs::remove_file(root.join(var)).unwrap();
    let v = json_of(&run(root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["entries"][0]["running"], true, "{v:#}");
    // set-default names the UKI by its file, as loader.conf wants it.
    let out = run(root, &["boot", "set-default", &old]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let conf = std::fs::read_to_string(root.join("boot/efi/loader/loader.conf")).unwrap();
    assert!(conf.contains(&format!("default {old}\n")), "{conf}");
    let v = json_of(&run(root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["default"], old.as_str(), "{v:#}");
}

#[test]
fn inventory_says_systemd_boot_with_its_ukis() {
    let g = debian13_uki();
    let root = &g.root;
    let v = json_of(&run(root, &["inventory", "--format", "json"]));
    let b = &v["facts"]["boot"];
    assert_eq!(b["kind"], "systemd-boot", "{b:#}");
    let home = &b["cmdline_home"];
    assert_eq!(home["kind"], "systemd-boot");
    assert_eq!(home["layout"], "uki");
    assert_eq!(
        home["ukis"],
        serde_json::json!([
            format!("/boot/efi/EFI/Linux/{UKI_MID}-{OLD}.efi"),
            format!("/boot/efi/EFI/Linux/{UKI_MID}-{NEW}.efi")
        ])
    );
    assert_eq!(
        home["kernel_images"][1]["path"],
        format!("/boot/vmlinuz-{NEW}")
    );
    let text = stdout_of(&run(root, &["inventory"]));
    let boot = text.lines().find(|l| l.starts_with("Boot:")).unwrap();
    assert!(
        boot.contains("systemd-boot (ESP /boot/efi")
            && boot.contains("2 unified kernel images")
            && boot.contains(&format!("running {UKI_MID}-{NEW}.efi")),
        "{boot}"
    );
}
