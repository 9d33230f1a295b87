//! Making what a boot loader reads durable *where the boot loader reads it*:
//! which filesystems, and how each is flushed. The host layer runs the
//! system calls (`host::Filesystem`); the choices are made here.
//!
//! GRUB reads ext4 and XFS without replaying their journals. A `grub.cfg`
//! that `update-grub` rewrote, even one whose transaction is committed to the
//! journal, may still have its inode and extents only in the journal: after a
//! power cut GRUB boots the old file (seen in the VM testbed: `apply`, power
//! cut 1-4 ms later, the next boot without `iommu=pt`). So after writing a
//! boot-loader file, the journal of the filesystem holding it must be
//! *checkpointed* (its blocks written to their home locations), not only
//! committed.
//!
//! How, per filesystem (decided here, reported in the outcome):
//! - ext4 (also ext2/3 mounted by the ext4 driver): `syncfs`, then
//!   `EXT4_IOC_CHECKPOINT` (Linux >= 5.13): the journal is committed and
//!   checkpointed without freezing anything, so no other writer blocks and a
//!   killed gdrprov can leave nothing frozen. `syncfs` alone writes home most
//!   of what it committed, but not a metadata block that another process put
//!   into the next running transaction meanwhile (an inode table block shared
//!   with a busy log file); the checkpoint covers that too. Older kernels:
//!   freeze/thaw as below.
//! - XFS (and other journalling filesystems GRUB reads: JFS, ReiserFS):
//!   `syncfs` does not write XFS's log home; a freeze/thaw cycle (FIFREEZE
//!   quiesces the log) does. This is what OSTree does for `/boot`.
//! - vfat (the ESP), btrfs, f2fs: `syncfs` is enough (no journal; btrfs and
//!   f2fs commit a transaction/checkpoint with the superblock on sync).
//! - Where the kernel refuses the ioctl (no CAP_SYS_ADMIN in a container, a
//!   filesystem already frozen by someone else): `syncfs` plus `sync`, and the
//!   outcome says that only a sync was possible.
//!
//! A freeze is never left behind: the host layer forks a watchdog around it
//! (`host::flush`).
//!
//! On an image root (`--root DIR`) nothing is frozen or checkpointed: each
//! filesystem under the root that holds boot files gets a `syncfs`; the
//! image's journal is checkpointed when the builder unmounts it, and the
//! builder's own `/` must never be frozen.

use crate::error::{Error, Result};
use crate::host::{self, Durable, DurableMethod as Method, Filesystem, Host};
use nix::sys::statfs;

/// Directories whose filesystems hold what boot loaders read: GRUB's
/// `grub.cfg` and `grubenv` (BIOS and EFI), BLS / systemd-boot entries, the
/// ESP with its UKIs (`EFI/Linux`), kernels and initramfs images.
const BOOT_DIRS: &[&str] = &[
    "/boot",
    "/boot/grub",
    "/boot/grub2",
    "/boot/loader",
    "/boot/loader/entries",
    "/boot/efi",
    "/boot/efi/EFI",
    "/boot/efi/loader",
    "/boot/efi/EFI/Linux",
    "/efi",
    "/efi/EFI",
    "/efi/loader",
    "/efi/EFI/Linux",
];

/// Tools that write files a boot loader reads (`grub.cfg`, `grubenv`, BLS
/// entries, initramfs images, UKIs).
const BOOT_TOOLS: &[&str] = &[
    "update-grub",
    "update-grub2",
    "grub-mkconfig",
    "grub2-mkconfig",
    "grub-install",
    "grub2-install",
    "grub-reboot",
    "grub2-reboot",
    "grub-set-default",
    "grub2-set-default",
    "grub-editenv",
    "grub2-editenv",
    "grubby",
    "kernel-install",
    "bootctl",
    "ukify",
    "update-initramfs",
    "mkinitramfs",
    "dracut",
    "mkinitcpio",
];

/// Whether a file gdrprov writes or removes is read at boot from where it
/// lies (anything under `/boot` or `/efi`, the ESP included), or feeds what
/// is (`/etc/kernel/cmdline`, from which kernel-install writes entries and
/// UKIs). `/etc/default/grub` is not: GRUB reads the `grub.cfg` made from it,
/// which the regeneration command writes (see [`is_boot_command`]).
pub fn is_boot_path(path: &str) -> bool {
    path.starts_with("/boot/")
        || path.starts_with("/efi/")
        || path == "/etc/kernel/cmdline"
        || path.starts_with("/etc/kernel/cmdline.d/")
}

