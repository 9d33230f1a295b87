//! The boot switch last (issue 37), per boot shape: in the plan, the switch
//! (update-grub; the loader entry written with its new options; the UKI
//! rebuilt) comes after every initramfs rebuild and every file no boot loader
//! reads, and the rebuild holds the boot file it switches on the initramfs it
//! loads now. Pure: worlds of facts, no root.

use crate::facts::boot_shape::{CmdlineHome, KernelImage, SdBoot};
use crate::facts::OsFamily;
use crate::plan::inputs::KernelModules;
use crate::plan::modules::testkit::{desired, World};
use crate::plan::{Action, Plan};

const K: &str = "6.1.0-56-amd64";
const PROFILE: &str =
    "boot: { cmdline: { present: [gdrprov_pc=1] } }\nmodules: { absent: [virtio_scsi] }";
const MODULES_ONLY: &str = "modules: { absent: [virtio_scsi] }";
const ENTRY: &str = "/boot/efi/loader/entries/4f1c-6.1.0-56-amd64.conf";

/// Kernel K whose initramfs holds the module the profiles block.
fn with_kernel(w: &mut World) {
    w.seen.kernels = vec![KernelModules {
        release: K.into(),
        builtin: Some(Default::default()),
        index: Some(["virtio_scsi".to_string()].into()),
        ko_files: Default::default(),
        has_kernel_dir: true,
    }];
    w.seen
        .initramfs
        .insert(K.into(), Some(["virtio_scsi".to_string()].into()));
}

fn grub() -> World {
    let mut w = World::image(OsFamily::Debian);
    w.seen.grub.defaults = vec![(
        "/etc/default/grub".into(),
        Ok(Some("GRUB_CMDLINE_LINUX=\"quiet\"\n".into())),
    )];
    w.seen.grub.has_update_grub = true;
    w.seen.grub.cfg = Some(format!(
        "menuentry 'Debian' {{\n\tlinux\t/boot/vmlinuz-{K} root=/dev/vda1 ro quiet\n\tinitrd\t/boot/initrd.img-{K}\n}}\n"
    ));
    w.facts.boot.cmdline_home = CmdlineHome::OnHost {
        evidence: "/boot/grub/grub.cfg".into(),
    };
    with_kernel(&mut w);
    w
}

fn sdboot(layout: Option<&str>) -> World {
    let mut w = World::image(OsFamily::Debian);
    let uki = layout == Some("uki");
    w.facts.boot.cmdline_home = CmdlineHome::SystemdBoot(SdBoot {
        esp: "/boot/efi".into(),
        entries: if uki { vec![] } else { vec![ENTRY.into()] },
        ukis: if uki {
            vec![format!("/boot/efi/EFI/Linux/4f1c-{K}.efi")]
        } else {
            vec![]
        },
        layout: layout.map(str::to_string),
        kernel_install: true,
        kernel_images: vec![KernelImage {
            version: K.into(),
            path: format!("/boot/vmlinuz-{K}"),
        }],
        efi_default: None,
        efi_oneshot: None,
        efi_selected: None,
    });
    w.file("/etc/kernel/cmdline", "root=/dev/vda2 ro\n");
    if !uki {
        w.file(ENTRY, &format!("title Debian\nversion {K}\noptions root=/dev/vda2 ro\nlinux /4f1c/{K}/linux\ninitrd /4f1c/{K}/initrd.img-{K}\n"));
    }
    with_kernel(&mut w);
    w
}

/// The plan's steps as `tool` (commands) or `>path` (files), and the holds
/// of the initramfs rebuild.
fn steps_of(p: &Plan) -> (Vec<String>, Vec<(String, String)>) {
    let mut holds = Vec::new();
    let steps = p
        .changes
        .iter()
        .map(|c| match &c.action {
            Action::Run { command } => {
                if command.rebuilds_initramfs() {
                    holds.extend(
                        command
                            .hold
                            .iter()
                            .map(|h| (h.reader.clone(), h.file.clone())),
                    );
                }
                command.argv[0].clone()
            }
            _ => format!(">{}", c.path().unwrap_or_default()),
        })
        .collect();
    (steps, holds)
}

fn at(steps: &[String], what: &str) -> usize {
    steps
        .iter()
        .position(|s| s == what)
        .unwrap_or_else(|| panic!("no {what} in {steps:?}"))
}

