//! The journal proves itself before it is used (issue 37): a generation's
//! journal names its own number and directory (two generation directories
//! swapped are refused, not restored from); `state.json` must agree with the
//! journal before apply, rollback, recover or history act on it; a
//! generation directory that is a symlink out of the root is refused;
//! generation numbers are bounded. Journals of the previous version (no
//! `directory`) still roll back.

use crate::common::{snapshot, stderr_of, stdout_of};
use crate::util::{gd, Root};
use std::path::Path;

const STATE: &str = "var/lib/gdrprov";

#[track_caller]
fn ok(root: &Root, args: &[&str]) {
    let out = gd(root, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
}

/// Each of apply, rollback, recover and history: exit 1, every word named,
/// the whole root (journal and state included) unchanged; `journal check`
/// exit 3; `rollback --format json` one JSON document.
#[track_caller]
fn all_refuse(root: &Root, profile: &str, words: &[&str]) {
    let before = snapshot(root);
    for args in [
        &["apply", profile, "--yes", "--no-exec"][..],
        &["rollback", "--yes"],
        &["recover", "--yes"],
        &["history"],
    ] {
        let out = gd(root, args);
        let err = stderr_of(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{args:?}: {}{err}",
            stdout_of(&out)
        );
        for w in words {
            assert!(err.contains(w), "{args:?}: the message lacks {w:?}: {err}");
        }
        assert!(snapshot(root) == before, "{args:?} changed the root");
    }
    let out = gd(root, &["rollback", "--yes", "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("rollback --format json: {e}: {}", stdout_of(&out)));
    assert!(words.iter().all(|w| v.to_string().contains(w)), "{v}");
    let out = gd(root, &["journal", "check"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "journal check: {}",
        stdout_of(&out)
    );
    assert!(snapshot(root) == before, "the root changed");
}

fn extra(t: &Path) -> String {
    let p = t.join("extra.yaml");
    std::fs::write(
        &p,
        "name: extra\nextends: rdma-dmabuf\nfiles:\n  - path: /etc/gdrprov-extra.conf\n    content: \"x=1\\n\"\n",
    )
    .unwrap();
    p.display().to_string()
}

#[test]
fn two_generation_directories_swapped_are_refused_not_restored_from() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    let extra = extra(t.path());
    ok(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    ok(&root, &["apply", &extra, "--yes", "--no-exec"]);
    let g = root.join(STATE).join("generations");
    std::fs::rename(g.join("1"), g.join("x")).unwrap();
    std::fs::rename(g.join("2"), g.join("1")).unwrap();
    std::fs::rename(g.join("x"), g.join("2")).unwrap();
    all_refuse(
        &root,
        "rdma-dmabuf",
        &[
            "generations/1/journal.json is the journal of generation 2",
            "swapped",
        ],
    );
}

/// Only the journals' `directory` swapped (numbers edited to match): still
/// refused, by the directory the journal names.
#[test]
fn a_journal_naming_another_directory_is_refused() {
    let root = Root::example("ubuntu-22.04-h100");
    ok(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    let j = root.join(STATE).join("generations/1/journal.json");
    let text = std::fs::read_to_string(&j).unwrap();
    assert!(text.contains("\"directory\": \"generations/1\""), "{text}");
    std::fs::write(
        &j,
        text.replace(
            "\"directory\": \"generations/1\"",
            "\"directory\": \"generations/7\"",
        ),
    )
    .unwrap();
    all_refuse(&root, "rdma-dmabuf", &["says it belongs in generations/7"]);
}

/// state.json edited to own the user's own `console=tty1`: apply would
/// remove it from the kernel command line on the state's word. Refused.
#[test]
fn a_hand_edited_state_is_refused_before_anything_acts_on_it() {
    let root = Root::example("ubuntu-22.04-h100");
    ok(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    let s = root.join(STATE).join("state.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&s).unwrap()).unwrap();
    v["kernel_args"]
        .as_array_mut()
        .unwrap()
        .push("console=tty1".into());
    std::fs::write(&s, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    all_refuse(
        &root,
        "rdma-dmabuf",
        &[
            "state.json",
            "does not own what generation 1 recorded",
            "journal check",
        ],
    );
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(grub.contains("console=tty1"), "{grub}");
}

/// generations/1 moved out of the root, a symlink left in its place:
/// `history` said "gdrprov has not changed" the root, exit 0.
#[test]
fn a_generation_directory_that_is_a_symlink_out_of_the_root_is_refused() {
    let root = Root::example("ubuntu-22.04-h100");
    ok(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    let outside = tempfile::tempdir().unwrap();
    let g = root.join(STATE).join("generations");
    std::fs::rename(g.join("1"), outside.path().join("1")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("1"), g.join("1")).unwrap();
    all_refuse(
        &root,
        "rdma-dmabuf",
        &["is a symlink", "not a directory gdrprov made"],
    );
}

/// A generation directory numbered u64::MAX: the next number overflowed
/// (a panic in a debug build). Now refused, naming the bound.
#[test]
fn generation_numbers_are_bounded() {
    let root = Root::example("ubuntu-22.04-h100");
    let g = root.join(STATE).join("generations");
    std::fs::create_dir_all(g.join(u64::MAX.to_string())).unwrap();
    let before = snapshot(&root);
    let out = gd(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("past the highest") && !err.contains("panicked"),
        "{err}"
    );
    assert!(snapshot(&root) == before, "apply changed the root");
}

/// A journal written by the previous version (no `directory`) is read and
/// rolled back as before: the root ends as it began.
#[test]
fn a_journal_without_its_directory_still_rolls_back() {
    let root = Root::example("ubuntu-22.04-h100");
    let pristine = snapshot(&root);
    ok(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    let j = root.join(STATE).join("generations/1/journal.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&j).unwrap()).unwrap();
    assert!(v.as_object_mut().unwrap().remove("directory").is_some());
    std::fs::write(&j, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
    ok(&root, &["history"]);
    ok(&root, &["journal", "check"]);
    ok(&root, &["rollback", "--yes"]);
    let mut now = snapshot(&root);
    now.retain(|k, _| !k.starts_with("var/lib/gdrprov") && k != "var/" && k != "var/lib/");
    let mut was = pristine;
    was.retain(|k, _| !k.starts_with("var/lib/gdrprov") && k != "var/" && k != "var/lib/");
    assert!(now == was, "rollback did not give the pristine tree");
}
