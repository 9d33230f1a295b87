//! The few raw system calls gdrprov's host layer needs that neither std nor nix offers as safe
//! functions, each wrapped here in one: ext4's journal checkpoint, a filesystem freeze and thaw
//! (`gdrprov::host::flush` runs them, `gdrprov::apply::durable` decides when), the watchdog
//! process forked around a freeze, and SIGPIPE's default disposition for the binary.
//!
//! A leaf crate, as nix is: it knows nothing of gdrprov (no profile, no boot loader, no policy)
//! and depends on libc only. With `crates/gdrprov-rdma` it is the only place `unsafe` is allowed
//! (`unsafe_code` is denied in the rest of the workspace; tests/house keeps the exception here).
//! It left the RDMA crate so that the host layer does not depend on the GPU crate (issue 44).
//!
//! Each function is a system call on what the caller passes in: none reads or writes a file.
#![allow(
    unsafe_code,
    reason = "raw ioctls, fork and signal dispositions have no safe API in std or nix"
)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

/// `EXT4_IOC_CHECKPOINT` (`_IOW('f', 43, __u32)`).
const EXT4_IOC_CHECKPOINT: libc::c_ulong = ioc(1, b'f', 43, std::mem::size_of::<u32>());
/// `FIFREEZE` (`_IOWR('X', 119, int)`).
const FIFREEZE: libc::c_ulong = ioc(3, b'X', 119, std::mem::size_of::<libc::c_int>());
/// `FITHAW` (`_IOWR('X', 120, int)`).
const FITHAW: libc::c_ulong = ioc(3, b'X', 120, std::mem::size_of::<libc::c_int>());

