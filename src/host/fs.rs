//! File access inside the root. Writes are atomic (a temp file beside the
//! target, fsync, rename, fsync of the file and of the directory, the
//! replaced file held open until then), so a crash or a full disk leaves
//! either the old file or the new one, never a mix, on FAT too.

use super::path::split_parent;
use super::read::{is_absent, not_regular_file as not_regular, ReadLimit};
use super::Host;
use crate::error::{Error, Result};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Mode and owner of a file, kept across edits and restored on rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileMeta {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// How to write a file: `meta` set means "make it exactly this" (rollback);
/// unset means "keep the existing file's mode and owner, or create it with
/// `new_mode`, owned by root".
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    pub meta: Option<FileMeta>,
    pub new_mode: u32,
}

impl Default for WriteOptions {
    fn default() -> Self {
        WriteOptions {
            meta: None,
            new_mode: 0o644,
        }
    }
}

impl Host {
    /// Reads a file of the root; `None` when it does not exist. At most
    /// [`ReadLimit::RootFile`]'s size ([`Host::read_limited`] for others).
    pub fn read(&self, path: &str) -> Result<Option<Vec<u8>>> {
        self.read_limited(path, ReadLimit::RootFile)
    }

    /// Fails, naming them, when a read met a FIFO, socket or device node where
    /// a regular file should be: a probe answers "absent" for such a path,
    /// but a command must not go on as if the root were sound.
    pub fn refuse_special_files(&self) -> Result<()> {
        let seen = match self.special.lock() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let Some(first) = seen.iter().next() else {
            return Ok(());
        };
        let shown: Vec<String> = seen.iter().map(|p| self.display(p)).collect();
        let r = self.resolve(first)?;
        let why = match std::fs::symlink_metadata(&r.real) {
            Ok(m) => match not_regular(String::new(), &m) {
                Error::BadPath { why, .. } => why,
                other => other.to_string(),
            },
            Err(e) => e.to_string(),
        };
        Err(Error::BadPath {
            path: shown.join(", "),
            why,
        })
    }

    /// Reads a text file that gdrprov may edit; it must be UTF-8.
    pub fn read_text(&self, path: &str) -> Result<Option<String>> {
        self.read_text_limited(path, ReadLimit::RootFile)
    }

    /// Reads a file for a fact: missing or unreadable gives `None`, invalid
    /// UTF-8 is replaced. Probes report "absent", they never fail.
    pub fn read_fact(&self, path: &str) -> Option<String> {
        self.log(|r| {
            r.files.insert(path.to_string());
        });
        self.read(path)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    }

    /// Reads a binary file for a fact (PCI config space), at most `max` bytes.
    pub fn read_fact_bytes(&self, path: &str, max: usize) -> Option<Vec<u8>> {
        self.read_fact_range(path, 0, max)
    }

    /// Reads at most `max` bytes from `offset` of a binary file for a fact
    /// (a UKI's sections), never the rest of it; `None` when unreadable.
    pub fn read_fact_range(&self, path: &str, offset: u64, max: usize) -> Option<Vec<u8>> {
        use std::io::{Read, Seek};
        self.log(|r| {
            r.files.insert(path.to_string());
        });
        let (mut file, _) = self.open_regular(path).ok().flatten()?;
        if offset > 0 {
            file.seek(std::io::SeekFrom::Start(offset)).ok()?;
        }
        let mut b = Vec::new();
        file.take(max as u64).read_to_end(&mut b).ok()?;
        Some(b)
    }

    pub fn exists(&self, path: &str) -> bool {
        self.log(|r| {
            r.paths.insert(path.to_string());
        });
        self.resolve(path)
            .map(|r| std::fs::symlink_metadata(&r.real).is_ok())
            .unwrap_or(false)
    }

    /// The path inside the root that `path` names once every symlink is
    /// followed (chroot semantics); `None` when it does not exist. For sysfs:
    /// `/sys/bus/pci/devices/0000:3b:00.0` gives `/sys/devices/pci0000:3a/...`.
    pub fn canonical(&self, path: &str) -> Option<String> {
        self.log(|r| {
            r.paths.insert(path.to_string());
        });
        let r = self.resolve(path).ok()?;
        std::fs::symlink_metadata(&r.real).ok()?;
        Some(r.logical)
    }

