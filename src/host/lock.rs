//! The files gdrprov keeps open rather than reads or replaces: the lock of a
//! root's state (a `flock` held for a whole apply or rollback, the holder's
//! pid inside) and the space a generation sets aside. Both are opened inside
//! the root, never through a symlink at their own name (`O_NOFOLLOW`), never
//! blocking (`O_NONBLOCK`), and must be regular files: a FIFO or device node
//! planted at `var/lib/gdrprov/lock` is refused, never written into.

use super::Host;
use crate::error::{Error, Result};
use nix::fcntl::Flock;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

/// Held for the whole apply or rollback; released when dropped.
pub struct FileLock {
    _file: Flock<File>,
}

/// The lock taken (`StateStore::lock`, which opens it through
/// `Host::open_lock_file`).
impl From<Flock<File>> for FileLock {
    fn from(file: Flock<File>) -> Self {
        FileLock { _file: file }
    }
}

impl std::fmt::Debug for FileLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FileLock")
    }
}

/// Options for gdrprov's own private files: mode 0600 when created, never
/// through a symlink, never blocking.
fn private() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .mode(0o600);
    o
}

impl Host {
    /// Opens `path` (in the root) with `opts`; refuses what is not a
    /// regular file. Gives the file and the path as shown.
    fn open_private(
        &self,
        path: &str,
        opts: &OpenOptions,
        op: &'static str,
    ) -> Result<(File, String)> {
        let r = self.resolve(path)?;
        let shown = self.display(&r.logical);
        let file = opts
            .open(&r.real)
            .map_err(|e| Error::io(op, shown.clone(), e))?;
        let meta = file
            .metadata()
            .map_err(|e| Error::io(op, shown.clone(), e))?;
        if !meta.is_file() {
            return Err(super::read::not_regular_file(shown, &meta));
        }
        Ok((file, shown))
    }

    /// Sets aside `bytes` of disk space in `path` (created or emptied),
    /// allocated and on disk.
    pub fn reserve_space(&self, path: &str, bytes: u64) -> Result<()> {
        let mut o = private();
        o.write(true).create(true).truncate(true);
        let (file, shown) = self.open_private(path, &o, "reserve space in")?;
        let len = i64::try_from(bytes).unwrap_or(i64::MAX);
        nix::fcntl::posix_fallocate(&file, 0, len)
            .map_err(|e| Error::io("reserve space in", shown.clone(), e.into()))?;
        file.sync_all()
            .map_err(|e| Error::io("reserve space in", shown, e))
    }
}

/// Writes `text` into a new file at `path` (named by the user or made in
/// `$TMPDIR`, not in a root) readable by its owner only (0600), never over an
/// existing file or through a symlink.
pub fn write_new_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    let mut o = private();
    o.write(true).create_new(true);
    let mut f = o.open(path)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()
}
