//! Reliability (issue 9): gdrprov never leaves a host half-configured, never
//! writes where it must not, and never panics on input. Everything runs the
//! real binary on copies of the example roots; the tests that need root
//! (a chroot with a real /bin/sh, a small tmpfs) say so and skip otherwise.

use crate::common::*;
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub(crate) type Snap = BTreeMap<String, (Vec<u8>, u32)>;

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub(crate) fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

macro_rules! need_root {
    ($what:expr) => {
        if !is_root() {
            eprintln!("SKIPPED: {} needs root (CI runs as root)", $what);
            return;
        }
    };
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Runs gdrprov with `args` then `--root ROOT`.
fn gd(root: &Path, args: &[&str]) -> Output {
    gdrprov()
        .env("PATH", PATH)
        .args(args)
        .args(["--root", &s(root)])
        .output()
        .unwrap()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout_of(out),
        stderr_of(out)
    );
}

fn no_panic(out: &Output) {
    let all = format!("{}{}", stdout_of(out), stderr_of(out));
    assert!(!all.contains("panicked"), "panic: {all}");
    assert!(
        out.status.code().is_some(),
        "killed by a signal: {:?}",
        out.status
    );
}

/// Every path of `now` is wholly as in `old` or wholly as in `new`, and no
/// temp file is left behind. Gives the paths that are new.
fn wholly_old_or_new(now: &Snap, old: &Snap, new: &Snap, what: &str) -> Vec<String> {
    let mut newer = Vec::new();
    for k in now.keys().chain(old.keys()).chain(new.keys()) {
        assert!(
            !(k.contains(".gdrprov-") && k.ends_with(".tmp")),
            "{what}: temp file left: {k}"
        );
        let (n, o, w) = (now.get(k), old.get(k), new.get(k));
        assert!(
            n == o || n == w,
            "{what}: {k} is neither the old nor the new file: {:?}",
            n.map(|(c, m)| (String::from_utf8_lossy(c).into_owned(), format!("{m:o}")))
        );
        if n != o && !newer.contains(k) {
            newer.push(k.clone());
        }
    }
    newer
}

pub(crate) fn journal(root: &Path, n: u64) -> serde_json::Value {
    let p = root.join(format!("var/lib/gdrprov/generations/{n}/journal.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is damaged: {e}", p.display()))
}

/// Every generation directory has a parseable journal; numbers 1..=N.
fn generations(root: &Path) -> Vec<serde_json::Value> {
    let dir = root.join("var/lib/gdrprov/generations");
    let mut ns: Vec<u64> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
                .collect()
        })
        .unwrap_or_default();
    ns.sort_unstable();
    assert_eq!(
        ns,
        (1..=ns.len() as u64).collect::<Vec<_>>(),
        "generation numbers are not consecutive"
    );
    ns.iter().map(|n| journal(root, *n)).collect()
}

/// A profile of several file steps beside rdma-dmabuf's three (nccl.conf,
/// the modprobe.d block list, /etc/default/grub): a new file and a replaced
/// one that keeps its odd mode.
fn extra_profile(t: &Path, root: &Path) -> PathBuf {
    std::fs::write(root.join("etc/two.conf"), "old two\n").unwrap();
    std::fs::set_permissions(
        root.join("etc/two.conf"),
        std::fs::Permissions::from_mode(0o640),
    )
    .unwrap();
    let p = t.join("extra.yaml");
    std::fs::write(
        &p,
        "files:\n  - path: /etc/one.conf\n    content: \"new one\\n\"\n  - path: /etc/two.conf\n    content: \"new two\\n\"\n",
    )
    .unwrap();
    p
}

// ------------------------------------------------------------ crash safety

