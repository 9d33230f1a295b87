//! Directories gdrprov makes and removes inside the root (a generation of
//! the journal, the parents of a file it created): renamed into place,
//! removed whole or when empty, never through a symlink by their name.

use super::fs::sync_dir;
use super::path::split_parent;
use super::read::is_absent;
use super::Host;
use crate::error::{Error, Result};
use std::path::Path;

impl Host {
    /// Renames a directory gdrprov made to a name that must not exist yet
    /// (never over another), then syncs the parent: the new name is on disk.
    pub fn rename_dir(&self, from: &str, to: &str) -> Result<()> {
        let (src, dst) = (self.resolve(from)?, self.resolve(to)?);
        let (at, flag) = (
            nix::fcntl::AT_FDCWD,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        );
        nix::fcntl::renameat2(at, &src.real, at, &dst.real, flag)
            .map_err(|e| Error::io("rename a directory to", self.display(to), e.into()))?;
        sync_dir(dst.real.parent().unwrap_or(Path::new("/")))
            .map_err(|e| Error::io("sync", self.display(to), e))
    }

    /// Removes a directory gdrprov made and everything in it (a generation
    /// that could not be completed); one already gone is not an error.
    /// The directory itself, never a symlink by its name, is removed (one
    /// there is refused: following it would remove what it points to).
    pub fn remove_dir_all(&self, path: &str) -> Result<()> {
        let (parent, name) = split_parent(path)?;
        let real = self.resolve(parent)?.real.join(name);
        let refuse = |why: &str| {
            Err(Error::BadPath {
                path: self.display(path),
                why: why.into(),
            })
        };
        // `name` is one plain component (split_parent gives no empty one),
        // so only these could reach the root or above.
        if name == "." || name == ".." {
            return refuse("refusing to remove the root or a directory above this one");
        }
        match std::fs::symlink_metadata(&real) {
            Ok(m) if m.file_type().is_symlink() => {
                return refuse(
                    "is a symbolic link, not a directory gdrprov made; remove it by hand",
                )
            }
            Err(e) if is_absent(&e) => return Ok(()),
            _ => {}
        }
        match std::fs::remove_dir_all(&real) {
            Ok(()) => Ok(()),
            Err(e) if is_absent(&e) => Ok(()),
            Err(e) => Err(Error::io("remove", self.display(path), e)),
        }
    }

    /// The symlink's target when `path`'s last component is a symlink (its
    /// parent resolved inside the root, the name itself never followed);
    /// `None` when it is anything else or absent.
    pub fn symlink_at(&self, path: &str) -> Option<String> {
        let (parent, name) = split_parent(path).ok()?;
        let real = self.resolve(parent).ok()?.real.join(name);
        let m = std::fs::symlink_metadata(&real).ok()?;
        if !m.file_type().is_symlink() {
            return None;
        }
        Some(
            std::fs::read_link(&real)
                .map(|t| t.display().to_string())
                .unwrap_or_default(),
        )
    }

    /// Removes a directory if it is empty (one gdrprov created); gives
    /// whether it did. One already gone, not empty, or not a plain directory
    /// is left alone.
    pub fn remove_empty_dir(&self, path: &str) -> Result<bool> {
        let r = self.resolve(path)?;
        if r.real == self.root || !std::fs::symlink_metadata(&r.real).is_ok_and(|m| m.is_dir()) {
            return Ok(false);
        }
        match std::fs::remove_dir(&r.real) {
            Ok(()) => {
                let dir = r.real.parent().unwrap_or(Path::new("/"));
                sync_dir(dir).map_err(|e| Error::io("sync", self.display(&r.logical), e))?;
                Ok(true)
            }
            Err(e) if is_absent(&e) || e.kind() == std::io::ErrorKind::DirectoryNotEmpty => {
                Ok(false)
            }
            Err(e) => Err(Error::io("remove directory", self.display(&r.logical), e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_dir_all_never_follows_a_symlink_by_its_name() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("etc")).unwrap();
        std::fs::write(r.join("etc/keep"), "x").unwrap();
        std::fs::create_dir_all(r.join("var/g")).unwrap();
        std::os::unix::fs::symlink("/etc", r.join("var/g/.1.new")).unwrap();
        let h = Host::open(r, true).unwrap();
        let err = h.remove_dir_all("/var/g/.1.new").unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(r.join("etc/keep").exists(), "the link's target was removed");
        h.remove_dir_all("/var/g/..").unwrap_err();
        h.remove_dir_all("/var/g/nope").unwrap();
    }

    #[test]
    fn rename_dir_never_replaces_a_directory() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("g/.2.new")).unwrap();
        std::fs::write(r.join("g/.2.new/journal.json"), "{}").unwrap();
        std::fs::create_dir_all(r.join("g/2")).unwrap();
        let h = Host::open(r, true).unwrap();
        let err = h.rename_dir("/g/.2.new", "/g/2").unwrap_err().to_string();
        assert!(err.contains("/g/2"), "{err}");
        std::fs::remove_dir(r.join("g/2")).unwrap();
        h.rename_dir("/g/.2.new", "/g/2").unwrap();
        assert!(r.join("g/2/journal.json").is_file());
        assert!(!r.join("g/.2.new").exists());
    }
}
