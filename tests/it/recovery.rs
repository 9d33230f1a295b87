//! Recovery (issue 29, case 1): a generation left unfinished (killed, or
//! failed with a restore that failed too) is named by every command that
//! reads the journal, with one fix, `gdrprov recover`, which puts back an
//! apply and completes a rollback or a commit. Never "nothing to roll back"
//! while its changes are still there.

use crate::common::*;
use crate::reliability::{
    chroot_root, host_files, install_with_libs, is_root, journal, write_script,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn s(p: &Path) -> String {
    p.display().to_string()
}

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn gd(root: &Path, args: &[&str]) -> Output {
    gdrprov()
        .env("PATH", PATH)
        .args(args)
        .args(["--root", &s(root)])
        .output()
        .unwrap()
}

fn gd_fault(root: &Path, step: usize, args: &[&str]) -> Output {
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", step.to_string())
        .args(args)
        .args(["--root", &s(root)])
        .output()
        .unwrap();
    assert!(
        out.status.code().is_none(),
        "the fault after step {step} did not fire: {}",
        stderr_of(&out)
    );
    out
}

#[track_caller]
fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout_of(out),
        stderr_of(out)
    );
}

/// `out` failed with exit 1, naming generation `n` and `gdrprov recover
/// --root ROOT`, never "nothing to roll back".
#[track_caller]
fn names_recover(out: &Output, root: &Path, n: u64, what: &str) {
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(1), "{what}: {err}");
    assert!(
        err.contains(&format!("generation {n} ("))
            && err.contains(&format!("`gdrprov recover --root {}`", s(root))),
        "{what}: {err}"
    );
    assert!(!err.contains("nothing to roll back"), "{what}: {err}");
    assert!(!err.contains("rollback --generation"), "{what}: {err}");
}

