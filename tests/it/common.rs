//! Helpers shared by the integration tests: copies of the example roots and
//! whole-tree snapshots to prove "nothing changed" byte for byte.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh copy of `examples/hosts/NAME` in a temp dir (the dir guard and the root).
pub fn example_root(name: &str) -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join("examples/hosts").join(name), &root);
    (t, root)
}

pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let ty = e.file_type().unwrap();
        let dst = to.join(e.file_name());
        if ty.is_dir() {
            copy_tree(&e.path(), &dst);
        } else if ty.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(e.path()).unwrap(), dst).unwrap();
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// Every entry under `root`: relative path → (content or link target, mode).
pub fn snapshot(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, u32)>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd {
        let e = e.unwrap();
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().display().to_string();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if meta.is_dir() {
            out.insert(format!("{rel}/"), (Vec::new(), meta.mode()));
            walk(root, &p, out);
        } else if meta.file_type().is_symlink() {
            let t = std::fs::read_link(&p).unwrap();
            out.insert(rel, (t.display().to_string().into_bytes(), meta.mode()));
        } else {
            out.insert(rel, (std::fs::read(&p).unwrap(), meta.mode()));
        }
    }
}

/// The snapshot without gdrprov's own state directory.
pub fn without_state(mut s: BTreeMap<String, (Vec<u8>, u32)>) -> BTreeMap<String, (Vec<u8>, u32)> {
    s.retain(|k, _| !k.starts_with("var/lib/gdrprov") && k != "var/" && k != "var/lib/");
    s
}

pub fn gdrprov() -> assert_cmd::Command {
    let mut c = assert_cmd::Command::cargo_bin("gdrprov").unwrap();
    c.env_remove("GDRPROV_FAULT_AFTER_STEP")
        .env("NO_COLOR", "1");
    c
}

pub fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The check named NAME in a `verify --format json` report.
/// A command's standard output as JSON; on a parse error, both outputs in the panic.
pub fn json_of(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout_of(out), stderr_of(out)))
}

pub fn check_named(report: &serde_json::Value, name: &str) -> serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report:#}"))
        .clone()
}

/// Asserts two snapshots are equal, naming only the paths that differ.
pub fn assert_same(
    a: &BTreeMap<String, (Vec<u8>, u32)>,
    b: &BTreeMap<String, (Vec<u8>, u32)>,
    what: &str,
) {
    let diff: Vec<&String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .collect();
    assert!(diff.is_empty(), "{what}: these paths differ: {diff:?}");
}

/// Whether `tool` is installed (an executable file in `$PATH`).
pub fn installed(tool: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| {
            std::fs::metadata(Path::new(d).join(tool))
                .is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
        })
}

/// [`installed`], for a test that skips without the tool: says SKIPPED.
pub fn have(tool: &str) -> bool {
    let found = installed(tool);
    if !found {
        eprintln!("SKIPPED: {tool} is not installed (scripts/test.sh installs it)");
    }
    found
}
