//! The boot switch last (issue 37): what a boot loader reads names the new
//! command line only once the initramfs it will load is rebuilt and on disk,
//! and never the old command line with the rebuilt initramfs. On a real GRUB
//! root and a real systemd-boot root (chroots with a real /bin/sh; shell
//! scripts stand in for update-initramfs and update-grub), a profile that adds
//! kernel arguments and blocks a module inside the initramfs (rdma-dmabuf:
//! `iommu=pt`, nvidia_peermem) is applied and rolled back, killed after every
//! step, and recovered: at every instant the boot file's command line and the
//! initramfs it loads are of the same side. The stand-in update-initramfs
//! writes `blocked` into the image when gdrprov's modprobe.d file is there,
//! `plain` when not, as the real one copies /etc/modprobe.d into it.

use crate::boot_shapes::{put, sdboot_root, MID};
use crate::common::*;
use crate::reliability::{chroot_root, install_with_libs, is_root, write_script};
use std::path::{Path, PathBuf};
use std::process::Output;

const K: &str = "6.8.0-49-generic";
const ESP: &str = "/boot/efi";
const REBUILD: &str = "#!/bin/sh\nk=$3\nif [ -f /etc/modprobe.d/gdrprov-blacklist.conf ]; then echo blocked; else echo plain; fi > /boot/initrd.img-$k\n";

pub(crate) fn gd(root: &Path, args: &[&str]) -> Output {
    gdrprov()
        .args(args)
        .args(["--root", &root.display().to_string()])
        .output()
        .unwrap()
}

#[track_caller]
pub(crate) fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}\n{}",
        out.status.code(),
        stdout_of(out),
        stderr_of(out)
    );
}

/// The two boot shapes: where the boot file is and what prefixes the paths
/// it names (the ESP for systemd-boot).
#[derive(Clone, Copy, Debug)]
enum Shape {
    Grub,
    SdBoot,
}

impl Shape {
    fn reader(self) -> String {
        match self {
            Shape::Grub => "/boot/grub/grub.cfg".into(),
            Shape::SdBoot => format!("{ESP}/loader/entries/{MID}-{K}.conf"),
        }
    }

    fn initrd(self) -> String {
        match self {
            Shape::Grub => format!("/boot/initrd.img-{K}"),
            Shape::SdBoot => format!("{ESP}/{MID}/{K}/initrd.img-{K}"),
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Shape::Grub => "",
            Shape::SdBoot => ESP,
        }
    }

    fn root(self) -> (tempfile::TempDir, PathBuf) {
        match self {
            Shape::Grub => grub_root(),
            Shape::SdBoot => sdboot_chroot(),
        }
    }
}

/// Ubuntu with GRUB: grub.cfg loads /boot/initrd.img-K; update-grub
/// writes it from /etc/default/grub and notes what initrd it switches to.
fn grub_root() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = chroot_root(false);
    common_parts(&root);
    put(&root, "/boot/grub/grub.cfg", &grub_cfg("quiet splash"));
    write_script(
        &root,
        "/usr/sbin/update-grub",
        &format!(
            "#!/bin/sh\n. /etc/default/grub\nprintf \"menuentry 'Ubuntu' {{\\n\\tlinux\\t/boot/vmlinuz-{K} root=/dev/sda1 ro %s %s\\n\\tinitrd\\t/boot/initrd.img-{K}\\n}}\\n\" \"$GRUB_CMDLINE_LINUX\" \"$GRUB_CMDLINE_LINUX_DEFAULT\" > /boot/grub/grub.cfg.new\nwhile IFS= read -r l; do echo \"$l\"; done < /boot/grub/grub.cfg.new > /boot/grub/grub.cfg\nwhile IFS= read -r l; do echo \"$l\"; done < /boot/initrd.img-{K} > /run/initrd-at-switch\n"
        ),
    );
    (t, root)
}

fn grub_cfg(args: &str) -> String {
    format!("menuentry 'Ubuntu' {{\n\tlinux\t/boot/vmlinuz-{K} root=/dev/sda1 ro {args}\n\tinitrd\t/boot/initrd.img-{K}\n}}\n")
}