/// The paths whose content or mode differ between two snapshots (the
/// test's own update-grub stand-in aside).
fn differing(a: &crate::reliability::Snap, b: &crate::reliability::Snap) -> Vec<String> {
    a.keys()
        .chain(b.keys())
        .filter(|k| *k != "usr/sbin/update-grub" && a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// Clears `chattr +i` on a path when dropped (the test's tempdir must go).
struct Immutable(PathBuf);

impl Drop for Immutable {
    fn drop(&mut self) {
        let _ = Command::new("chattr").arg("-i").arg(&self.0).status();
    }
}

/// Whether `chattr +i` works on the filesystem of `dir` (ext4 does; some
/// tmpfs and overlay setups do not).
fn immutable_supported(dir: &Path) -> bool {
    let probe = dir.join("chattr-probe");
    std::fs::write(&probe, "x").unwrap();
    let set = Command::new("chattr")
        .arg("+i")
        .arg(&probe)
        .status()
        .is_ok_and(|st| st.success());
    let _ = Command::new("chattr").arg("-i").arg(&probe).status();
    let _ = std::fs::remove_file(&probe);
    set
}

/// Case 1 with a real `chattr +i`: update-grub (in a chroot root with a real
/// /bin/sh and chattr) makes /etc/default/grub immutable and fails, so the
/// apply fails and putting grub back fails too. The journal says failed;
/// every command names generation 1 and `gdrprov recover`; recover refuses
/// while the cause is there and puts everything back once it is gone.
#[test]
fn a_failed_apply_whose_restore_failed_is_named_and_recovered() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root and chattr +i need root (CI runs as root)");
        return;
    }
    let (_t, root) = chroot_root(false);
    if !immutable_supported(&root) {
        eprintln!("SKIPPED: chattr +i is not supported on {}", s(&root));
        return;
    }
    let chattr = ["/usr/bin/chattr", "/bin/chattr"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("chattr");
    install_with_libs(&root, chattr, "/usr/bin/chattr");
    write_script(
        &root,
        "/usr/sbin/update-grub",
        "#!/bin/sh\n/usr/bin/chattr +i /etc/default/grub\necho 'update-grub: failed on purpose' >&2\nexit 1\n",
    );
    let _guard = Immutable(root.join("etc/default/grub"));
    let pristine = host_files(&root);

    let out = gd(&root, &["apply", "rdma-dmabuf", "-y"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(err.contains("Putting files back ALSO failed"), "{err}");
    assert!(
        err.contains(&format!("`gdrprov recover --root {}`", s(&root))),
        "{err}"
    );
    assert!(!err.contains("rollback --generation"), "{err}");
    // What case 1 leaves: grub still changed, the journal says failed.
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(grub.contains("iommu=pt intel_iommu=on"), "{grub}");
    assert_eq!(journal(&root, 1)["status"], "failed");
    let history = gd(&root, &["history"]);
    assert!(stdout_of(&history).contains("failed"));
    assert!(stderr_of(&history).contains("gdrprov recover"));

    // The wrong remedy of case 1 is gone: rollback names recover.
    names_recover(
        &gd(&root, &["rollback", "--generation", "1", "-y"]),
        &root,
        1,
        "rollback --generation 1",
    );
    names_recover(&gd(&root, &["rollback", "-y"]), &root, 1, "rollback");
    names_recover(
        &gd(&root, &["apply", "rdma-dmabuf", "-y"]),
        &root,
        1,
        "apply",
    );

    // recover while grub is still immutable: refused, naming the file and why.
    let out = gd(&root, &["recover", "-y"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("/etc/default/grub") && err.contains("Operation not permitted"),
        "{err}"
    );
    assert!(err.contains("gdrprov recover"), "{err}");
    assert_eq!(journal(&root, 1)["status"], "failed");

    // The cause removed: recover puts every byte back and re-runs update-grub.
    let st = Command::new("chattr")
        .arg("-i")
        .arg(root.join("etc/default/grub"))
        .status()
        .unwrap();
    assert!(st.success());
    write_script(
        &root,
        "/usr/sbin/update-grub",
        "#!/bin/sh\necho run >> /run/update-grub.runs\nexit 0\n",
    );
    let out = gd(&root, &["recover", "-y"]);
    ok(&out, "recover");
    assert!(
        stderr_of(&out).contains("generation 1 (apply of rdma-dmabuf)"),
        "{}",
        stderr_of(&out)
    );
    assert!(
        stdout_of(&out).contains("apply again"),
        "{}",
        stdout_of(&out)
    );
    let left = differing(&host_files(&root), &pristine);
    assert!(left.is_empty(), "recover left files changed: {left:?}");
    assert_eq!(journal(&root, 1)["status"], "reverted");
    let runs = std::fs::read_to_string(root.join("run/update-grub.runs")).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "update-grub re-run on the restored file"
    );

    // And the operator applies again, and rolls back to every byte.
    ok(&gd(&root, &["apply", "rdma-dmabuf", "-y"]), "apply again");
    ok(&gd(&root, &["rollback", "-y"]), "rollback");
    let left = differing(&host_files(&root), &pristine);
    assert!(left.is_empty(), "rollback left files changed: {left:?}");
}

/// An apply killed after step 2: plan, apply, rollback (with and without
/// --generation), verify, history, doctor and commit all name generation 1
/// and `gdrprov recover`; the mutating ones change nothing. recover (JSON)
/// puts the files back; then none of them names it.
#[test]
fn every_command_names_an_interrupted_generation_and_recover() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let pristine = without_state(snapshot(&root));
    gd_fault(&root, 2, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    let before = snapshot(&root);
    for args in [
        &["apply", "rdma-dmabuf", "-y", "--no-exec"][..],
        &["rollback", "-y", "--no-exec"],
        &["rollback", "--generation", "1", "-y", "--no-exec"],
        &["commit", "--no-exec"],
        &["boot", "set-default", "0", "--no-exec"],
    ] {
        names_recover(&gd(&root, args), &root, 1, &args.join(" "));
    }
    assert_eq!(
        snapshot(&root),
        before,
        "a refused command changed the root"
    );
    let fix = format!("gdrprov recover --root {}", s(&root));
    let plan = json_of(&gd(
        &root,
        &["plan", "rdma-dmabuf", "--no-exec", "--format", "json"],
    ));
    assert!(
        plan["warnings"][0].as_str().unwrap().contains(&fix),
        "{plan:#}"
    );
    let (code, v) = {
        let out = gd(&root, &["verify", "rdma-dmabuf", "--format", "json"]);
        (out.status.code(), json_of(&out))
    };
    assert_eq!(code, Some(3), "verify: not ready");
    let c = check_named(&v, "journal");
    assert_eq!(c["status"], "fail", "{c}");
    assert!(c["detail"].as_str().unwrap().contains(&fix), "{c}");
    assert!(stderr_of(&gd(&root, &["history"])).contains(&fix));
    // A command that fails for another reason (here a profile that does not
    // exist) names it too, after its own error.
    let bad = gd(&root, &["plan", "no-such-profile", "--no-exec"]);
    assert_eq!(bad.status.code(), Some(1));
    let err = stderr_of(&bad);
    assert!(
        err.contains("unknown profile") && err.contains(&fix) && err.contains("generation 1"),
        "{err}"
    );
    let doctor = json_of(&gd(&root, &["doctor", "rdma-dmabuf", "--format", "json"]));
    let f = doctor["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == "journal-unfinished")
        .unwrap_or_else(|| panic!("{doctor:#}"));
    assert!(f["fix"].as_str().unwrap().contains(&fix), "{f}");

    let out = gd(&root, &["recover", "-y", "--no-exec", "--format", "json"]);
    ok(&out, "recover");
    let v = json_of(&out);
    assert_eq!(v["command"], "recover");
    assert_eq!(v["changed"], true);
    assert_eq!(v["generations"][0]["generation"], 1);
    assert_eq!(v["generations"][0]["status"], "in-progress");
    let restored: Vec<&str> = v["restored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["path"].as_str().unwrap())
        .collect();
    assert_eq!(restored.len(), 2, "{v:#}");
    assert!(
        v["next"].as_str().unwrap().contains("gdrprov apply"),
        "{v:#}"
    );
    assert_eq!(without_state(snapshot(&root)), pristine);

    // Nothing unfinished any more: nobody names it, recover has nothing to do.
    let plan = json_of(&gd(
        &root,
        &["plan", "rdma-dmabuf", "--no-exec", "--format", "json"],
    ));
    assert!(!plan["warnings"].to_string().contains("gdrprov recover"));
    assert!(!stderr_of(&gd(&root, &["history"])).contains("recover"));
    let out = gd(&root, &["recover", "-y"]);
    ok(&out, "recover again");
    assert!(stdout_of(&out).contains("Nothing to recover"));
    journal_ok(&root);
}

/// Killed while its generation is being made (backups and journal written,
/// nothing changed yet; seen in the VM testbed as a power cut 10 s into an
/// apply): no generation exists, so no command is stopped by it, `recover`
/// has nothing to do, and the next apply removes the half-made one and runs
/// as an uninterrupted apply would.
#[test]
fn a_run_killed_while_making_its_generation_leaves_no_generation() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let pristine = snapshot(&root);
    gd_fault(&root, 0, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    let gens = root.join("var/lib/gdrprov/generations");
    assert!(
        gens.join(".1.new/journal.json").is_file(),
        "no staged journal"
    );
    assert!(
        !gens.join("1").exists(),
        "a generation exists before it was published"
    );
    assert_eq!(
        without_state(snapshot(&root)),
        without_state(pristine.clone()),
        "the root was changed before the generation existed"
    );
    journal_ok(&root);
    let out = gd(&root, &["recover", "-y"]);
    ok(&out, "recover");
    assert!(
        stdout_of(&out).contains("Nothing to recover"),
        "{}",
        stdout_of(&out)
    );
    ok(
        &gd(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]),
        "apply",
    );
    assert!(
        !gens.join(".1.new").exists(),
        "the half-made generation is still there"
    );
    assert!(gens.join("1/journal.json").is_file());
    let (_t2, clean) = example_root("ubuntu-22.04-h100");
    ok(
        &gd(&clean, &["apply", "rdma-dmabuf", "-y", "--no-exec"]),
        "uncut apply",
    );
    assert_eq!(
        without_state(snapshot(&root)),
        without_state(snapshot(&clean)),
        "the apply after the cut differs from an uninterrupted one"
    );
    ok(&gd(&root, &["rollback", "-y", "--no-exec"]), "rollback");
    assert_eq!(without_state(snapshot(&root)), without_state(pristine));
    journal_ok(&root);
}

/// Every file of a root (`snapshot`'s).
type Files = std::collections::BTreeMap<String, (Vec<u8>, u32)>;

/// The example host with rdma-dmabuf applied (generation 1), and its files before.
fn applied() -> (tempfile::TempDir, PathBuf, Files) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let pristine = without_state(snapshot(&root));
    ok(
        &gd(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]),
        "apply",
    );
    (t, root, pristine)
}

/// `recover` completes the interrupted rollback, generation 2: it is reverted and generation 3
/// (complete) rolls generation 1 back, every file as `pristine`; a rollback after it has nothing
/// to do.
#[track_caller]
fn recover_completes_the_rollback(root: &Path, pristine: &Files) {
    let out = gd(root, &["recover", "-y", "--no-exec"]);
    ok(&out, "recover");
    assert!(
        stdout_of(&out).contains("Completed the interrupted rollback"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(&without_state(snapshot(root)), pristine);
    assert_eq!(journal(root, 1)["rolled_back_by"], 3);
    assert_eq!(journal(root, 2)["status"], "reverted");
    assert_eq!(journal(root, 3)["status"], "complete");
    let out = gd(root, &["rollback", "-y", "--no-exec"]);
    ok(&out, "rollback after recover");
    assert!(stdout_of(&out).contains("Nothing to roll back"));
    journal_ok(root);
}

/// A rollback killed after its first step: recover puts its files back and
/// rolls back again, ending as an uninterrupted rollback would (pristine).
#[test]
fn recover_completes_an_interrupted_rollback() {
    let (_t, root, pristine) = applied();
    gd_fault(&root, 1, &["rollback", "-y", "--no-exec"]);
    assert_eq!(journal(&root, 2)["status"], "in-progress");
    names_recover(
        &gd(&root, &["rollback", "-y", "--no-exec"]),
        &root,
        2,
        "rollback",
    );
    recover_completes_the_rollback(&root, &pristine);
}

/// A rollback killed after it marked what it undid and before it called
/// itself complete (the order since a random kill found the reverse order's
/// window: a complete rollback beside an apply still "in effect" whose files
/// state.json no longer owned, which every command then refused for good).
/// The journal is put in that instant's state by hand: recover reverts the
/// rollback, takes back its mark, and rolls back again.
#[test]
fn recover_completes_a_rollback_killed_between_its_mark_and_complete() {
    let (_t, root, pristine) = applied();
    ok(&gd(&root, &["rollback", "-y", "--no-exec"]), "rollback");
    assert_eq!(journal(&root, 1)["rolled_back_by"], 2);
    let gens = root.join("var/lib/gdrprov/generations");
    let mut g2 = journal(&root, 2);
    g2["status"] = "in-progress".into();
    g2["finished"] = serde_json::Value::Null;
    std::fs::write(gens.join("2/journal.json"), g2.to_string()).unwrap();
    std::fs::write(
        root.join("var/lib/gdrprov/state.json"),
        journal(&root, 1)["state_after"].to_string(),
    )
    .unwrap();
    recover_completes_the_rollback(&root, &pristine);
}

/// `journal check` finds nothing wrong.
#[track_caller]
fn journal_ok(root: &Path) {
    let out = gd(root, &["journal", "check"]);
    ok(&out, "journal check");
}

fn trial_running(root: &Path) {
    let args = "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro";
    std::fs::write(
        root.join("proc/cmdline"),
        format!(
            "{args} console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on gdrprov.trial=1\n"
        ),
    )
    .unwrap();
}

/// A commit killed after its first step, then a power loss that boots the
/// old default: commit itself names recover; recover puts the files back and
/// commits again (the trial had run), ending as a clean commit does.
#[test]
fn recover_completes_an_interrupted_commit() {
    let (_t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("etc/grub.d")).unwrap();
    ok(
        &gd(
            &root,
            &["apply", "rdma-dmabuf", "--trial", "-y", "--no-exec"],
        ),
        "apply --trial",
    );
    trial_running(&root);
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = clean_dir.path().join("root");
    copy_tree(&root, &clean);
    ok(&gd(&clean, &["commit", "--no-exec"]), "clean commit");

    gd_fault(&root, 1, &["commit", "--no-exec"]);
    assert_eq!(journal(&root, 2)["command"], "commit");
    // The power loss: the old default boots.
    std::fs::write(
        root.join("proc/cmdline"),
        "BOOT_IMAGE=/boot/vmlinuz-5.15.0-119-generic root=UUID=4f3c2a1e-7d9b-4c55-9a0e-2b8f6d1c0e11 ro console=tty1 console=ttyS0,115200n8\n",
    )
    .unwrap();
    names_recover(&gd(&root, &["commit", "--no-exec"]), &root, 2, "commit");
    let out = gd(&root, &["recover", "-y", "--no-exec"]);
    ok(&out, "recover");
    assert!(
        stdout_of(&out).contains("Completed the interrupted commit"),
        "{}",
        stdout_of(&out)
    );
    trial_running(&root);
    assert_eq!(
        without_state(snapshot(&root)),
        without_state(snapshot(&clean)),
        "recover did not end as the clean commit"
    );
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("var/lib/gdrprov/state.json")).unwrap())
            .unwrap();
    assert!(state.get("trial").is_none(), "{state:#}");
    assert_eq!(journal(&root, 2)["status"], "reverted");
    assert_eq!(journal(&root, 3)["status"], "complete");
    assert_eq!(journal(&root, 3)["command"], "commit");
    journal_ok(&root);
    journal_ok(&clean);
}

/// A regeneration command of the run rewrites a file an earlier step wrote (on systemd-boot,
/// update-initramfs's hook runs `kernel-install add`, which writes the loader entry again; found
/// by the power-cut campaign on the systemd-boot guest, with the arguments in another order).
/// Here update-grub reorders the two arguments in /etc/default/grub, as kernel-install does the
/// entry's (the original file is its fixed point, as an entry kernel-install wrote is). The
/// journal keeps what the run left, so rollback is not refused as if
/// someone else had edited the file, and puts every byte back; an edit after the run still is.
#[test]
fn a_file_rewritten_by_the_runs_own_regeneration_rolls_back_without_force() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let (_t, root) = chroot_root(false);
    write_script(
        &root,
        "/usr/sbin/update-grub",
        r#"#!/bin/sh
f=/etc/default/grub
while IFS= read -r l; do
  case "$l" in
    *"iommu=pt intel_iommu=on"*)
      l="${l%%iommu=pt intel_iommu=on*}intel_iommu=on iommu=pt${l#*iommu=pt intel_iommu=on}" ;;
  esac
  printf '%s\n' "$l"
done < $f > $f.regen
while IFS= read -r l; do printf '%s\n' "$l"; done < $f.regen > $f
exit 0
"#,
    );
    let pristine = host_files(&root);
    ok(&gd(&root, &["apply", "rdma-dmabuf", "-y"]), "apply");
    let grub = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    assert!(grub.contains("intel_iommu=on iommu=pt"), "{grub}");
    ok(
        &gd(&root, &["journal", "check"]),
        "journal check after apply",
    );
    ok(&gd(&root, &["rollback", "-y"]), "rollback without --force");
    let back = host_files(&root);
    assert!(
        differing(&pristine, &back)
            .iter()
            .all(|k| k.starts_with("var/lib/gdrprov") || k == "etc/default/grub.regen"),
        "{:?}",
        differing(&pristine, &back)
    );

    // Negative control: an edit by someone else after the run is still refused.
    ok(&gd(&root, &["apply", "rdma-dmabuf", "-y"]), "apply again");
    let g = root.join("etc/default/grub");
    let mut text = std::fs::read_to_string(&g).unwrap();
    text.push_str("# an operator's edit\n");
    std::fs::write(&g, text).unwrap();
    let out = gd(&root, &["rollback", "-y"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("changed after gdrprov wrote them"),
        "{}",
        stderr_of(&out)
    );
}
