//! Files named on the command line (`--textfile`, `--marker-dir`,
//! `--nfd-file`, a token, a snapshot directory), outside any root, written
//! through the door. Their directory is taken as the user named it (links
//! followed, made when missing), but the file itself is never a link: one
//! there is refused, naming it and its target, so a link left at
//! `--textfile` cannot send the write to another file.

use super::Dir;
use crate::error::{Error, Result};
use crate::host::fs::WriteOptions;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The directory `dir` (absolute, named by the user), made 0755 with its
/// parents when missing, open.
fn local_dir(dir: &Path) -> Result<Dir> {
    let shown = dir.display().to_string();
    make_dirs(dir).map_err(|e| Error::io("create directory", shown.clone(), e))?;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(dir, flags, Mode::empty())
        .map_err(|e| Error::io("open directory", shown.clone(), e.into()))?;
    Ok(Dir {
        fd,
        logical: shown.trim_end_matches('/').to_string(),
        prefix: String::new(),
    })
}

/// Makes `dir` and its missing parents, each exactly 0755: the umask does
/// not narrow them (under umask 077 a `--textfile` directory made 0700 would
/// hide the metrics from node-exporter). Directories already there are left
/// as they are.
fn make_dirs(dir: &Path) -> std::io::Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| std::fs::symlink_metadata(d).is_err())
        .collect();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(dir)?;
    for d in missing.iter().rev() {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// `path` made absolute, split into its directory and its (UTF-8) name.
fn split_local(path: &Path) -> Result<(PathBuf, String)> {
    let shown = path.display().to_string();
    let absolute = std::path::absolute(path).map_err(|e| Error::io("write", &shown, e))?;
    let name = absolute
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| *n != "." && *n != "..")
        .ok_or_else(|| Error::Usage(format!("{shown} is not a UTF-8 file path")))?
        .to_string();
    let dir = absolute.parent().unwrap_or(Path::new("/")).to_path_buf();
    Ok((dir, name))
}

/// Writes `data` to `path`, a file named by the user, atomically (temp file
/// beside it, fsync, rename) and durably, as [`crate::host::Host::write_atomic`]
/// does in a root: a reader (node-exporter's textfile collector) never sees
/// half a file. A symlink at `path` is refused, naming it.
pub fn write_local(path: &Path, data: &[u8]) -> Result<()> {
    let (dir, name) = split_local(path)?;
    local_dir(&dir)?.replace(&name, WriteOptions::default(), |f| f.write_all(data))
}

/// Removes `path`, a file named by the user (`ready` when `failed` is
/// written); absent is not an error, a link there is refused.
pub fn remove_local(path: &Path) -> Result<()> {
    let (dir, name) = split_local(path)?;
    let dir = local_dir(&dir)?;
    match dir.entry(&name)? {
        None => Ok(()),
        Some(m) if m.file_type().is_symlink() => Err(dir.refuse_link(&name, &dir.shown(&name))),
        Some(_) => nix::unistd::unlinkat(
            dir.fd.as_fd(),
            name.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        )
        .map_err(|e| Error::io("remove", dir.shown(&name), e.into())),
    }
}

/// Refuses a symlink at `path`, a file named by the user, before anything
/// is written (its directory as named; absent is fine).
pub fn refuse_local_link(path: &Path) -> Result<()> {
    let (dir, name) = split_local(path)?;
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let Ok(fd) = nix::fcntl::open(&dir, flags, Mode::empty()) else {
        return Ok(());
    };
    let dir = Dir {
        fd,
        logical: dir.display().to_string().trim_end_matches('/').to_string(),
        prefix: String::new(),
    };
    match dir.entry(&name)? {
        Some(m) if m.file_type().is_symlink() => Err(dir.refuse_link(&name, &dir.shown(&name))),
        _ => Ok(()),
    }
}

/// Writes `text` into a new file at `path` (named by the user or made in
/// `$TMPDIR`, not in a root) readable by its owner only (0600), never over an
/// existing file or through a symlink.
pub fn write_new_private(path: &Path, text: &str) -> std::io::Result<()> {
    let flags = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_EXCL
        | OFlag::O_NOFOLLOW
        | OFlag::O_NONBLOCK
        | OFlag::O_CLOEXEC;
    let fd = nix::fcntl::open(path, flags, Mode::from_bits_truncate(0o600))?;
    let mut f = std::fs::File::from(fd);
    f.write_all(text.as_bytes())?;
    f.sync_all()
}

/// A tree gdrprov makes from nothing outside any root (`inventory
/// --snapshot DIR`): directories, files and the symlinks that recreate the
/// root's own. Every file is written where no link is (`O_NOFOLLOW`).
pub struct LocalTree;

impl LocalTree {
    /// Makes `dir` and its parents (0755).
    pub fn make_dir_all(dir: &Path) -> std::io::Result<()> {
        make_dirs(dir)
    }

    /// Makes a symlink at `at` (its parents made) naming `target`.
    pub fn make_link(at: &Path, target: &Path) -> std::io::Result<()> {
        if let Some(parent) = at.parent() {
            Self::make_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(target, at)
    }

    /// Writes `data` into `path` (created or emptied, never through a link
    /// at its name), its parents made.
    pub fn write(path: &Path, data: &[u8]) -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            Self::make_dir_all(parent)?;
        }
        let flags = OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_TRUNC
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(path, flags, Mode::from_bits_truncate(0o644))?;
        let mut f = std::fs::File::from(fd);
        f.write_all(data)
    }
}