/// A fault after each step N of a five-step apply (GDRPROV_FAULT_AFTER_STEP,
/// which aborts the process as a crash would): each file is wholly old or
/// wholly new, the journal says in-progress with exactly N steps done; then
/// the next apply (or rollback) refuses, naming the generation and `gdrprov
/// recover`; recover puts every file back; apply then completes, and rollback
/// restores every byte.
#[test]
fn a_fault_after_every_step_leaves_files_whole_and_the_next_run_recovers() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let extra = extra_profile(t.path(), &root);
    let apply = |root: &Path, fault: Option<usize>| {
        let mut c = gdrprov();
        if let Some(n) = fault {
            c.env("GDRPROV_FAULT_AFTER_STEP", n.to_string());
        }
        c.args(["apply", "rdma-dmabuf", &s(&extra), "-y", "--no-exec"])
            .args(["--root", &s(root)])
            .output()
            .unwrap()
    };
    // The two known states: pristine, and after one clean apply.
    let pristine = snapshot(&root);
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = clean_dir.path().join("root");
    copy_tree(&root, &clean);
    ok(&apply(&clean, None), "clean apply");
    let applied = without_state(snapshot(&clean));
    let steps = journal(&clean, 1)["steps"].as_array().unwrap().len();
    assert_eq!(steps, 5, "{:#}", journal(&clean, 1));

    for n in 1..=steps {
        for next in ["apply", "rollback"] {
            let d = tempfile::tempdir().unwrap();
            let r = d.path().join("root");
            copy_tree(&root, &r);
            let out = apply(&r, Some(n));
            assert!(
                out.status.code().is_none(),
                "fault {n}: the hook did not abort: {}",
                stderr_of(&out)
            );
            let now = without_state(snapshot(&r));
            let newer =
                wholly_old_or_new(&now, &without_state(pristine.clone()), &applied, "crash");
            let j = journal(&r, 1);
            assert_eq!(j["status"], "in-progress", "fault {n}");
            let done: Vec<bool> = j["steps"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["done"].as_bool().unwrap())
                .collect();
            assert_eq!(done, (0..steps).map(|i| i < n).collect::<Vec<_>>());
            // Exactly the files of the done steps are new.
            let done_paths: Vec<String> = j["steps"].as_array().unwrap()[..n]
                .iter()
                .filter_map(|s| s["path"].as_str())
                .map(|p| p.trim_start_matches('/').to_string())
                .collect();
            let mut newer_files: Vec<String> =
                newer.into_iter().filter(|k| !k.ends_with('/')).collect();
            newer_files.sort();
            let mut want = done_paths.clone();
            want.sort();
            assert_eq!(newer_files, want, "fault {n}");
            ok(&gd(&r, &["history"]), "history after a crash");
            // The next apply or rollback changes nothing and names the fix.
            let before = snapshot(&r);
            let out = match next {
                "apply" => gd(&r, &["apply", "rdma-dmabuf", &s(&extra), "-y", "--no-exec"]),
                _ => gd(&r, &["rollback", "-y", "--no-exec"]),
            };
            assert_eq!(out.status.code(), Some(1), "{next} after fault {n}");
            assert!(
                stderr_of(&out).contains("generation 1 (apply of")
                    && stderr_of(&out).contains("`gdrprov recover --root"),
                "{}",
                stderr_of(&out)
            );
            assert_same(&snapshot(&r), &before, "a refused run changed the root");

            if next == "apply" {
                // What a kill -9 inside write_atomic leaves: its temporary file beside the
                // target (removed by the recovery), and a look-alike that is not ours (kept).
                let leftover = r.join("etc/.two.conf.gdrprov-4242.tmp");
                let not_ours = r.join("etc/.two.conf.gdrprov-x.tmp");
                std::fs::write(&leftover, "half written").unwrap();
                std::fs::write(&not_ours, "someone else's").unwrap();
                // A look-alike symlink is not ours either: kept, and its target untouched.
                let link = r.join("etc/.two.conf.gdrprov-77.tmp");
                std::fs::write(r.join("etc/linked-target"), "keep me").unwrap();
                std::os::unix::fs::symlink("/etc/linked-target", &link).unwrap();
                let out = gd(&r, &["recover", "-y", "--no-exec"]);
                ok(&out, "recover after a crash");
                assert!(
                    stderr_of(&out).contains("generation 1 (apply of"),
                    "{}",
                    stderr_of(&out)
                );
                assert!(
                    !leftover.exists(),
                    "fault {n}: the leftover temp file is still there"
                );
                assert!(
                    stderr_of(&out).contains("/etc/.two.conf.gdrprov-4242.tmp"),
                    "{}",
                    stderr_of(&out)
                );
                ok(
                    &gd(&r, &["apply", "rdma-dmabuf", &s(&extra), "-y", "--no-exec"]),
                    "apply after recover",
                );
                std::fs::remove_file(&not_ours)
                    .unwrap_or_else(|e| panic!("fault {n}: a file not ours was removed: {e}"));
                assert_eq!(
                    std::fs::read_to_string(r.join("etc/linked-target"))
                        .ok()
                        .as_deref(),
                    Some("keep me"),
                    "fault {n}: a symlink's target was removed"
                );
                assert!(
                    link.symlink_metadata().is_ok(),
                    "fault {n}: a look-alike symlink was removed"
                );
                std::fs::remove_file(&link).unwrap();
                std::fs::remove_file(r.join("etc/linked-target")).unwrap();
                assert_same(
                    &without_state(snapshot(&r)),
                    &applied,
                    "apply after a crash",
                );
                let gens = generations(&r);
                assert_eq!(gens[0]["status"], "reverted");
                assert_eq!(gens[1]["status"], "complete");
            } else {
                ok(&gd(&r, &["recover", "-y", "--no-exec"]), "recover");
            }
            let out = gd(&r, &["rollback", "-y", "--no-exec"]);
            ok(&out, &format!("rollback after fault {n} ({next})"));
            assert_same(
                &without_state(snapshot(&r)),
                &without_state(pristine.clone()),
                &format!("fault {n}, then {next}: not back to pristine"),
            );
            assert!(generations(&r).iter().all(|g| g["status"] != "in-progress"));
        }
    }
}

/// Copies `bin` into the chroot `root` with every library `ldd` lists.
pub(crate) fn install_with_libs(root: &Path, bin: &str, as_path: &str) {
    let dst = root.join(as_path.trim_start_matches('/'));
    std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
    std::fs::copy(bin, &dst).unwrap();
    let out = Command::new("ldd").arg(bin).output().unwrap();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let lib = line
            .split_whitespace()
            .find(|w| w.starts_with('/'))
            .map(str::to_string);
        if let Some(lib) = lib {
            let d = root.join(lib.trim_start_matches('/'));
            if !d.exists() {
                std::fs::create_dir_all(d.parent().unwrap()).unwrap();
                std::fs::copy(&lib, &d).unwrap();
            }
        }
    }
}

/// The Ubuntu example as a root that commands really run in (chroot): dash
/// as /bin/sh, `sleep`, and optionally grub-script-check.
pub(crate) fn chroot_root(with_grub_check: bool) -> (tempfile::TempDir, PathBuf) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    install_with_libs(&root, "/bin/dash", "/bin/sh");
    let sleep = if Path::new("/bin/sleep").exists() {
        "/bin/sleep"
    } else {
        "/usr/bin/sleep"
    };
    install_with_libs(&root, sleep, "/bin/sleep");
    if with_grub_check {
        let gsc = which("grub-script-check").expect("grub-script-check");
        install_with_libs(&root, &gsc, "/usr/bin/grub-script-check");
    }
    std::fs::create_dir_all(root.join("run")).unwrap();
    (t, root)
}

fn which(tool: &str) -> Option<String> {
    PATH.split(':')
        .map(|d| format!("{d}/{tool}"))
        .find(|p| Path::new(p).is_file())
}

fn kill9(pid: &str) {
    let st = Command::new("kill").args(["-9", pid]).status().unwrap();
    assert!(st.success(), "kill -9 {pid}");
}

