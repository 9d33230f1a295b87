//! Flushing a filesystem that holds boot-loader files, the way it is told to:
//! `syncfs`, ext4's journal checkpoint, a freeze/thaw cycle, or `sync`. Which
//! one, for which filesystem, and what to fall back to when the kernel refuses
//! is decided in `apply::durable` (which also says why GRUB needs it); this
//! module opens the filesystems, runs the system call it is given and reports
//! the kernel's answer.
//!
//! Never left frozen: before freezing, a watchdog process is forked (as
//! OSTree does). It ignores SIGINT/SIGTERM/SIGHUP, sits in its own session,
//! and thaws the filesystem if gdrprov dies while it is frozen (its pipe from
//! gdrprov reaches EOF: the kernel closes it on any death, SIGKILL included)
//! or if gdrprov has not said "thawed" within 30 s (stopped with SIGSTOP).
//! gdrprov blocks the catchable termination signals between freeze and thaw
//! and writes nothing to any file there.

use super::read::open_dir;
use super::Host;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;

/// How one filesystem is (to be) made durable: what `apply::durable`
/// decides, and what the outcome reports was done.
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

/// One filesystem, open through a directory on it.
#[derive(Debug)]
pub struct Filesystem {
    /// Its mount point inside the root, as shown to people.
    pub mount: String,
    /// Its `statfs` type (`f_type`), `None` when the kernel did not say.
    pub magic: Option<i64>,
    dir: File,
}

impl Host {
    /// The filesystems holding `dirs` (paths inside the root), each once,
    /// in the order first met; a directory that is not there is skipped.
    pub fn filesystems_of<'a>(&self, dirs: impl IntoIterator<Item = &'a str>) -> Vec<Filesystem> {
        let mut seen: Vec<u64> = Vec::new();
        let mut out = Vec::new();
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
            let mount = self.display(&self.mount_point(&r.logical, meta.dev()));
            out.push(Filesystem::of(f, mount));
        }
        out
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

impl Filesystem {
    fn of(dir: File, mount: String) -> Filesystem {
        #[allow(clippy::unnecessary_cast)]
        let magic = nix::sys::statfs::fstatfs(dir.as_fd())
            .ok()
            .map(|s| s.filesystem_type().0 as i64);
        Filesystem { mount, magic, dir }
    }

    /// The filesystem holding `dir`, a real path (tests of the choice).
    #[cfg(test)]
    pub(crate) fn at(dir: &std::path::Path) -> Filesystem {
        Filesystem::of(open_dir(dir).unwrap(), dir.display().to_string())
    }

    /// `syncfs`: its dirty data and metadata written (and its journal committed).
    pub fn syncfs(&self) -> std::io::Result<()> {
        nix::unistd::syncfs(self.dir.as_fd()).map_err(std::io::Error::from)
    }

    /// Commits and checkpoints an ext4 journal (flags 0: no discard, no
    /// zeroing). `ENODEV`: no journal; `ENOTTY`/`EINVAL`/`EOPNOTSUPP`: the
    /// kernel has no such ioctl (before 5.13).
    pub fn checkpoint(&self) -> nix::Result<()> {
        checkpoint(&self.dir)
    }

    /// Freezes and thaws it, guarded by the watchdog (see the module). An
    /// error means it was not frozen (or the watchdog could not be started).
    pub fn freeze_thaw(&self) -> nix::Result<()> {
        freeze_thaw(&self.dir, Between::Nothing)
    }
}

/// `sync`: every filesystem's data written.
pub fn sync() {
    nix::unistd::sync();
}

/// A system call's error as nix gives it (the callers match on its errno).
fn errno(e: std::io::Error) -> nix::Error {
    nix::Error::from_raw(e.raw_os_error().unwrap_or(nix::libc::EIO))
}

fn checkpoint(dir: &File) -> nix::Result<()> {
    gdrprov_sys::ext4_checkpoint(dir.as_fd()).map_err(errno)
}

fn thaw(fd: RawFd) -> nix::Result<()> {
    gdrprov_sys::thaw(fd).map_err(errno)
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
    let pipes = gdrprov_sys::WatchdogPipes {
        from_parent: to_child_r.as_raw_fd(),
        to_parent: from_child_w.as_raw_fd(),
        parent_ends: [from_child_r.as_raw_fd(), to_child_w.as_raw_fd()],
    };
    let child = gdrprov_sys::fork_thaw_watchdog(dir_fd, pipes, WATCHDOG_MS).map_err(errno)?;
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
        gdrprov_sys::freeze(dir_fd).map_err(errno)?;
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
    use crate::host::flush_fixture::Ext4;

    #[test]
    fn the_checkpoint_by_itself_makes_a_committed_file_visible() {
        let Some(fs) = Ext4::new() else { return };
        fs.write_committed("grubenv", "next_entry=x\n");
        checkpoint(&fs.dir()).unwrap();
        assert_eq!(
            fs.as_grub_reads("/grubenv").as_deref(),
            Some("next_entry=x\n")
        );
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
