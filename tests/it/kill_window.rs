//! The kill window between a rollback's mark and its removal of
//! directories, hit on purpose (issue 37): a complete rollback marks the
//! generations it undoes (`rolled_back_by`) and then removes the
//! directories those applies made (`apply::remove_undone_dirs`). A kill
//! between the two (found at random by `kills_random`, seed
//! 1795869794634232509) must still end, after `recover`, in the original
//! tree. `GDRPROV_FAULT_AT=rollback-marked` aborts the process exactly
//! there, as a SIGKILL would, for a rollback and for the rollback that
//! `recover` carries out again; the tree is compared path by path (type,
//! mode, owner, content) with the one before the apply.

use crate::common::{gdrprov, stdout_of};
use crate::kills::{fresh, journal, many_files, ok, same, tree};
use crate::util::Root;
use std::time::Duration;

/// `gdrprov ARGS --root ROOT`, aborted at the named fault point.
fn killed_at_mark(root: &Root, args: &[&str]) -> std::process::Output {
    gdrprov()
        .env("GDRPROV_FAULT_AT", "rollback-marked")
        .timeout(Duration::from_secs(60))
        .args(args)
        .args(["--root", root.arg()])
        .output()
        .unwrap()
}

/// The directories generation 1 made, as paths of the root.
fn created_dirs(root: &Root) -> Vec<std::path::PathBuf> {
    journal(root, 1)["steps"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["created_dirs"].as_array().cloned().unwrap_or_default())
        .map(|d| root.join(&d.as_str().unwrap()[1..]))
        .collect()
}

/// Apply PROFILE, then rollback killed between its mark and the removal of
/// the directories; with `recover_killed`, the recover that completes it is
/// killed at the same point too. Then recover: the original tree.
fn rollback_killed_at_mark(profile: &str, recover_killed: bool) {
    let root = fresh("ubuntu-22.04-h100");
    let was = tree(&root);
    ok(&root, &["apply", profile, "--yes", "--no-exec"]);
    let dirs = created_dirs(&root);
    assert!(!dirs.is_empty(), "{profile}: the apply made no directory");
    let out = killed_at_mark(&root, &["rollback", "--yes", "--no-exec"]);
    assert!(!out.status.success(), "the fault did not stop rollback");
    // Killed in the window: generation 1 marked, the rollback unfinished,
    // the directories still there.
    assert_eq!(journal(&root, 1)["rolled_back_by"], 2);
    assert_eq!(journal(&root, 2)["status"], "in-progress");
    assert!(dirs.iter().all(|d| d.is_dir()), "{dirs:?}");
    if recover_killed {
        let out = killed_at_mark(&root, &["recover", "--yes", "--no-exec"]);
        assert!(!out.status.success(), "the fault did not stop recover");
        assert!(dirs.iter().any(|d| d.is_dir()), "{dirs:?}");
    }
    ok(&root, &["recover", "--yes", "--no-exec"]);
    same(
        &tree(&root),
        &was,
        &format!("{profile}: rollback killed at its mark (recover killed: {recover_killed})"),
    );
    ok(&root, &["journal", "check"]);
    let out = gdrprov()
        .args(["rollback", "--yes", "--no-exec", "--root", root.arg()])
        .output()
        .unwrap();
    assert!(
        stdout_of(&out).contains("Nothing to roll back"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn a_rollback_killed_between_its_mark_and_the_removal_of_directories_is_recovered() {
    let t = tempfile::tempdir().unwrap();
    let many = many_files(t.path());
    for recover_killed in [false, true] {
        rollback_killed_at_mark(&many, recover_killed);
    }
}