pub(crate) fn write_script(root: &Path, path: &str, body: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// What differs outside gdrprov's state and the scratch dirs the test's
/// scripts use (`run/`, `boot/grub/grub.cfg` regenerated by update-grub).
pub(crate) fn host_files(root: &Path) -> Snap {
    let mut s = without_state(snapshot(root));
    s.retain(|k, _| !k.starts_with("run") && k != "boot/grub/grub.cfg");
    s
}

/// A real `kill -9` of an apply blocked in `update-grub` (a chroot root with
/// a real /bin/sh): the files are wholly new (their steps were done), the
/// journal is in progress; the next apply (update-grub now exits 0) puts the
/// files back, regenerates, applies in full; rollback restores every byte.
#[test]
fn a_real_kill_9_during_update_grub_is_recovered_by_the_next_apply() {
    need_root!("a chroot root with a real /bin/sh");
    let (_t, root) = chroot_root(false);
    write_script(
        &root,
        "/usr/sbin/update-grub",
        "#!/bin/sh\necho $$ > /run/update-grub.pid\nexec sleep 600\n",
    );
    let pristine = host_files(&root);
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = clean_dir.path().join("root");
    copy_tree(&root, &clean);
    ok(
        &gd(&clean, &["apply", "rdma-dmabuf", "-y", "--no-exec"]),
        "clean apply",
    );
    let applied = host_files(&clean);
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let mut child = Command::new(&bin)
        .env("PATH", PATH)
        .env_remove("GDRPROV_FAULT_AFTER_STEP")
        .args(["apply", "rdma-dmabuf", "-y", "--root", &s(&root)])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pidfile = root.join("run/update-grub.pid");
    let start = Instant::now();
    while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("apply ended before update-grub ran: {st:?}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "update-grub never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let j = journal(&root, 1);
    let file_steps_done = j["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["path"].is_string())
        .all(|s| s["done"] == true);
    assert!(file_steps_done, "{j:#}");
    // kill -9 gdrprov, then its child (the sleeping update-grub).
    kill9(&child.id().to_string());
    let st = child.wait().unwrap();
    assert!(st.code().is_none(), "not killed: {st:?}");
    kill9(std::fs::read_to_string(&pidfile).unwrap().trim());

    // Wholly new files, the journal in progress and parseable.
    let now = host_files(&root);
    let newer = wholly_old_or_new(&now, &pristine, &applied, "kill -9");
    for f in [
        "etc/default/grub",
        "etc/nccl.conf",
        "etc/modprobe.d/gdrprov-blacklist.conf",
    ] {
        assert!(newer.iter().any(|k| k == f), "{f} not written: {newer:?}");
    }
    assert_eq!(journal(&root, 1)["status"], "in-progress");

    // The next apply: update-grub works now and counts its runs.
    write_script(
        &root,
        "/usr/sbin/update-grub",
        "#!/bin/sh\necho run >> /run/update-grub.runs\nexit 0\n",
    );
    let out = gd(&root, &["recover", "-y"]);
    ok(&out, "recover after kill -9");
    assert!(
        stderr_of(&out).contains("generation 1 (apply of"),
        "{}",
        stderr_of(&out)
    );
    ok(
        &gd(&root, &["apply", "rdma-dmabuf", "-y"]),
        "apply after recover",
    );
    let runs = std::fs::read_to_string(root.join("run/update-grub.runs")).unwrap();
    assert_eq!(
        runs.lines().count(),
        2,
        "update-grub: once for the recovery (the killed run), once for the apply"
    );
    let gens = generations(&root);
    assert_eq!(gens.len(), 2);
    assert_eq!(gens[0]["status"], "reverted");
    assert_eq!(gens[1]["status"], "complete");
    assert!(std::fs::read_to_string(root.join("etc/default/grub"))
        .unwrap()
        .contains("iommu=pt"));
    ok(&gd(&root, &["rollback", "-y"]), "rollback");
    let mut back = host_files(&root);
    back.retain(|k, _| k != "usr/sbin/update-grub");
    let mut want = pristine;
    want.retain(|k, _| k != "usr/sbin/update-grub");
    assert_same(&back, &want, "rollback after kill -9");
}

// ---------------------------------------------------------------- disk full

/// A tmpfs mounted for the test, unmounted when dropped (even on failure).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Tmpfs {
        std::fs::create_dir_all(at).unwrap();
        let st = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0755"),
                "tmpfs",
            ])
            .arg(at)
            .status()
            .unwrap();
        assert!(st.success(), "mount tmpfs failed");
        Tmpfs(at.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn free_bytes(p: &Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(p).unwrap();
    st.blocks_available() as u64 * st.fragment_size() as u64
}

/// Fills the file system of `dir` until `leave` bytes are free.
fn fill(dir: &Path, leave: u64) {
    let free = free_bytes(dir);
    if free > leave {
        let f = std::fs::File::create(dir.join("filler")).unwrap();
        f.set_len(0).unwrap();
        let mut w = std::io::BufWriter::new(f);
        let chunk = vec![0x5a_u8; 4096];
        let mut left = free - leave;
        use std::io::Write;
        while left > 0 {
            let n = left.min(4096) as usize;
            if w.write_all(&chunk[..n]).is_err() {
                break;
            }
            left -= n as u64;
        }
        let _ = w.flush();
    }
}

/// An apply on a root that runs out of space, with 0 to 64 KiB left: it
/// either completes (enough space) or exits 1 with one message naming the
/// full file system, and then every file is as it was and the journal holds
/// no generation at all (or one marked reverted, if the disk filled after
/// the first write); never a file half-written, never an in-progress
/// generation. A later apply with space completes.
#[test]
fn a_full_disk_fails_cleanly_and_changes_nothing() {
    need_root!("mounting a small tmpfs");
    let t = tempfile::tempdir().unwrap();
    let mut outcomes = Vec::new();
    for leave_kib in [0_u64, 4, 8, 12, 16, 20, 24, 32, 48, 64, 96] {
        let mnt = t.path().join(format!("fs{leave_kib}"));
        let _fs = Tmpfs::mount(&mnt, "512k");
        let root = mnt.join("root");
        copy_tree(&repo().join("examples/hosts/ubuntu-22.04-h100"), &root);
        let extra = extra_profile(t.path(), &root);
        fill(&mnt, leave_kib * 1024);
        let pristine = without_state(snapshot(&root));
        let out = gd(
            &root,
            &["apply", "rdma-dmabuf", &s(&extra), "-y", "--no-exec"],
        );
        no_panic(&out);
        let err = stderr_of(&out);
        let gens = generations(&root);
        if out.status.success() {
            outcomes.push(format!("{leave_kib} KiB free: applied"));
            assert_eq!(gens.len(), 1);
            assert_eq!(gens[0]["status"], "complete");
            assert!(std::fs::read_to_string(root.join("etc/one.conf")).unwrap() == "new one\n");
        } else {
            assert_eq!(out.status.code(), Some(1), "{err}");
            assert!(
                err.contains("No space left on device") && err.contains("the file system is full"),
                "{leave_kib} KiB: not a clear disk-full message: {err}"
            );
            assert!(err.starts_with("gdrprov: error: "), "{err}");
            assert_same(
                &without_state(snapshot(&root)),
                &pristine,
                &format!("{leave_kib} KiB free: a failed apply changed files"),
            );
            for g in &gens {
                assert_eq!(g["status"], "reverted", "{leave_kib} KiB: {g:#}");
            }
            outcomes.push(format!(
                "{leave_kib} KiB free: refused, {} generation(s) left (reverted)",
                gens.len()
            ));
            // With space again, the next apply completes.
            std::fs::remove_file(mnt.join("filler")).unwrap();
            ok(
                &gd(
                    &root,
                    &["apply", "rdma-dmabuf", &s(&extra), "-y", "--no-exec"],
                ),
                "apply after freeing space",
            );
        }
    }
    eprintln!("disk full outcomes: {outcomes:#?}");
    assert!(
        outcomes.iter().any(|o| o.contains("refused")),
        "no fill level made the apply fail: {outcomes:?}"
    );
}

// -------------------------------------------------------------- concurrency

/// Two applies started at once, over many rounds: each exits 0 or 1 with a
/// clear message (lock held, or the host changed under its plan); at least
/// one applies; the result is exactly one clean apply, with consecutive
/// complete generations and no damaged journal.
#[test]
fn two_applies_at_once_never_interleave() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    // Many files, so that an apply takes long enough to overlap.
    let mut yaml = String::from("files:\n");
    for i in 0..40 {
        yaml.push_str(&format!(
            "  - path: /etc/gdr/f{i:02}.conf\n    content: \"file {i}\\n\"\n"
        ));
    }
    let p = t.path().join("many.yaml");
    std::fs::write(&p, yaml).unwrap();
    let clean_dir = tempfile::tempdir().unwrap();
    let clean = clean_dir.path().join("root");
    copy_tree(&root, &clean);
    ok(
        &gd(&clean, &["apply", "rdma-dmabuf", &s(&p), "-y", "--no-exec"]),
        "clean apply",
    );
    let want = without_state(snapshot(&clean));
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let mut locked = 0;
    for round in 0..12 {
        let d = tempfile::tempdir().unwrap();
        let r = d.path().join("root");
        copy_tree(&root, &r);
        let spawn = || {
            Command::new(&bin)
                .env_remove("GDRPROV_FAULT_AFTER_STEP")
                .args(["apply", "rdma-dmabuf", &s(&p), "-y", "--no-exec"])
                .args(["--root", &s(&r)])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outs = [a.wait_with_output().unwrap(), b.wait_with_output().unwrap()];
        let mut applied = 0;
        for o in &outs {
            no_panic(o);
            match o.status.code() {
                Some(0) => applied += 1,
                Some(1) => {
                    let e = stderr_of(o);
                    assert!(
                        e.contains("holds the lock") || e.contains("the host changed between"),
                        "round {round}: unclear failure: {e}"
                    );
                    if e.contains("holds the lock") {
                        locked += 1;
                    }
                }
                c => panic!("round {round}: exit {c:?}"),
            }
        }
        assert!(applied >= 1, "round {round}: neither applied");
        assert_same(
            &without_state(snapshot(&r)),
            &want,
            &format!("round {round}: not one clean apply"),
        );
        let gens = generations(&r);
        assert!(!gens.is_empty());
        assert!(
            gens.iter().all(|g| g["status"] == "complete"),
            "round {round}: {gens:#?}"
        );
        assert_eq!(
            gens.len(),
            1,
            "round {round}: the second apply must find nothing to do"
        );
    }
    eprintln!("rounds where the second apply met the lock: {locked}");
}

// ------------------------------------------------------------ hostile roots

/// A directory outside the root that must never change.
fn sentinel(t: &Path) -> PathBuf {
    let out = t.join("outside");
    std::fs::create_dir_all(out.join("default")).unwrap();
    std::fs::create_dir_all(out.join("modprobe.d")).unwrap();
    std::fs::write(
        out.join("default/grub"),
        "GRUB_CMDLINE_LINUX=\"sentinel-outside-root\"\n",
    )
    .unwrap();
    std::fs::write(
        out.join("grub"),
        "GRUB_CMDLINE_LINUX=\"sentinel-outside-root\"\n",
    )
    .unwrap();
    std::fs::write(out.join("nccl.conf"), "sentinel-outside-root\n").unwrap();
    out
}

/// A link target that points at `target` from `link` by climbing with `..`
/// far past the root.
fn climbing(target: &Path) -> String {
    format!(
        "{}{}",
        "../".repeat(20),
        target.display().to_string().trim_start_matches('/')
    )
}

/// Symlinks at every managed path and at a parent directory, pointing
/// outside the root (absolute and `../../..` relative): gdrprov reads them as
/// if the root were `/` (chroot semantics), so nothing outside is read or
/// written, and every write lands inside the root. Apply and rollback.
#[test]
fn symlinks_pointing_out_of_the_root_are_never_followed_out() {
    // Link (inside the root) → what it points at, under the outside dir.
    let cases = [
        ("etc/default/grub", "grub"),
        ("etc/modprobe.d", "modprobe.d"),
        ("var/lib/gdrprov", ""),
        ("etc", ""),
    ];
    for (link, target) in cases {
        for relative in [false, true] {
            let (t, root) = example_root("ubuntu-22.04-h100");
            let out_dir = sentinel(t.path());
            let before_out = snapshot(&out_dir);
            let at = root.join(link);
            if at.is_dir() {
                std::fs::remove_dir_all(&at).unwrap();
            } else if at.exists() {
                std::fs::remove_file(&at).unwrap();
            }
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            let tgt = out_dir.join(target);
            let dest = if relative { climbing(&tgt) } else { s(&tgt) };
            std::os::unix::fs::symlink(&dest, &at).unwrap();
            let what = format!("{link} -> {dest}");
            let p = t.path().join("files.yaml");
            std::fs::write(
                &p,
                "files:\n  - path: /etc/nccl.conf\n    content: \"inside\\n\"\n",
            )
            .unwrap();
            let plan = gd(&root, &["plan", "rdma-dmabuf", "--no-exec"]);
            no_panic(&plan);
            for args in [
                vec!["apply", "rdma-dmabuf", "-y", "--no-exec"],
                vec!["apply", s(&p).leak(), "-y", "--no-exec"],
            ] {
                let out = gd(&root, &args);
                no_panic(&out);
                assert_same(
                    &snapshot(&out_dir),
                    &before_out,
                    &format!("{what}: {args:?} changed something outside the root"),
                );
                if out.status.success() {
                    // What was written is inside the root, where the link
                    // points when the root is `/`.
                    let r = gd(&root, &["rollback", "-y", "--no-exec"]);
                    no_panic(&r);
                    assert_same(&snapshot(&out_dir), &before_out, &what);
                } else {
                    assert_eq!(out.status.code(), Some(1), "{what}: {}", stderr_of(&out));
                }
            }
            // The outside grub file's content was never read as the host's.
            assert!(
                !stdout_of(&plan).contains("sentinel-outside-root"),
                "{what}: the plan read a file outside the root: {}",
                stdout_of(&plan)
            );
        }
    }
}

fn meta(p: &Path) -> (u32, u32, u32) {
    let m = std::fs::metadata(p).unwrap();
    (m.mode() & 0o7777, m.uid(), m.gid())
}

/// Edited files keep mode and owner (1234:1234 0640); files gdrprov
/// creates are 0644 root:root even under umask 077; journal files are 0600
/// in 0700 directories even under umask 000; rollback restores the old
/// mode and owner.
#[test]
fn modes_and_owners_are_kept_created_files_0644_journal_0600() {
    need_root!("chown to another user");
    let (t, root) = example_root("ubuntu-22.04-h100");
    let grub = root.join("etc/default/grub");
    let nccl = root.join("etc/nccl.conf");
    std::fs::write(&nccl, "old\n").unwrap();
    for f in [&grub, &nccl] {
        std::os::unix::fs::chown(f, Some(1234), Some(1234)).unwrap();
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o640)).unwrap();
    }
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let with_umask = |mask: &str, args: &[&str]| {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {mask}; exec \"$0\" \"$@\""))
            .arg(&bin)
            .args(args)
            .args(["--root", &s(&root)])
            .env_remove("GDRPROV_FAULT_AFTER_STEP")
            .output()
            .unwrap();
        ok(&out, &format!("{args:?} under umask {mask}"));
    };
    let p = t.path().join("p.yaml");
    std::fs::write(
        &p,
        "files:\n  - path: /etc/gdr/sub/new.conf\n    content: \"x\\n\"\n",
    )
    .unwrap();
    let p2 = t.path().join("p2.yaml");
    std::fs::write(
        &p2,
        "files:\n  - path: /etc/gdr-new.conf\n    content: \"y\\n\"\n",
    )
    .unwrap();
    with_umask("077", &["apply", "rdma-dmabuf", &s(&p), "-y", "--no-exec"]);
    with_umask(
        "000",
        &["apply", "rdma-dmabuf", &s(&p), &s(&p2), "-y", "--no-exec"],
    );
    // Directories gdrprov had to create are 0755 (0700 for its own state),
    // whatever the umask.
    for dir in ["etc/gdr", "etc/gdr/sub", "var", "var/lib"] {
        assert_eq!(meta(&root.join(dir)), (0o755, 0, 0), "{dir}");
    }
    assert!(std::fs::read_to_string(&grub).unwrap().contains("iommu=pt"));
    assert_eq!(meta(&grub), (0o640, 1234, 1234), "edited grub defaults");
    assert_eq!(meta(&nccl), (0o640, 1234, 1234), "replaced nccl.conf");
    for created in [
        "etc/modprobe.d/gdrprov-blacklist.conf",
        "etc/gdr/sub/new.conf",
        "etc/gdr-new.conf",
    ] {
        assert_eq!(meta(&root.join(created)), (0o644, 0, 0), "{created}");
    }
    let state = root.join("var/lib/gdrprov");
    let mut checked = 0;
    for (rel, _) in snapshot(&state) {
        let (mode, uid, _) = meta(&state.join(rel.trim_end_matches('/')));
        let want = if rel.ends_with('/') { 0o700 } else { 0o600 };
        assert_eq!((mode, uid), (want, 0), "var/lib/gdrprov/{rel}: {mode:o}");
        checked += 1;
    }
    assert!(checked > 5);
    assert_eq!(meta(&state).0, 0o700);
    // Rollback (both generations) puts mode and owner back.
    with_umask("022", &["rollback", "--generation", "1", "-y", "--no-exec"]);
    assert_eq!(meta(&grub), (0o640, 1234, 1234));
    assert_eq!(meta(&nccl), (0o640, 1234, 1234));
    assert_eq!(std::fs::read_to_string(&nccl).unwrap(), "old\n");
}

