//! A scratch file in a directory the user names (`bench gds --dir`): made new (never an
//! existing file, never through a link), filled, reopened with `O_DIRECT` for cuFile, its pages
//! dropped from the page cache for a cold read, read back for a check, and removed. The
//! directory must exist: a bench does not make one. [`Existing`] is the user's own file to
//! read (`bench gds --file`): opened read-only, never changed nor removed.

use crate::error::{Error, Result};
use nix::fcntl::{OFlag, PosixFadviseAdvice};
use nix::sys::stat::Mode;
use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// The scratch file: its directory's descriptor and its name there.
#[derive(Debug)]
pub struct Scratch {
    dir: std::os::fd::OwnedFd,
    name: String,
    shown: String,
    file: File,
}

/// Refuses, before any work, a `--dir` that is a link (never followed: name the directory it
/// leads to), not a directory, missing, or inside `/proc` (another process's root through
/// `/proc/PID/root`, or the kernel's files). The open itself ([`open_dir`]) refuses a link too.
pub fn check_dir(dir: &Path) -> Result<()> {
    let shown = dir.display().to_string();
    let bad = |why: String| Error::BadPath {
        path: shown.clone(),
        why,
    };
    // As written with `..` taken lexically (`/tmp/../proc/1/root`), and as resolved.
    let mut lexical = PathBuf::new();
    for c in dir.components() {
        match c {
            std::path::Component::ParentDir => {
                lexical.pop();
            }
            std::path::Component::CurDir => {}
            c => lexical.push(c),
        }
    }
    let real = std::fs::canonicalize(dir).ok();
    if lexical.starts_with("/proc") || real.is_some_and(|r| r.starts_with("/proc")) {
        return Err(bad(format!(
            "{shown} is inside /proc (another process's root, or the kernel's files), not on the mount to test; name a directory of a local file system, e.g. /data/tmp"
        )));
    }
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            let to = std::fs::read_link(dir).map_or_else(|_| "?".into(), |t| t.display().to_string());
            Err(bad(format!(
                "{shown} is a symlink to {to}: the bench never writes through a link; name the directory itself"
            )))
        }
        Ok(m) if !m.is_dir() => Err(bad(format!(
            "{shown} is not a directory; name a directory on the mount to test"
        ))),
        Ok(_) => Ok(()),
        Err(e) => Err(bad(format!(
            "{shown} cannot be used ({e}); name an existing directory on the mount to test (the bench does not make one)"
        ))),
    }
}

fn open_dir(dir: &Path) -> Result<std::os::fd::OwnedFd> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    nix::fcntl::open(dir, flags, Mode::empty())
        .map_err(|e| Error::io("open directory", dir.display().to_string(), e.into()))
}

