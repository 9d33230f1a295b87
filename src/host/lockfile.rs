//! The journal's lock file, opened so that nothing but a regular file is
//! ever written: a device node, FIFO, socket or directory placed where the
//! lock goes is refused before one byte is written (issue 37: `19704\n` was
//! written into the first bytes of a block device at `var/lib/gdrprov/lock`).

use super::Host;
use crate::error::{Error, Result};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;

/// At most this much of a lock file is read: a pid and a newline.
const MAX_LOCK_BYTES: u64 = 32;

impl Host {
    /// Opens the lock file at `path` (inside the root) for reading and, with
    /// `create`, writing (created 0600 when missing). Never follows a
    /// symlink, never blocks on open (`O_NONBLOCK`: a FIFO), and refuses
    /// (`fstat` on the open file) anything that is not a regular file, with
    /// the path and the fix. `None`: absent and not `create`.
    pub fn open_lock_file(
        &self,
        path: &str,
        create: bool,
    ) -> Result<Option<(std::fs::File, String)>> {
        // The parent is resolved (chroot semantics); the lock itself is the
        // name in it, never followed: a symlink there is refused.
        let (parent, name) = super::fs::split_parent(path)?;
        let dir = self.resolve(parent)?;
        let real = dir.real.join(name);
        let shown = self.display(&format!("{}/{name}", dir.logical.trim_end_matches('/')));
        let mut opts = std::fs::OpenOptions::new();
        opts.read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
            .mode(0o600);
        if create {
            opts.write(true).create(true).truncate(false);
        }
        let file = match opts.open(&real) {
            Ok(f) => f,
            Err(e) if !create && super::fs::is_absent(&e) => return Ok(None),
            // A symlink (O_NOFOLLOW), a directory, a socket (ENXIO): named
            // by what is there, with the fix, not by the errno.
            Err(e) => {
                return Err(match std::fs::symlink_metadata(&real) {
                    Ok(m) if m.file_type().is_symlink() => Error::BadPath {
                        path: shown,
                        why: "it is a symlink, not a regular file, so gdrprov will not read or write it; \
                              replace it with a regular file (or remove it) and run again"
                            .into(),
                    },
                    Ok(m) if !m.is_file() => super::fs::not_regular(shown, &m),
                    _ => Error::io("open lock", shown, e),
                })
            }
        };
        let meta = file
            .metadata()
            .map_err(|e| Error::io("stat", shown.clone(), e))?;
        if !meta.is_file() {
            return Err(super::fs::not_regular(shown, &meta));
        }
        Ok(Some((file, shown)))
    }
}

/// Writes this process's pid into an open, locked lock file (replacing what
/// it held).
pub fn write_pid(file: &mut std::fs::File) {
    let _ = file.set_len(0);
    let _ = file.rewind();
    let _ = writeln!(file, "{}", std::process::id());
}

/// The pid another run wrote into a lock file, as ` (pid N)`; empty when it
/// wrote none (or something that is not a pid). Reads at most a few bytes.
pub fn holder_of(file: &mut std::fs::File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(MAX_LOCK_BYTES).read_to_string(&mut text);
    let pid = text.trim();
    if !pid.is_empty() && pid.len() < 12 && pid.bytes().all(|b| b.is_ascii_digit()) {
        format!(" (pid {pid})")
    } else {
        String::new()
    }
}
