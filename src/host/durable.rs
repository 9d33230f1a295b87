//! Making what a boot loader reads durable *where the boot loader reads it*.
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
//! Never left frozen: before freezing, a watchdog process is forked (as
//! OSTree does). It ignores SIGINT/SIGTERM/SIGHUP, sits in its own session,
//! and thaws the filesystem if gdrprov dies while it is frozen (its pipe from
//! gdrprov reaches EOF: the kernel closes it on any death, SIGKILL included)
//! or if gdrprov has not said "thawed" within 30 s (stopped with SIGSTOP).
//! gdrprov blocks the catchable termination signals between freeze and thaw
//! and writes nothing to any file there.
//!
//! On an image root (`--root DIR`) nothing is frozen or checkpointed: each
//! filesystem under the root that holds boot files gets a `syncfs`; the
//! image's journal is checkpointed when the builder unmounts it, and the
//! builder's own `/` must never be frozen.

use super::read::open_dir;
use super::Host;
use crate::error::{Error, Result};
use nix::sys::statfs::{self, FsType};
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

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

/// How one filesystem was made durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// `syncfs` + `EXT4_IOC_CHECKPOINT`.
    Checkpoint,
    /// `syncfs` + FIFREEZE/FITHAW.
    FreezeThaw,
    /// `syncfs` only: enough for this filesystem (or an image root).
    Syncfs,
    /// `syncfs` + `sync` only, because the kernel refused more (see `note`).
    Sync,
}

impl Method {
    pub fn describe(self) -> &'static str {
        match self {
            Method::Checkpoint => "journal checkpointed",
            Method::FreezeThaw => "frozen and thawed",
            Method::Syncfs => "synced",
            Method::Sync => "synced only",
        }
    }
}

/// What was done to one filesystem holding boot files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Durable {
    /// Its mount point, as shown to people (`ROOT/boot` on an image root).
    pub mount: String,
    pub filesystem: String,
    pub method: Method,
    /// Why only a sync was possible.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl std::fmt::Display for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}: {})",
            self.mount,
            self.filesystem,
            self.method.describe()
        )?;
        if let Some(n) = &self.note {
            write!(f, "; {n}")?;
        }
        Ok(())
    }
}

impl Host {
    /// Makes every filesystem that holds boot-loader files durable where the
    /// boot loader reads it: the standard boot directories that exist, and
    /// the directories of `paths` (boot files gdrprov wrote or removed).
    /// Errors only when the data could not be written (`syncfs` failed).
    pub fn make_boot_durable(&self, paths: &[&str]) -> Result<Vec<Durable>> {
        let mut seen: Vec<u64> = Vec::new();
        let mut out = Vec::new();
        let dirs = BOOT_DIRS.iter().copied().chain(
            paths
                .iter()
                .map(|p| p.rsplit_once('/').map_or("/", |(d, _)| d)),
        );
        for dir in dirs {
            let Ok(r) = self.resolve(if dir.is_empty() { "/" } else { dir }) else {
                continue;
            };
            let Ok(f) = open_dir(&r.real) else { continue };
            let Ok(meta) = f.metadata() else { continue };
            if seen.contains(&meta.dev()) {
                continue;
            }
            seen.push(meta.dev());
            let mount = self.mount_point(&r.logical, meta.dev());
            let shown = self.display(&mount);
            let done = durable_fs(&f, self.is_live())
                .map_err(|e| Error::io("make durable (syncfs)", shown.clone(), e))?;
            out.push(Durable {
                mount: shown,
                filesystem: done.0,
                method: done.1,
                note: done.2,
            });
        }
        Ok(out)
    }

    /// The highest directory above `logical` (inside the root) on device `dev`.
    fn mount_point(&self, logical: &str, dev: u64) -> String {
        let mut best = logical.to_string();
        let mut cur = logical.to_string();
        while let Some((parent, _)) = cur.rsplit_once('/') {
            let parent = if parent.is_empty() { "/" } else { parent };
            let same = self
                .resolve(parent)
                .ok()
                .and_then(|r| std::fs::metadata(r.real).ok())
                .is_some_and(|m| m.dev() == dev);
            if !same {
                break;
            }
            best = parent.to_string();
            if parent == "/" {
                break;
            }
            cur = parent.to_string();
        }
        best
    }
}

