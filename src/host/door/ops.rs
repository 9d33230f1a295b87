//! What the door does inside a root: files written atomically and durably,
//! directories made, renamed and removed, each relative to a directory
//! handle the walk reached ([`Host::walk`]), never through a symlink.

use super::{not_a_file, Dir};
use crate::error::{Error, Result};
use crate::host::fs::{FileMeta, WriteOptions};
use crate::host::read::is_absent;
use crate::host::Host;
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::UnlinkatFlags;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

impl Dir {
    /// Replaces `name` in this directory by a temp file that `fill` writes:
    /// fsynced, renamed over it, fsynced again (its new name), then the
    /// directory fsynced, the replaced file held open until then. The
    /// existing file (never a link: the caller checked, and a rename
    /// replaces a link planted since, never its target) gives mode and
    /// owner unless `opts` says them.
    pub(super) fn replace(
        &self,
        name: &str,
        opts: WriteOptions,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<()> {
        let shown = self.shown(name);
        let existing = match self.entry(name)? {
            Some(m) if m.is_file() => Some(FileMeta {
                mode: m.permissions().mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            }),
            Some(m) if m.file_type().is_symlink() => return Err(self.refuse_link(name, &shown)),
            Some(m) => return Err(not_a_file(shown, &m)),
            None => None,
        };
        let meta = opts.meta.or(existing).unwrap_or(FileMeta {
            mode: opts.new_mode,
            uid: 0,
            gid: 0,
        });
        let tmp = format!(".{name}.gdrprov-{}.tmp", std::process::id());
        // `write_tmp` removes the temp file it made when it fails, and never one it did not
        // make (an `O_EXCL` create that met an existing name left that file alone).
        self.write_tmp(&tmp, fill, meta)
            .and_then(|new| {
                // The file replaced stays open until the new one and the
                // directory are on disk. On FAT (the ESP) its clusters are freed
                // when its inode goes, at the end of the rename, and the rename's
                // directory entry (the new start cluster) is written with the
                // renamed file's inode, not with the directory: synced in the
                // other order, a power cut between left the entry pointing into
                // freed clusters (systemd-boot: "Error preparing initrd: Volume
                // Corrupt"; power-cut campaign, systemd-boot run 6). Held open,
                // the old clusters are freed only once the new entry is written.
                let flags =
                    OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
                let replaced = openat(self.fd.as_fd(), name, flags, Mode::empty()).ok();
                if let Err(e) =
                    nix::fcntl::renameat(self.fd.as_fd(), tmp.as_str(), self.fd.as_fd(), name)
                {
                    self.unlink_quietly(&tmp);
                    return Err(e.into());
                }
                new.sync_all()?;
                self.sync()?;
                drop(replaced);
                Ok(())
            })
            .map_err(|e| Error::io("write", shown, e))
    }

    /// Creates `tmp` (new, never through a link), has `fill` write it, sets
    /// its mode and owner, fsyncs it; gives it back open.
    fn write_tmp(
        &self,
        tmp: &str,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
        meta: FileMeta,
    ) -> std::io::Result<std::fs::File> {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        // Failing here (EEXIST: the name is someone else's), nothing is ours to remove.
        let fd = openat(self.fd.as_fd(), tmp, flags, Mode::from_bits_truncate(0o600))?;
        let f = std::fs::File::from(fd);
        Self::fill_tmp(f, fill, meta).inspect_err(|_| self.unlink_quietly(tmp))
    }

    /// Removes `name` (a temp file this run made), ignoring failure.
    fn unlink_quietly(&self, name: &str) {
        let _ = nix::unistd::unlinkat(self.fd.as_fd(), name, UnlinkatFlags::NoRemoveDir);
    }

    /// Has `fill` write the new temp file `f`, sets its mode and owner, fsyncs it.
    fn fill_tmp(
        mut f: std::fs::File,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
        meta: FileMeta,
    ) -> std::io::Result<std::fs::File> {
        fill(&mut f)?;
        // FAT (an EFI system partition: systemd-boot's entries) has no owners or
        // modes: its mount options give every file the same ones, and a chown or
        // chmod to others fails with EPERM.
        let fat = nix::sys::statfs::fstatfs(&f)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::MSDOS_SUPER_MAGIC);
        if !fat {
            // Owner first: chown clears set-id bits, chmod then sets the wanted mode.
            if nix::unistd::geteuid().is_root() {
                std::os::unix::fs::fchown(&f, Some(meta.uid), Some(meta.gid))?;
            }
            f.set_permissions(std::fs::Permissions::from_mode(meta.mode))?;
        }
        f.sync_all()?;
        Ok(f)
    }