/// Debian 13 with systemd-boot: the entry of kernel K loads its initrd from
/// the ESP, where gdrprov places the rebuilt one.
fn sdboot_chroot() -> (tempfile::TempDir, PathBuf) {
    let (t, root) = sdboot_root(ESP, false);
    install_with_libs(&root, "/bin/dash", "/bin/sh");
    std::fs::create_dir_all(root.join("run")).unwrap();
    let entry = std::fs::read_to_string(root.join(format!(
        "{}/loader/entries/{MID}-6.12.43+deb13-amd64.conf",
        &ESP[1..]
    )))
    .unwrap()
    .replace("6.12.43+deb13-amd64", K);
    for d in ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"] {
        let _ =
            std::fs::remove_file(root.join(format!("{}/loader/entries/{MID}-{d}.conf", &ESP[1..])));
    }
    put(&root, &Shape::SdBoot.reader(), &entry);
    put(&root, &Shape::SdBoot.initrd(), "plain\n");
    put(&root, &format!("{ESP}/{MID}/{K}/linux"), "kernel\n");
    common_parts(&root);
    (t, root)
}

/// Kernel K with nvidia_peermem in its initramfs, the stand-ins of
/// lsinitramfs and update-initramfs; the latter notes what the boot file
/// says while it runs.
fn common_parts(root: &Path) {
    put(
        root,
        &format!("/lib/modules/{K}/modules.dep"),
        "kernel/drivers/infiniband/nvidia-peermem.ko:\n",
    );
    put(root, &format!("/boot/initrd.img-{K}"), "plain\n");
    for d in ["usr/sbin", "etc/modprobe.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    write_script(
        root,
        "/usr/sbin/lsinitramfs",
        "#!/bin/sh\necho usr/lib/modules/x/kernel/drivers/infiniband/nvidia-peermem.ko\n",
    );
    let note = "for f in /boot/grub/grub.cfg /boot/efi/loader/entries/*.conf; do [ -f $f ] && while IFS= read -r l; do echo \"$l\"; done < $f; done > /run/boot-file-during-rebuild\nexit 0\n";
    write_script(
        root,
        "/usr/sbin/update-initramfs",
        &format!("{REBUILD}{note}"),
    );
}

/// What the boot file boots now: whether its command line is the new one
/// (`iommu=pt`), whether the initramfs it loads is the new one (`blocked`),
/// and that initramfs's path.
fn side(root: &Path, shape: Shape) -> (bool, bool, String) {
    let text = std::fs::read_to_string(root.join(&shape.reader()[1..])).unwrap();
    let line_new = text
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("linux") || l.starts_with("options"))
        .any(|l| l.split_whitespace().any(|a| a == "iommu=pt"));
    let initrd = text
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with("initrd"))
        .and_then(|l| l.split_whitespace().last())
        .map(|p| format!("{}{p}", shape.prefix()))
        .unwrap_or_default();
    let content = std::fs::read_to_string(root.join(initrd.trim_start_matches('/')))
        .unwrap_or_else(|e| {
            panic!("{shape:?}: the boot file loads {initrd}, which cannot be read: {e}")
        });
    (line_new, content == "blocked\n", initrd)
}

#[track_caller]
fn same_side(root: &Path, shape: Shape, when: &str) -> bool {
    let (line_new, initrd_new, initrd) = side(root, shape);
    assert_eq!(
        line_new,
        initrd_new,
        "{shape:?} {when}: the boot would run the {} command line with the {} initramfs ({initrd})",
        if line_new { "new" } else { "old" },
        if initrd_new { "new" } else { "old" }
    );
    line_new
}

pub(crate) fn held_left(root: &Path) -> Vec<String> {
    snapshot(root)
        .into_keys()
        .filter(|p| p.contains(".gdrprov-held"))
        .collect()
}