/// The filesystem's name as people know it, and what it needs beyond syncfs.
fn kind(t: FsType) -> (String, Method) {
    // Magic numbers not in nix: JFS, ReiserFS, F2FS.
    const JFS: i64 = 0x3153_464a;
    const REISERFS: i64 = 0x5265_4973;
    const F2FS: i64 = 0xf2f5_2010;
    let named = [
        (statfs::EXT4_SUPER_MAGIC, "ext4", Method::Checkpoint),
        (statfs::XFS_SUPER_MAGIC, "xfs", Method::FreezeThaw),
        (statfs::MSDOS_SUPER_MAGIC, "vfat", Method::Syncfs),
        (statfs::BTRFS_SUPER_MAGIC, "btrfs", Method::Syncfs),
        (statfs::TMPFS_MAGIC, "tmpfs", Method::Syncfs),
    ];
    if let Some((_, n, m)) = named.iter().find(|(magic, _, _)| *magic == t) {
        return (n.to_string(), *m);
    }
    #[allow(clippy::unnecessary_cast)]
    let raw = t.0 as i64;
    match raw {
        JFS => ("jfs".into(), Method::FreezeThaw),
        REISERFS => ("reiserfs".into(), Method::FreezeThaw),
        F2FS => ("f2fs".into(), Method::Syncfs),
        _ => (format!("type {raw:#x}"), Method::Syncfs),
    }
}

/// `syncfs`, then what the filesystem needs (only on the live root).
fn durable_fs(dir: &File, live: bool) -> std::io::Result<(String, Method, Option<String>)> {
    nix::unistd::syncfs(dir.as_fd()).map_err(std::io::Error::from)?;
    let (name, want) = statfs::fstatfs(dir.as_fd())
        .map(|s| kind(s.filesystem_type()))
        .unwrap_or_else(|_| ("unknown".into(), Method::Syncfs));
    if !live {
        return Ok((name, Method::Syncfs, None));
    }
    let fallback = |why: String| {
        nix::unistd::sync();
        Ok((name.clone(), Method::Sync, Some(why)))
    };
    match want {
        Method::Checkpoint => match checkpoint(dir) {
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
                match freeze_thaw(dir, Between::Nothing) {
                    Ok(()) => Ok((name, Method::FreezeThaw, None)),
                    Err(e2) => fallback(format!(
                        "the kernel refused EXT4_IOC_CHECKPOINT ({e}) and FIFREEZE ({e2})"
                    )),
                }
            }
            Err(e) => fallback(format!("the kernel refused EXT4_IOC_CHECKPOINT ({e})")),
        },
        Method::FreezeThaw => match freeze_thaw(dir, Between::Nothing) {
            Ok(()) => Ok((name, Method::FreezeThaw, None)),
            Err(e) => fallback(format!("the kernel refused FIFREEZE ({e})")),
        },
        Method::Syncfs | Method::Sync => Ok((name, Method::Syncfs, None)),
    }
}

/// A system call's error as nix gives it (the callers match on its errno).
fn errno(e: std::io::Error) -> nix::Error {
    nix::Error::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO))
}

/// Commits and checkpoints an ext4 journal (flags 0: no discard, no zeroing).
fn checkpoint(dir: &File) -> nix::Result<()> {
    gdrprov_rdma::sys::ext4_checkpoint(dir.as_fd()).map_err(errno)
}

fn thaw(fd: RawFd) -> nix::Result<()> {
    gdrprov_rdma::sys::thaw(fd).map_err(errno)
}

/// How long the watchdog lets gdrprov keep the filesystem frozen.
const WATCHDOG_MS: nix::libc::c_int = 30_000;

/// Test hooks: what happens between freeze and thaw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Between {
    Nothing,
    /// The process kills itself with SIGKILL while frozen.
    #[cfg(test)]
    DieFrozen,
}

/// Freezes and thaws the filesystem of `dir`, guarded by a watchdog process
/// that thaws it should this process die or stall in between. An error means
/// it was not frozen (or the watchdog could not be started).
fn freeze_thaw(dir: &File, between: Between) -> nix::Result<()> {
    use nix::fcntl::OFlag;
    use nix::unistd::pipe2;
    let (from_child_r, from_child_w) = pipe2(OFlag::O_CLOEXEC)?;
    let (to_child_r, to_child_w) = pipe2(OFlag::O_CLOEXEC)?;
    let dir_fd = dir.as_raw_fd();
    let pipes = gdrprov_rdma::sys::WatchdogPipes {
        from_parent: to_child_r.as_raw_fd(),
        to_parent: from_child_w.as_raw_fd(),
        parent_ends: [from_child_r.as_raw_fd(), to_child_w.as_raw_fd()],
    };
    let child = gdrprov_rdma::sys::fork_thaw_watchdog(dir_fd, pipes, WATCHDOG_MS).map_err(errno)?;
    drop(from_child_w);
    drop(to_child_r);
    let result = guarded_freeze_thaw(dir_fd, &from_child_r, to_child_w, between);
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(child), None);
    result
}