/// Whether a command writes files a boot loader reads.
pub fn is_boot_command(argv: &[String]) -> bool {
    argv.first()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .is_some_and(|tool| BOOT_TOOLS.contains(&tool))
}

/// Makes every filesystem that holds boot-loader files durable where the
/// boot loader reads it: the standard boot directories that exist, and
/// the directories of `paths` (boot files gdrprov wrote or removed).
/// Errors only when the data could not be written (`syncfs` failed).
pub fn make_boot_durable(host: &Host, paths: &[&str]) -> Result<Vec<Durable>> {
    let dirs = BOOT_DIRS.iter().copied().chain(
        paths
            .iter()
            .map(|p| p.rsplit_once('/').map_or("/", |(d, _)| d)),
    );
    let mut out = Vec::new();
    for fs in host.filesystems_of(dirs) {
        let (filesystem, method, note) = durable_fs(&fs, host.is_live())
            .map_err(|e| Error::io("make durable (syncfs)", fs.mount.clone(), e))?;
        out.push(Durable {
            mount: fs.mount,
            filesystem,
            method,
            note,
        });
    }
    Ok(out)
}

/// The filesystem's name as people know it, and what it needs beyond syncfs.
#[allow(
    clippy::unnecessary_cast,
    reason = "f_type is i64 or i32 by architecture"
)]
fn kind(magic: Option<i64>) -> (String, Method) {
    // Magic numbers not in nix: JFS, ReiserFS, F2FS.
    const JFS: i64 = 0x3153_464a;
    const REISERFS: i64 = 0x5265_4973;
    const F2FS: i64 = 0xf2f5_2010;
    let Some(raw) = magic else {
        return ("unknown".into(), Method::Syncfs);
    };
    let named = [
        (statfs::EXT4_SUPER_MAGIC, "ext4", Method::Checkpoint),
        (statfs::XFS_SUPER_MAGIC, "xfs", Method::FreezeThaw),
        (statfs::MSDOS_SUPER_MAGIC, "vfat", Method::Syncfs),
        (statfs::BTRFS_SUPER_MAGIC, "btrfs", Method::Syncfs),
        (statfs::TMPFS_MAGIC, "tmpfs", Method::Syncfs),
    ];
    if let Some((_, n, m)) = named.iter().find(|(t, _, _)| t.0 as i64 == raw) {
        return (n.to_string(), *m);
    }
    match raw {
        JFS => ("jfs".into(), Method::FreezeThaw),
        REISERFS => ("reiserfs".into(), Method::FreezeThaw),
        F2FS => ("f2fs".into(), Method::Syncfs),
        _ => (format!("type {raw:#x}"), Method::Syncfs),
    }
}