/// The plan: the initramfs rebuild holds the boot file and comes before the
/// switch (update-grub; the entry's write), which comes last.
fn plan_order(root: &Path, shape: Shape) -> usize {
    let v = planned(root);
    let changes = v["changes"].as_array().unwrap_or_else(|| panic!("{v:#}"));
    let at = |f: &dyn Fn(&serde_json::Value) -> bool| changes.iter().position(f);
    let rebuild = at(&|c| runs(c, "update-initramfs")).expect("an initramfs rebuild");
    let hold = &changes[rebuild]["command"]["hold"][0];
    assert_eq!(hold["reader"], shape.reader().as_str(), "{v:#}");
    assert_eq!(hold["file"], shape.initrd().as_str(), "{v:#}");
    let switch = match shape {
        Shape::Grub => at(&|c| runs(c, "update-grub")),
        Shape::SdBoot => at(&|c| c["path"] == shape.reader().as_str()),
    }
    .expect("the switch");
    assert!(
        rebuild < switch,
        "the switch comes before the rebuild: {v:#}"
    );
    for (i, c) in changes.iter().enumerate() {
        let boot_file = c["path"].as_str().is_some_and(|p| p.starts_with("/boot"));
        assert!(
            i <= switch || !boot_file,
            "{} is written after the switch: {v:#}",
            c["path"]
        );
    }
    changes.len()
}

/// `plan rdma-dmabuf --force` on `root`, as JSON.
pub(crate) fn planned(root: &Path) -> serde_json::Value {
    let out = gd(
        root,
        &["plan", "rdma-dmabuf", "--force", "--format", "json"],
    );
    ok(&out, "plan");
    json_of(&out)
}

/// Whether a planned change runs `tool`.
pub(crate) fn runs(c: &serde_json::Value, tool: &str) -> bool {
    c["command"]["argv"]
        .as_array()
        .is_some_and(|a| a.iter().any(|x| x == tool))
}

/// `rollback ARGS` on a fresh root from `applied` (what it undoes in
/// effect), killed after each step in turn, each then recovered: one side
/// at every kill and after it, the old side once recovered, no held copy
/// left.
fn rollback_killed_after_every_step(
    shape: Shape,
    applied: &dyn Fn() -> (tempfile::TempDir, PathBuf),
    args: &[&str],
) {
    for n in 1..=20 {
        let (_t, root) = applied();
        if !kill_after(&root, n, args) {
            assert!(n > 2, "{shape:?}: the rollback had only {} steps", n - 1);
            return;
        }
        same_side(&root, shape, &format!("rollback killed after step {n}"));
        ok(&gd(&root, &["recover", "-y"]), "recover");
        let new = same_side(&root, shape, &format!("recovered from rollback step {n}"));
        assert!(!new, "{shape:?}: recover did not complete the rollback");
        assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
    }
    panic!("{shape:?}: the rollback did not finish in 20 steps");
}

fn both(f: fn(Shape)) {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    f(Shape::Grub);
    f(Shape::SdBoot);
}

#[test]
fn apply_holds_the_boot_file_on_its_initramfs_until_the_switch() {
    both(|shape| {
        let (_t, root) = shape.root();
        plan_order(&root, shape);
        assert!(!same_side(&root, shape, "before"));
        ok(
            &gd(&root, &["apply", "rdma-dmabuf", "-y", "--force"]),
            "apply",
        );
        // While update-initramfs ran, the boot file had its old command line and
        // loaded the held copy of the old initramfs.
        let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
        assert!(
            during.contains(&format!("initrd.img-{K}.gdrprov-held"))
                && !during.contains("iommu=pt"),
            "{shape:?}: during the rebuild the boot file read:\n{during}"
        );
        if let Shape::Grub = shape {
            let at = std::fs::read_to_string(root.join("run/initrd-at-switch")).unwrap();
            assert_eq!(
                at, "blocked\n",
                "update-grub ran before the initramfs was rebuilt"
            );
        }
        assert!(same_side(&root, shape, "after apply"));
        let (_, _, initrd) = side(&root, shape);
        assert_eq!(initrd, shape.initrd());
        assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
        // Rollback: the same order, back to the old side.
        ok(&gd(&root, &["rollback", "-y"]), "rollback");
        let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
        assert!(
            during.contains(".gdrprov-held") && during.contains("iommu=pt"),
            "{shape:?}: during the rollback's rebuild the boot file read:\n{during}"
        );
        assert!(!same_side(&root, shape, "after rollback"));
        assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
    });
}