fn guarded_freeze_thaw(
    dir_fd: RawFd,
    from_child: &OwnedFd,
    to_child: OwnedFd,
    between: Between,
) -> nix::Result<()> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal};
    // The watchdog says it is ready (its signals are ignored) before anything freezes.
    let mut b = [0u8; 1];
    if nix::unistd::read(from_child, &mut b)? != 1 {
        return Err(nix::Error::ECHILD);
    }
    let mut block = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ] {
        block.add(s);
    }
    let mut old = SigSet::empty();
    nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&block), Some(&mut old))?;
    // "About to freeze": from here on the watchdog thaws if this process goes.
    let result = nix::unistd::write(&to_child, b"F").and_then(|_| {
        gdrprov_rdma::sys::freeze(dir_fd).map_err(errno)?;
        #[cfg(test)]
        if between == Between::DieFrozen {
            let _ = nix::sys::signal::raise(Signal::SIGKILL);
        }
        let _ = between;
        // EINVAL: the watchdog thawed it already (this process stalled).
        match thaw(dir_fd) {
            Ok(()) | Err(nix::Error::EINVAL) => Ok(()),
            Err(e) => Err(e),
        }
    });
    let _ = nix::unistd::write(&to_child, b"T");
    drop(to_child);
    let _ = nix::sys::signal::pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let d = h.make_boot_durable(&["/boot/grub/grub.cfg"]).unwrap();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].method, Method::Syncfs);
        assert_eq!(d[0].mount, h.display("/"));
        // No boot directory at all: nothing to do.
        let empty = tempfile::tempdir().unwrap();
        let h = Host::open(empty.path(), true).unwrap();
        assert!(h.make_boot_durable(&[]).unwrap().is_empty());
    }

    /// A small ext4 filesystem in a file, mounted through a loop device;
    /// `debugfs` reads it as GRUB does: without replaying the journal.
    struct Ext4 {
        _dir: tempfile::TempDir,
        img: std::path::PathBuf,
        mnt: std::path::PathBuf,
    }

    impl Ext4 {
        fn new() -> Option<Ext4> {
            Ext4::with(&[])
        }

        fn with(mkfs_opts: &[&str]) -> Option<Ext4> {
            if !nix::unistd::geteuid().is_root() {
                eprintln!("SKIPPED: mounting an ext4 image needs root (CI runs as root)");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let img = dir.path().join("fs.img");
            let mnt = dir.path().join("mnt");
            std::fs::create_dir(&mnt).unwrap();
            let run = |argv: &[&str]| {
                std::process::Command::new(argv[0])
                    .args(&argv[1..])
                    .output()
                    .map(|o| {
                        (
                            o.status.success(),
                            String::from_utf8_lossy(&o.stderr).into_owned(),
                        )
                    })
            };
            let img_s = img.to_str()?;
            let mut argv = vec!["mkfs.ext4", "-q", "-F"];
            argv.extend_from_slice(mkfs_opts);
            argv.extend([img_s, "32M"]);
            let mk = run(&argv);
            if !matches!(mk, Ok((true, _))) {
                eprintln!("SKIPPED: mkfs.ext4 (e2fsprogs) is not usable here: {mk:?}");
                return None;
            }
            match run(&["mount", "-o", "loop", img.to_str()?, mnt.to_str()?]) {
                Ok((true, _)) => {}
                other => {
                    eprintln!("SKIPPED: no loop mount here: {other:?}");
                    return None;
                }
            }
            Some(Ext4 {
                _dir: dir,
                img,
                mnt,
            })
        }

        /// What GRUB would read at `path` (inside the filesystem), or None.
        fn as_grub_reads(&self, path: &str) -> Option<String> {
            let o = std::process::Command::new("debugfs")
                .args(["-R", &format!("cat {path}")])
                .arg(&self.img)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&o.stdout).into_owned();
            (!text.is_empty()).then_some(text)
        }

        /// Writes a file as a careful tool would (fsync: committed to the
        /// journal) and checks that GRUB's view does not have it yet.
        fn write_committed(&self, name: &str, text: &str) {
            use std::io::Write;
            let mut f = File::create(self.mnt.join(name)).unwrap();
            f.write_all(text.as_bytes()).unwrap();
            f.sync_all().unwrap();
            assert_eq!(
                self.as_grub_reads(&format!("/{name}")),
                None,
                "precondition: fsync alone leaves the file only in the journal"
            );
        }

        fn dir(&self) -> File {
            open_dir(&self.mnt).unwrap()
        }
    }

    impl Drop for Ext4 {
        fn drop(&mut self) {
            let _ = thaw(self.dir().as_raw_fd());
            let _ = std::process::Command::new("umount").arg(&self.mnt).status();
        }
    }

    #[test]
    fn ext4_checkpoint_makes_a_committed_file_visible_to_a_reader_without_journal_replay() {
        let Some(fs) = Ext4::new() else { return };
        fs.write_committed("grub.cfg", "new menu\n");
        let (name, method, note) = durable_fs(&fs.dir(), true).unwrap();
        assert_eq!(
            (name.as_str(), method, note),
            ("ext4", Method::Checkpoint, None)
        );
        assert_eq!(fs.as_grub_reads("/grub.cfg").as_deref(), Some("new menu\n"));
        // The ioctl by itself (no syncfs) checkpoints too.
        fs.write_committed("grubenv", "next_entry=x\n");
        checkpoint(&fs.dir()).unwrap();
        assert_eq!(
            fs.as_grub_reads("/grubenv").as_deref(),
            Some("next_entry=x\n")
        );
    }

    /// ext4 without a journal: nothing to checkpoint, syncfs is enough.
    #[test]
    fn ext4_without_a_journal_is_synced() {
        let Some(fs) = Ext4::with(&["-O", "^has_journal"]) else {
            return;
        };
        std::fs::write(fs.mnt.join("grub.cfg"), "plain\n").unwrap();
        let (name, method, note) = durable_fs(&fs.dir(), true).unwrap();
        assert_eq!(
            (name.as_str(), method, note),
            ("ext4", Method::Syncfs, None)
        );
        assert_eq!(fs.as_grub_reads("/grub.cfg").as_deref(), Some("plain\n"));
    }

    #[test]
    fn freeze_thaw_makes_a_committed_file_visible_and_leaves_it_writable() {
        let Some(fs) = Ext4::new() else { return };
        fs.write_committed("grub.cfg", "frozen menu\n");
        freeze_thaw(&fs.dir(), Between::Nothing).unwrap();
        assert_eq!(
            fs.as_grub_reads("/grub.cfg").as_deref(),
            Some("frozen menu\n")
        );
        // Thawed: FITHAW finds nothing to thaw, and a write goes through.
        assert_eq!(thaw(fs.dir().as_raw_fd()), Err(nix::Error::EINVAL));
        std::fs::write(fs.mnt.join("after"), "ok").unwrap();
    }

    /// A process SIGKILLed between FIFREEZE and FITHAW: its watchdog thaws
    /// the filesystem, so a write to it completes.
    #[test]
    #[allow(
        unsafe_code,
        reason = "the test forks a child that must die frozen, as gdrprov would"
    )]
    fn a_kill_while_frozen_does_not_leave_the_filesystem_frozen() {
        let Some(fs) = Ext4::new() else { return };
        let dir = fs.dir();
        // SAFETY: the child only runs freeze_thaw and is killed inside it.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let _ = freeze_thaw(&dir, Between::DieFrozen);
                // Not reached: SIGKILL. Should it be, leave without cleanup.
                unsafe { nix::libc::_exit(3) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                let st = nix::sys::wait::waitpid(child, None).unwrap();
                assert_eq!(
                    st,
                    nix::sys::wait::WaitStatus::Signaled(
                        child,
                        nix::sys::signal::Signal::SIGKILL,
                        false
                    ),
                    "the child must die by SIGKILL while frozen"
                );
            }
        }
        // A write to a frozen filesystem blocks: do it in a thread, bounded.
        let target = fs.mnt.join("written-after-the-kill");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(std::fs::write(target, "ok").is_ok()));
        match rx.recv_timeout(std::time::Duration::from_secs(10)) {
            Ok(ok) => assert!(ok, "write after the kill failed"),
            Err(_) => {
                let _ = thaw(dir.as_raw_fd());
                panic!("the filesystem stayed frozen after the process was killed");
            }
        }
    }
}
