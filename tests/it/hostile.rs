//! Hostile roots (issue 29, case 3): a FIFO where a root file should be
//! (`proc/cmdline`, `etc/default/grub`) must not hang plan, doctor,
//! inventory or apply. Each is run with a timeout, so that a hang fails the
//! test instead of hanging it; each refuses, naming the path and the fix,
//! and leaves the root as it was.

use crate::common::{gdrprov, stderr_of, stdout_of};
use crate::util::Root;
use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Long enough for a slow CI machine, short enough that a hang shows.
const LIMIT: Duration = Duration::from_secs(30);

/// Every entry under `root` as (content, mode); a FIFO, socket or device
/// node is recorded by its type, never opened (that would hang the test).
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let t = m.file_type();
            let content = if t.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else if t.is_symlink() {
                std::fs::read_link(&p)
                    .unwrap()
                    .display()
                    .to_string()
                    .into_bytes()
            } else if t.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                format!("<special {:?}>", t.is_fifo()).into_bytes()
            };
            out.insert(rel, (content, m.mode()));
        }
    }
    out
}

fn fifo_at(rel: &str) -> Root {
    let root = Root::example("ubuntu-22.04-h100");
    let p = root.join(rel);
    let _ = std::fs::remove_file(&p);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    root
}

/// Runs `gdrprov ARGS --root ROOT` under [`LIMIT`]; it must end by itself,
/// fail, and name the FIFO and the fix.
fn refuses(root: &Root, rel: &str, args: &[&str]) {
    let (out, what) = ends(root, rel, args);
    let err = stderr_of(&out);
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{err}",
        out.status,
        stdout_of(&out)
    );
    let named = root.join(rel).display().to_string();
    assert!(
        err.contains(&named)
            && err.contains("a FIFO")
            && err.contains("replace it with a regular file"),
        "{what}: the message must name {named} and the fix:\n{err}"
    );
}

/// Runs `gdrprov ARGS --root ROOT` under [`LIMIT`]; it must end by itself.
fn ends(root: &Root, rel: &str, args: &[&str]) -> (std::process::Output, String) {
    let start = Instant::now();
    let out = gdrprov()
        .timeout(LIMIT)
        .args(args)
        .args(["--root", root.arg()])
        .output()
        .unwrap();
    let what = format!("gdrprov {} with a FIFO at {rel}", args.join(" "));
    assert!(
        start.elapsed() < LIMIT && out.status.code().is_some(),
        "{what}: hung, killed after {LIMIT:?}"
    );
    (out, what)
}

/// Every command reads `proc/cmdline`: each refuses. Only plan and apply
/// read the GRUB defaults' content (doctor and inventory ask whether the
/// file is there): those two refuse, the others just must not hang.
#[test]
fn a_fifo_at_proc_cmdline_or_the_grub_defaults_is_refused_without_hanging() {
    let plan = &["plan", "rdma-dmabuf"][..];
    let apply = &["apply", "rdma-dmabuf", "--yes", "--no-exec"][..];
    for rel in ["proc/cmdline", "etc/default/grub"] {
        let root = fifo_at(rel);
        let before = tree(&root);
        for args in [plan, &["doctor"], &["inventory"], apply] {
            if rel == "proc/cmdline" || args == plan || args == apply {
                refuses(&root, rel, args);
            } else {
                ends(&root, rel, args);
            }
            assert!(
                tree(&root) == before,
                "gdrprov {} changed the root with a FIFO at {rel}",
                args.join(" ")
            );
        }
    }
}

/// A FIFO where apply writes a file it creates (`etc/nccl.conf`, absent in
/// the example): refused before anything is written.
#[test]
fn a_fifo_where_apply_writes_is_refused_and_nothing_changes() {
    let rel = "etc/nccl.conf";
    let root = fifo_at(rel);
    let before = tree(&root);
    refuses(&root, rel, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    assert!(tree(&root) == before, "apply changed the root");
}
