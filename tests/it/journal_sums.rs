//! A journal that cannot lie (issue 29, case 2): every backup carries its
//! checksum and size, checked before anything is restored; a journal lost or
//! damaged while the state file still owns changes is an error, never
//! "nothing to roll back".

use crate::common::{gdrprov, snapshot, stderr_of, stdout_of, without_state};
use crate::util::{gd, Root};

const GENS: &str = "var/lib/gdrprov/generations";

fn applied() -> Root {
    let root = Root::example("ubuntu-22.04-h100");
    let out = gd(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    assert!(out.status.success(), "apply: {}", stderr_of(&out));
    root
}

/// Rollback must fail, change nothing, and say `words` on stderr.
fn rollback_refuses(root: &Root, words: &[&str]) {
    refuses(root, &["rollback", "--yes", "--no-exec"], words)
}

/// `args` must fail, change nothing, and say `words` on stderr.
fn refuses(root: &Root, args: &[&str], words: &[&str]) {
    let before = snapshot(root);
    let out = gd(root, args);
    let err = stderr_of(&out);
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "rollback: exit {:?}\nstdout:\n{}\nstderr:\n{err}",
        out.status,
        stdout_of(&out)
    );
    assert!(!stdout_of(&out).contains("Done"), "{}", stdout_of(&out));
    for w in words {
        assert!(err.contains(w), "rollback's message lacks {w:?}:\n{err}");
    }
    let after = snapshot(root);
    let changed: Vec<&String> = before
        .keys()
        .chain(after.keys())
        // The lock holds the pid of its last holder: taking it changes nothing.
        .filter(|k| *k != "var/lib/gdrprov/lock" && before.get(*k) != after.get(*k))
        .collect();
    assert!(changed.is_empty(), "rollback changed the root: {changed:?}");
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn every_backup_is_journaled_with_its_checksum_and_size() {
    let root = applied();
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join(GENS).join("1/journal.json")).unwrap())
            .unwrap();
    let mut seen = 0;
    for step in j["steps"].as_array().unwrap() {
        for (copy, sum) in [("before", "before_sum"), ("after", "after_sum")] {
            let Some(rel) = step[copy].as_str() else {
                continue;
            };
            let bytes = std::fs::read(root.join("var/lib/gdrprov").join(rel)).unwrap();
            assert_eq!(step[sum]["sha256"], sha256_hex(&bytes), "{rel}");
            assert_eq!(step[sum]["size"], bytes.len() as u64, "{rel}");
            seen += 1;
        }
    }
    assert!(seen >= 2, "{j:#}");
}

#[test]
fn a_damaged_backup_is_refused_before_anything_is_restored() {
    let root = applied();
    let backup = root.join(GENS).join("1/1.before");
    let good = std::fs::read(&backup).unwrap();
    std::fs::write(&backup, "garbage\n").unwrap();
    rollback_refuses(
        &root,
        &[
            &backup.display().to_string(),
            &sha256_hex(&good),
            &sha256_hex(b"garbage\n"),
        ],
    );
    assert!(std::fs::read_to_string(root.join("etc/default/grub"))
        .unwrap()
        .contains("iommu=pt"));
}

/// Recovery of an interrupted apply checks the backups the same way.
#[test]
fn recovery_refuses_a_damaged_backup_too() {
    let root = Root::example("ubuntu-22.04-h100");
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", "2")
        .args([
            "apply",
            "rdma-dmabuf",
            "--yes",
            "--no-exec",
            "--root",
            root.arg(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "the fault did not fire");
    let backup = root.join(GENS).join("1/1.before");
    std::fs::write(&backup, "garbage\n").unwrap();
    refuses(
        &root,
        &["recover", "--yes", "--no-exec"],
        &[&backup.display().to_string(), "sha256"],
    );
}

/// Generations written before checksums existed still roll back: their
/// backups are restored unchecked, as the version that wrote them did.
#[test]
fn a_journal_of_an_older_version_without_checksums_still_rolls_back() {
    let root = Root::example("ubuntu-22.04-h100");
    let pristine = without_state(snapshot(&root));
    let out = gd(&root, &["apply", "rdma-dmabuf", "--yes", "--no-exec"]);
    assert!(out.status.success(), "apply: {}", stderr_of(&out));
    let path = root.join(GENS).join("1/journal.json");
    let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for step in j["steps"].as_array_mut().unwrap() {
        let step = step.as_object_mut().unwrap();
        step.remove("before_sum");
        step.remove("after_sum");
    }
    std::fs::write(&path, serde_json::to_vec_pretty(&j).unwrap()).unwrap();
    let out = gd(&root, &["rollback", "--yes", "--no-exec"]);
    assert!(out.status.success(), "rollback: {}", stderr_of(&out));
    assert_eq!(without_state(snapshot(&root)), pristine);
}

#[test]
fn a_deleted_journal_is_an_error_while_the_state_owns_changes() {
    let root = applied();
    std::fs::remove_dir_all(root.join(GENS)).unwrap();
    rollback_refuses(
        &root,
        &["state.json", "owns changes", "generations", "iommu=pt"],
    );
}

#[test]
fn a_truncated_journal_is_an_error_while_the_state_owns_changes() {
    let root = applied();
    std::fs::write(root.join(GENS).join("1/journal.json"), "").unwrap();
    rollback_refuses(
        &root,
        &["state.json", "owns changes", "journal.json is damaged"],
    );
}