    /// The last component of the path a symlink points to (a sysfs `driver`
    /// link gives the driver's name); `None` when it is not a symlink.
    pub fn link_name(&self, path: &str) -> Option<String> {
        let c = self.canonical(path)?;
        let base = c.rsplit('/').next()?.to_string();
        (!base.is_empty()).then_some(base)
    }

    /// Names in a directory that start with `prefix`, sorted (a snapshot
    /// copies only those).
    pub fn list_dir_prefix(&self, path: &str, prefix: &str) -> Vec<String> {
        self.log(|r| {
            r.dir_prefixes
                .entry(path.to_string())
                .or_default()
                .insert(prefix.to_string());
        });
        let mut v = self.list_dir_unlogged(path);
        v.retain(|n| n.starts_with(prefix));
        v
    }

    /// Names in a directory, sorted; empty when it does not exist.
    pub fn list_dir(&self, path: &str) -> Vec<String> {
        self.log(|r| {
            r.dirs.insert(path.to_string());
        });
        self.list_dir_unlogged(path)
    }

    fn list_dir_unlogged(&self, path: &str) -> Vec<String> {
        let Ok(r) = self.resolve(path) else {
            return Vec::new();
        };
        let mut names: Vec<String> = std::fs::read_dir(&r.real)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n != super::KEEP_FILE)
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    pub fn meta(&self, path: &str) -> Result<Option<FileMeta>> {
        let r = self.resolve(path)?;
        match std::fs::metadata(&r.real) {
            Ok(m) => Ok(Some(FileMeta {
                mode: m.permissions().mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            })),
            Err(e) if is_absent(&e) => Ok(None),
            Err(e) => Err(Error::io("stat", self.display(&r.logical), e)),
        }
    }

