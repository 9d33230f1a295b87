//! Recording and replaying what the fact probes read, for `inventory --snapshot`.
//!
//! A recording host logs every path a probe reads or lists and every probe
//! command with its output. The snapshot copies those files (recreating the
//! symlinks on the way, so sysfs paths still resolve inside the copy) and
//! writes the command outputs to `.gdrprov-snapshot/commands.json`. A host
//! opened on such a directory answers `query` from that file and runs nothing,
//! so `inventory --root SNAP` gives the same answers on another machine.

use super::read::ReadLimit;
use super::{CommandOutput, Host};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Directory inside a snapshot root holding command outputs and probe results.
pub const SNAPSHOT_DIR: &str = ".gdrprov-snapshot";

/// Placed in every empty directory of a snapshot so that git keeps it;
/// directory listings never show it.
pub const KEEP_FILE: &str = ".gdrprov-keep";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedCommand {
    pub argv: Vec<String>,
    /// `None` when the command could not be run (missing tool, or killed).
    #[serde(default)]
    pub code: Option<i32>,
    #[serde(default)]
    pub stdout: String,
    #[serde(default)]
    pub stderr: String,
    /// False when the tool was not there: a replay then answers "absent".
    #[serde(default = "yes")]
    pub ran: bool,
}

fn yes() -> bool {
    true
}

/// What the probes looked at.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Recording {
    /// Files read (as asked for, before symlinks are followed).
    #[serde(default)]
    pub files: BTreeSet<String>,
    /// Directories listed.
    #[serde(default)]
    pub dirs: BTreeSet<String>,
    /// Directories listed for names with a prefix only (`libnccl.so.` in a
    /// library directory): only those names are copied into a snapshot.
    #[serde(default)]
    pub dir_prefixes: BTreeMap<String, BTreeSet<String>>,
    /// Paths whose existence or link target was looked at.
    #[serde(default)]
    pub paths: BTreeSet<String>,
    #[serde(default)]
    pub commands: Vec<RecordedCommand>,
    /// In-process probes (the CUDA driver API), by name.
    #[serde(default)]
    pub probes: BTreeMap<String, serde_json::Value>,
    /// Every process started, as run (`chroot ROOT ...` on an image root);
    /// not part of a snapshot. Tests count them.
    #[serde(skip)]
    pub spawned: Vec<Vec<String>>,
}

impl Recording {
    fn command(&self, argv: &[&str]) -> Option<&RecordedCommand> {
        self.commands.iter().find(|c| c.argv == argv)
    }
}

/// Loads the recorded commands and probes of a snapshot root, if it is one.
/// Either file absent: nothing recorded. Present, it must be what `inventory
/// --snapshot` wrote (strict types: a wrong type or a missing field is
/// refused, naming the file and the field), never read as "no commands"
/// (issue 43: a replay that answered "tool absent" for a damaged file).
pub(super) fn load_replay(root: &Path) -> crate::error::Result<Option<Recording>> {
    let dir = root.join(SNAPSHOT_DIR);
    if !dir.is_dir() {
        return Ok(None);
    }
    let mut rec = Recording::default();
    // Through the door: a FIFO planted there is refused, not waited on.
    // Only an absent file is "nothing recorded"; a directory, a FIFO, text
    // that is not UTF-8 is refused, naming the file.
    let read = |name: &str| -> crate::error::Result<Option<String>> {
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            _ => super::read::read_local_text(&path, ReadLimit::RootFile).map(Some),
        }
    };
    if let Some(text) = read("commands.json")? {
        rec.commands = strict(&dir.join("commands.json"), &text)?;
    }
    if let Some(text) = read("probes.json")? {
        rec.probes = strict(&dir.join("probes.json"), &text)?;
    }
    Ok(Some(rec))
}

/// TEXT as a `T`, or a refusal naming FILE and the failing field's path.
fn strict<T: serde::de::DeserializeOwned>(file: &Path, text: &str) -> crate::error::Result<T> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        crate::error::Error::Usage(format!(
            "{}: field `{field}`: {}; this snapshot file is not as gdrprov's `inventory --snapshot DIR` wrote it: take the snapshot again",
            file.display(),
            e.into_inner()
        ))
    })
}

impl Host {
    /// Starts logging every fact read and probe command (for `--snapshot`).
    pub fn recording(mut self) -> Self {
        self.recorder = Some(Arc::new(Mutex::new(Recording::default())));
        self
    }

