//! The lock of a root's state, once taken: a `flock` held for a whole apply
//! or rollback, the holder's pid inside. The file is opened by the write
//! door (`door/lock.rs`: never through a symlink, never blocking, a regular
//! file only).

use nix::fcntl::Flock;
use std::fs::File;

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