    /// Creates a directory and its parents inside the root, each one created
    /// with exactly `mode` (the umask does not narrow it: a root-run tool
    /// under umask 077 must not make /etc/x unreadable to services).
    pub fn create_dir_all(&self, path: &str, mode: u32) -> Result<()> {
        // Resolution follows every symlink that exists (inside the root); what
        // is missing after that is plain names, created as real directories.
        let r = self.resolve(path)?;
        let shown = || self.display(&r.logical);
        match std::fs::metadata(&r.real) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(Error::BadPath {
                    path: shown(),
                    why: "exists and is not a directory".into(),
                })
            }
            Err(_) => {}
        }
        let mut missing = Vec::new();
        let mut p = r.real.as_path();
        while p.starts_with(&self.root) && p != self.root && std::fs::symlink_metadata(p).is_err() {
            missing.push(p);
            p = p.parent().unwrap_or(Path::new("/"));
        }
        for d in missing.into_iter().rev() {
            match std::fs::DirBuilder::new().mode(mode).create(d) {
                Ok(()) => std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode))
                    .map_err(|e| Error::io("create directory", shown(), e))?,
                // Another run made it first: fine.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
                Err(e) => return Err(Error::io("create directory", shown(), e)),
            }
        }
        Ok(())
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
    pub(super) fn place(&self, from: &str, to: &str) -> Result<()> {
        let (parent, _) = split_parent(to)?;
        if !self.exists(parent) {
            return Ok(());
        }
        self.remove_leftover_temps(to)?;
        self.copy_atomic(from, to)
    }

    /// Replaces `path` by a temp file that `fill` writes: fsynced, renamed
    /// over it, fsynced again (its new name), then the directory fsynced, the
    /// replaced file held open until then.
    fn replace(
        &self,
        path: &str,
        opts: WriteOptions,
        fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    ) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        self.create_dir_all(parent, 0o755)?;
        let r = self.resolve(path)?;
        let shown = self.display(&r.logical);
        let existing = match std::fs::symlink_metadata(&r.real) {
            Ok(m) if m.is_file() => Some(FileMeta {
                mode: m.permissions().mode() & 0o7777,
                uid: m.uid(),
                gid: m.gid(),
            }),
            Ok(m) => return Err(not_regular(shown, &m)),
            Err(_) => None,
        };
        let meta = opts.meta.or(existing).unwrap_or(FileMeta {
            mode: opts.new_mode,
            uid: 0,
            gid: 0,
        });
        let dir = r.real.parent().unwrap_or(Path::new("/"));
        let tmp = dir.join(format!(".{name}.gdrprov-{}.tmp", std::process::id()));
        let result = write_tmp(&tmp, fill, meta).and_then(|new| {
            // The file replaced stays open until the new one and the
            // directory are on disk. On FAT (the ESP) its clusters are freed
            // when its inode goes, at the end of the rename, and the rename's
            // directory entry (the new start cluster) is written with the
            // renamed file's inode, not with the directory: synced in the
            // other order, a power cut between left the entry pointing into
            // freed clusters (systemd-boot: "Error preparing initrd: Volume
            // Corrupt"; power-cut campaign, systemd-boot run 6). Held open,
            // the old clusters are freed only once the new entry is written.
            let replaced = super::read::hold_replaced(&r.real);
            std::fs::rename(&tmp, &r.real)?;
            new.sync_all()?;
            sync_dir(dir)?;
            drop(replaced);
            Ok(())
        });
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::io("write", shown, e));
        }
        Ok(())
    }

    /// Removes the temporary files `write_atomic` makes beside `path`
    /// (`.NAME.gdrprov-PID.tmp`) that a killed run left behind; returns the
    /// names removed. Call it only under the state lock, when no other
    /// gdrprov can be writing beside `path`.
    pub fn remove_leftover_temps(&self, path: &str) -> Result<Vec<String>> {
        let (parent, name) = split_parent(path)?;
        let prefix = format!(".{name}.gdrprov-");
        let dir = self.resolve(parent)?;
        let mut removed = Vec::new();
        for entry in self.list_dir_unlogged(parent) {
            let Some(pid) = entry
                .strip_prefix(&prefix)
                .and_then(|rest| rest.strip_suffix(".tmp"))
            else {
                continue;
            };
            if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let shown = if parent == "/" {
                format!("/{entry}")
            } else {
                format!("{parent}/{entry}")
            };
            // The entry itself, never resolved: a symlink by that name is not
            // ours, and following it would remove its target.
            let real = dir.real.join(&entry);
            if std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) {
                std::fs::remove_file(&real)
                    .map_err(|e| Error::io("remove", self.display(&shown), e))?;
                removed.push(shown);
            }
        }
        if !removed.is_empty() {
            sync_dir(&dir.real).map_err(|e| Error::io("sync", self.display(parent), e))?;
        }
        Ok(removed)
    }

    /// Removes a file; a file already gone is not an error.
    pub fn remove(&self, path: &str) -> Result<()> {
        let r = self.resolve(path)?;
        match std::fs::remove_file(&r.real) {
            Ok(()) => {
                let dir = r.real.parent().unwrap_or(Path::new("/"));
                sync_dir(dir).map_err(|e| Error::io("sync", self.display(&r.logical), e))
            }
            Err(e) if is_absent(&e) => Ok(()),
            Err(e) => Err(Error::io("remove", self.display(&r.logical), e)),
        }
    }
}

/// Creates `tmp`, has `fill` write it, sets its mode and owner, fsyncs it;
/// gives it back open.
fn write_tmp(
    tmp: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> std::io::Result<()>,
    meta: FileMeta,
) -> std::io::Result<std::fs::File> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(tmp)?;
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

pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    super::read::open_dir(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn write_keeps_mode_and_creates_parents() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::open(t.path(), true).unwrap();
        h.write_atomic("/etc/a/b.conf", b"one\n", WriteOptions::default())
            .unwrap();
        assert_eq!(h.meta("/etc/a/b.conf").unwrap().unwrap().mode, 0o644);
        std::fs::set_permissions(
            t.path().join("etc/a/b.conf"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        h.write_atomic("/etc/a/b.conf", b"two\n", WriteOptions::default())
            .unwrap();
        assert_eq!(h.read("/etc/a/b.conf").unwrap().unwrap(), b"two\n");
        assert_eq!(h.meta("/etc/a/b.conf").unwrap().unwrap().mode, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(t.path().join("etc/a"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "temp file left behind: {leftovers:?}");
    }

    #[test]
    fn write_through_symlink_stays_in_root() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("etc/modprobe.d")).unwrap();
        let h = Host::open(t.path(), true).unwrap();
        h.write_atomic("/etc/modprobe.d/x.conf", b"x\n", WriteOptions::default())
            .unwrap();
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        let inside = t
            .path()
            .join(outside.path().strip_prefix("/").unwrap())
            .join("x.conf");
        assert_eq!(std::fs::read(inside).unwrap(), b"x\n");
    }

    #[test]
    fn reads_follow_symlinks_inside_the_root_only() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("etc/default")).unwrap();
        std::fs::write(r.join("etc/hostname"), "inside\n").unwrap();
        // Absolute, climbing and relative links all land inside the root.
        std::os::unix::fs::symlink("/../../etc/hostname", r.join("etc/a")).unwrap();
        std::os::unix::fs::symlink("../../../../../../etc/hostname", r.join("etc/default/b"))
            .unwrap();
        std::os::unix::fs::symlink("/etc", r.join("etc/default/c")).unwrap();
        let h = Host::open(r, true).unwrap();
        for p in [
            "/etc/a",
            "/etc/default/b",
            "/etc/default/c/hostname",
            "/../etc/hostname",
        ] {
            assert_eq!(h.read(p).unwrap().as_deref(), Some(&b"inside\n"[..]), "{p}");
        }
        assert!(h.read("/etc/hostname/x").unwrap().is_none());
        assert!(h.read("/etc/default/nope").unwrap().is_none());
    }

    #[test]
    fn copy_atomic_refuses_a_missing_source_and_place_skips_a_removed_kernel() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("boot/efi/K")).unwrap();
        std::fs::write(r.join("boot/efi/K/initrd"), "old\n").unwrap();
        let h = Host::open(r, true).unwrap();
        // No source: refused, naming it; the target stays whole, no temp file.
        let err = h
            .copy_atomic("/boot/initrd.img-1", "/boot/efi/K/initrd")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/boot/initrd.img-1") && err.contains("does not exist"),
            "{err}"
        );
        assert_eq!(
            std::fs::read(r.join("boot/efi/K/initrd")).unwrap(),
            b"old\n"
        );
        assert_eq!(std::fs::read_dir(r.join("boot/efi/K")).unwrap().count(), 1);
        // place: a temp copy a killed run left goes, the new file arrives whole.
        std::fs::write(r.join("boot/initrd.img-1"), "new\n").unwrap();
        let stale = r.join("boot/efi/K/.initrd.gdrprov-99999.tmp");
        std::fs::write(&stale, "half").unwrap();
        h.place("/boot/initrd.img-1", "/boot/efi/K/initrd").unwrap();
        assert_eq!(
            std::fs::read(r.join("boot/efi/K/initrd")).unwrap(),
            b"new\n"
        );
        assert!(!stale.exists(), "the killed run's temp copy is still there");
        // The kernel's directory is gone (the kernel was removed): nothing to place.
        h.place("/boot/initrd.img-1", "/boot/efi/GONE/initrd")
            .unwrap();
        assert!(!r.join("boot/efi/GONE").exists());
    }

    #[test]
    fn missing_file_reads_as_none() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::open(t.path(), true).unwrap();
        assert!(h.read("/nope/x").unwrap().is_none());
        assert!(h.read_fact("/proc/cmdline").is_none());
        h.remove("/nope/x").unwrap();
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("proc")).unwrap();
        let fifo = t.path().join("proc/cmdline");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
        let h = Host::open(t.path(), true).unwrap();
        let err = h.read("/proc/cmdline").unwrap_err().to_string();
        assert!(
            err.contains("a FIFO") && err.contains("replace it"),
            "{err}"
        );
        assert!(h.read_fact("/proc/cmdline").is_none());
        let err = h
            .write_atomic("/proc/cmdline", b"x\n", WriteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("a FIFO"), "{err}");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }
}
