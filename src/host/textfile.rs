//! The files verify and recheck leave for machines (the readiness marker for
//! the first-boot unit, metrics for node-exporter's textfile collector, the
//! node-feature-discovery file; their text is rendered in src/output and
//! src/fleet).

use crate::error::{Error, Result};
use crate::host::{Host, WriteOptions};
use std::path::Path;

/// Writes `DIR/ready` or `DIR/failed` (atomically) and removes the other, so
/// exactly one says how the last verify went.
pub fn write_marker(dir: &Path, ready: bool, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir.display().to_string(), e))?;
    let (name, other) = if ready {
        ("ready", "failed")
    } else {
        ("failed", "ready")
    };
    write_textfile(&dir.join(name), text)?;
    match std::fs::remove_file(dir.join(other)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(
            "remove",
            dir.join(other).display().to_string(),
            e,
        )),
    }
}

/// Writes a file atomically through the host layer (temp file in the same
/// directory, fsync, rename): the textfile collector never reads half a file,
/// and ignores the temp file (`.NAME.gdrprov-PID.tmp`, not `*.prom`).
pub fn write_textfile(path: &Path, text: &str) -> Result<()> {
    let shown = path.display().to_string();
    let absolute = std::path::absolute(path).map_err(|e| Error::io("write", &shown, e))?;
    let Some(absolute) = absolute.to_str() else {
        return Err(Error::Usage(format!("{shown} is not a UTF-8 path")));
    };
    Host::open(Path::new("/"), true)?.write_atomic(
        absolute,
        text.as_bytes(),
        WriteOptions::default(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_replaces_the_other_one() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run/gdrprov");
        write_marker(&dir, false, "why").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("failed")).unwrap(), "why");
        write_marker(&dir, true, "ok").unwrap();
        assert!(!dir.join("failed").exists());
        assert_eq!(std::fs::read_to_string(dir.join("ready")).unwrap(), "ok");
    }
}