impl Scratch {
    /// Makes `dir/name`, new (`O_EXCL`, `O_NOFOLLOW`), mode 0600, `size` bytes long, filled by
    /// `fill(offset, block)` block by block, then flushed to the device.
    pub fn create(
        dir: &Path,
        name: &str,
        size: u64,
        fill: &mut dyn FnMut(u64, &mut [u8]),
    ) -> Result<Scratch> {
        let dfd = open_dir(dir)?;
        let shown = PathBuf::from(dir).join(name).display().to_string();
        let flags =
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(dfd.as_fd(), name, flags, Mode::from_bits_truncate(0o600))
            .map_err(|e| Error::io("create", &shown, e.into()))?;
        let scratch = Scratch {
            dir: dfd,
            name: name.to_string(),
            shown: shown.clone(),
            file: File::from(fd),
        };
        let mut block = vec![0u8; 8 << 20];
        let mut off = 0u64;
        while off < size {
            let n = (size - off).min(block.len() as u64) as usize;
            fill(off, &mut block[..n]);
            scratch
                .file
                .write_all_at(&block[..n], off)
                .map_err(|e| Error::io("write", &shown, e))?;
            off += n as u64;
        }
        scratch
            .file
            .sync_all()
            .map_err(|e| Error::io("sync", &shown, e))?;
        Ok(scratch)
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// The file opened again with `O_DIRECT` (cuFile's direct paths need it) through
    /// `/proc/self/fd` (the same file, whatever its name now leads to, and without `O_NOFOLLOW`
    /// in its flags: cuFile refuses such a descriptor with 5019); `None` when the file system
    /// refuses `O_DIRECT` (tmpfs), then cuFile gets the buffered descriptor.
    pub fn direct(&self) -> Option<File> {
        reopen_direct(&self.file, OFlag::O_RDWR)
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Flushes the file and drops its pages from the page cache, so the next read comes from
    /// the device (a cold read; no root needed, unlike `drop_caches`).
    pub fn drop_pages(&self) -> Result<()> {
        self.file
            .sync_all()
            .map_err(|e| Error::io("sync", &self.shown, e))?;
        drop_cached(&self.file, &self.shown)
    }

    /// Reads `buf.len()` bytes at `offset` (the check of what was written).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        read_exact(&self.file, &self.shown, buf, offset)
    }
}

/// A regular file the user names, to read (`bench gds --file`): opened read-only, never
/// written, never removed.
#[derive(Debug)]
pub struct Existing {
    shown: String,
    file: File,
    len: u64,
}

impl Existing {
    /// Opens `path` read-only; refuses anything but a regular file.
    pub fn open(path: &Path) -> Result<Existing> {
        let shown = path.display().to_string();
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK;
        let fd = nix::fcntl::open(path, flags, Mode::empty())
            .map_err(|e| Error::io("open", &shown, e.into()))?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|e| Error::io("stat", &shown, e))?;
        if !meta.is_file() {
            return Err(Error::Refused(format!(
                "{shown} is not a regular file; fix: name a file on the mount to test (or use --dir alone for a test file made there)"
            )));
        }
        Ok(Existing {
            shown,
            len: meta.len(),
            file,
        })
    }

    pub fn shown(&self) -> &str {
        &self.shown
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The file opened again read-only with `O_DIRECT` (see [`Scratch::direct`]).
    pub fn direct(&self) -> Option<File> {
        reopen_direct(&self.file, OFlag::O_RDONLY)
    }

    pub fn file(&self) -> &File {
        &self.file
    }

    /// Drops the file's pages from the page cache (a cold read; it has nothing to flush).
    pub fn drop_pages(&self) -> Result<()> {
        drop_cached(&self.file, &self.shown)
    }

    /// Reads `buf.len()` bytes at `offset` (the check of what cuFile read).
    pub fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        read_exact(&self.file, &self.shown, buf, offset)
    }
}

/// `file` opened again with `O_DIRECT` and `access` (`O_RDWR`, `O_RDONLY`) through
/// `/proc/self/fd` ([`Scratch::direct`] says why); `None` where the file system refuses it.
fn reopen_direct(file: &File, access: OFlag) -> Option<File> {
    use std::os::fd::AsRawFd;
    let flags = access | OFlag::O_DIRECT | OFlag::O_CLOEXEC;
    let fd_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    nix::fcntl::open(fd_path.as_str(), flags, Mode::empty())
        .ok()
        .map(File::from)
}

/// Drops `file`'s pages from the page cache (`shown` names it in an error).
fn drop_cached(file: &File, shown: &str) -> Result<()> {
    nix::fcntl::posix_fadvise(file.as_fd(), 0, 0, PosixFadviseAdvice::POSIX_FADV_DONTNEED)
        .map_err(|e| Error::io("drop pages of", shown, e.into()))
}

/// Reads `buf.len()` bytes of `file` at `offset`.
fn read_exact(file: &File, shown: &str, buf: &mut [u8], offset: u64) -> Result<()> {
    file.read_exact_at(buf, offset)
        .map_err(|e| Error::io("read", shown, e))
}

impl Drop for Scratch {
    /// The scratch file never outlives the bench.
    fn drop(&mut self) {
        let _ = nix::unistd::unlinkat(
            self.dir.as_fd(),
            self.name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
}