/// The directories `--textfile` and `--marker-dir` make are 0755 even under
/// umask 077 (node-exporter, another user, reads the textfile); ones already
/// there keep their mode. Failed before the fix: the umask made them 0700.
#[test]
fn textfile_and_marker_dirs_are_0755_under_umask_077() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let kept = t.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o750)).unwrap();
    let prom = kept.join("a/b/gdrprov.prom");
    let markers = t.path().join("m/run/gdrprov");
    let out = Command::new("sh")
        .arg("-c")
        .arg("umask 077; exec \"$0\" \"$@\"")
        .arg(assert_cmd::cargo::cargo_bin("gdrprov"))
        .args(["verify", "rdma-dmabuf", "--root", &s(&root), "--marker-dir"])
        .arg(&markers)
        .arg("--textfile")
        .arg(&prom)
        .output()
        .unwrap();
    assert!(prom.is_file(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(markers.join("failed").is_file());
    for dir in [
        kept.join("a"),
        kept.join("a/b"),
        t.path().join("m"),
        t.path().join("m/run"),
        markers,
    ] {
        let mode = std::fs::metadata(&dir).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o755, "{}: {mode:o}", dir.display());
    }
    assert_eq!(std::fs::metadata(&kept).unwrap().mode() & 0o7777, 0o750);
}

