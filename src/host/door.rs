//! The one door for writing. Every file gdrprov writes, creates, renames or
//! removes goes through here: inside a root (its own files, boot files, the
//! journal and state, the lock, the reserve, markers) and named on the
//! command line (`--textfile`, `--marker-dir`, a snapshot, a token). No
//! other module writes: `tests/house/` (`every_file_write_goes_through_the_one_door`)
//! fails on a write, create, rename or remove call anywhere else, and
//! clippy.toml refuses them outside `src/host`.
//!
//! Inside a root a path is walked component by component from a handle of
//! the root (`openat` with `O_NOFOLLOW | O_DIRECTORY`), never following a
//! symlink or `..`, and the file is then made, replaced or removed relative
//! to the directory handle reached (`openat` with `O_EXCL | O_NOFOLLOW`,
//! `renameat`, `unlinkat`, `mkdirat`). A symlink anywhere on the path is
//! refused, naming the link, its target and the fix: a link planted at
//! `etc/modprobe.d/gdrprov-blacklist.conf` never makes gdrprov rewrite
//! `/etc/default/grub`, `state.json` or `/proc/cmdline`.
//!
//! One exception, narrow and stated: a link a distribution itself ships at a
//! path of [`DISTRO_LINKS`] is followed when it resolves inside the root to a
//! regular file of the same name, not under `/proc`, `/sys`, `/dev` or
//! `/run`, and not one of gdrprov's own files; the plan says so
//! (`facts::boot_shape`'s `distro_links`).
//!
//! A file named on the command line is the user's: its directory is taken
//! as named (links followed, as any tool does), but the file itself is
//! never a link (refused, naming it), so a link left at `--textfile` cannot
//! send the write elsewhere.

mod local;
mod lock;
mod ops;
mod scratch;

pub use local::{refuse_local_link, remove_local, write_local, write_new_private, LocalTree};
pub use lock::write_pid;
pub use scratch::{check_dir as check_scratch_dir, Existing, Scratch};

use super::read::{kind_of, not_regular_file as not_regular};
use super::Host;
use crate::error::{Error, Result};
use nix::fcntl::{openat, OFlag};
use nix::sys::stat::Mode;
use std::os::fd::{AsFd, OwnedFd};

/// Links a distribution itself ships at a path gdrprov writes, followed
/// under the rules of [`Host::distro_link`]: `/etc/kernel/cmdline` is a link
/// to `/usr/lib/kernel/cmdline` on some hosts.
pub const DISTRO_LINKS: &[&str] = &["/etc/kernel/cmdline"];

/// Trees a distribution link may never lead into: the kernel's and the
/// running system's (`/proc/cmdline` is no file to edit).
const NEVER_INTO: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// gdrprov's own files: never the target of a followed link.
const OWN: &[&str] = &["/var/lib/gdrprov", "/run/gdrprov"];

/// A directory reached by the door, open: what is made, replaced or removed
/// in it is named relative to this handle, never by a path again.
pub(super) struct Dir {
    fd: OwnedFd,
    /// Its path inside the root (or on the machine, for a local file).
    logical: String,
    /// Put before `logical` to show it (the root's path; empty when live or local).
    prefix: String,
}

impl Dir {
    /// The path inside the root of `name` in this directory.
    fn child(&self, name: &str) -> String {
        if self.logical == "/" {
            format!("/{name}")
        } else {
            format!("{}/{name}", self.logical)
        }
    }

    /// How `name` in this directory is shown to people.
    fn shown(&self, name: &str) -> String {
        format!("{}{}", self.prefix, self.child(name))
    }

    /// What is at `name` in this directory, never followed: a symlink is a
    /// symlink. `None` when nothing is there.
    fn entry(&self, name: &str) -> Result<Option<std::fs::Metadata>> {
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match openat(self.fd.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => std::fs::File::from(fd)
                .metadata()
                .map(Some)
                .map_err(|e| Error::io("stat", self.shown(name), e)),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(e) => Err(Error::io("stat", self.shown(name), e.into())),
        }
    }

    /// The target a symlink at `name` names (as written in the link).
    fn link_target(&self, name: &str) -> String {
        nix::fcntl::readlinkat(self.fd.as_fd(), name)
            .map(|t| t.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "(unreadable)".into())
    }

    /// The refusal of a link at `name` on the way to `written`.
    fn refuse_link(&self, name: &str, written: &str) -> Error {
        link_refused(written, &self.shown(name), &self.link_target(name))
    }