    /// What was logged so far.
    pub fn recorded(&self) -> Option<Recording> {
        let r = self.recorder.as_ref()?;
        r.lock().ok().map(|g| g.clone())
    }

    /// True when the root is a snapshot taken with `inventory --snapshot`
    /// (or a fixture written like one): commands are replayed, never run.
    pub fn is_snapshot(&self) -> bool {
        self.replay.is_some()
    }

    pub(super) fn log(&self, f: impl FnOnce(&mut Recording)) {
        if let Some(r) = &self.recorder {
            if let Ok(mut g) = r.lock() {
                f(&mut g);
            }
        }
    }

    /// A snapshot's recorded answer to a command: `Some(None)` when the
    /// snapshot says the tool was absent or never asked, `None` when this
    /// root is not a snapshot.
    pub(super) fn replayed(&self, argv: &[&str]) -> Option<Option<CommandOutput>> {
        let replay = self.replay.as_ref()?;
        let out = replay
            .command(argv)
            .filter(|c| c.ran)
            .map(|c| CommandOutput {
                code: c.code,
                stdout: c.stdout.clone(),
                stderr: c.stderr.clone(),
            });
        // A snapshot of a snapshot keeps what the first one recorded.
        if replay.command(argv).is_some() {
            self.log_command(argv, out.as_ref());
        }
        Some(out)
    }

    /// Logs `argv`'s answer worked out without running it (from a file the
    /// tool itself reads), so that a snapshot replays it like a command.
    pub fn record_answer(&self, argv: &[&str], out: Option<&CommandOutput>) {
        self.log_command(argv, out);
    }

    pub(super) fn log_command(&self, argv: &[&str], out: Option<&CommandOutput>) {
        self.log(|r| {
            if r.command(argv).is_none() {
                r.commands.push(RecordedCommand {
                    argv: argv.iter().map(|s| s.to_string()).collect(),
                    code: out.and_then(|o| o.code),
                    stdout: out.map(|o| o.stdout.clone()).unwrap_or_default(),
                    stderr: out.map(|o| o.stderr.clone()).unwrap_or_default(),
                    ran: out.is_some(),
                });
            }
        });
    }

    /// An in-process probe (one that loads a library rather than reading a
    /// file or running a command): computed on the running system only,
    /// replayed from a snapshot, `None` on an image root.
    pub fn probe<T>(&self, name: &str, compute: impl FnOnce() -> T) -> Option<T>
    where
        T: Serialize + serde::de::DeserializeOwned,
    {
        if let Some(replay) = &self.replay {
            let v = replay.probes.get(name)?.clone();
            self.log(|r| {
                r.probes.insert(name.to_string(), v.clone());
            });
            return serde_json::from_value(v).ok();
        }
        if !self.is_live() {
            return None;
        }
        let value = compute();
        if let Ok(json) = serde_json::to_value(&value) {
            self.log(|r| {
                r.probes.insert(name.to_string(), json);
            });
        }
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A way to put something that is not a snapshot file at a path.
    type Make = (&'static str, fn(&Path));

    /// Only an absent commands.json or probes.json is "nothing recorded":
    /// a directory, a FIFO or text that is not UTF-8 there is refused,
    /// naming the file.
    #[test]
    fn a_snapshot_file_that_cannot_be_read_is_refused_not_taken_for_absent() {
        for name in ["commands.json", "probes.json"] {
            let makes: [Make; 3] = [
                ("a directory", |p| std::fs::create_dir(p).unwrap()),
                ("a FIFO", |p| {
                    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
                }),
                ("not UTF-8", |p| std::fs::write(p, b"[\xff]").unwrap()),
            ];
            for (what, make) in makes {
                let root = tempfile::tempdir().unwrap();
                let dir = root.path().join(SNAPSHOT_DIR);
                std::fs::create_dir(&dir).unwrap();
                make(&dir.join(name));
                let e = load_replay(root.path())
                    .err()
                    .unwrap_or_else(|| panic!("{name} {what}: taken for absent"))
                    .to_string();
                assert!(e.contains(name), "{name} {what}: {e}");
            }
        }
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join(SNAPSHOT_DIR)).unwrap();
        let rec = load_replay(root.path()).unwrap().unwrap();
        assert!(rec.commands.is_empty() && rec.probes.is_empty());
    }
}