// ----------------------------------------------------------- hostile inputs

fn validate(t: &Path, yaml: &[u8]) -> Output {
    let p = t.join("hostile.yaml");
    std::fs::write(&p, yaml).unwrap();
    gdrprov()
        .args(["profile", "validate", &s(&p)])
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap()
}

/// One clear line on stderr, exit 1, no panic.
fn refused_clearly(out: &Output, what: &str, expect: &str) {
    no_panic(out);
    let err = stderr_of(out);
    assert_eq!(out.status.code(), Some(1), "{what}: accepted: {err}");
    assert!(err.contains(expect), "{what}: expected {expect:?} in {err}");
    assert!(err.len() < 2000, "{what}: message of {} bytes", err.len());
}

/// Kernel arguments with every character the shell or GRUB would interpret,
/// and other hostile profile values: refused when the profile is loaded.
#[test]
fn hostile_profile_values_are_refused_at_load() {
    let t = tempfile::tempdir().unwrap();
    for bad in [
        "x=$(touch /tmp/pwned)",
        "x=`id`",
        "x=\"q\"",
        "x='q'",
        "a;reboot",
        "a\\b",
        "a|b",
        "a&b",
        "a<b",
        "a>b",
        "a#b",
        "a b",
        "a\tb",
        "a\nb",
        "a\rb",
        "a\u{0}b",
        "a\u{1b}b",
        "caf\u{e9}",
        "=value",
        "",
    ] {
        for key in ["present", "absent"] {
            let yaml = format!(
                "boot:\n  cmdline:\n    {key}: [{}]\n",
                serde_json::to_string(bad).unwrap()
            );
            let out = validate(t.path(), yaml.as_bytes());
            refused_clearly(&out, &format!("kernel arg {bad:?}"), "kernel argument");
        }
    }
    let huge = "a".repeat(100_000);
    refused_clearly(
        &validate(
            t.path(),
            format!("boot:\n  cmdline:\n    present: [x={huge}]\n").as_bytes(),
        ),
        "a 100 kB kernel argument",
        "gdrprov refuses arguments over 1024 bytes",
    );
    for (yaml, expect) in [
        (
            "modules:\n  absent: [\"x; rm -rf /\"]\n",
            "not a kernel module name",
        ),
        (
            "modules:\n  present: [\"../../x\"]\n",
            "not a kernel module name",
        ),
        (
            "modules:\n  options: { nvidia: \"a=1\\ninstall nvidia /bin/sh -c reboot\" }\n",
            "newline",
        ),
        (
            "services:\n  disabled: [\"x$(id)\"]\n",
            "not a systemd unit name",
        ),
        ("boot:\n  entry: \"a b\"\n", "boot.entry"),
        (
            "files:\n  - path: /etc/../x\n    content: x\n",
            "not allowed",
        ),
        (
            "files:\n  - path: \"/etc/x\\0y\"\n    content: x\n",
            "control character",
        ),
        (
            "files:\n  - path: /etc/x\n    content: x\n    mode: \"4777a\"\n",
            "octal",
        ),
        (
            "files:\n  - path: /etc/x\n    template: ../../../../../../etc/passwd\n",
            "absolute paths and `..` are not allowed",
        ),
        (
            "files:\n  - path: /etc/x\n    template: /etc/passwd\n",
            "absolute paths and `..` are not allowed",
        ),
    ] {
        refused_clearly(&validate(t.path(), yaml.as_bytes()), yaml, expect);
    }
}

