//! The door's side inside a root: a file of the root opened for reading
//! (resolved by the kernel inside the root with `openat2`, or by
//! [`Host::resolve`] where the kernel cannot) and the root's own handle for
//! it. (The lock file is opened by the write door, `door/lock.rs`.)
//! Each is opened without blocking and checked on the open file (`fstat`):
//! a FIFO, socket or device node where a file should be is refused.

use crate::error::{Error, Result};
use crate::host::read::{is_absent, not_regular_file as not_regular};
use crate::host::Host;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

impl Host {
    /// Opens a regular file inside the root for reading, with the path it
    /// is shown by; `None` when it does not exist.
    pub(in crate::host) fn open_regular(
        &self,
        path: &str,
    ) -> Result<Option<(std::fs::File, String)>> {
        if let Some(opened) = self.open_in_root(path) {
            return opened;
        }
        let r = self.resolve(path)?;
        // O_NONBLOCK: opening a FIFO without a writer must not wait for one.
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .open(&r.real)
        {
            Ok(f) => f,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(Error::io("read", self.display(&r.logical), e)),
        };
        self.check_regular(&file, &r.logical)?;
        Ok(Some((file, r.logical)))
    }

    /// Checks (fstat, on the file opened) that an open file is a regular
    /// file: a FIFO, socket or device node in a root would block the read or
    /// never end, so it is refused, naming the path and the fix.
    fn check_regular(&self, file: &std::fs::File, path: &str) -> Result<()> {
        let shown = || self.display(path);
        let meta = file.metadata().map_err(|e| Error::io("stat", shown(), e))?;
        if meta.is_file() {
            return Ok(());
        }
        // A directory read as a file fails at once, as it always did; a
        // FIFO, socket or device node is a hostile root, named later.
        if !meta.is_dir() {
            if let Ok(mut seen) = self.special.lock() {
                seen.insert(path.to_string());
            }
        }
        Err(not_regular(shown(), &meta))
    }

    /// [`Host::open_regular`] with the kernel resolving the path inside the
    /// root (`openat2` with `RESOLVE_IN_ROOT`: the same chroot semantics as
    /// [`Host::resolve`], in one system call instead of one per component).
    /// `None` when the kernel cannot do it (older than 5.6, a seccomp filter,
    /// a magic link): the caller then resolves the path itself.
    fn open_in_root(&self, path: &str) -> Option<Result<Option<(std::fs::File, String)>>> {
        use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
        let root = self.root_fd.as_ref()?;
        let relative = path.strip_prefix('/')?;
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)
            .resolve(ResolveFlag::RESOLVE_IN_ROOT);
        let fd = match openat2(
            root.as_ref(),
            if relative.is_empty() { "." } else { relative },
            how,
        ) {
            Ok(fd) => fd,
            Err(nix::errno::Errno::ENOENT | nix::errno::Errno::ENOTDIR) => return Some(Ok(None)),
            Err(_) => return None,
        };
        let file = std::fs::File::from(fd);
        Some(
            self.check_regular(&file, path)
                .map(|()| Some((file, path.to_string()))),
        )
    }
}

/// The root directory, open for `openat2`; `None` where it cannot be opened.
/// (`O_PATH`: a handle to resolve in, never read.)
pub(in crate::host) fn open_root(root: &Path) -> Option<std::os::fd::OwnedFd> {
    nix::fcntl::open(
        root,
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .ok()
}
