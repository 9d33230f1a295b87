//! No write through a link (issue 43): every path gdrprov writes inside a
//! root, replaced by a symlink to each sensitive target, is refused by the
//! command that writes it: exit 1, a message naming the link and its target,
//! the root unchanged, the target untouched.
//!
//! The owned paths are not listed by hand: they are every file path the
//! plans of the example hosts change (`plan --format json`), plus the
//! journal's own files (state, generations, lock) and the readiness marker.
//! The one door they all pass through is `src/host/door.rs`; the one
//! exception it makes (a distribution's own `/etc/kernel/cmdline` link,
//! followed to a file of its kind and said in the plan) is tested last.

use super::harness::{refused_unchanged, tree};
use crate::common::{gdrprov, json_of, stderr_of, stdout_of};
use crate::util::Root;
use std::path::Path;

const STATE: &str = "/var/lib/gdrprov/state.json";

/// (example host, profile): the plans whose written paths are generated.
const PLANS: &[(&str, &str)] = &[
    ("ubuntu-22.04-h100", "rdma-dmabuf"),
    ("ubuntu-22.04-h100", "legacy-peermem"),
];

/// The journal's own files, written by every command that changes a root.
const JOURNAL: &[&str] = &[
    STATE,
    "/var/lib/gdrprov/generations",
    "/var/lib/gdrprov/lock",
];

/// Where a planted link points: GRUB's defaults, gdrprov's state, the
/// kernel's command line, a secret, a file outside the root (absolute),
/// and a relative climb out of it.
fn targets(outside: &Path) -> Vec<String> {
    vec![
        "/etc/default/grub".into(),
        STATE.into(),
        "/proc/cmdline".into(),
        "/etc/shadow".into(),
        outside.display().to_string(),
        "../../../../../../../../../../etc/passwd".into(),
    ]
}

/// Every file path the plan of `profile` on `host` writes.
fn written_by(host: &str, profile: &str) -> Vec<String> {
    let root = Root::example(host);
    let out = gdrprov()
        .args(["plan", profile, "--format", "json", "--root", root.arg()])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let paths: Vec<String> = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str().map(str::to_string))
        .collect();
    assert!(!paths.is_empty(), "{host} {profile}: no path planned");
    paths
}

/// A copy of `host` with `profile` applied (`--no-exec`).
fn applied(host: &str, profile: &str) -> Root {
    let root = Root::example(host);
    std::fs::write(root.join("etc/shadow"), "root:*:1::::::\n").unwrap();
    let out = gdrprov()
        .args(["apply", profile, "--yes", "--no-exec", "--root", root.arg()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    root
}

/// Replaces `path` in `root` (a file, a directory or nothing) by a link to `target`.
fn plant(root: &Path, path: &str, target: &str) {
    let at = root.join(path.trim_start_matches('/'));
    match std::fs::symlink_metadata(&at) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(&at).unwrap(),
        Ok(_) => std::fs::remove_file(&at).unwrap(),
        Err(_) => std::fs::create_dir_all(at.parent().unwrap()).unwrap(),
    }
    std::os::unix::fs::symlink(target, &at).unwrap();
}

/// Runs `args` on `root` with a link at `path` to `target`: refused naming
/// both, the root unchanged, the file outside untouched.
fn refused(root: &Root, args: &[&str], path: &str, target: &str, outside: &Path) {
    judged(root, args, path, target, outside, false);
}

/// As [`refused`]; with `may_skip`, a command that succeeds without writing
/// `path` at all (a rollback that finds none of its keys through the link)
/// passes when the link and what it points to are as they were. A link
/// that leads nowhere in the root may be refused by the planner first
/// (`/etc/default/grub does not exist`): the message then names the path.
fn judged(root: &Root, args: &[&str], path: &str, target: &str, outside: &Path, may_skip: bool) {
    let args = [args, &["--root", root.arg()]].concat();
    let case = format!("{} (link {path} -> {target})", args.join(" "));
    let before = tree(root);
    let out = super::harness::run_in(None, &args);
    let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(std::fs::read(outside).unwrap(), b"outside\n", "{case}");
    let after = tree(root);
    let rel = path.trim_start_matches('/');
    if may_skip && out.status.code() == Some(0) {
        assert_eq!(before.get(rel), after.get(rel), "{case}: the link changed");
        let inside = root.join(rel).canonicalize().ok();
        if let Some(t) = inside.and_then(|p| {
            p.strip_prefix(&**root)
                .ok()
                .map(|p| p.display().to_string())
        }) {
            assert_eq!(
                before.get(&t),
                after.get(&t),
                "{case}: its target changed\n{text}"
            );
        }
        return;
    }
    super::harness::assert_unchanged(&before, &after, &case);
    let named = format!("{path} is a symlink to {target}");
    let dangling = std::fs::metadata(root.join(rel)).is_err()
        || !root.join(rel).canonicalize().unwrap().starts_with(&**root);
    let needle = if text.contains(&named) || !dangling {
        named
    } else {
        path.to_string()
    };
    super::harness::assert_refused(&out, &needle, &case);
}

fn outside_file() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let f = t.path().join("victim");
    std::fs::write(&f, "outside\n").unwrap();
    (t, f)
}