/// YAML that costs the parser: deep nesting, alias bombs, NUL, huge files
/// and values, invalid UTF-8. A clear error within seconds, no panic, no
/// OOM (the run is limited to 1 GiB of address space).
#[test]
fn yaml_bombs_and_junk_fail_fast() {
    let t = tempfile::tempdir().unwrap();
    let mut bomb = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for i in 1..10 {
        let (p, c) = ((b'a' + i - 1) as char, (b'a' + i) as char);
        bomb.push_str(&format!(
            "{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n"
        ));
    }
    let vars_bomb = format!(
        "vars:\n{}",
        bomb.lines().map(|l| format!("  {l}\n")).collect::<String>()
    );
    let many_aliases = format!("vars:\n  a: &a x\n  b: [{}]\n", vec!["*a"; 5000].join(","));
    let cases: Vec<(String, Vec<u8>)> = vec![
        (
            "10,000 [".into(),
            format!("vars: {}", "[".repeat(10_000)).into_bytes(),
        ),
        (
            "10,000 [ in vars.a".into(),
            format!("vars:\n  a: {}", "[".repeat(10_000)).into_bytes(),
        ),
        (
            "10,000 [ ]".into(),
            format!("vars: {}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
        ),
        (
            "10,000 {".into(),
            format!("vars: {}", "{a: ".repeat(10_000)).into_bytes(),
        ),
        (
            "1,000 nested maps".into(),
            (0..1_000)
                .map(|i| format!("{}k:\n", " ".repeat(i)))
                .collect::<String>()
                .into_bytes(),
        ),
        ("billion laughs".into(), bomb.into_bytes()),
        ("billion laughs in vars".into(), vars_bomb.into_bytes()),
        ("5,000 aliases".into(), many_aliases.into_bytes()),
        ("NUL".into(), b"name: a\0b\n".to_vec()),
        ("invalid UTF-8".into(), b"name: \xff\xfe\n".to_vec()),
        (
            "2 MiB file".into(),
            format!("name: {}\n", "a".repeat(2 << 20)).into_bytes(),
        ),
        (
            "900 kB value".into(),
            format!("description: {}\n", "a".repeat(900_000)).into_bytes(),
        ),
        (
            "10,000 keys".into(),
            format!(
                "vars:\n{}",
                (0..10_000)
                    .map(|i| format!("  k{i}: v\n"))
                    .collect::<String>()
            )
            .into_bytes(),
        ),
        (
            "binary junk".into(),
            (0..65536u32)
                .map(|i| (i.wrapping_mul(2654435761) >> 24) as u8)
                .collect(),
        ),
    ];
    for (what, data) in cases {
        let p = t.path().join("bomb.yaml");
        std::fs::write(&p, &data).unwrap();
        let start = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 1048576; exec \"$0\" profile validate \"$1\"")
            .arg(assert_cmd::cargo::cargo_bin("gdrprov"))
            .arg(&p)
            .output()
            .unwrap();
        let took = start.elapsed();
        no_panic(&out);
        assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
        let err = stderr_of(&out);
        assert!(err.len() < 4000, "{what}: message of {} bytes", err.len());
        // Accepted only if it is a valid small profile (10,000 vars; the
        // 900 kB description is refused since issue 37, over 4096 bytes):
        // everything else is refused with one error line.
        if out.status.success() {
            assert!(
                what.starts_with("900 kB")
                    || what.starts_with("10,000 keys")
                    || what.starts_with("5,000"),
                "{what}: accepted"
            );
        } else {
            assert_eq!(out.status.code(), Some(1), "{what}: {err}");
            assert!(err.starts_with("gdrprov: error: "), "{what}: {err}");
        }
        eprintln!(
            "{what}: exit {:?} in {took:?}: {}",
            out.status.code(),
            err.trim()
        );
    }
}

