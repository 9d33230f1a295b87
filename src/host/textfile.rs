//! The files verify and recheck leave for machines (the readiness marker for
//! the first-boot unit, metrics for node-exporter's textfile collector, the
//! node-feature-discovery file; their text is rendered in src/output and
//! src/fleet). Each is written through the door, where it is: a file named
//! on the command line ([`Dest::Local`]: a link at its name refused), or a
//! default of the root ([`Dest::InRoot`]: `/run/gdrprov` of `--root R`, not
//! the machine's; never through a link inside the root).

use crate::error::Result;
use crate::host::{door, Host, WriteOptions};
use std::path::{Path, PathBuf};

/// Where a file for machines goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// Named on the command line, outside any root.
    Local(PathBuf),
    /// A path inside a root (a default, or a profile's `vars`).
    InRoot { root: PathBuf, path: String },
}

impl Dest {
    /// `name` in this directory.
    pub fn join(&self, name: &str) -> Dest {
        match self {
            Dest::Local(p) => Dest::Local(p.join(name)),
            Dest::InRoot { root, path } => Dest::InRoot {
                root: root.clone(),
                path: format!("{}/{name}", path.trim_end_matches('/')),
            },
        }
    }

    /// Writes `text` here atomically (temp file in the same directory,
    /// fsync, rename): the textfile collector never reads half a file, and
    /// ignores the temp file (`.NAME.gdrprov-PID.tmp`, not `*.prom`).
    pub fn write(&self, text: &str) -> Result<()> {
        match self {
            Dest::Local(p) => door::write_local(p, text.as_bytes()),
            Dest::InRoot { root, path } => {
                Host::open(root, true)?.write_atomic(path, text.as_bytes(), WriteOptions::default())
            }
        }
    }

    /// Refuses, before anything is written, a link where this file goes.
    pub fn refuse_links(&self) -> Result<()> {
        match self {
            Dest::Local(p) => door::refuse_local_link(p),
            Dest::InRoot { root, path } => Host::open(root, true)?.refuse_links([path.as_str()]),
        }
    }

    /// Removes the file here; absent is not an error.
    pub fn remove(&self) -> Result<()> {
        match self {
            Dest::Local(p) => door::remove_local(p),
            Dest::InRoot { root, path } => Host::open(root, true)?.remove(path),
        }
    }
}

/// Writes `DIR/ready` or `DIR/failed` (atomically) and removes the other, so
/// exactly one says how the last verify went.
pub fn write_marker(dir: &Dest, ready: bool, text: &str) -> Result<()> {
    let (name, other) = if ready {
        ("ready", "failed")
    } else {
        ("failed", "ready")
    };
    // Both checked first: a link at either leaves both as they were.
    dir.join(name).refuse_links()?;
    dir.join(other).refuse_links()?;
    dir.join(name).write(text)?;
    dir.join(other).remove()
}

/// Writes a file named on the command line atomically through the door
/// ([`Dest::write`]).
pub fn write_textfile(path: &Path, text: &str) -> Result<()> {
    Dest::Local(path.to_path_buf()).write(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_replaces_the_other_one() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run/gdrprov");
        let d = Dest::Local(dir.clone());
        write_marker(&d, false, "why").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("failed")).unwrap(), "why");
        write_marker(&d, true, "ok").unwrap();
        assert!(!dir.join("failed").exists());
        assert_eq!(std::fs::read_to_string(dir.join("ready")).unwrap(), "ok");
    }

    #[test]
    fn a_marker_in_a_root_stays_in_it() {
        let t = tempfile::tempdir().unwrap();
        let d = Dest::InRoot {
            root: t.path().to_path_buf(),
            path: "/run/gdrprov".into(),
        };
        write_marker(&d, true, "ok").unwrap();
        assert_eq!(
            std::fs::read_to_string(t.path().join("run/gdrprov/ready")).unwrap(),
            "ok"
        );
        // A link for the directory, inside the root: refused, nothing written.
        std::fs::remove_dir_all(t.path().join("run/gdrprov")).unwrap();
        std::os::unix::fs::symlink("/etc", t.path().join("run/gdrprov")).unwrap();
        let err = write_marker(&d, true, "ok").unwrap_err().to_string();
        assert!(err.contains("is a symlink to /etc"), "{err}");
        assert!(!t.path().join("etc").exists());
    }
}
