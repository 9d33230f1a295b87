//! Kills leave nothing (issue 37): apply, rollback and recover killed at
//! every step boundary (`GDRPROV_FAULT_AFTER_STEP`: the process aborts right
//! after step N, as a kill would), and inside each file step (what a kill
//! during `write_atomic` leaves: the directories the step made and its
//! temporary file, or the file renamed into place but the step not yet
//! marked done, reproduced on the tree as the kill leaves it), then
//! `recover`; and real SIGKILLs at spread instants of an apply. Every tree
//! after recovery is compared with the original, path by path: type, mode,
//! owner and content (gdrprov's own state directory aside). Before: a kill
//! inside a file step left the directories it made (`etc/modprobe.d`)
//! while `recover` said the host was as it was.

use crate::common::{gdrprov, stderr_of, stdout_of};
use crate::util::Root;
use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// path -> (type and content or link target, mode, uid, gid).
pub(crate) type Tree = BTreeMap<String, (Vec<u8>, u32, u32, u32)>;

pub(crate) fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "var/lib/gdrprov" {
                continue;
            }
            let m = std::fs::symlink_metadata(&p).unwrap();
            let content = if m.is_dir() {
                todo.push(p.clone());
                b"<dir>".to_vec()
            } else if m.file_type().is_symlink() {
                let mut v = b"<link>".to_vec();
                v.extend(
                    std::fs::read_link(&p)
                        .unwrap()
                        .display()
                        .to_string()
                        .bytes(),
                );
                v
            } else {
                std::fs::read(&p).unwrap()
            };
            out.insert(rel, (content, m.mode(), m.uid(), m.gid()));
        }
    }
    // An image without var/lib before the first apply: the state dir's
    // parents are gdrprov's, made once, kept (0755).
    for d in ["var", "var/lib"] {
        if out.get(d).is_some_and(|(c, ..)| c == b"<dir>") && !root.join(d).join("gdrprov").exists()
        {
            continue;
        }
    }
    out
}

#[track_caller]
pub(crate) fn same(now: &Tree, was: &Tree, what: &str) {
    let keys: std::collections::BTreeSet<&String> = now.keys().chain(was.keys()).collect();
    let diff: Vec<String> = keys
        .into_iter()
        .filter(|k| !(k.as_str() == "var" || k.as_str() == "var/lib"))
        .filter(|k| now.get(*k) != was.get(*k))
        .map(|k| match (now.get(k), was.get(k)) {
            (Some(_), None) => format!("{k} (left behind)"),
            (None, Some(_)) => format!("{k} (missing)"),
            (Some(a), Some(b)) => format!(
                "{k} (mode {:o}/{:o}, owner {}:{}/{}:{}, content same: {})",
                a.1,
                b.1,
                a.2,
                a.3,
                b.2,
                b.3,
                a.0 == b.0
            ),
            _ => unreachable!(),
        })
        .collect();
    assert!(diff.is_empty(), "{what}: not the original tree: {diff:?}");
}

pub(crate) fn gd(root: &Root, args: &[&str], fault: Option<usize>) -> std::process::Output {
    let mut c = gdrprov();
    if let Some(n) = fault {
        c.env("GDRPROV_FAULT_AFTER_STEP", n.to_string());
    }
    c.timeout(Duration::from_secs(60))
        .args(args)
        .args(["--root", root.arg()])
        .output()
        .unwrap()
}

#[track_caller]
pub(crate) fn ok(root: &Root, args: &[&str]) {
    let out = gd(root, args, None);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
}