/// Linux's generic `_IOC(dir, type, nr, size)` (dir: 1 write, 2 read, 3 both), as on x86_64
/// and arm64 (the architectures gdrprov builds for).
const fn ioc(dir: libc::c_ulong, ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    (dir << 30)
        | ((size as libc::c_ulong) << 16)
        | ((ty as libc::c_ulong) << 8)
        | nr as libc::c_ulong
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Commits and checkpoints the ext4 journal of the filesystem holding `dir` (flags 0: no
/// discard, no zeroing). Linux >= 5.13; `ENOTTY`/`EINVAL`/`EOPNOTSUPP` where it has none.
pub fn ext4_checkpoint(dir: BorrowedFd<'_>) -> io::Result<()> {
    let flags: u32 = 0;
    // SAFETY: the fd is open for the call (borrowed); the kernel reads one u32 from a valid pointer.
    check(unsafe { libc::ioctl(dir.as_raw_fd(), EXT4_IOC_CHECKPOINT as _, &flags) })
}

/// Freezes the filesystem holding `dir` (FIFREEZE).
pub fn freeze(dir: RawFd) -> io::Result<()> {
    let mut unused: libc::c_int = 0;
    // SAFETY: FIFREEZE ignores its argument; the pointer is valid anyway. A closed fd is EBADF.
    check(unsafe { libc::ioctl(dir, FIFREEZE as _, &mut unused) })
}

/// Thaws the filesystem holding `dir` (FITHAW); `EINVAL` when it is not frozen.
pub fn thaw(dir: RawFd) -> io::Result<()> {
    let mut unused: libc::c_int = 0;
    // SAFETY: FITHAW ignores its argument; the pointer is valid anyway. A closed fd is EBADF.
    check(unsafe { libc::ioctl(dir, FITHAW as _, &mut unused) })
}

/// Sets SIGPIPE back to its default (die quietly on a closed pipe, as Unix tools do), for a
/// binary's `main` to call first thing, before any thread exists.
pub fn default_sigpipe() {
    // SAFETY: SIG_DFL is a valid disposition for SIGPIPE; called before threads exist (the
    // caller's promise), so no other thread changes dispositions meanwhile.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// The fds of the watchdog's two pipes, as the parent made them.
#[derive(Debug, Clone, Copy)]
pub struct WatchdogPipes {
    /// The child reads "F" (about to freeze) and "T" (thawed) from this end.
    pub from_parent: RawFd,
    /// The child writes "R" (ready) to this end.
    pub to_parent: RawFd,
    /// The parent's ends, which the child closes first.
    pub parent_ends: [RawFd; 2],
}

/// Forks the thaw watchdog for the filesystem holding `dir`: the child ignores the termination
/// signals, sits in its own session, says "R" on `to_parent`, then thaws on EOF after "F" (the
/// parent died while frozen) and every `stall_ms` while no "T" comes; it exits on "T". Gives the
/// child's pid to the parent. The child makes only async-signal-safe calls.
pub fn fork_thaw_watchdog(
    dir: RawFd,
    pipes: WatchdogPipes,
    stall_ms: libc::c_int,
) -> io::Result<libc::pid_t> {
    // SAFETY: the child runs only `watchdog` (plain system calls, no allocation, no lock) and
    // leaves with _exit: safe after fork in a multi-threaded process.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => watchdog(dir, pipes, stall_ms),
        pid => Ok(pid),
    }
}

fn watchdog(dir: RawFd, pipes: WatchdogPipes, stall_ms: libc::c_int) -> ! {
    // SAFETY: plain system calls on fds this process owns; no allocation.
    unsafe {
        for fd in pipes.parent_ends {
            libc::close(fd);
        }
        libc::setsid();
        for s in [
            libc::SIGINT,
            libc::SIGTERM,
            libc::SIGHUP,
            libc::SIGQUIT,
            libc::SIGPIPE,
        ] {
            libc::signal(s, libc::SIG_IGN);
        }
        let ready = b'R';
        libc::write(pipes.to_parent, (&ready as *const u8).cast(), 1);
        libc::close(pipes.to_parent);
        let mut armed = false;
        let mut unused: libc::c_int = 0;
        loop {
            let mut p = libc::pollfd {
                fd: pipes.from_parent,
                events: libc::POLLIN,
                revents: 0,
            };
            let r = libc::poll(&mut p, 1, if armed { stall_ms } else { -1 });
            if r == 0 {
                // Stalled while frozen: thaw, and keep watching.
                libc::ioctl(dir, FITHAW as _, &mut unused);
                continue;
            }
            if r < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                break;
            }
            let mut c = 0u8;
            let n = libc::read(pipes.from_parent, (&mut c as *mut u8).cast(), 1);
            if n == 1 && c == b'F' {
                armed = true;
            } else if n == 1 && c == b'T' {
                libc::_exit(0);
            } else if n < 0 && *libc::__errno_location() == libc::EINTR {
                continue;
            } else {
                break;
            }
        }
        // The parent is gone (EOF) or the pipe failed: thaw if it had begun to freeze.
        if armed {
            libc::ioctl(dir, FITHAW as _, &mut unused);
        }
        libc::_exit(0)
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

    #[test]
    fn request_numbers_are_the_kernels() {
        // From <linux/fs.h> and <linux/ext4.h> on x86_64 and arm64.
        assert_eq!(FIFREEZE, 0xc004_5877);
        assert_eq!(FITHAW, 0xc004_5878);
        assert_eq!(EXT4_IOC_CHECKPOINT, 0x4004_662b);
    }

    #[test]
    fn a_thaw_of_a_filesystem_not_frozen_is_refused_not_done() {
        let dir = std::env::temp_dir();
        let f = std::fs::File::open(&dir).unwrap();
        let err = thaw(f.as_raw_fd()).unwrap_err();
        // EINVAL (not frozen) as root, EPERM without CAP_SYS_ADMIN.
        assert!(
            matches!(err.raw_os_error(), Some(libc::EINVAL | libc::EPERM)),
            "{err}"
        );
        assert_eq!(thaw(-1).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }
}
