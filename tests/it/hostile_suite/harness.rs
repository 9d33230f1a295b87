//! What every hostile case asserts: exit 1, a message naming the problem, no
//! panic, and the tree it ran on unchanged.
#![allow(dead_code)]

use crate::common::{gdrprov, stderr_of, stdout_of};
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Output;
use std::time::Duration;

/// A hostile case must answer within this, or it hangs (a slow CI machine has room).
pub const LIMIT: Duration = Duration::from_secs(60);

/// One entry of a tree: kind, mode, owner and content (a link's target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub kind: &'static str,
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub content: Vec<u8>,
}

/// Every entry under `root` by its relative path; a FIFO, socket or device
/// node is recorded by its kind, never opened.
pub fn tree(root: &Path) -> BTreeMap<String, Entry> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let (kind, content) = if t.is_dir() {
                todo.push(p.clone());
                ("dir", Vec::new())
            } else if t.is_symlink() {
                let target = std::fs::read_link(&p).unwrap();
                ("link", target.as_os_str().as_encoded_bytes().to_vec())
            } else if t.is_file() {
                ("file", std::fs::read(&p).unwrap())
            } else {
                ("special", Vec::new())
            };
            out.insert(
                rel,
                Entry {
                    kind,
                    mode: m.mode(),
                    uid: m.uid(),
                    gid: m.gid(),
                    content,
                },
            );
        }
    }
    out
}

/// Fails naming every path whose entry differs between `before` and `after`.
#[track_caller]
pub fn assert_unchanged(
    before: &BTreeMap<String, Entry>,
    after: &BTreeMap<String, Entry>,
    case: &str,
) {
    let diff: Vec<&String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .collect();
    assert!(diff.is_empty(), "{case}: the tree changed at {diff:?}");
}

/// Runs gdrprov with `args` in `cwd` (a scratch directory when None), with a
/// deadline; a hang fails the case.
pub fn run_in(cwd: Option<&Path>, args: &[&str]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    let mut c = gdrprov();
    c.current_dir(cwd.unwrap_or(scratch.path()))
        .args(args)
        .timeout(LIMIT);
    c.output().unwrap()
}

/// Asserts a refusal: exit 1, no panic, and `needle` (case-insensitive) in
/// what it printed. Gives both outputs, joined, for more checks.
#[track_caller]
pub fn assert_refused(out: &Output, needle: &str, case: &str) -> String {
    let text = format!("{}{}", stdout_of(out), stderr_of(out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{case}: exit {:?}, wanted 1\n{text}",
        out.status.code()
    );
    assert!(!text.contains("panicked"), "{case}: it panicked\n{text}");
    assert!(
        text.to_lowercase().contains(&needle.to_lowercase()),
        "{case}: the message does not name `{needle}`\n{text}"
    );
    text
}

/// Runs `args` on `root` (the caller put `--root` in `args` where wanted),
/// asserting a refusal naming `needle` and the tree under `root` unchanged.
#[track_caller]
pub fn refused_unchanged(root: &Path, args: &[&str], needle: &str) -> String {
    let case = args.join(" ");
    let before = tree(root);
    let out = run_in(None, args);
    let text = assert_refused(&out, needle, &case);
    assert_unchanged(&before, &tree(root), &case);
    text
}