/// The journal of generation `n`.
pub(crate) fn journal(root: &Root, n: u64) -> serde_json::Value {
    let p = root.join(format!("var/lib/gdrprov/generations/{n}/journal.json"));
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// Runs `gdrprov ARGS --root ROOT` and SIGKILLs it `after` its start (unless it ended first):
/// how it ended.
pub(crate) fn kill_at(root: &Root, args: &[&str], after: Duration) -> std::process::ExitStatus {
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let mut child = std::process::Command::new(bin)
        .args(args)
        .args(["--root", root.arg()])
        .env("NO_COLOR", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    );
    child.wait().unwrap()
}

/// Whether generation `n` is there and complete.
pub(crate) fn complete(root: &Root, n: u64) -> bool {
    root.join(format!("var/lib/gdrprov/generations/{n}/journal.json"))
        .exists()
        && journal(root, n)["status"] == "complete"
}

/// After a kill of `cmd`: `recover`; then the rollback still owed (an apply that had finished,
/// or a rollback killed before it began, which recover leaves as it is); the original tree.
/// True when a rollback was owed.
pub(crate) fn recovered(root: &Root, was: &Tree, cmd: &str, what: &str) -> bool {
    let out = gd(root, &["recover", "--yes", "--no-exec"], None);
    assert!(out.status.success(), "{what}: recover: {}", stderr_of(&out));
    let owed = match cmd {
        "apply" => complete(root, 1),
        "rollback" => !complete(root, 2),
        _ => false,
    };
    if owed {
        ok(root, &["rollback", "--yes", "--no-exec"]);
    }
    same(&tree(root), was, what);
    ok(root, &["journal", "check"]);
    owed
}

/// Each built-in profile on an example host it is for.
pub(crate) const BUILT_INS: [(&str, &str); 5] = [
    ("ubuntu-22.04-h100", "rdma-dmabuf"),
    ("ubuntu-22.04-h100", "legacy-peermem"),
    ("ubuntu-22.04-h100", "gds-iommu-off"),
    ("rocky-9-a100", "rdma-dmabuf"),
    ("alinux3-erdma", "erdma-cloud"),
];

/// A copy of `host` with a file of another owner and mode (kept through
/// everything), and the profile argument.
pub(crate) fn fresh(host: &str) -> Root {
    let root = Root::example(host);
    let grub = root.join("etc/default/grub");
    if grub.exists() {
        std::os::unix::fs::chown(&grub, Some(1234), Some(1234)).ok();
        std::fs::set_permissions(&grub, std::os::unix::fs::PermissionsExt::from_mode(0o640))
            .unwrap();
    }
    root
}

/// A profile with many new files in new directories, on top of rdma-dmabuf.
pub(crate) fn many_files(dir: &Path) -> String {
    let mut y = String::from("name: many\nextends: rdma-dmabuf\nfiles:\n");
    for i in 0..12 {
        y.push_str(&format!(
            "  - path: /opt/site{}/conf.d/n{i}/f{i}.conf\n    content: \"v={i}\\n\"\n",
            i % 3
        ));
    }
    for i in 0..4 {
        y.push_str(&format!(
            "  - path: /etc/site.d/deep/x{i}.conf\n    content: \"x={i}\\n\"\n    mode: \"0600\"\n"
        ));
    }
    let p = dir.join("many.yaml");
    std::fs::write(&p, y).unwrap();
    p.display().to_string()
}

/// What a kill inside step `i` (0-based) of generation `n` leaves: the
/// directories the step makes, and its temporary file (`renamed`: the file
/// in place, the step not yet marked done). False when step `i` writes no
/// file.
fn kill_inside(root: &Root, n: u64, i: usize, renamed: bool) -> bool {
    let g = journal(root, n);
    let Some(step) = g["steps"].get(i) else {
        return false;
    };
    let (Some(path), Some(after)) = (step["path"].as_str(), step["after"].as_str()) else {
        return false;
    };
    let target = root.join(&path[1..]);
    for d in step["created_dirs"].as_array().into_iter().flatten().rev() {
        // Each step lists the directories missing when the generation was
        // made: an earlier step may have made one already.
        let d = root.join(&d.as_str().unwrap()[1..]);
        if !d.exists() {
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                .unwrap();
        }
    }
    let bytes = std::fs::read(root.join("var/lib/gdrprov").join(after)).unwrap();
    if renamed {
        std::fs::write(&target, &bytes).unwrap();
    } else {
        let name = target.file_name().unwrap().to_str().unwrap();
        let tmp = target.with_file_name(format!(".{name}.gdrprov-4242.tmp"));
        std::fs::write(tmp, &bytes[..bytes.len() / 2]).unwrap();
    }
    true
}

/// Kills of one profile on one host: apply after each step and inside each
/// file step, then recover; rollback after each step, then recover (which
/// completes it); a recover killed while completing that rollback, then
/// recover again. Returns how many kills were recovered.
fn kill_everywhere(host: &str, profile: &str) -> usize {
    let apply = ["apply", profile, "--yes", "--no-exec"];
    let probe = fresh(host);
    ok(&probe, &apply);
    let steps = journal(&probe, 1)["steps"].as_array().unwrap().len();
    ok(&probe, &["rollback", "--yes", "--no-exec"]);
    let rollback_steps = journal(&probe, 2)["steps"].as_array().unwrap().len();
    let mut kills = 0;
    let check_recovered = |root: &Root, was: &Tree, what: &str| {
        ok(root, &["recover", "--yes", "--no-exec"]);
        same(&tree(root), was, what);
        ok(root, &["journal", "check"]);
    };
    for k in 0..=steps {
        for inside in [None, Some(false), Some(true)] {
            let root = fresh(host);
            let was = tree(&root);
            let out = gd(&root, &apply, Some(k));
            assert!(
                !out.status.success(),
                "{host} {profile}: the fault after step {k} did not stop apply"
            );
            let what = format!("{host} {profile}: apply killed after step {k} {inside:?}");
            if let Some(renamed) = inside {
                if k == 0 || !kill_inside(&root, 1, k, renamed) {
                    continue;
                }
            }
            check_recovered(&root, &was, &what);
            kills += 1;
        }
    }
    for k in 1..=rollback_steps {
        for inside in [None, Some(false), Some(true)] {
            let root = fresh(host);
            let was = tree(&root);
            ok(&root, &apply);
            let out = gd(&root, &["rollback", "--yes", "--no-exec"], Some(k));
            assert!(
                !out.status.success(),
                "{host} {profile}: the fault after step {k} did not stop rollback"
            );
            if let Some(renamed) = inside {
                if !kill_inside(&root, 2, k, renamed) {
                    continue;
                }
            }
            let what = format!("{host} {profile}: rollback killed after step {k} {inside:?}");
            // recover completes the rollback: the original tree.
            check_recovered(&root, &was, &what);
            kills += 1;
        }
        // recover itself killed while it carries the rollback out again
        // (the rollback killed after its first step; every step of recover's).
        for j in (1..=rollback_steps).filter(|_| k == 1) {
            let root = fresh(host);
            let was = tree(&root);
            ok(&root, &apply);
            gd(&root, &["rollback", "--yes", "--no-exec"], Some(k));
            let out = gd(&root, &["recover", "--yes", "--no-exec"], Some(j));
            if out.status.success() {
                continue;
            }
            check_recovered(&root, &was, &format!("{host} {profile}: recover killed after step {j} of the rollback killed after {k}"));
            kills += 1;
        }
    }
    kills
}

#[test]
fn every_kill_of_a_built_in_profile_is_recovered_to_the_original_tree() {
    let mut total = 0;
    for (host, profile) in BUILT_INS {
        total += kill_everywhere(host, profile);
    }
    eprintln!("built-in profiles: {total} kills, every one recovered to the original tree");
    assert!(total >= 40, "{total}");
}

#[test]
fn every_kill_of_many_new_files_in_new_directories_is_recovered() {
    let t = tempfile::tempdir().unwrap();
    let p = many_files(t.path());
    let total = kill_everywhere("ubuntu-22.04-h100", &p);
    eprintln!("many new files: {total} kills, every one recovered to the original tree");
    assert!(total >= 50, "{total}");
}

/// Real SIGKILLs at instants spread over an apply of many files (measured
/// first), each followed by `recover`: the original tree every time.
#[test]
fn real_sigkills_at_spread_instants_are_recovered() {
    let t = tempfile::tempdir().unwrap();
    let p = many_files(t.path());
    let apply = ["apply", p.as_str(), "--yes", "--no-exec"];
    let probe = fresh("ubuntu-22.04-h100");
    let start = std::time::Instant::now();
    ok(&probe, &apply);
    let took = start.elapsed().as_micros() as u64;
    let mut interrupted = 0;
    for i in 0..8u64 {
        let root = fresh("ubuntu-22.04-h100");
        let was = tree(&root);
        // Spread over the whole run, then a little past it.
        let at = took * (i + 1) / 7;
        let status = kill_at(&root, &apply, Duration::from_micros(at));
        // Killed after its journal said complete (or not killed): the apply stands, and
        // rollback undoes it.
        let finished = recovered(
            &root,
            &was,
            "apply",
            &format!("SIGKILL {i} at {at} us of {took} us"),
        );
        if !finished && !status.success() {
            interrupted += 1;
        }
    }
    eprintln!("real SIGKILLs: 8, {interrupted} inside the apply, every one recovered");
}
