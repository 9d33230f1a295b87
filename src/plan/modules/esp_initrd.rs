//! update-initramfs on a systemd-boot host with type #1 entries (Debian 12
//! and its kind): the new initramfs reaches the ESP whole or not at all.
//!
//! Debian's hook `/etc/initramfs/post-update.d/systemd-boot` runs
//! `kernel-install add`, whose `90-loaderentry.install` copies the kernel
//! (`linux`) and the new initrd onto the ESP with `install`: unlink, rewrite,
//! no fsync, on FAT. A power cut in the seconds before the ESP is synced
//! left the kernel unreadable and the host unbootable (systemd-boot power-cut
//! campaign, run 4 cut 9: `Error loading \MID\VERSION\linux: Unsupported`).
//! So gdrprov runs update-initramfs with `KERNEL_INSTALL_BYPASS=1`
//! (kernel-install then does nothing; systemd 252 and later) and copies the
//! new initrd itself to where the entries name it, through a temp file,
//! fsync and rename. The kernel on the ESP is never rewritten, and the loader
//! entry stays as gdrprov wrote it. Pure: reads facts and `ctx.seen`.
//!
//! Either way (and on GRUB, and on RHEL's BLS entries) the entry is held on
//! the initrd it loads while the initrd is rebuilt ([`holds`],
//! `gdrprov_boot::hold`): the new initrd goes where no boot reads it until the
//! switch, the entry written with its new options (systemd-boot, RHEL BLS:
//! `bls_switch`) or update-grub (GRUB), names it together with the new
//! command line.

use crate::facts::boot_shape::{CmdlineHome, SdBoot};
use crate::facts::OsFamily;
use crate::host::{CommandSpec, Hold, Placement};
use crate::plan::modules::Context;
use gdrprov_boot::sdboot::values;

/// What makes kernel-install do nothing.
pub const BYPASS: (&str, &str) = ("KERNEL_INSTALL_BYPASS", "1");

/// `spec` (update-initramfs of `kernel`) made to bypass kernel-install and
/// place the initrd itself, when the host boots type #1 entries through
/// systemd-boot that carry a kernel-install copy of that initrd; else
/// `spec` as it is (GRUB, UKIs, no entry for the kernel: kernel-install
/// then writes only new files, nothing a boot reads is torn).
pub fn initramfs_command(ctx: &Context, kernel: &str, spec: CommandSpec) -> CommandSpec {
    // Kept by `plan::build` only where the plan switches the boot file.
    let spec = CommandSpec {
        hold: holds(ctx, kernel),
        ..spec
    };
    let CmdlineHome::SystemdBoot(sd) = &ctx.facts.boot.cmdline_home else {
        return spec;
    };
    if ctx.facts.os.family == OsFamily::Rhel || sd.layout.as_deref() == Some("uki") {
        return spec;
    }
    let place = placements(ctx, sd, kernel);
    if place.is_empty() {
        return spec;
    }
    let to: Vec<&str> = place.iter().map(|p| p.to.as_str()).collect();
    CommandSpec {
        why: format!(
            "{}; kernel-install is bypassed and gdrprov puts the new initrd at {} itself, whole or not at all (kernel-install's copy is not crash-safe on the FAT ESP)",
            spec.why,
            to.join(", ")
        ),
        env: [(BYPASS.0.to_string(), BYPASS.1.to_string())].into(),
        place,
        ..spec
    }
}

/// Where the type #1 entries of `kernel` load Debian's initrd of it from:
/// each `initrd` line named `initrd.img-KERNEL` (what 90-loaderentry copies
/// from `/boot/initrd.img-KERNEL`), as a path under the ESP.
fn placements(ctx: &Context, sd: &SdBoot, kernel: &str) -> Vec<Placement> {
    let from = format!("/boot/initrd.img-{kernel}");
    let mut out: Vec<Placement> = Vec::new();
    for (_, to) in entry_initrds(ctx, sd, kernel) {
        if to != from && !out.iter().any(|p| p.to == to) {
            out.push(Placement {
                from: from.clone(),
                to,
            });
        }
    }
    out
}