    /// Removes `name` and everything under it, never following a link
    /// (a link inside is removed as a link).
    fn remove_tree(&self, name: &str) -> std::io::Result<()> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = openat(self.fd.as_fd(), name, flags, Mode::empty())?;
        let sub = Dir {
            fd,
            logical: self.child(name),
            prefix: self.prefix.clone(),
        };
        for (entry, is_dir) in sub.names()? {
            if is_dir {
                sub.remove_tree(&entry)?;
            } else {
                nix::unistd::unlinkat(sub.fd.as_fd(), entry.as_str(), UnlinkatFlags::NoRemoveDir)?;
            }
        }
        nix::unistd::unlinkat(self.fd.as_fd(), name, UnlinkatFlags::RemoveDir)?;
        Ok(())
    }

    /// The names in this directory, each with whether it is a directory
    /// (never followed); `.` and `..` left out.
    pub(super) fn names(&self) -> std::io::Result<Vec<(String, bool)>> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut d = nix::dir::Dir::openat(self.fd.as_fd(), ".", flags, Mode::empty())?;
        let mut out = Vec::new();
        for e in d.iter() {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "." || name == ".." {
                continue;
            }
            let is_dir = match e.file_type() {
                Some(t) => t == nix::dir::Type::Directory,
                None => self
                    .entry(&name)
                    .ok()
                    .flatten()
                    .is_some_and(|m| m.file_type().is_dir()),
            };
            out.push((name, is_dir));
        }
        Ok(out)
    }
}

impl Host {
    /// Creates a directory and its parents inside the root, each one created
    /// with exactly `mode` (the umask does not narrow it), never through a
    /// symlink.
    pub fn create_dir_all(&self, path: &str, mode: u32) -> Result<()> {
        let written = self.display(path);
        let mut made = Vec::new();
        self.walk(path, Some(mode), &mut made, &written).map(drop)
    }

    /// Writes a file atomically, creating its parent directories.
    pub fn write_atomic(&self, path: &str, data: &[u8], opts: WriteOptions) -> Result<()> {
        self.replace(path, opts, |f| f.write_all(data))
    }

    /// Copies `from` to `to` inside the root as [`Host::write_atomic`]
    /// writes. `to` keeps its mode and owner (new: 0644, root). Streamed: an
    /// initramfs is tens of megabytes.
    pub fn copy_atomic(&self, from: &str, to: &str) -> Result<()> {
        let Some((mut src, _)) = self.open_regular(from)? else {
            return Err(Error::BadPath {
                path: self.display(from),
                why: "does not exist, so it cannot be copied".into(),
            });
        };
        // A failed read of `from` shows as a failed write of `to`, with
        // the error (and its hint: a full ESP) of the read.
        self.replace(to, WriteOptions::default(), |f| {
            std::io::copy(&mut src, f).map(|_| ())
        })
    }

    /// Copies a file a command made (`from`) where the boot loader reads it
    /// (`to`), unless the directory it goes to is gone (its kernel was
    /// removed: nothing boots from there). A copy a killed run left
    /// half-made goes first.
    pub(in crate::host) fn place(&self, from: &str, to: &str) -> Result<()> {
        let (parent, _) = crate::host::path::split_parent(to)?;
        if !self.exists(parent) {
            return Ok(());
        }
        self.remove_leftover_temps(to)?;
        self.copy_atomic(from, to)
    }