/// Every file no boot loader reads and the rebuild come before the switch.
#[track_caller]
fn switch_last(steps: &[String], switch: &str) {
    let s = at(steps, switch);
    assert!(at(steps, "update-initramfs") < s, "{steps:?}");
    for (i, step) in steps.iter().enumerate() {
        if step.starts_with(">/etc/") {
            assert!(i < s, "{step} after the switch: {steps:?}");
        }
    }
}

#[test]
fn grub_rebuilds_holding_grub_cfg_then_update_grub() {
    let p = grub().plan(&desired(PROFILE)).0.unwrap();
    let (steps, holds) = steps_of(&p);
    switch_last(&steps, "update-grub");
    assert_eq!(
        holds,
        [(
            "/boot/grub/grub.cfg".to_string(),
            format!("/boot/initrd.img-{K}")
        )]
    );
    // No new command line: nothing to switch, the initramfs is rebuilt in
    // place (the line is the same on both sides) and grub.cfg is not held.
    let p = grub().plan(&desired(MODULES_ONLY)).0.unwrap();
    let (steps, holds) = steps_of(&p);
    assert!(!steps.contains(&"update-grub".to_string()), "{steps:?}");
    assert!(holds.is_empty(), "{holds:?}");
}

#[test]
fn systemd_boot_rebuilds_holding_the_entry_then_writes_it() {
    let p = sdboot(None).plan(&desired(PROFILE)).0.unwrap();
    let (steps, holds) = steps_of(&p);
    let entry = format!(">{ENTRY}");
    switch_last(&steps, &entry);
    assert_eq!(at(&steps, &entry), steps.len() - 1, "{steps:?}");
    assert_eq!(
        holds,
        [(
            ENTRY.to_string(),
            format!("/boot/efi/4f1c/{K}/initrd.img-{K}")
        )]
    );
    let p = sdboot(None).plan(&desired(MODULES_ONLY)).0.unwrap();
    assert!(steps_of(&p).1.is_empty());
}

/// A UKI holds the command line and the initramfs in one file, rebuilt
/// whole by kernel-install after the initramfs: nothing to hold.
#[test]
fn a_uki_is_rebuilt_after_the_initramfs_and_nothing_is_held() {
    let p = sdboot(Some("uki")).plan(&desired(PROFILE)).0.unwrap();
    let (steps, holds) = steps_of(&p);
    switch_last(&steps, "kernel-install");
    assert!(holds.is_empty(), "{holds:?}");
}

const BLS: &str = "/boot/loader/entries/3c1d-6.1.0-56-amd64.conf";
const RESCUE: &str = "/boot/loader/entries/3c1d-0-rescue.conf";

/// Rocky with BLS entries, literal options (RHEL 9) or `$kernelopts`
/// (RHEL 8).
fn rhel(options: &str) -> World {
    let mut w = World::image(OsFamily::Rhel);
    w.seen.grub.defaults = vec![(
        "/etc/default/grub".into(),
        Ok(Some("GRUB_CMDLINE_LINUX=\"rhgb quiet\"\n".into())),
    )];
    w.seen.grub.grubenv_bls = Some("kernelopts=root=/dev/vda1 ro rhgb quiet\n".into());
    w.seen.grub.bls_entries = vec![
        (
            BLS.rsplit('/').next().unwrap().into(),
            format!("title Rocky\nversion {K}\nlinux /vmlinuz-{K}\ninitrd /initramfs-{K}.img $tuned_initrd\noptions {options}\ngrub_class rocky\n"),
        ),
        (
            RESCUE.rsplit('/').next().unwrap().into(),
            "title Rescue\nversion 0-rescue-3c1d\nlinux /vmlinuz-0-rescue-3c1d\ninitrd /initramfs-0-rescue-3c1d.img\noptions root=/dev/vda1 ro\n".into(),
        ),
    ];
    w.facts.boot.cmdline_home = CmdlineHome::OnHost {
        evidence: "/boot/loader/entries".into(),
    };
    with_kernel(&mut w);
    w
}

