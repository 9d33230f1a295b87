//! Resolving in-root paths with chroot semantics: `..` stops at the root and a
//! symlink's target, absolute or relative, is read as if the root were `/`.
//! The result can therefore never name a file outside the root.

use super::Host;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// Symlinks followed in one resolution before giving up (the kernel's limit).
const MAX_LINKS: usize = 40;

/// A path resolved inside a root: `real` is what the process opens,
/// `logical` the absolute path inside the root, as shown to people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InRoot {
    pub real: PathBuf,
    pub logical: String,
}

/// A path written in a profile must be absolute, plain and free of `..`, so
/// that what the profile says is exactly what gets written.
pub fn check_profile_path(path: &str) -> Result<()> {
    let bad = |why: &str| {
        Err(Error::BadPath {
            path: path.to_string(),
            why: why.to_string(),
        })
    };
    if !path.starts_with('/') {
        return bad("it must be absolute inside the root, like /etc/nccl.conf");
    }
    if path.chars().any(|c| c.is_control()) {
        return bad("it contains a control character");
    }
    if path.len() > 4096 {
        return bad("it is longer than 4096 bytes");
    }
    if path.ends_with('/') {
        return bad("it names a directory, not a file");
    }
    // Checked on the raw text: Path::components would quietly drop `.`.
    if path[1..]
        .split('/')
        .any(|seg| seg.is_empty() || seg == "." || seg == "..")
    {
        return bad("`.`, `..` and empty components are not allowed; write the plain path");
    }
    Ok(())
}

/// What [`Host::resolve_visiting`] meets on the way: the path so far (its
/// components inside the root) is a directory, or a symlink to `target`.
pub enum Visit<'a> {
    Dir,
    Link(&'a Path),
}

impl Host {
    /// Resolves `path` (absolute, inside the root) to a real path that lies
    /// inside the root, following symlinks with chroot semantics. Missing
    /// trailing components are allowed (for files about to be created).
    pub fn resolve(&self, path: &str) -> Result<InRoot> {
        self.resolve_visiting(path, |_, _| Ok(()))
    }

    /// As [`Host::resolve`], telling `visit` each directory and symlink on
    /// the way (a snapshot recreates them); an error from `visit` stops it.
    pub fn resolve_visiting(
        &self,
        path: &str,
        mut visit: impl FnMut(&[OsString], Visit) -> Result<()>,
    ) -> Result<InRoot> {
        if !path.starts_with('/') {
            return Err(Error::BadPath {
                path: path.into(),
                why: "host paths must be absolute inside the root".into(),
            });
        }
        let mut todo: VecDeque<OsString> = components(Path::new(path));
        let mut done: Vec<OsString> = Vec::new();
        let mut links = 0usize;
        let mut missing = false;
        while let Some(name) = todo.pop_front() {
            if name == ".." {
                done.pop();
                continue;
            }
            done.push(name);
            if missing {
                continue;
            }
            let real = self.join(&done);
            match std::fs::symlink_metadata(&real) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(Error::BadPath {
                            path: path.into(),
                            why: "too many levels of symbolic links".into(),
                        });
                    }
                    let target = std::fs::read_link(&real)
                        .map_err(|e| Error::io("read link", real.display().to_string(), e))?;
                    visit(&done, Visit::Link(&target))?;
                    done.pop();
                    if target.is_absolute() {
                        done.clear();
                    }
                    let mut rest = components(&target);
                    rest.extend(todo.drain(..));
                    todo = rest;
                }
                Ok(meta) if meta.is_dir() => visit(&done, Visit::Dir)?,
                Ok(_) => {}
                Err(_) => missing = true,
            }
        }
        let logical = if done.is_empty() {
            "/".to_string()
        } else {
            done.iter()
                .map(|c| format!("/{}", c.to_string_lossy()))
                .collect()
        };
        Ok(InRoot {
            real: self.join(&done),
            logical,
        })
    }

    fn join(&self, parts: &[OsString]) -> PathBuf {
        let mut p = self.root().to_path_buf();
        p.extend(parts);
        p
    }
}

/// The normal components of a path, with `..` kept as a marker and `.` dropped.
fn components(p: &Path) -> VecDeque<OsString> {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// `/a/b/c` as (`/a/b`, `c`); a path without a file name is refused.
pub(super) fn split_parent(path: &str) -> Result<(&str, &str)> {
    match path.rsplit_once('/') {
        Some((parent, name)) if !name.is_empty() => {
            Ok((if parent.is_empty() { "/" } else { parent }, name))
        }
        _ => Err(Error::BadPath {
            path: path.into(),
            why: "not a file path".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn host(dir: &Path) -> Host {
        Host::open(dir, true).unwrap()
    }

    #[test]
    fn dotdot_stops_at_root() {
        let t = tempfile::tempdir().unwrap();
        let h = host(t.path());
        let r = h.resolve("/../../etc/passwd").unwrap();
        assert_eq!(r.real, h.root().join("etc/passwd"));
        assert_eq!(r.logical, "/etc/passwd");
    }

    #[test]
    fn absolute_symlink_is_read_inside_root() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("etc")).unwrap();
        symlink("/etc/shadow", t.path().join("etc/grub")).unwrap();
        let h = host(t.path());
        let r = h.resolve("/etc/grub").unwrap();
        assert_eq!(r.real, h.root().join("etc/shadow"));
    }

    #[test]
    fn relative_symlink_climbing_out_is_clamped() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("etc/default")).unwrap();
        symlink("../../../../../tmp", t.path().join("etc/default/d")).unwrap();
        let h = host(t.path());
        let r = h.resolve("/etc/default/d/x").unwrap();
        assert_eq!(r.real, h.root().join("tmp/x"));
    }

    #[test]
    fn symlinked_parent_directory_stays_inside() {
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(t.path().join("var/lib")).unwrap();
        symlink("/", t.path().join("var/lib/gdrprov")).unwrap();
        let h = host(t.path());
        let r = h.resolve("/var/lib/gdrprov/lock").unwrap();
        assert_eq!(r.real, h.root().join("lock"));
        assert!(r.real.starts_with(h.root()));
    }

    #[test]
    fn symlink_loop_is_an_error() {
        let t = tempfile::tempdir().unwrap();
        symlink("/b", t.path().join("a")).unwrap();
        symlink("/a", t.path().join("b")).unwrap();
        let h = host(t.path());
        assert!(h.resolve("/a/x").is_err());
    }

    #[test]
    fn profile_paths_must_be_plain_and_absolute() {
        assert!(check_profile_path("/etc/nccl.conf").is_ok());
        for bad in [
            "etc/nccl.conf",
            "/etc/../shadow",
            "/etc/./x",
            "/",
            "/etc/",
            "/etc/a\nb",
        ] {
            assert!(check_profile_path(bad).is_err(), "{bad:?} accepted");
        }
    }
}
