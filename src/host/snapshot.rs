//! `inventory --snapshot DIR`: copies every file the probes read, the
//! directory listings they made and the symlinks on the way (sysfs is mostly
//! symlinks), plus the output of every probe command and the CUDA driver
//! API's answer, into DIR. A host opened on DIR replays the commands and runs
//! nothing, so `inventory --root DIR` and `doctor --root DIR` give the same
//! answers on any machine.

use super::{Host, LocalTree, Recording, Visit, KEEP_FILE, SNAPSHOT_DIR};
use crate::error::{Error, Result};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Files larger than this are not copied (none of the probes needs one).
const MAX_FILE: u64 = 2 << 20;

#[derive(Debug, Default)]
pub struct Summary {
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    pub commands: usize,
    pub skipped: Vec<String>,
}

struct Copier<'a> {
    host: &'a Host,
    dst: &'a Path,
    summary: Summary,
}

impl Copier<'_> {
    fn link(&mut self, at: &Path, target: &Path) -> std::io::Result<()> {
        if std::fs::symlink_metadata(at).is_ok() {
            return Ok(());
        }
        LocalTree::make_link(at, target)?;
        self.summary.links += 1;
        Ok(())
    }

    /// Resolves `path` in the source as the host layer does (chroot
    /// semantics), recreating every directory and symlink on the way in the
    /// destination. Returns the resolved source and destination paths, or
    /// `None` when it is missing (or a symlink loop).
    fn materialize(&mut self, path: &str) -> std::io::Result<Option<(PathBuf, PathBuf)>> {
        let (host, dst) = (self.host, self.dst);
        let mut failed: Option<std::io::Error> = None;
        let resolved = host.resolve_visiting(path, |parts, visit| {
            let mut at = dst.to_path_buf();
            at.extend(parts);
            let made = match visit {
                Visit::Link(target) => self.link(&at, target),
                Visit::Dir if std::fs::symlink_metadata(&at).is_err() => {
                    self.summary.dirs += 1;
                    LocalTree::make_dir_all(&at)
                }
                Visit::Dir => Ok(()),
            };
            made.map_err(|e| {
                failed = Some(e);
                Error::Usage("snapshot copy failed".into())
            })
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let Ok(r) = resolved else { return Ok(None) };
        if std::fs::symlink_metadata(&r.real).is_err() {
            return Ok(None);
        }
        Ok(Some((r.real, dst.join(r.logical.trim_start_matches('/')))))
    }

    fn copy_file(&mut self, path: &str) -> std::io::Result<()> {
        let Some((s, d)) = self.materialize(path)? else {
            return Ok(());
        };
        // Through the door (a regular file, opened without blocking). sysfs
        // and procfs report sizes that are not the content's: read at most
        // one byte past the limit, then check.
        let data = match super::read::open_regular_local(&s) {
            Ok(f) => {
                use std::io::Read;
                let mut d = Vec::new();
                if f.take(MAX_FILE + 1).read_to_end(&mut d).is_err() {
                    return Ok(());
                }
                d
            }
            Err(_) => return Ok(()),
        };
        if data.len() as u64 > MAX_FILE {
            self.summary
                .skipped
                .push(format!("{path} (over {MAX_FILE} bytes)"));
            return Ok(());
        }
        LocalTree::write(&d, &data)?;
        self.summary.files += 1;
        Ok(())
    }

    fn copy_listing(
        &mut self,
        path: &str,
        prefixes: Option<&BTreeSet<String>>,
    ) -> std::io::Result<()> {
        let Some((s, d)) = self.materialize(path)? else {
            return Ok(());
        };
        let Ok(rd) = std::fs::read_dir(&s) else {
            return Ok(());
        };
        for e in rd.flatten() {
            if let Some(ps) = prefixes {
                let name = e.file_name().to_string_lossy().into_owned();
                if !ps.iter().any(|p| name.starts_with(p.as_str())) {
                    continue;
                }
            }
            let at = d.join(e.file_name());
            if std::fs::symlink_metadata(&at).is_ok() {
                continue;
            }
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_symlink() {
                if let Ok(t) = std::fs::read_link(e.path()) {
                    self.link(&at, &t)?;
                }
            } else if ft.is_dir() {
                LocalTree::make_dir_all(&at)?;
                self.summary.dirs += 1;
            } else {
                // Listed, not read: its name is the fact, so an empty file stands in.
                LocalTree::write(&at, b"")?;
            }
        }
        Ok(())
    }

    fn touch_path(&mut self, path: &str) -> std::io::Result<()> {
        let Some((s, d)) = self.materialize(path)? else {
            return Ok(());
        };
        if std::fs::metadata(&s).is_ok_and(|m| m.is_file())
            && std::fs::symlink_metadata(&d).is_err()
        {
            LocalTree::write(&d, b"")?;
        }
        Ok(())
    }
}

/// Writes the snapshot of what `host` recorded into `dest`.
pub fn write(host: &Host, rec: &Recording, dest: &Path) -> Result<Summary> {
    if dest.exists() {
        let empty = std::fs::read_dir(dest)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false);
        if !empty {
            return Err(Error::Usage(format!(
                "snapshot directory {} exists and is not empty; name a new directory",
                dest.display()
            )));
        }
    }
    let io = |e: std::io::Error| Error::io("write snapshot", dest.display().to_string(), e);
    LocalTree::make_dir_all(dest).map_err(io)?;
    let dest = std::fs::canonicalize(dest).map_err(io)?;
    if dest.starts_with(host.root()) && host.root() != Path::new("/") {
        return Err(Error::Usage(
            "the snapshot directory must not be inside the root being read".into(),
        ));
    }
    let mut c = Copier {
        host,
        dst: &dest,
        summary: Summary::default(),
    };
    for d in &rec.dirs {
        c.copy_listing(d, None).map_err(io)?;
    }
    for (d, prefixes) in &rec.dir_prefixes {
        if !rec.dirs.contains(d) {
            c.copy_listing(d, Some(prefixes)).map_err(io)?;
        }
    }
    for f in &rec.files {
        c.copy_file(f).map_err(io)?;
    }
    for p in &rec.paths {
        c.touch_path(p).map_err(io)?;
    }
    keep_empty_dirs(&dest).map_err(io)?;
    let meta_dir = dest.join(SNAPSHOT_DIR);
    LocalTree::make_dir_all(&meta_dir).map_err(io)?;
    let json = |v: &dyn erased::Json| v.to_json();
    LocalTree::write(
        &meta_dir.join("commands.json"),
        json(&rec.commands).as_bytes(),
    )
    .map_err(io)?;
    LocalTree::write(&meta_dir.join("probes.json"), json(&rec.probes).as_bytes()).map_err(io)?;
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let info = serde_json::json!({
        "gdrprov": env!("CARGO_PKG_VERSION"),
        "taken_unix": secs,
        "source_root": host.root().display().to_string(),
        "skipped": c.summary.skipped,
    });
    LocalTree::write(
        &meta_dir.join("snapshot.json"),
        serde_json::to_string_pretty(&info)
            .unwrap_or_default()
            .as_bytes(),
    )
    .map_err(io)?;
    c.summary.commands = rec.commands.len();
    Ok(c.summary)
}

/// Git drops empty directories; an empty `/sys/class/infiniband` is a fact.
fn keep_empty_dirs(dir: &Path) -> std::io::Result<()> {
    let mut empty = true;
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        empty = false;
        if e.file_type()?.is_dir() {
            keep_empty_dirs(&e.path())?;
        }
    }
    if empty {
        LocalTree::write(&dir.join(KEEP_FILE), b"")?;
    }
    Ok(())
}

mod erased {
    pub trait Json {
        fn to_json(&self) -> String;
    }
    impl<T: serde::Serialize> Json for T {
        fn to_json(&self) -> String {
            serde_json::to_string_pretty(self).unwrap_or_default()
        }
    }
}