/// `/etc/default/grub` with shell injection in the command-line
/// assignments: the plan and the apply refuse it with file:line, and nothing
/// runs (as root the apply really runs commands, in a chroot whose
/// update-grub sources the defaults as grub-mkconfig does; the marker file
/// the payload would write never appears, inside or outside the root).
/// Commands on lines of their own (`x; cmd`, `cmd` on the next line) are the
/// host's own configuration, run by every update-grub with or without
/// gdrprov: gdrprov reads the file without running it (no marker under
/// --no-exec) and keeps those lines byte for byte. Also NUL, invalid UTF-8,
/// a huge value and a huge file: refused or handled, quickly.
#[test]
fn hostile_grub_defaults_are_refused_and_nothing_they_contain_runs() {
    let t = tempfile::tempdir().unwrap();
    let marker = t.path().join("pwned");
    let m = s(&marker);
    let refused = [
        format!("GRUB_CMDLINE_LINUX=\"$(echo pwned > {m})\"\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet `echo pwned > {m}`\"\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\" && echo pwned > {m}\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\" | echo pwned > {m}\n"),
        format!("GRUB_CMDLINE_LINUX=$(echo pwned > {m})\n"),
        format!("GRUB_CMDLINE_LINUX=\"${{X:-$(echo pwned > {m})}}\"\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\necho pwned > {m}\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\neval \"GRUB_CMDLINE_LINUX=x; echo pwned > {m}\"\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\n. {m}.sh\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX $(echo pwned > {m})\"\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\\\n$(echo pwned > {m})\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"`echo pwned > {m}`\"\n"),
        "GRUB_CMDLINE_LINUX=\"quiet\"\nalias GRUB_CMDLINE_LINUX=x\n".to_string(),
    ];
    let own_commands = [
        format!("GRUB_CMDLINE_LINUX=\"quiet\"; echo pwned > {m}\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\"\necho pwned > {m}\n"),
        format!("GRUB_CMDLINE_LINUX=\"quiet\" # $(echo pwned > {m})\n"),
    ];
    // As root: a chroot root whose update-grub sources the defaults, and an
    // apply that runs commands. Otherwise: --no-exec.
    let exec_apply: &[&str] = if is_root() {
        &["apply", "rdma-dmabuf", "-y"]
    } else {
        &["apply", "rdma-dmabuf", "-y", "--no-exec"]
    };
    let no_exec_apply: &[&str] = &["apply", "rdma-dmabuf", "-y", "--no-exec"];
    let setup = |grub: &[u8]| {
        let (t, root) = if is_root() {
            let (t, root) = chroot_root(false);
            write_script(
                &root,
                "/usr/sbin/update-grub",
                "#!/bin/sh\n. /etc/default/grub\nexit 0\n",
            );
            std::fs::create_dir_all(root.join(m.trim_start_matches('/')).parent().unwrap())
                .unwrap();
            (t, root)
        } else {
            example_root("ubuntu-22.04-h100")
        };
        std::fs::write(root.join("etc/default/grub"), grub).unwrap();
        (t, root)
    };
    let run = |root: &Path, args: &[&str], what: &str| {
        let start = Instant::now();
        let out = gd(root, args);
        no_panic(&out);
        assert!(start.elapsed() < Duration::from_secs(10), "{what}: slow");
        assert!(!marker.exists(), "{what}: the payload ran");
        assert!(
            !root.join(m.trim_start_matches('/')).exists(),
            "{what}: the payload ran inside the root"
        );
        out
    };
    let mut refusals: Vec<(Vec<u8>, String)> = refused
        .iter()
        .map(|p| (p.clone().into_bytes(), p.clone()))
        .collect();
    refusals.push((
        b"GRUB_CMDLINE_LINUX=\"\xff\xfe\"\n".to_vec(),
        "invalid UTF-8".into(),
    ));
    for (grub, what) in &refusals {
        let (_t, root) = setup(grub);
        let pristine = snapshot(&root);
        for args in [&["plan", "rdma-dmabuf"][..], exec_apply] {
            let out = run(&root, args, what);
            refused_clearly(&out, what, "etc/default");
            assert_same(&snapshot(&root), &pristine, what);
        }
    }
    for p in &own_commands {
        let (_t, root) = setup(p.as_bytes());
        ok(&run(&root, &["plan", "rdma-dmabuf"], p), p);
        ok(&run(&root, no_exec_apply, p), p);
        let after = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
        assert!(after.contains("iommu=pt"), "{p}: not edited: {after}");
        let cmd = p
            .split_once("\"quiet\"")
            .unwrap()
            .1
            .trim_start_matches('\n');
        assert!(
            after.contains(cmd),
            "{p}: its own command was not kept: {after}"
        );
    }
    // NUL and huge files: refused at once, nothing changed.
    let nul = b"GRUB_CMDLINE_LINUX=\"quiet\"\nGRUB_CMDLINE_LINUX=\"a\0b\"\n".to_vec();
    let big_value = format!("GRUB_CMDLINE_LINUX=\"{}\"\n", "a=1 ".repeat(250_000)).into_bytes();
    let big_file = format!(
        "{}GRUB_CMDLINE_LINUX=\"quiet\"\n",
        "# comment\n".repeat(500_000)
    )
    .into_bytes();
    for (grub, what, expect) in [
        (nul, "NUL", "line 2 holds a NUL byte"),
        (big_value, "1 MB value", "more than any GRUB defaults file"),
        (
            big_file,
            "5 MB of comments",
            "more than any GRUB defaults file",
        ),
    ] {
        let (_t, root) = setup(&grub);
        let pristine = snapshot(&root);
        for args in [&["plan", "rdma-dmabuf"][..], exec_apply] {
            let out = run(&root, args, what);
            refused_clearly(&out, what, expect);
            assert_same(&snapshot(&root), &pristine, what);
        }
    }
    // Big but plausible (200 arguments, 64 KiB of comments): edited, fast.
    let many_args = format!("GRUB_CMDLINE_LINUX=\"{}\"\n", "a=1 ".repeat(200));
    let comments = format!(
        "{}GRUB_CMDLINE_LINUX=\"quiet\"\n",
        "# comment\n".repeat(6_500)
    );
    for grub in [many_args, comments] {
        let (_t, root) = setup(grub.as_bytes());
        ok(&run(&root, no_exec_apply, "big"), "big but plausible");
        let after = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
        assert!(after.contains("iommu=pt"));
    }
}