/// Each type #1 entry of `kernel` with each initrd it loads that is named
/// `initrd.img-KERNEL` (a safe absolute path under the ESP): the entry's
/// path and the initrd's path inside the root.
fn entry_initrds(ctx: &Context, sd: &SdBoot, kernel: &str) -> Vec<(String, String)> {
    let name = format!("initrd.img-{kernel}");
    let mut out = Vec::new();
    for path in &sd.entries {
        let Some(text) = ctx.seen.file_fact(path) else {
            continue;
        };
        if !is_entry_of(text, kernel) {
            continue;
        }
        for rel in values(text, "initrd") {
            let safe = rel.starts_with('/') && !rel.split('/').any(|c| c == "..");
            if safe && rel.rsplit('/').next() == Some(name.as_str()) {
                out.push((
                    path.clone(),
                    format!("{}{rel}", sd.esp.trim_end_matches('/')),
                ));
            }
        }
    }
    out
}

/// The boot files that load the initrd of `kernel` in place and are held on
/// it while it is rebuilt: GRUB's grub.cfg (Debian family) where it loads
/// `/boot/initrd.img-KERNEL`; on systemd-boot the type #1 entries whose initrd
/// gdrprov places (see [`placements`]); on the RHEL family the BLS entries
/// that load `/boot/initramfs-KERNEL.img` (`bls_switch::holds`). Not: UKIs
/// (the command line and the initrd are one file, replaced whole), a root
/// booted from elsewhere.
pub fn holds(ctx: &Context, kernel: &str) -> Vec<Hold> {
    let name = format!("initrd.img-{kernel}");
    match &ctx.facts.boot.cmdline_home {
        CmdlineHome::SystemdBoot(sd) => {
            if ctx.facts.os.family == OsFamily::Rhel || sd.layout.as_deref() == Some("uki") {
                return Vec::new();
            }
            entry_initrds(ctx, sd, kernel)
                .into_iter()
                .map(|(reader, file)| Hold {
                    reader,
                    file,
                    kernelopts: None,
                })
                .collect()
        }
        CmdlineHome::OnHost { .. } if ctx.facts.os.family == OsFamily::Rhel => {
            super::bls_switch::holds(ctx, kernel)
        }
        CmdlineHome::OnHost { .. } => {
            let cfg = super::bootcfg::GRUB_CFG;
            match &ctx.seen.grub.cfg {
                Some(text) if gdrprov_boot::hold::names(text, &name) => vec![Hold {
                    reader: cfg.to_string(),
                    file: format!("/boot/{name}"),
                    kernelopts: None,
                }],
                _ => Vec::new(),
            }
        }
        _ => Vec::new(),
    }
}

/// Whether an entry boots `kernel`: its `version`, or a `linux` path in a
/// directory named after it (kernel-install's `/MID/VERSION/linux`).
fn is_entry_of(text: &str, kernel: &str) -> bool {
    values(text, "version").any(|v| v == kernel)
        || values(text, "linux").any(|l| l.split('/').any(|c| c == kernel))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENTRY: &str = "title      Debian GNU/Linux 12 (bookworm)\nversion    6.1.0-56-amd64\nmachine-id 4f1c\nsort-key   debian\noptions    root=/dev/vda2 ro systemd.machine_id=4f1c\nlinux      /4f1c/6.1.0-56-amd64/linux\ninitrd     /4f1c/6.1.0-56-amd64/initrd.img-6.1.0-56-amd64\n";

    #[test]
    fn an_entry_is_matched_by_version_or_its_kernel_directory() {
        assert!(is_entry_of(ENTRY, "6.1.0-56-amd64"));
        assert!(!is_entry_of(ENTRY, "6.1.0-5"));
        let no_version = ENTRY.replace("version    6.1.0-56-amd64\n", "");
        assert!(is_entry_of(&no_version, "6.1.0-56-amd64"));
        assert!(!is_entry_of(&no_version, "6.1.0-55-amd64"));
    }
}
