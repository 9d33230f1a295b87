//! Extra boot entries, `boot list|once|set-default`, trial boots and
//! `commit`, on copies of the example roots (`--no-exec`: they have no real
//! GRUB). The generated /etc/grub.d script is checked with `sh -n` and run
//! with a fake grub-probe; GRUB's own `grub-script-check` must accept what it
//! prints.

use crate::common::*;
use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const GDS_ENTRY: &str = "extends: gds-iommu-off\nboot: { entry: gdrprov-gds }\n";

fn r(root: &Path) -> &str {
    root.to_str().unwrap()
}

fn state(root: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(root.join("var/lib/gdrprov/state.json")).unwrap())
        .unwrap()
}

fn gds_profile(t: &tempfile::TempDir) -> String {
    let p = t.path().join("my-gds.yaml");
    std::fs::write(&p, GDS_ENTRY).unwrap();
    p.display().to_string()
}

/// Runs a generated /etc/grub.d script the way grub-mkconfig would, with a
/// fake /boot (two kernels, one initrd) and a fake grub-probe; gives stdout.
fn run_grubd_script(script: &Path) -> String {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    std::fs::create_dir_all(d.join("boot")).unwrap();
    for f in [
        "vmlinuz-6.1.0-26-amd64",
        "vmlinuz-6.1.0-27-amd64",
        "initrd.img-6.1.0-27-amd64",
        "vmlinuz-6.1.0-28-amd64.dpkg-tmp",
    ] {
        std::fs::write(d.join("boot").join(f), "").unwrap();
    }
    let probe = d.join("grub-probe");
    std::fs::write(
        &probe,
        "#!/bin/sh\nfor a; do t=\"$a\"; done\ncase \"$t\" in\n --target=partmap) echo msdos;;\n --target=abstraction) ;;\n --target=fs) echo ext2;;\n --target=compatibility_hint) echo hd0,msdos1;;\n --target=fs_uuid) echo 0b6a-11;;\n --target=hints_string) ;;\n *) exit 1;;\nesac\n",
    )
    .unwrap();
    let relpath = d.join("grub-mkrelpath");
    std::fs::write(
        &relpath,
        format!("#!/bin/sh\necho \"${{1#{}}}\"\n", d.display()),
    )
    .unwrap();
    for p in [&probe, &relpath] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The one line that names /boot, pointed at the fake one.
    let text = std::fs::read_to_string(script).unwrap();
    let line = "for i in /boot/vmlinuz-* /vmlinuz-* ; do";
    assert!(text.contains(line), "{text}");
    let text = text.replace(
        line,
        &format!("for i in {}/boot/vmlinuz-* ; do", d.display()),
    );
    let copy = d.join("script");
    std::fs::write(&copy, text).unwrap();
    let out = std::process::Command::new("sh")
        .arg(&copy)
        .env("pkgdatadir", "/usr/share/grub")
        .env("grub_probe", &probe)
        .env("grub_mkrelpath", &relpath)
        .env("GRUB_DEVICE", "/dev/vda1")
        .env("GRUB_DEVICE_BOOT", "/dev/vda1")
        .env("GRUB_DEVICE_UUID", "0b6a-11")
        .output()
        .unwrap();
    assert!(out.status.success(), "script failed: {}", stderr_of(&out));
    stdout_of(&out)
}

fn grub_script_check(text: &str) {
    if !have("grub-script-check") {
        eprintln!("grub-script-check not installed (scripts/test.sh installs it); skipped");
        return;
    }
    let t = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(t.path(), text).unwrap();
    let out = std::process::Command::new("grub-script-check")
        .arg(t.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "grub-script-check rejects:\n{text}\n{}",
        stderr_of(&out)
    );
}