/// The cases and their kin: each path a plan writes, a link to each
/// target, on the first apply and on a re-apply after it.
#[test]
fn apply_never_writes_through_a_link_at_a_path_it_writes() {
    let (_t, outside) = outside_file();
    for (host, profile) in PLANS {
        for path in written_by(host, profile) {
            for target in targets(&outside) {
                if target == path {
                    continue;
                }
                let apply = ["apply", profile, "--yes", "--no-exec"];
                // First apply: the link was there before gdrprov ever ran.
                let root = Root::example(host);
                std::fs::write(root.join("etc/shadow"), "root:*:1::::::\n").unwrap();
                plant(&root, &path, &target);
                refused(&root, &apply, &path, &target, &outside);
                // Re-apply: the file gdrprov wrote, replaced by a link.
                let root = applied(host, profile);
                plant(&root, &path, &target);
                refused(&root, &apply, &path, &target, &outside);
            }
        }
    }
}

/// The journal's own files as links: every command that writes the journal
/// refuses (a plan with changes: the other profile).
#[test]
fn the_journal_is_never_written_through_a_link() {
    let (_t, outside) = outside_file();
    for path in JOURNAL {
        for target in targets(&outside) {
            if target == *path {
                continue;
            }
            let root = applied("ubuntu-22.04-h100", "legacy-peermem");
            plant(&root, path, &target);
            let apply = ["apply", "rdma-dmabuf", "--yes", "--no-exec"];
            refused(&root, &apply, path, &target, &outside);
        }
    }
}

/// Rollback writes back every file the apply wrote: a link at any of them
/// is refused (`--force`: past the check for edits since).
#[test]
fn rollback_never_writes_through_a_link() {
    let (_t, outside) = outside_file();
    let (host, profile) = PLANS[0];
    for (i, path) in written_by(host, profile).into_iter().enumerate() {
        // Each path with two targets in turn: the kinds are covered above.
        let all = targets(&outside);
        for target in [&all[i % all.len()], &all[(i + 3) % all.len()]] {
            if *target == path {
                continue;
            }
            let root = applied(host, profile);
            plant(&root, &path, target);
            let rollback = ["rollback", "--yes", "--no-exec", "--force"];
            judged(&root, &rollback, &path, target, &outside, true);
        }
    }
}

/// `recheck --root R` writes R's `/run/gdrprov`, never the machine's, and
/// never through a link there; a link at `--marker-dir DIR/ready` the same.
#[test]
fn recheck_writes_the_roots_marker_and_never_through_a_link() {
    let (_t, outside) = outside_file();
    let root = applied("ubuntu-22.04-h100", "legacy-peermem");
    let machine = tree(Path::new("/run/gdrprov"));
    let out = gdrprov()
        .args(["recheck", "--root", root.arg()])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "{}",
        stderr_of(&out)
    );
    let markers: Vec<String> = ["ready", "failed"]
        .iter()
        .filter(|m| root.join("run/gdrprov").join(m).exists())
        .map(|m| m.to_string())
        .collect();
    assert_eq!(markers.len(), 1, "{markers:?}");
    assert_eq!(
        machine,
        tree(Path::new("/run/gdrprov")),
        "the machine's /run/gdrprov changed"
    );
    for path in ["/run/gdrprov", "/run/gdrprov/ready", "/run/gdrprov/failed"] {
        for target in targets(&outside) {
            let root = applied("ubuntu-22.04-h100", "legacy-peermem");
            plant(&root, path, &target);
            refused(&root, &["recheck"], path, &target, &outside);
        }
    }
    // A directory the user names: a link at the marker in it is refused.
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready");
    std::os::unix::fs::symlink(&outside, &ready).unwrap();
    let marker = dir.path().to_str().unwrap();
    let out = gdrprov()
        .args(["recheck", "--marker-dir", marker, "--root", root.arg()])
        .output()
        .unwrap();
    let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{} is a symlink to", ready.display())),
        "{text}"
    );
    assert_eq!(std::fs::read(&outside).unwrap(), b"outside\n");
}