    /// The refusal of a link at `name` met as a directory on the way to
    /// `written` (inside the root): the fix is to write the path it leads
    /// to, never to remove the link (`/lib` -> `usr/lib` holds the host up).
    fn refuse_dir_link(&self, name: &str, written: &str) -> Error {
        let link = self.child(name);
        let target = self.link_target(name);
        let rest = written
            .strip_prefix(self.shown(name).as_str())
            .or_else(|| written.strip_prefix(link.as_str()))
            .unwrap_or("");
        let base = if target.starts_with('/') {
            String::new()
        } else {
            self.logical.clone()
        };
        let resolved = format!("{}{rest}", lexical(&format!("{base}/{target}")));
        let fix = if OWN
            .iter()
            .any(|o| link == *o || o.starts_with(&format!("{link}/")))
        {
            format!("gdrprov keeps its own files only at {link} itself: mount the storage there (a bind mount) in place of the link")
        } else {
            format!("write {resolved} instead (do not remove the link: the system may need it)")
        };
        Error::BadPath {
            path: written.into(),
            why: format!(
                "{} is a symlink to {target} (a directory): gdrprov never writes through a link; {fix}",
                self.shown(name)
            ),
        }
    }

    fn sync(&self) -> std::io::Result<()> {
        nix::unistd::fsync(self.fd.as_fd()).map_err(Into::into)
    }

    /// Opens the directory `name` in this one, never through a symlink;
    /// `None` when it is missing. A link or a file there is refused, named
    /// as on the way to `written`.
    fn open_sub(&self, name: &str, written: &str) -> Result<Option<Dir>> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        match openat(self.fd.as_fd(), name, flags, Mode::empty()) {
            Ok(fd) => Ok(Some(Dir {
                fd,
                logical: self.child(name),
                prefix: self.prefix.clone(),
            })),
            Err(nix::errno::Errno::ENOENT) => Ok(None),
            Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENOTDIR) => {
                Err(match self.entry(name)? {
                    Some(m) if m.file_type().is_symlink() => self.refuse_dir_link(name, written),
                    Some(m) => Error::BadPath {
                        path: written.into(),
                        why: format!(
                            "{} is {}, not a directory; move it away and run again",
                            self.shown(name),
                            kind_of(&m)
                        ),
                    },
                    None => Error::BadPath {
                        path: written.into(),
                        why: format!("{} changed while it was opened", self.shown(name)),
                    },
                })
            }
            Err(e) => Err(Error::io("open directory", self.shown(name), e.into())),
        }
    }

    /// [`Dir::open_sub`], making it (with exactly `mode`) when missing;
    /// gives whether it was made.
    fn make_sub(&self, name: &str, mode: u32, written: &str) -> Result<(Dir, bool)> {
        if let Some(d) = self.open_sub(name, written)? {
            return Ok((d, false));
        }
        let m = Mode::from_bits_truncate(mode);
        let made = match nix::sys::stat::mkdirat(self.fd.as_fd(), name, m) {
            Ok(()) => true,
            // Another run made it first: fine.
            Err(nix::errno::Errno::EEXIST) => false,
            Err(e) => return Err(Error::io("create directory", self.shown(name), e.into())),
        };
        let Some(d) = self.open_sub(name, written)? else {
            return Err(Error::BadPath {
                path: written.into(),
                why: format!("{} vanished as it was made", self.shown(name)),
            });
        };
        if made {
            // Exactly `mode`: the umask does not narrow it (a root-run tool
            // under umask 077 must not make /etc/x unreadable to services).
            nix::sys::stat::fchmod(d.fd.as_fd(), m)
                .map_err(|e| Error::io("create directory", self.shown(name), e.into()))?;
        }
        Ok((d, made))
    }
}

/// The refusal of a symlink met on the way to `written`: the link, its
/// target and the fix.
pub(super) fn link_refused(written: &str, link: &str, target: &str) -> Error {
    Error::BadPath {
        path: written.into(),
        why: format!(
            "{link} is a symlink to {target}: gdrprov never writes through a link (the write would land on {target}); replace the link by a regular file (or directory) of its own, or remove it, and run again"
        ),
    }
}

/// `path` (absolute) with `.` and `..` taken lexically, for a message.
fn lexical(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    for n in path.split('/') {
        match n {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            n => out.push(n),
        }
    }
    format!("/{}", out.join("/"))
}

/// The plain names of an absolute path inside the root; `..` is refused
/// (never followed), `.` and empty names are dropped.
fn names_of(path: &str) -> Result<Vec<&str>> {
    if !path.starts_with('/') {
        return Err(Error::BadPath {
            path: path.into(),
            why: "host paths must be absolute inside the root".into(),
        });
    }
    let names: Vec<&str> = path
        .split('/')
        .filter(|n| !n.is_empty() && *n != ".")
        .collect();
    if names.contains(&"..") {
        return Err(Error::BadPath {
            path: path.into(),
            why: "`..` is never followed when writing; write the plain path".into(),
        });
    }
    Ok(names)
}