// ---------------------------------------------------------- never unbootable

/// A chroot root whose `update-grub` generates grub.cfg from the defaults;
/// when they hold iommu=pt it writes a grub.cfg GRUB rejects (an unclosed
/// menuentry) and, in "fail" mode, also exits 1. Every run is counted.
fn regen_root(mode: &str) -> (tempfile::TempDir, PathBuf) {
    let (t, root) = chroot_root(true);
    std::fs::write(root.join("etc/ug-mode"), mode).unwrap();
    write_script(
        &root,
        "/usr/sbin/update-grub",
        r#"#!/bin/sh
echo run >> /run/update-grub.runs
. /etc/default/grub
read mode < /etc/ug-mode
case "$GRUB_CMDLINE_LINUX" in
*iommu=pt*)
  printf 'menuentry "Ubuntu" {\n\tlinux /vmlinuz root=/dev/sda1 %s\n' "$GRUB_CMDLINE_LINUX" > /boot/grub/grub.cfg
  if [ "$mode" = fail ]; then echo "update-grub: simulated failure" >&2; exit 1; fi
  ;;
*)
  printf 'menuentry "Ubuntu" {\n\tlinux /vmlinuz root=/dev/sda1 %s\n}\n' "$GRUB_CMDLINE_LINUX" > /boot/grub/grub.cfg
  ;;
esac
exit 0
"#,
    );
    (t, root)
}

/// The GRUB config is checked with grub-script-check after update-grub; a
/// regeneration that fails, or writes a grub.cfg GRUB rejects, fails the
/// apply: /etc/default/grub is restored byte for byte, and grub.cfg is
/// regenerated from it (and is valid again).
#[test]
fn a_failed_or_broken_regeneration_restores_the_grub_defaults() {
    need_root!("a chroot root with a real /bin/sh");
    if which("grub-script-check").is_none() {
        eprintln!("SKIPPED: grub-script-check is not installed (apt-get install grub-common)");
        return;
    }
    for (mode, expect) in [
        ("broken", "grub-script-check"),
        ("fail", "simulated failure"),
    ] {
        let (_t, root) = regen_root(mode);
        let grub_before = std::fs::read(root.join("etc/default/grub")).unwrap();
        let plan = gd(&root, &["plan", "rdma-dmabuf", "--format", "json"]);
        ok(&plan, "plan");
        let v: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
        let runs: Vec<String> = v["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["kind"] == "run")
            .map(|c| {
                c["command"]["argv"][2]
                    .as_str()
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(
            runs,
            ["sh", "update-grub", "grub-script-check"],
            "{:#}",
            v["changes"]
        );
        let pristine = host_files(&root);
        let out = gd(&root, &["apply", "rdma-dmabuf", "-y"]);
        no_panic(&out);
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{mode}: {err}");
        assert!(err.contains(expect), "{mode}: {err}");
        assert!(err.contains("put back"), "{mode}: {err}");
        assert_eq!(
            std::fs::read(root.join("etc/default/grub")).unwrap(),
            grub_before,
            "{mode}: /etc/default/grub not restored"
        );
        assert_same(&host_files(&root), &pristine, mode);
        let runs = std::fs::read_to_string(root.join("run/update-grub.runs")).unwrap();
        assert_eq!(runs.lines().count(), 2, "{mode}: regeneration not re-run");
        let st = Command::new("grub-script-check")
            .arg(root.join("boot/grub/grub.cfg"))
            .status()
            .unwrap();
        assert!(st.success(), "{mode}: grub.cfg left broken");
        assert!(!std::fs::read_to_string(root.join("boot/grub/grub.cfg"))
            .unwrap()
            .contains("iommu=pt"));
        let gens = generations(&root);
        assert_eq!(gens.len(), 1);
        assert_eq!(gens[0]["status"], "reverted");
    }
}

/// A command that fails in an image tree for want of what a booted system
/// has (update-grub's grub-probe without /dev): the apply is undone, and
/// the message says how to run it there or leave it pending.
#[test]
fn a_command_failing_in_an_image_root_says_how_to_run_it_or_leave_it_pending() {
    need_root!("a chroot root with a real /bin/sh");
    let (_t, root) = chroot_root(false);
    write_script(
        &root,
        "/usr/sbin/update-grub",
        "#!/bin/sh\necho '/usr/sbin/grub-probe: error: cannot find a device for / (is /dev mounted?).' >&2\nexit 1\n",
    );
    let before = host_files(&root);
    let out = gd(&root, &["apply", "rdma-dmabuf", "-y", "--force"]);
    assert_ne!(out.status.code(), Some(0));
    let err = stderr_of(&out);
    assert!(err.contains("is /dev mounted?"), "{err}");
    assert!(
        err.contains("bind-mount /dev, /proc and /sys") && err.contains("--no-exec"),
        "{err}"
    );
    assert_same(&host_files(&root), &before, "undone apply");
    // Pending instead: the files are written, the command is owed.
    let out = gd(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--force", "--no-exec"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}