fn pending(v: &serde_json::Value) -> Vec<String> {
    v["pending_commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn debian_extra_entry_is_a_grubd_script_that_grub_accepts() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("etc/grub.d")).unwrap();
    let pristine = snapshot(&root);
    let gds = gds_profile(&t);
    let v = json_exits(
        0,
        &[
            "apply",
            "rdma-dmabuf",
            &gds,
            "-y",
            "--no-exec",
            "--root",
            r(&root),
        ],
    );
    let p = pending(&v);
    assert!(
        p.iter()
            .any(|c| c.ends_with("sh -n /etc/grub.d/42_gdrprov_gdrprov-gds"))
            && p.iter().any(|c| c.ends_with("update-grub"))
            && p.iter()
                .any(|c| c.ends_with("grub-script-check /boot/grub/grub.cfg")),
        "{p:?}"
    );
    // The default entry gets passthrough; the extra entry iommu=off.
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(grub.contains("iommu=pt intel_iommu=on"), "{grub}");
    let script = root.join("etc/grub.d/42_gdrprov_gdrprov-gds");
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755, "grub-mkconfig runs only executable scripts");
    let check = std::process::Command::new("sh")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(check.status.success(), "sh -n: {}", stderr_of(&check));
    let menu = run_grubd_script(&script);
    grub_script_check(&menu);
    assert!(
        menu.starts_with("menuentry 'gdrprov: gdrprov-gds (iommu=off)' ")
            && menu.contains("$menuentry_id_option 'gdrprov-gds' {"),
        "{menu}"
    );
    let linux = menu
        .lines()
        .find(|l| l.trim_start().starts_with("linux"))
        .unwrap();
    assert_eq!(
        linux.trim(),
        "linux\t/boot/vmlinuz-6.1.0-27-amd64 root=/dev/vda1 ro console=tty1 console=ttyS0,115200n8 iommu=off"
    );
    assert!(
        menu.contains("initrd\t/boot/initrd.img-6.1.0-27-amd64"),
        "{menu}"
    );

    // Idempotent; then a profile set without the entry removes the script.
    gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            &gds,
            "--no-exec",
            "--detailed-exitcode",
        ])
        .args(["--root", r(&root)])
        .assert()
        // Files are done; the commands an apply --no-exec left are owed:
        // pending, as plan says without --no-exec too (docs/commands.md).
        .code(2)
        .stdout(predicates::str::contains("Nothing to write"));
    ok(&[
        "apply",
        "rdma-dmabuf",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert!(!script.exists(), "the entry no profile wants is removed");
    ok(&[
        "rollback",
        "--generation",
        "1",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback",
    );
}

#[test]
fn bls_extra_entry_is_derived_from_the_default_entry_and_written_after_grubby() {
    let (t, root) = example_root("rocky-9-a100");
    let gds = gds_profile(&t);
    let v = json_exits(0, &["plan", "rdma-dmabuf", &gds, "--root", r(&root)]);
    let order: Vec<String> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["path"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| c["command"]["argv"][2].as_str().unwrap_or("").to_string())
        })
        .collect();
    let entry = "/boot/loader/entries/3c1d9f0e2b7a4e5c8d6f1a2b3c4d5e6f-gdrprov-gds.conf";
    let grubby = order.iter().position(|c| c == "grubby").unwrap();
    let write = order.iter().position(|c| c == entry).unwrap();
    assert!(
        write > grubby,
        "entry must be written after grubby: {order:?}"
    );

    ok(&[
        "apply",
        "rdma-dmabuf",
        &gds,
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    let text = std::fs::read_to_string(root.join(entry.trim_start_matches('/'))).unwrap();
    assert_eq!(
        text,
        "title Rocky Linux (5.14.0-427.13.1.el9_4.x86_64) 9.4 (Blue Onyx) (gdrprov gdrprov-gds)\n\
         version 5.14.0-427.13.1.el9_4.x86_64\n\
         linux /vmlinuz-5.14.0-427.13.1.el9_4.x86_64\n\
         initrd /initramfs-5.14.0-427.13.1.el9_4.x86_64.img $tuned_initrd\n\
         options root=/dev/mapper/rl-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rl-swap rd.lvm.lv=rl/root rd.lvm.lv=rl/swap rhgb quiet iommu=off\n\
         grub_users $grub_users\n\
         grub_arg --unrestricted\n\
         grub_class rocky\n"
    );
    // boot list shows it beside the default, and which one runs.
    let out = run(&["boot", "list", "--format", "json", "--root", r(&root)]);
    let v = json_of(&out);
    let entries = v["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{v}");
    let default: Vec<&serde_json::Value> =
        entries.iter().filter(|e| e["default"] == true).collect();
    assert_eq!(
        default[0]["id"],
        "3c1d9f0e2b7a4e5c8d6f1a2b3c4d5e6f-5.14.0-427.13.1.el9_4.x86_64"
    );
    assert_eq!(default[0]["running"], true, "{v}");
    let ours = entries.iter().find(|e| e["gdrprov"] == true).unwrap();
    assert_eq!(ours["running"], false);
    let out = run(&[
        "boot",
        "once",
        "gdrprov-gds",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert!(
        stdout_of(&out).contains("grub2-reboot 3c1d9f0e2b7a4e5c8d6f1a2b3c4d5e6f-gdrprov-gds"),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
}

const GRUB_CFG: &str = r#"#
# DO NOT EDIT THIS FILE
#
### BEGIN /etc/grub.d/00_header ###
if [ -s $prefix/grubenv ]; then
  set have_grubenv=true
  load_env
fi
if [ "${next_entry}" ] ; then
   set default="${next_entry}"
   set next_entry=
   save_env next_entry
   set boot_once=true
else
   set default="0"
fi
function load_video {
  insmod all_video
}
### BEGIN /etc/grub.d/10_linux ###
menuentry 'Ubuntu' --class ubuntu --class gnu-linux --class gnu --class os $menuentry_id_option 'gnulinux-simple-4f3c2a1e' {
	recordfail
	load_video
	insmod gzio
	if [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi
	search --no-floppy --fs-uuid --set=root 4f3c2a1e
	linux	/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8
	initrd	/boot/initrd.img-5.15.0-119-generic
}
submenu 'Advanced options for Ubuntu' $menuentry_id_option 'gnulinux-advanced-4f3c2a1e' {
	menuentry 'Ubuntu, with Linux 5.15.0-119-generic' --class ubuntu $menuentry_id_option 'gnulinux-5.15.0-119-generic-advanced-4f3c2a1e' {
		linux	/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8
	}
	menuentry 'Ubuntu, with Linux 5.15.0-119-generic (recovery mode)' --class ubuntu $menuentry_id_option 'gnulinux-5.15.0-119-generic-recovery-4f3c2a1e' {
		linux	/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro recovery nomodeset dis_ucode_ldr console=tty1 console=ttyS0,115200n8
	}
}
### BEGIN /etc/grub.d/42_gdrprov_gdrprov-gds ###
menuentry 'gdrprov: gdrprov-gds (iommu=off)' --class gnu-linux --class gnu --class os $menuentry_id_option 'gdrprov-gds' {
	insmod gzio
	search --no-floppy --fs-uuid --set=root 4f3c2a1e
	linux	/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8 iommu=off
	initrd	/boot/initrd.img-5.15.0-119-generic
}
"#;

#[test]
fn boot_list_once_and_set_default_on_grub_cfg() {
    let root = Root::example("ubuntu-22.04-h100");
    grub_script_check(GRUB_CFG);
    std::fs::write(root.join("boot/grub/grub.cfg"), GRUB_CFG).unwrap();
    std::fs::write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8 iommu=off\n",
    )
    .unwrap();
    let before = snapshot(&root);
    let out = run(&["boot", "list", "--format", "json", "--root", r(&root)]);
    let v = json_of(&out);
    let ids: Vec<&str> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            "gnulinux-simple-4f3c2a1e",
            "gnulinux-advanced-4f3c2a1e>gnulinux-5.15.0-119-generic-advanced-4f3c2a1e",
            "gnulinux-advanced-4f3c2a1e>gnulinux-5.15.0-119-generic-recovery-4f3c2a1e",
            "gdrprov-gds"
        ]
    );
    assert_eq!(v["default"], "gnulinux-simple-4f3c2a1e");
    let e = &v["entries"][3];
    assert_eq!(
        (e["running"].as_bool(), e["gdrprov"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(v["entries"][0]["running"], false);
    let text = run(&["boot", "list", "--root", r(&root)]);
    assert!(
        stdout_of(&text).contains("gdrprov-gds  [running]")
            && stdout_of(&text).contains("gnulinux-simple-4f3c2a1e  [default]"),
        "{}",
        stdout_of(&text)
    );

    // once: grub-reboot (no GRUB_DEFAULT change: 00_header honours
    // next_entry whatever GRUB_DEFAULT is).
    let out = ok(&[
        "boot",
        "once",
        "gdrprov-gds",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert!(
        stdout_of(&out).ends_with("grub-reboot gdrprov-gds\n"),
        "{}",
        stdout_of(&out)
    );
    let out = run(&[
        "boot",
        "once",
        "gnulinux-5.15.0-119-generic-recovery-4f3c2a1e",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert!(
        stdout_of(&out).ends_with(
            "grub-reboot 'gnulinux-advanced-4f3c2a1e>gnulinux-5.15.0-119-generic-recovery-4f3c2a1e'\n"
        ),
        "an entry in a submenu by its own id: {}",
        stdout_of(&out)
    );
    let out = run(&["boot", "once", "nope", "--no-exec", "--root", r(&root)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("no boot entry `nope`") && stderr_of(&out).contains("gdrprov-gds"),
        "{}",
        stderr_of(&out)
    );
    // set-default: GRUB_DEFAULT=saved through the editor, then grub-set-default.
    let v = json_exits(
        0,
        &[
            "boot",
            "set-default",
            "gdrprov-gds",
            "--no-exec",
            "--root",
            r(&root),
        ],
    );
    let changes = v["changes"].as_array().unwrap();
    assert!(
        changes[0]["diff"]
            .as_str()
            .unwrap()
            .contains("-GRUB_DEFAULT=0\n+GRUB_DEFAULT=\"saved\""),
        "{v}"
    );
    let last = changes.last().unwrap()["command"]["argv"]
        .as_array()
        .unwrap();
    assert_eq!(last[last.len() - 2..], ["grub-set-default", "gdrprov-gds"]);
    assert_same(
        &snapshot(&root),
        &before,
        "--no-exec boot commands change nothing",
    );
}

#[test]
fn boot_commands_refuse_a_host_without_grub() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("etc")).unwrap();
    let out = run(&["boot", "list", "--root", t.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("work with GRUB and systemd-boot"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn trial_boot_then_commit_only_when_the_trial_runs() {
    let root = Root::example("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("etc/grub.d")).unwrap();
    let pristine = snapshot(&root);
    let grub_before = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    let v = json_exits(
        0,
        &[
            "apply",
            "rdma-dmabuf",
            "--trial",
            "-y",
            "--no-exec",
            "--root",
            r(&root),
        ],
    );
    let p = pending(&v);
    assert!(
        p.last().unwrap().ends_with("grub-reboot gdrprov-trial"),
        "{p:?}"
    );
    assert!(
        v["reboot_reasons"].to_string().contains("trial boot"),
        "{v}"
    );
    // The default entry is untouched; the trial entry has the new arguments.
    assert_eq!(
        std::fs::read_to_string(root.join("etc/default/grub")).unwrap(),
        grub_before
    );
    let script = root.join("etc/grub.d/42_gdrprov_gdrprov-trial");
    // The trial entry carries gdrprov's marker, which tells the trial boot apart.
    assert!(run_grubd_script(&script)
        .contains("console=ttyS0,115200n8 iommu=pt intel_iommu=on gdrprov.trial=1\n"));
    let s = state(&root);
    assert_eq!(s["trial"]["entry"], "gdrprov-trial");
    assert_eq!(s["trial"]["profiles"], serde_json::json!(["rdma-dmabuf"]));
    assert_eq!(
        s["trial"]["args"],
        serde_json::json!([
            "console=tty1",
            "console=ttyS0,115200n8",
            "iommu=pt",
            "intel_iommu=on"
        ])
    );
    assert_eq!(
        s["kernel_args"],
        serde_json::json!([]),
        "the default owns nothing yet"
    );
    // The boot after a trial: GRUB has cleared next_entry, so commit owes no
    // grub-editenv (the replaced-trial case is below).
    std::fs::write(
        root.join("boot/grub/grubenv"),
        "# GRUB Environment Block\nnext_entry=\n",
    )
    .unwrap();

    // Still on the old command line: the trial did not boot.
    let before = snapshot(&root);
    let out = run(&["commit", "--no-exec", "--root", r(&root)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("the trial entry (gdrprov-trial) is not what is running; it did not boot or was not chosen; nothing committed"),
        "{}",
        stderr_of(&out)
    );
    assert_same(&snapshot(&root), &before, "refused commit");

    // Booted into the trial: commit makes it the default.
    std::fs::write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on\n",
    )
    .unwrap();
    let v = json_exits(0, &["commit", "--no-exec", "--root", r(&root)]);
    let p = pending(&v);
    assert!(
        !p.iter().any(|c| c.contains("grub-reboot")),
        "a committed trial owes no one-shot boot: {p:?}"
    );
    assert!(p.iter().any(|c| c.ends_with("update-grub")), "{p:?}");
    assert!(!p.iter().any(|c| c.contains("grub-editenv")), "{p:?}");
    assert!(std::fs::read_to_string(root.join("etc/default/grub"))
        .unwrap()
        .contains("console=ttyS0,115200n8 iommu=pt intel_iommu=on\""));
    assert!(!script.exists(), "the trial entry is gone");
    let s = state(&root);
    assert!(s.get("trial").is_none(), "{s}");
    assert_eq!(
        s["kernel_args"],
        serde_json::json!(["iommu=pt", "intel_iommu=on"])
    );
    exits(1, &["commit", "--no-exec", "--root", r(&root)]);

    // Rollback of both generations restores everything.
    ok(&[
        "rollback",
        "--generation",
        "1",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    let mut now = without_state(snapshot(&root));
    let mut was = without_state(pristine);
    for test_edit in ["proc/cmdline", "boot/grub/grubenv"] {
        now.remove(test_edit);
        was.remove(test_edit);
    }
    assert_same(&now, &was, "rollback of trial + commit");
}

#[test]
fn a_trial_that_only_removes_an_argument_is_recognised() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("no-console.yaml");
    std::fs::write(&p, "boot: { cmdline: { absent: [console=tty1] } }\n").unwrap();
    ok(&[
        "apply",
        p.to_str().unwrap(),
        "--trial",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert_eq!(
        state(&root)["trial"]["removed"],
        serde_json::json!(["console=tty1"])
    );
    // The old default runs: every trial argument is there, but so is the
    // one the trial removes.
    let out = run(&["commit", "--no-exec", "--root", r(&root)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("has console=tty1, which the trial removes"),
        "{}",
        stderr_of(&out)
    );
    std::fs::write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=ttyS0,115200n8\n",
    )
    .unwrap();
    ok(&["commit", "--no-exec", "--root", r(&root)]);
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(
        grub.contains("GRUB_CMDLINE_LINUX=\"console=ttyS0,115200n8\""),
        "{grub}"
    );
}

#[test]
fn trial_needs_boot_settings_and_the_trial_name_is_reserved() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let before = snapshot(&root);
    let out = run(&[
        "apply",
        "legacy-peermem",
        "--trial",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("--trial"), "{}", stderr_of(&out));
    let p = t.path().join("bad.yaml");
    std::fs::write(&p, "boot: { iommu: off, entry: gdrprov-trial }\n").unwrap();
    let out = run(&[
        "apply",
        p.to_str().unwrap(),
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("reserved"), "{}", stderr_of(&out));
    assert_same(&snapshot(&root), &before, "refused");
}

/// The real `grub-mkconfig` (Debian's 00_header and 10_linux, and gdrprov's
/// script) on the example root's edited defaults, in a private mount
/// namespace where /boot, /etc/default, /etc/grub.d and grub-probe are
/// bind-mounted test copies, so nothing on this machine changes. Needs root
/// and `unshare`; skipped otherwise.
#[test]
fn real_grub_mkconfig_runs_the_generated_entry() {
    let euid = std::process::Command::new("id").arg("-u").output().unwrap();
    if stdout_of(&euid).trim() != "0"
        || !have("unshare")
        || !have("grub-mkconfig")
        || !Path::new("/etc/grub.d/10_linux").exists()
    {
        eprintln!("needs root, unshare and grub-mkconfig (grub-common); skipped");
        return;
    }
    let (t, root) = example_root("ubuntu-22.04-h100");
    let gds = gds_profile(&t);
    ok(&[
        "apply",
        "rdma-dmabuf",
        &gds,
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);

    let w = t.path().join("mk");
    for d in ["boot/grub", "grub.d", "default"] {
        std::fs::create_dir_all(w.join(d)).unwrap();
    }
    for f in ["vmlinuz-6.1.0-27-amd64", "initrd.img-6.1.0-27-amd64"] {
        std::fs::write(w.join("boot").join(f), "").unwrap();
    }
    for e in std::fs::read_dir("/etc/grub.d").unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), w.join("grub.d").join(e.file_name())).unwrap();
    }
    // Only the distribution's Linux entries and gdrprov's.
    for f in ["20_linux_xen", "30_os-prober", "30_uefi-firmware"] {
        let _ = std::fs::remove_file(w.join("grub.d").join(f));
    }
    std::fs::copy(
        root.join("etc/grub.d/42_gdrprov_gdrprov-gds"),
        w.join("grub.d/42_gdrprov_gdrprov-gds"),
    )
    .unwrap();
    std::fs::copy(root.join("etc/default/grub"), w.join("default/grub")).unwrap();
    let probe = w.join("grub-probe");
    std::fs::write(
        &probe,
        "#!/bin/sh\nt=\nfor a; do case \"$a\" in --target=*) t=\"$a\";; esac; done\ncase \"$t\" in\n --target=device) echo /dev/vda1;;\n --target=partmap) echo msdos;;\n --target=abstraction) ;;\n --target=fs) echo ext2;;\n --target=compatibility_hint) echo hd0,msdos1;;\n --target=fs_uuid) echo 0b6a-11;;\n --target=partuuid) echo 0b6a-01;;\n --target=hints_string) ;;\n --target=drive) echo '(hd0,msdos1)';;\n *) exit 1;;\nesac\n",
    )
    .unwrap();
    std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = w.join("grub.cfg");
    let script = format!(
        "mount --bind {w}/grub-probe /usr/sbin/grub-probe && mount --bind {w}/boot /boot && \
         mount --bind {w}/grub.d /etc/grub.d && mount --bind {w}/default /etc/default && \
         grub-mkconfig -o {cfg}",
        w = w.display(),
        cfg = cfg.display()
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .unwrap();
    if !out.status.success() && stderr_of(&out).contains("unshare") {
        eprintln!("unshare refused here ({}); skipped", stderr_of(&out).trim());
        return;
    }
    assert!(out.status.success(), "grub-mkconfig: {}", stderr_of(&out));
    let text = std::fs::read_to_string(&cfg).unwrap();
    grub_script_check(&text);
    std::fs::write(root.join("boot/grub/grub.cfg"), &text).unwrap();
    let out = run(&["boot", "list", "--format", "json", "--root", r(&root)]);
    let v = json_of(&out);
    let entries = v["entries"].as_array().unwrap();
    let first = &entries[0];
    assert_eq!(first["default"], true, "{v}");
    let args = first["args"].to_string();
    assert!(args.contains("\"iommu=pt\",\"intel_iommu=on\""), "{args}");
    let gds = entries.iter().find(|e| e["id"] == "gdrprov-gds").unwrap();
    assert_eq!(gds["title"], "gdrprov: gdrprov-gds (iommu=off)");
    let args: Vec<&str> = gds["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        args,
        [
            "root=/dev/vda1",
            "ro",
            "console=tty1",
            "console=ttyS0,115200n8",
            "iommu=off"
        ]
    );
    // As if the apply had run its commands (grub-mkconfig above did their
    // work): re-planning against the regenerated grub.cfg finds nothing stale.
    let mut s = state(&root);
    s["pending_commands"] = serde_json::json!([]);
    std::fs::write(
        root.join("var/lib/gdrprov/state.json"),
        serde_json::to_string(&s).unwrap(),
    )
    .unwrap();
    exits(
        0,
        &[
            "plan",
            "rdma-dmabuf",
            &gds_profile(&t),
            "--detailed-exitcode",
            "--root",
            r(&root),
        ],
    );
}

#[test]
fn a_trial_replaced_before_it_booted_cancels_its_one_shot_boot() {
    let root = Root::example("ubuntu-22.04-h100");
    ok(&[
        "apply",
        "rdma-dmabuf",
        "--trial",
        "-y",
        "--no-exec",
        "--root",
        r(&root),
    ]);
    // grub-reboot ran (as the pending command would have) and no boot since.
    std::fs::write(
        root.join("boot/grub/grubenv"),
        "# GRUB Environment Block\nnext_entry=gdrprov-trial\n",
    )
    .unwrap();
    let out = ok(&[
        "apply",
        "rdma-dmabuf",
        "-y",
        "--no-exec",
        "--format",
        "json",
        "--root",
        r(&root),
    ]);
    let p = pending(&json_of(&out));
    assert!(
        p.iter()
            .any(|c| c.ends_with("grub-editenv /boot/grub/grubenv unset next_entry")),
        "{p:?}"
    );
    assert!(!p.iter().any(|c| c.contains("grub-reboot")), "{p:?}");
    assert!(state(&root).get("trial").is_none());
}