/// The one exception: a distribution's own `/etc/kernel/cmdline` link to
/// `/usr/lib/kernel/cmdline` is followed, and the plan says so; the same
/// link to the kernel's `/proc/cmdline` or gdrprov's state is refused.
#[test]
fn a_distributions_kernel_cmdline_link_is_followed_and_said() {
    let (_t, outside) = outside_file();
    let (_keep, root) = crate::boot_shapes::sdboot_root("/efi", true);
    let link = root.join("etc/kernel/cmdline");
    let real = root.join("usr/lib/kernel/cmdline");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::rename(&link, &real).unwrap();
    std::os::unix::fs::symlink("/usr/lib/kernel/cmdline", &link).unwrap();
    let r = root.to_str().unwrap();
    let out = gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            "--force",
            "--format",
            "json",
            "--root",
            r,
        ])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let said = doc["changes"].as_array().unwrap().iter().any(|c| {
        c["path"] == "/etc/kernel/cmdline"
            && c["description"].as_str().unwrap().contains(
                "follows the distribution's link /etc/kernel/cmdline → /usr/lib/kernel/cmdline",
            )
    });
    assert!(said, "{doc}");
    let out = gdrprov()
        .args([
            "apply",
            "rdma-dmabuf",
            "-y",
            "--no-exec",
            "--force",
            "--root",
            r,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().contains("iommu=pt"));
    for target in [
        "/proc/cmdline",
        STATE,
        "../../proc/cmdline",
        "/etc/default/grub",
    ] {
        let (_keep, root) = crate::boot_shapes::sdboot_root("/efi", true);
        std::fs::create_dir_all(root.join("var/lib/gdrprov")).unwrap();
        plant(&root, "/etc/kernel/cmdline", target);
        let root_arg = root.to_str().unwrap();
        let needle = format!("/etc/kernel/cmdline is a symlink to {target}");
        let args = [
            "apply",
            "rdma-dmabuf",
            "-y",
            "--no-exec",
            "--force",
            "--root",
            root_arg,
        ];
        refused_unchanged(&root, &args, &needle);
        assert_eq!(std::fs::read(&outside).unwrap(), b"outside\n");
    }
}

/// `recover` puts back the files of a generation a kill left unfinished: a
/// link at any of them is refused before the lock is taken.
#[test]
fn recover_never_writes_through_a_link() {
    let (_t, outside) = outside_file();
    let (host, profile) = PLANS[0];
    let all = targets(&outside);
    for (i, path) in written_by(host, profile).into_iter().enumerate() {
        let target = &all[(i + 1) % all.len()];
        if *target == path {
            continue;
        }
        let root = Root::example(host);
        // Killed after every step: each step's file is written.
        let out = gdrprov()
            .env("GDRPROV_FAULT_AFTER_STEP", "3")
            .args(["apply", profile, "--yes", "--no-exec", "--root", root.arg()])
            .output()
            .unwrap();
        assert_ne!(
            out.status.code(),
            Some(0),
            "the fault did not stop the apply"
        );
        plant(&root, &path, target);
        judged(
            &root,
            &["recover", "--yes", "--no-exec"],
            &path,
            target,
            &outside,
            true,
        );
    }
}

/// `bench gds` (issue 47) writes its test files in the directory `--dir` names and its metrics
/// at `--textfile`: both are checked before any work (no GPU is touched, so this runs on CI):
/// `--dir` a link (to a directory, dangling), not a directory, or a path into another root
/// (`/proc/PID/root`, also spelled with `..`), and `--textfile` a link (to a file, dangling),
/// are each refused naming the path; nothing is written, the link's target is untouched.
#[test]
fn bench_gds_never_writes_through_a_link() {
    let (_t, outside) = outside_file();
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    std::fs::create_dir(d.join("real")).unwrap();
    std::fs::write(d.join("file"), "x\n").unwrap();
    std::os::unix::fs::symlink(d.join("real"), d.join("dirlink")).unwrap();
    std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
    std::os::unix::fs::symlink(&outside, d.join("real/m.prom")).unwrap();
    std::os::unix::fs::symlink(d.join("gone.prom"), d.join("real/dangling.prom")).unwrap();
    let p = |rel: &str| d.join(rel).display().to_string();
    let real = p("real");
    let cases: Vec<(Vec<String>, String)> = vec![
        (
            vec![p("dirlink")],
            format!("{} is a symlink to {real}", p("dirlink")),
        ),
        (
            vec![p("dangling")],
            format!("{} is a symlink to", p("dangling")),
        ),
        (vec![p("file")], format!("{} is not a directory", p("file"))),
        (vec!["/proc/1/root/tmp".into()], "is inside /proc".into()),
        (
            vec![format!(
                "{}/../../../../../../proc/self/root{real}",
                d.display()
            )],
            "is inside /proc".into(),
        ),
        (
            vec![real.clone(), "--textfile".into(), p("real/m.prom")],
            format!("{} is a symlink to {}", p("real/m.prom"), outside.display()),
        ),
        (
            vec![real.clone(), "--textfile".into(), p("real/dangling.prom")],
            format!(
                "{} is a symlink to {}",
                p("real/dangling.prom"),
                p("gone.prom")
            ),
        ),
    ];
    for (rest, needle) in cases {
        let mut args = vec![
            "bench".to_string(),
            "gds".into(),
            "--size".into(),
            "1M".into(),
            "--dir".into(),
        ];
        args.extend(rest);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        super::harness::refused_unchanged(d, &args, &needle);
        assert_eq!(std::fs::read(&outside).unwrap(), b"outside\n");
        assert!(!d.join("gone.prom").exists() && !d.join("nowhere").exists());
    }
}