/// `syncfs`, then what the filesystem needs (only on the live root), with
/// the fallbacks when the kernel refuses it.
fn durable_fs(fs: &Filesystem, live: bool) -> std::io::Result<(String, Method, Option<String>)> {
    fs.syncfs()?;
    let (name, want) = kind(fs.magic);
    if !live {
        return Ok((name, Method::Syncfs, None));
    }
    let fallback = |why: String| {
        host::sync();
        Ok((name.clone(), Method::Sync, Some(why)))
    };
    match want {
        Method::Checkpoint => match fs.checkpoint() {
            Ok(()) => Ok((name, Method::Checkpoint, None)),
            // No journal (ext2-style): what syncfs wrote is where GRUB reads it.
            Err(nix::Error::ENODEV) => Ok((name, Method::Syncfs, None)),
            // Before Linux 5.13 the ioctl does not exist: freeze/thaw instead.
            Err(e)
                if matches!(
                    e,
                    nix::Error::ENOTTY | nix::Error::EINVAL | nix::Error::EOPNOTSUPP
                ) =>
            {
                match fs.freeze_thaw() {
                    Ok(()) => Ok((name, Method::FreezeThaw, None)),
                    Err(e2) => fallback(format!(
                        "the kernel refused EXT4_IOC_CHECKPOINT ({e}) and FIFREEZE ({e2})"
                    )),
                }
            }
            Err(e) => fallback(format!("the kernel refused EXT4_IOC_CHECKPOINT ({e})")),
        },
        Method::FreezeThaw => match fs.freeze_thaw() {
            Ok(()) => Ok((name, Method::FreezeThaw, None)),
            Err(e) => fallback(format!("the kernel refused FIFREEZE ({e})")),
        },
        Method::Syncfs | Method::Sync => Ok((name, Method::Syncfs, None)),
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use crate::host::flush_fixture::Ext4;

    #[test]
    fn boot_paths() {
        for p in [
            "/boot/grub/grub.cfg",
            "/boot/grub/grubenv",
            "/boot/grub2/grubenv",
            "/boot/efi/EFI/debian/grub.cfg",
            "/boot/loader/entries/gdrprov-trial.conf",
            "/boot/efi/loader/entries/abc-6.1.conf",
            "/efi/EFI/Linux/linux-6.1.efi",
            "/boot/initrd.img-6.1.0-13-amd64",
            "/etc/kernel/cmdline",
        ] {
            assert!(is_boot_path(p), "{p} is read at boot");
        }
        for p in [
            "/etc/default/grub",
            "/etc/default/grub.d/50-gdrprov.cfg",
            "/etc/modprobe.d/gdrprov.conf",
            "/etc/kernel/install.conf.bak",
            "/bootx/grub.cfg",
            "/var/lib/gdrprov/state.json",
        ] {
            assert!(!is_boot_path(p), "{p} is not read by a boot loader");
        }
    }

    #[test]
    fn boot_commands() {
        let argv = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        for c in [
            "update-grub",
            "grub-mkconfig -o /boot/grub/grub.cfg",
            "/usr/sbin/grub2-mkconfig -o /boot/grub2/grub.cfg",
            "grub-reboot gdrprov-trial",
            "grub2-set-default 0",
            "grub-editenv /boot/grub/grubenv unset next_entry",
            "grubby --update-kernel=ALL --args=iommu=pt",
            "update-initramfs -u -k 6.1.0",
            "dracut -f --kver 6.1",
            "kernel-install add 6.1 /boot/vmlinuz-6.1",
            "bootctl set-oneshot x.conf",
        ] {
            assert!(is_boot_command(&argv(c)), "{c} writes boot files");
        }
        for c in [
            "sh -n /etc/default/grub",
            "grub-script-check /boot/grub/grub.cfg",
            "modprobe -r dummy",
            "systemctl enable x",
        ] {
            assert!(!is_boot_command(&argv(c)), "{c} writes no boot file");
        }
        assert!(!is_boot_command(&[]));
    }

    /// On a root that is not `/`: syncfs only, each filesystem once, named
    /// by its mount point inside the root.
    #[test]
    fn image_root_is_synced_not_frozen() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("boot/grub")).unwrap();
        std::fs::write(t.path().join("boot/grub/grub.cfg"), "x").unwrap();
        let h = Host::open(t.path(), true).unwrap();
        let d = make_boot_durable(&h, &["/boot/grub/grub.cfg"]).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].method, Method::Syncfs);
        assert_eq!(d[0].mount, h.display("/"));
        // No boot directory at all: nothing to do.
        let empty = tempfile::tempdir().unwrap();
        let h = Host::open(empty.path(), true).unwrap();
        assert!(make_boot_durable(&h, &[]).unwrap().is_empty());
    }

    #[test]
    fn ext4_checkpoint_makes_a_committed_file_visible_to_a_reader_without_journal_replay() {
        let Some(fs) = Ext4::new() else { return };
        fs.write_committed("grub.cfg", "new menu\n");
        let (name, method, note) = durable_fs(&fs.filesystem(), true).unwrap();
        assert_eq!(
            (name.as_str(), method, note),
            ("ext4", Method::Checkpoint, None)
        );
        assert_eq!(fs.as_grub_reads("/grub.cfg").as_deref(), Some("new menu\n"));
    }

    /// ext4 without a journal: nothing to checkpoint, syncfs is enough.
    #[test]
    fn ext4_without_a_journal_is_synced() {
        let Some(fs) = Ext4::with(&["-O", "^has_journal"]) else {
            return;
        };
        std::fs::write(fs.mnt.join("grub.cfg"), "plain\n").unwrap();
        let (name, method, note) = durable_fs(&fs.filesystem(), true).unwrap();
        assert_eq!(
            (name.as_str(), method, note),
            ("ext4", Method::Syncfs, None)
        );
        assert_eq!(fs.as_grub_reads("/grub.cfg").as_deref(), Some("plain\n"));
    }
}
