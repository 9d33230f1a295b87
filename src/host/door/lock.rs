//! The files gdrprov keeps open rather than replaces, written through the
//! door: the lock of a root's state (opened to read the holder's pid and to
//! write ours) and the space a generation sets aside. Both are opened
//! relative to their directory reached by the walk, never through a symlink
//! (`O_NOFOLLOW`), never blocking (`O_NONBLOCK`), and must be regular files:
//! a FIFO or device node planted at `var/lib/gdrprov/lock` is refused, never
//! written into (issue 37: `19704\n` was written into the first bytes of a
//! block device there).

use super::{not_a_file, Dir};
use crate::error::{Error, Result};
use crate::host::Host;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;
use std::io::{Seek, Write};
use std::os::fd::AsFd;

impl Dir {
    /// Opens `name` here with `flags` (plus `O_NOFOLLOW`, `O_NONBLOCK`,
    /// `O_CLOEXEC`; created 0600); refuses a link (naming its target) and
    /// what is not a regular file. `None`: absent and not created.
    fn open_private(
        &self,
        name: &str,
        flags: OFlag,
        op: &'static str,
    ) -> Result<Option<std::fs::File>> {
        let shown = self.shown(name);
        let flags = flags | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let file = match openat(
            self.fd.as_fd(),
            name,
            flags,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => std::fs::File::from(fd),
            Err(nix::errno::Errno::ENOENT) if !flags.contains(OFlag::O_CREAT) => return Ok(None),
            // A symlink (O_NOFOLLOW), a directory, a socket (ENXIO): named
            // by what is there, with the fix, not by the errno.
            Err(e) => {
                return Err(match self.entry(name)? {
                    Some(m) if m.file_type().is_symlink() => self.refuse_link(name, &shown),
                    Some(m) if !m.is_file() => not_a_file(shown, &m),
                    _ => Error::io(op, shown, e.into()),
                })
            }
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io("stat", shown.clone(), e))?;
        if !meta.is_file() {
            return Err(not_a_file(shown, &meta));
        }
        Ok(Some(file))
    }
}

impl Host {
    /// Opens the lock file at `path` (inside the root) for reading and, with
    /// `create`, writing (created 0600 when missing). Never follows a
    /// symlink, on the way or at the lock, never blocks on open, and
    /// refuses anything that is not a regular file, with the path and the
    /// fix. `None`: absent and not `create`.
    pub fn open_lock_file(
        &self,
        path: &str,
        create: bool,
    ) -> Result<Option<(std::fs::File, String)>> {
        let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
        let Some(dir) = dir else {
            if create {
                return Err(Error::Journal(format!(
                    "the lock file {} could not be created: its directory does not exist",
                    self.display(path)
                )));
            }
            return Ok(None);
        };
        let flags = if create {
            OFlag::O_RDWR | OFlag::O_CREAT
        } else {
            OFlag::O_RDONLY
        };
        let shown = dir.shown(name);
        Ok(dir
            .open_private(name, flags, "open lock")?
            .map(|f| (f, shown)))
    }

    /// Sets aside `bytes` of disk space in `path` (created or emptied),
    /// allocated and on disk.
    pub fn reserve_space(&self, path: &str, bytes: u64) -> Result<()> {
        let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
        let Some(dir) = dir else {
            return Err(Error::BadPath {
                path: self.display(path),
                why: "its directory does not exist".into(),
            });
        };
        let shown = dir.shown(name);
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_TRUNC;
        let Some(file) = dir.open_private(name, flags, "reserve space in")? else {
            return Err(Error::BadPath {
                path: shown,
                why: "could not be created".into(),
            });
        };
        let len = i64::try_from(bytes).unwrap_or(i64::MAX);
        nix::fcntl::posix_fallocate(&file, 0, len)
            .map_err(|e| Error::io("reserve space in", shown.clone(), e.into()))?;
        file.sync_all()
            .map_err(|e| Error::io("reserve space in", shown, e))
    }
}

/// Writes this process's pid into an open, locked lock file (replacing what
/// it held).
pub fn write_pid(file: &mut std::fs::File) {
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = writeln!(file, "{}", std::process::id());
}