    /// Replaces `path` (its parents made 0755 where missing) by what `fill`
    /// writes ([`Dir::replace`]). A link on the way is refused; a link at
    /// the file itself too, unless it is a distribution's own link that
    /// [`Host::distro_link`] allows (then its target is written). What this
    /// call made is removed when it fails.
    pub(in crate::host) fn replace(
        &self,
        path: &str,
        opts: WriteOptions,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<()> {
        let mut made = Vec::new();
        let result = (|| {
            let (dir, name) = self.walk_parent(path, Some(0o755), &mut made)?;
            let Some(dir) = dir else {
                return Err(Error::BadPath {
                    path: self.display(path),
                    why: "its directory could not be made".into(),
                });
            };
            if dir.entry(name)?.is_some_and(|m| m.file_type().is_symlink()) {
                if let Some(target) = self.distro_link(path) {
                    let (tdir, tname) = self.walk_parent(&target, None, &mut made)?;
                    if let Some(tdir) = tdir {
                        return tdir.replace(tname, opts, fill);
                    }
                }
            }
            dir.replace(name, opts, fill)
        })();
        if result.is_err() {
            for d in made.iter().rev() {
                let _ = self.remove_empty_dir(d);
            }
        }
        result
    }

    /// Removes the temporary files `write_atomic` makes beside `path`
    /// (`.NAME.gdrprov-PID.tmp`) that a killed run left behind; returns the
    /// names removed. Call it only under the state lock, when no other
    /// gdrprov can be writing beside `path`.
    pub fn remove_leftover_temps(&self, path: &str) -> Result<Vec<String>> {
        let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
        let Some(dir) = dir else {
            return Ok(Vec::new());
        };
        let prefix = format!(".{name}.gdrprov-");
        let names = dir
            .names()
            .map_err(|e| Error::io("list", self.display(&dir.logical), e))?;
        let mut removed = Vec::new();
        for (entry, _) in names {
            let Some(pid) = entry
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".tmp"))
            else {
                continue;
            };
            if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            // The entry itself, never followed: a symlink by that name is
            // not ours, and following it would remove its target.
            if dir.entry(&entry)?.is_some_and(|m| m.is_file()) {
                nix::unistd::unlinkat(dir.fd.as_fd(), entry.as_str(), UnlinkatFlags::NoRemoveDir)
                    .map_err(|e| Error::io("remove", dir.shown(&entry), e.into()))?;
                removed.push(dir.child(&entry));
            }
        }
        if !removed.is_empty() {
            dir.sync()
                .map_err(|e| Error::io("sync", self.display(&dir.logical), e))?;
        }
        Ok(removed)
    }

    /// Removes a file; a file already gone is not an error. A symlink where
    /// the file should be is refused (never followed, never removed).
    pub fn remove(&self, path: &str) -> Result<()> {
        let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
        let Some(dir) = dir else { return Ok(()) };
        let shown = dir.shown(name);
        match dir.entry(name)? {
            None => return Ok(()),
            Some(m) if m.file_type().is_symlink() => return Err(dir.refuse_link(name, &shown)),
            Some(m) if m.is_dir() => return Err(not_a_file(shown, &m)),
            Some(_) => {}
        }
        match nix::unistd::unlinkat(dir.fd.as_fd(), name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => dir.sync().map_err(|e| Error::io("sync", shown, e)),
            Err(nix::errno::Errno::ENOENT) => Ok(()),
            Err(e) => Err(Error::io("remove", shown, e.into())),
        }
    }

    /// Renames a directory gdrprov made to a name that must not exist yet
    /// (never over another), then syncs the parent: the new name is on disk.
    pub fn rename_dir(&self, from: &str, to: &str) -> Result<()> {
        let missing = |p: &str| Error::BadPath {
            path: self.display(p),
            why: "its directory does not exist".into(),
        };
        let (src, sname) = self.walk_parent(from, None, &mut Vec::new())?;
        let src = src.ok_or_else(|| missing(from))?;
        let (dst, dname) = self.walk_parent(to, None, &mut Vec::new())?;
        let dst = dst.ok_or_else(|| missing(to))?;
        if let Some(m) = src.entry(sname)? {
            if m.file_type().is_symlink() {
                return Err(src.refuse_link(sname, &src.shown(sname)));
            }
        }
        nix::fcntl::renameat2(
            src.fd.as_fd(),
            sname,
            dst.fd.as_fd(),
            dname,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(|e| Error::io("rename a directory to", self.display(to), e.into()))?;
        dst.sync()
            .map_err(|e| Error::io("sync", self.display(to), e))
    }

    /// Removes a directory gdrprov made and everything in it (a generation
    /// that could not be completed); one already gone is not an error.
    /// The directory itself, never a symlink by its name, is removed (one
    /// there is refused: following it would remove what it points to).
    pub fn remove_dir_all(&self, path: &str) -> Result<()> {
        let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
        let Some(dir) = dir else { return Ok(()) };
        let shown = dir.shown(name);
        match dir.entry(name)? {
            None => return Ok(()),
            Some(m) if m.file_type().is_symlink() => {
                return Err(Error::BadPath {
                    path: shown,
                    why: format!(
                        "is a symlink to {}, not a directory gdrprov made; remove it by hand",
                        dir.link_target(name)
                    ),
                })
            }
            Some(m) if !m.is_dir() => return Err(not_a_file(shown, &m)),
            Some(_) => {}
        }
        match dir.remove_tree(name) {
            Ok(()) => Ok(()),
            Err(e) if is_absent(&e) => Ok(()),
            Err(e) => Err(Error::io("remove", shown, e)),
        }
    }

    /// Removes a directory if it is empty (one gdrprov created); gives
    /// whether it did. One already gone, not empty, or not a plain directory
    /// (a link) is left alone.
    pub fn remove_empty_dir(&self, path: &str) -> Result<bool> {
        if super::names_of(path)?.is_empty() {
            return Ok(false);
        }
        let Ok((Some(dir), name)) = self.walk_parent(path, None, &mut Vec::new()) else {
            return Ok(false);
        };
        if !dir.entry(name)?.is_some_and(|m| m.is_dir()) {
            return Ok(false);
        }
        match nix::unistd::unlinkat(dir.fd.as_fd(), name, UnlinkatFlags::RemoveDir) {
            Ok(()) => {
                dir.sync()
                    .map_err(|e| Error::io("sync", dir.shown(name), e))?;
                Ok(true)
            }
            Err(
                nix::errno::Errno::ENOENT
                | nix::errno::Errno::ENOTEMPTY
                | nix::errno::Errno::EEXIST,
            ) => Ok(false),
            Err(e) => Err(Error::io("remove directory", dir.shown(name), e.into())),
        }
    }
}
