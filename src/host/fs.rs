//! File access inside the root: reads, listings and metadata. Every write
//! is the door's ([`super::door`]): atomic (a temp file beside the target,
//! fsync, rename, fsync of the file and of the directory, the replaced file
//! held open until then), so a crash or a full disk leaves either the old
//! file or the new one, never a mix, on FAT too; never through a symlink.

use super::read::{is_absent, not_regular_file as not_regular, ReadLimit};
use super::Host;
use crate::error::{Error, Result};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

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

    pub(super) fn list_dir_unlogged(&self, path: &str) -> Vec<String> {
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

    /// Whether `path` (or, when it is absent, nothing) lies on FAT, an EFI
    /// system partition: its mount options give every file the same mode
    /// and owner (0777 with umask=000), and the write door sets none there.
    pub fn on_fat(&self, path: &str) -> bool {
        self.resolve(path).is_ok_and(|r| {
            nix::sys::statfs::statfs(&r.real)
                .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::MSDOS_SUPER_MAGIC)
        })
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
    fn a_write_through_a_symlinked_directory_is_refused_naming_the_link() {
        let t = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("etc")).unwrap();
        std::os::unix::fs::symlink(outside.path(), t.path().join("etc/modprobe.d")).unwrap();
        let h = Host::open(t.path(), true).unwrap();
        let err = h
            .write_atomic("/etc/modprobe.d/x.conf", b"x\n", WriteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("etc/modprobe.d is a symlink to")
                && err.contains(&outside.path().display().to_string())
                && err.contains("/x.conf instead")
                && !err.contains("remove it"),
            "{err}"
        );
        assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
        let inside = t.path().join(outside.path().strip_prefix("/").unwrap());
        assert!(!inside.exists(), "written inside the root through the link");
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