/// RHEL's BLS entries: dracut holds the entry, gdrprov's write of the
/// entry's final text (grubby's options, the rebuilt initramfs) is the
/// switch, and grubby comes after it.
#[test]
fn rhel_bls_rebuilds_holding_the_entry_then_writes_it_before_grubby() {
    let p = rhel("root=/dev/vda1 ro rhgb quiet")
        .plan(&desired(PROFILE))
        .0
        .unwrap();
    let (steps, holds) = steps_of(&p);
    let entry = format!(">{BLS}");
    assert!(at(&steps, "dracut") < at(&steps, &entry), "{steps:?}");
    assert!(at(&steps, &entry) < at(&steps, "grubby"), "{steps:?}");
    for (i, step) in steps.iter().enumerate() {
        if step.starts_with(">/etc/") {
            assert!(
                i < at(&steps, "dracut"),
                "{step} after the rebuild: {steps:?}"
            );
        }
    }
    assert_eq!(
        holds,
        [(BLS.to_string(), format!("/boot/initramfs-{K}.img"))]
    );
    // An entry grubby changes without a rebuild is written too (for the
    // journal), not held, before grubby.
    assert!(
        at(&steps, &format!(">{RESCUE}")) < at(&steps, "grubby"),
        "{steps:?}"
    );
    let after = crate::plan::modules::testkit::written(&p, BLS).unwrap();
    assert!(
        after.contains("\noptions root=/dev/vda1 ro rhgb quiet gdrprov_pc=1\n"),
        "{after}"
    );
    assert!(
        after.contains(&format!("\ninitrd /initramfs-{K}.img $tuned_initrd\n")),
        "{after}"
    );
    // No new command line: no grubby, nothing held, no switch.
    let p = rhel("root=/dev/vda1 ro rhgb quiet")
        .plan(&desired(MODULES_ONLY))
        .0
        .unwrap();
    let (steps, holds) = steps_of(&p);
    assert!(
        holds.is_empty() && !steps.contains(&entry),
        "{steps:?} {holds:?}"
    );
    // --no-exec: nothing runs, so nothing is switched either.
    let mut w = rhel("root=/dev/vda1 ro rhgb quiet");
    w.no_exec = true;
    let p = w.plan(&desired(PROFILE)).0.unwrap();
    assert!(!steps_of(&p).0.contains(&entry), "{:?}", steps_of(&p).0);
}

/// An RHEL 8 entry reads its line from grubenv (`$kernelopts`), which
/// grubby edits: held with grubenv's line written out, and switched to the
/// new line written out, before grubby (other variables kept). Where grubenv
/// has no plain `kernelopts`, not held, and the plan says why.
#[test]
fn rhel_8_kernelopts_entries_are_held_with_their_line_written_out() {
    let p = rhel("$kernelopts $tuned_params")
        .plan(&desired(PROFILE))
        .0
        .unwrap();
    let (steps, holds) = steps_of(&p);
    let entry = format!(">{BLS}");
    assert_eq!(
        holds,
        [(BLS.to_string(), format!("/boot/initramfs-{K}.img"))]
    );
    assert!(at(&steps, "dracut") < at(&steps, &entry), "{steps:?}");
    assert!(at(&steps, &entry) < at(&steps, "grubby"), "{steps:?}");
    let held_line = p.changes.iter().find_map(|c| match &c.action {
        Action::Run { command } if command.rebuilds_initramfs() => {
            command.hold.first().and_then(|h| h.kernelopts.clone())
        }
        _ => None,
    });
    assert_eq!(held_line.as_deref(), Some("root=/dev/vda1 ro rhgb quiet"));
    let after = crate::plan::modules::testkit::written(&p, BLS).unwrap();
    assert!(
        after.contains("\noptions root=/dev/vda1 ro rhgb quiet $tuned_params gdrprov_pc=1\n"),
        "{after}"
    );
    assert!(
        p.warnings.iter().all(|w| !w.contains("$kernelopts")),
        "{:?}",
        p.warnings
    );
    // No plain kernelopts in grubenv: not held, not written, said.
    let mut w = rhel("$kernelopts");
    w.seen.grub.grubenv_bls = Some("saved_entry=x\n".into());
    let p = w.plan(&desired(PROFILE)).0.unwrap();
    let (steps, holds) = steps_of(&p);
    assert!(holds.is_empty(), "{holds:?}");
    assert!(!steps.contains(&entry), "{steps:?}");
    assert!(at(&steps, "dracut") < at(&steps, "grubby"), "{steps:?}");
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains(BLS) && w.contains("$kernelopts")),
        "{:?}",
        p.warnings
    );
}