impl Host {
    /// The root, open as the start of every walk.
    fn root_dir(&self) -> Result<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(self.root(), flags, Mode::empty())
            .map_err(|e| Error::io("open the root", self.root().display().to_string(), e.into()))?;
        Ok(Dir {
            fd,
            logical: "/".into(),
            prefix: if self.is_live() {
                String::new()
            } else {
                self.root().display().to_string()
            },
        })
    }

    /// Walks to the directory `path` (inside the root) from the root,
    /// component by component, never following a symlink. With `make`,
    /// missing directories are made with that mode and pushed onto `made`;
    /// without it, a missing one gives `None`. `written` is what the
    /// caller writes, named in a refusal.
    pub(super) fn walk(
        &self,
        path: &str,
        make: Option<u32>,
        made: &mut Vec<String>,
        written: &str,
    ) -> Result<Option<Dir>> {
        let mut dir = self.root_dir()?;
        for name in names_of(path)? {
            dir = match make {
                Some(mode) => {
                    let (d, new) = dir.make_sub(name, mode, written)?;
                    if new {
                        made.push(d.logical.clone());
                    }
                    d
                }
                None => match dir.open_sub(name, written)? {
                    Some(d) => d,
                    None => return Ok(None),
                },
            };
        }
        Ok(Some(dir))
    }

    /// The parent of `path` walked (made when `make`), and the file's name.
    pub(super) fn walk_parent<'p>(
        &self,
        path: &'p str,
        make: Option<u32>,
        made: &mut Vec<String>,
    ) -> Result<(Option<Dir>, &'p str)> {
        let (parent, name) = super::path::split_parent(path)?;
        if name == "." || name == ".." {
            return Err(Error::BadPath {
                path: self.display(path),
                why: "not a file path".into(),
            });
        }
        let written = self.display(path);
        Ok((self.walk(parent, make, made, &written)?, name))
    }

    /// The file a distribution's own link at `path` (one of
    /// [`DISTRO_LINKS`]) leads to, inside the root, when gdrprov may follow
    /// it: a regular file of the same name, not under `/proc`, `/sys`,
    /// `/dev` or `/run`, not one of gdrprov's own files, reached without
    /// another link. `None` for any other path or link.
    pub fn distro_link(&self, path: &str) -> Option<String> {
        if !DISTRO_LINKS.contains(&path) {
            return None;
        }
        self.symlink_at(path)?;
        let target = self.resolve(path).ok()?.logical;
        let under = |roots: &[&str]| {
            roots
                .iter()
                .any(|r| target == *r || target.starts_with(&format!("{r}/")))
        };
        let same_name = target.rsplit('/').next() == path.rsplit('/').next();
        if target == path || !same_name || under(NEVER_INTO) || under(OWN) {
            return None;
        }
        if target
            .rsplit('/')
            .next()
            .is_some_and(|n| n.contains("gdrprov"))
        {
            return None;
        }
        // The target itself, reached without a link, must be a regular file.
        let (dir, name) = self.walk_parent(&target, None, &mut Vec::new()).ok()?;
        let meta = dir?.entry(name).ok()??;
        meta.is_file().then_some(target)
    }

    /// The symlink's target when `path`'s last component is a symlink (its
    /// parent resolved inside the root, the name itself never followed);
    /// `None` when it is anything else or absent.
    pub fn symlink_at(&self, path: &str) -> Option<String> {
        let (parent, name) = super::path::split_parent(path).ok()?;
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

    /// The first symlink on the way to `path` or at it (its path inside the root
    /// and what it names), as the door would meet it; `None` when there is none
    /// or the link is one the door follows (`host::DISTRO_LINKS`).
    pub fn first_link(&self, path: &str) -> Option<(String, String)> {
        if self.distro_link(path).is_some() {
            return None;
        }
        let mut first = None;
        let _ = self.resolve_visiting(path, |done, visit| {
            if let (None, super::Visit::Link(target)) = (&first, visit) {
                let names: Vec<String> = done
                    .iter()
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect();
                first = Some((
                    format!("/{}", names.join("/")),
                    target.display().to_string(),
                ));
            }
            Ok(())
        });
        first
    }

    /// Refuses, before anything is written, a path of `paths` that the door
    /// would refuse: a symlink on the way or at the file itself (a followed
    /// distribution link aside), or something that is not a directory where
    /// one is needed. Commands that change a root call it first, so that a
    /// refusal leaves the root as it was.
    pub fn refuse_links<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
        for path in paths {
            let (dir, name) = self.walk_parent(path, None, &mut Vec::new())?;
            let Some(dir) = dir else { continue };
            if let Some(m) = dir.entry(name)? {
                if m.file_type().is_symlink() && self.distro_link(path).is_none() {
                    return Err(dir.refuse_link(name, &dir.shown(name)));
                }
            }
        }
        Ok(())
    }
}

/// A message for what is at a path where a regular file should be.
pub(super) fn not_a_file(shown: String, meta: &std::fs::Metadata) -> Error {
    not_regular(shown, meta)
}

#[cfg(test)]
mod tests;