/// Killed after every step of apply, then of rollback: the boot file and
/// its initramfs are of one side, and `recover` keeps them so while it puts
/// back the apply (or completes the rollback).
#[test]
fn a_kill_after_any_step_and_its_recovery_boot_one_side() {
    both(|shape| {
        let (_t, root) = shape.root();
        let steps = plan_order(&root, shape);
        for n in 1..=steps {
            let (_t, root) = shape.root();
            kill_after(&root, n, &["apply", "rdma-dmabuf", "-y", "--force"]);
            same_side(&root, shape, &format!("apply killed after step {n}"));
            ok(&gd(&root, &["recover", "-y"]), "recover");
            let new = same_side(&root, shape, &format!("recovered from apply step {n}"));
            assert!(!new, "{shape:?}: recover of an apply left the new side");
            assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
        }
        let applied = || {
            let (t, root) = shape.root();
            ok(
                &gd(&root, &["apply", "rdma-dmabuf", "-y", "--force"]),
                "apply",
            );
            (t, root)
        };
        rollback_killed_after_every_step(shape, &applied, &["rollback", "-y"]);
    });
}

/// Runs `args` with a fault after step `n`; false when it had fewer steps
/// (it finished).
pub(crate) fn kill_after(root: &Path, n: usize, args: &[&str]) -> bool {
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", n.to_string())
        .args(args)
        .args(["--root", &root.display().to_string()])
        .output()
        .unwrap();
    match out.status.code() {
        None => true,
        Some(0) => false,
        Some(c) => panic!(
            "{args:?} with a fault after step {n}: exit {c}: {}",
            stderr_of(&out)
        ),
    }
}

/// Two applies rolled back together: the first rebuilt the initramfs
/// without switching the boot entry (only a module blocked: the entry's line
/// stays, so the rebuild held nothing), the second switched the entry
/// without a rebuild (a kernel argument added). This is how `apply --trial`
/// then `commit` leave the journal on systemd-boot (the trial entry is new;
/// the commit writes the default entry), which a chroot root cannot run
/// (the one-shot EFI variable). The rollback of both must still hold the
/// entry while it rebuilds, and put it back after (found by the systemd-boot
/// power-cut campaign, seed 3702 cut 1: a rollback of a trial and its
/// commit, cut during update-initramfs, booted the old line with the new
/// initramfs). Killed after every step, then `recover`: one side at every
/// instant.
#[test]
fn a_rollback_holds_the_entry_a_later_apply_switched_over_an_earlier_rebuild() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let shape = Shape::SdBoot;
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.yaml");
    let blocked = "name: p\nmodules:\n  absent: [nvidia_peermem]\n";
    std::fs::write(&first, blocked).unwrap();
    let second = dir.path().join("second.yaml");
    std::fs::write(
        &second,
        format!("{blocked}boot:\n  cmdline:\n    present: [iommu=pt]\n"),
    )
    .unwrap();
    let (first, second) = (first.to_str().unwrap(), second.to_str().unwrap());
    let both_applied = || {
        let (t, root) = shape.root();
        ok(
            &gd(&root, &["apply", first, "-y", "--force"]),
            "apply first",
        );
        let (line_new, initrd_new, _) = side(&root, shape);
        assert!(
            !line_new && initrd_new,
            "{shape:?}: the first apply switched the line"
        );
        ok(
            &gd(&root, &["apply", second, "-y", "--force"]),
            "apply second",
        );
        let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild"));
        assert!(during.is_ok(), "the first apply rebuilt the initramfs");
        assert!(same_side(&root, shape, "after both applies"));
        (t, root)
    };
    let (_t, root) = both_applied();
    let _ = std::fs::remove_file(root.join("run/boot-file-during-rebuild"));
    ok(
        &gd(&root, &["rollback", "--generation", "1", "-y"]),
        "rollback",
    );
    let during = std::fs::read_to_string(root.join("run/boot-file-during-rebuild")).unwrap();
    assert!(
        during.contains(".gdrprov-held") && during.contains("iommu=pt"),
        "during the rollback's rebuild the boot file read:\n{during}"
    );
    assert!(!same_side(&root, shape, "after rollback"));
    assert!(held_left(&root).is_empty(), "{:?}", held_left(&root));
    let args = ["rollback", "--generation", "1", "-y"];
    rollback_killed_after_every_step(shape, &both_applied, &args);
}
