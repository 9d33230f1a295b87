//! Every refusal of a hostile input under `--format json` is one JSON
//! document (issue 37: "every refusal: one message naming the problem and
//! the fix, a non-zero exit, nothing changed, and under `--format json` one
//! JSON document"). The families whose own tests check their refusals as
//! text (`hostile_bounds`, `hostile_lock`, `guard_rails`, `hostile_journal`'s
//! `history`) again here with `--format json`: stdout is exactly one JSON
//! value (nothing before or after it) with the command's name, the refusal's
//! words inside it, exit 1 or 2, no panic, within the time limit.
//! (`hostile_text`, `hostile_peer`, `hostile_recheck` and `hostile_journal`'s
//! `rollback` check their JSON themselves.)

use crate::common::*;
use crate::util::Root;
use std::path::Path;
use std::time::Duration;

/// `args --format json` (from `cwd`) refuses with one JSON document of
/// `command` holding every word.
#[track_caller]
fn one_document(cwd: &Path, args: &[&str], command: &str, words: &[&str]) {
    let out = gdrprov()
        .current_dir(cwd)
        .timeout(Duration::from_secs(30))
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let (stdout, stderr) = (stdout_of(&out), stderr_of(&out));
    assert!(
        matches!(out.status.code(), Some(1 | 2)),
        "{args:?}: exit {:?} (killed: a hang?)\n{stdout}{stderr}",
        out.status.code()
    );
    let mut docs = serde_json::Deserializer::from_str(&stdout).into_iter::<serde_json::Value>();
    let doc = match docs.next() {
        Some(Ok(doc)) => doc,
        other => panic!("{args:?}: stdout is not a JSON document ({other:?}):\n{stdout}\n{stderr}"),
    };
    assert!(
        docs.next().is_none(),
        "{args:?}: more than one document:\n{stdout}"
    );
    assert_eq!(doc["command"], command, "{args:?}: {doc:#}");
    let text = doc.to_string();
    for w in words {
        assert!(
            text.contains(w),
            "{args:?}: the document lacks {w:?}: {doc:#}"
        );
    }
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

fn mkfifo(p: &Path) {
    nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// FIFOs and `/dev/zero` wherever a file is named (sweep results,
/// `--verify-dir`, `--drained`, `--probation`, `--nccl-log`,
/// `--token-file`), results that are not measurements, node lists and
/// simulation sizes out of bounds, token files others can read and secrets
/// that are not text.
#[test]
fn bounded_inputs_refuse_with_one_json_document() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    crate::sweep::results(&d.join("res"));
    let res = "res";
    mkfifo(&d.join("fifo"));
    let example = format!("{}/examples/hosts/ubuntu-22.04-h100", repo().display());
    let report = ["fleet", "sweep", "report", res];
    let sweep = "fleet sweep report";
    for (bad, what) in [("fifo", "a FIFO"), ("/dev/zero", "a device node")] {
        for opt in ["--drained", "--probation"] {
            one_document(d, &[&report[..], &[opt, bad]].concat(), sweep, &[what]);
        }
        one_document(
            d,
            &["doctor", "--nccl-log", bad, "--root", &example],
            "doctor",
            &[what, "NCCL log"],
        );
        one_document(
            d,
            &["bench", "pair", "127.0.0.1", "--token-file", bad],
            "bench pair",
            &[what, "token file"],
        );
        // A result file and a verify report that are a FIFO, or a link to /dev/zero.
        let target = if bad == "fifo" {
            d.join("fifo")
        } else {
            "/dev/zero".into()
        };
        std::os::unix::fs::symlink(&target, d.join("res/round-1/x+y+mlx5_0.json")).unwrap();
        one_document(d, &report, sweep, &["x+y+mlx5_0.json", what]);
        std::fs::remove_file(d.join("res/round-1/x+y+mlx5_0.json")).unwrap();
        let v = d.join("verify");
        std::fs::create_dir_all(&v).unwrap();
        std::os::unix::fs::symlink(&target, v.join("n1.json")).unwrap();
        one_document(
            d,
            &[&report[..], &["--verify-dir", "verify"]].concat(),
            sweep,
            &["n1.json", what],
        );
        std::fs::remove_file(v.join("n1.json")).unwrap();
    }
    // Results that are not measurements.
    for (file, body, word) in [
        ("n1+n1+mlx5_0.json", "90.0", "paired with itself"),
        ("n1+n2+mlx5_0.json", "1e300", "average_gbps"),
    ] {
        let r = d.join(format!("bad-{word}/round-1"));
        std::fs::create_dir_all(&r).unwrap();
        std::fs::write(
            r.join(file),
            format!(r#"{{"results":[{{"bytes":1,"average_gbps":{body}}}]}}"#),
        )
        .unwrap();
        let dir = format!("bad-{word}");
        one_document(d, &["fleet", "sweep", "report", &dir], sweep, &[word]);
    }
    // Node lists and simulation sizes.
    for (list, word) in [
        ("r[1-100000]n[1-100000]", "more than 65536 nodes"),
        ("g[1-65537]", "more than 65536 nodes"),
        (
            "n[1-99999999999999999999999]",
            "n[1-99999999999999999999999]",
        ),
        ("n[5-1]", "not a range from low to high"),
    ] {
        one_document(
            d,
            &["fleet", "sweep", "plan", "--nodelist", list],
            "fleet sweep plan",
            &[word],
        );
    }
    for (args, word) in [
        (&["--rails", "100000000"][..], "--rails must be 1 to 64"),
        (&["--nodes", "10000000"], "--nodes must be 2 to 16384"),
        (&["--pair-seconds", "NaN"], "--pair-seconds"),
    ] {
        one_document(
            d,
            &[&["fleet", "sweep", "simulate"][..], args].concat(),
            "fleet sweep simulate",
            &[word],
        );
    }
    // Token files others can read, a secret of NUL bytes.
    use std::os::unix::fs::PermissionsExt;
    let tok = d.join("token");
    std::fs::write(&tok, "0123456789abcdef0123\n").unwrap();
    std::fs::set_permissions(&tok, std::fs::Permissions::from_mode(0o644)).unwrap();
    let pair = ["bench", "pair", "127.0.0.1", "--token-file", "token"];
    one_document(d, &pair, "bench pair", &["0644", "chmod 600"]);
    std::fs::write(&tok, "\0".repeat(17)).unwrap();
    std::fs::set_permissions(&tok, std::fs::Permissions::from_mode(0o600)).unwrap();
    one_document(d, &pair, "bench pair", &["control character"]);
}

/// Profiles: `extends` too deep, `--` and blocking the root disk's driver
/// in kernel arguments, version requirements it does not understand under
/// `requires:` and `when:`, a name that would become lines.
#[test]
fn profile_refusals_are_one_json_document() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let write = |name: &str, yaml: &str| std::fs::write(d.join(name), yaml).unwrap();
    write("p0.yaml", "extends: rdma-dmabuf\n");
    for i in 1..=40 {
        write(&format!("p{i}.yaml"), &format!("extends: p{}\n", i - 1));
    }
    let validate = |file: &str, words: &[&str]| {
        one_document(d, &["profile", "validate", file], "profile validate", words)
    };
    validate("p40.yaml", &["extends", "more than 32 levels"]);
    write("dd.yaml", "boot:\n  cmdline:\n    present: [\"--\"]\n");
    validate("dd.yaml", &["ends the kernel's arguments"]);
    for spec in ["=> 5", "^5.12", ">= 5.x || 6"] {
        write("r.yaml", &format!("requires:\n  kernel: \"{spec}\"\n"));
        validate(
            "r.yaml",
            &["requires.kernel", "is not a version constraint"],
        );
        write(
            "w.yaml",
            &format!("modules:\n  when: {{ kernel: \"{spec}\" }}\n  present: [rdma_ucm]\n"),
        );
        validate("w.yaml", &["when.kernel", "is not a version constraint"]);
    }
    write(
        "name.yaml",
        "name: \"x)\\ninstall nvme /bin/false\\nblacklist nvme\\n# (\"\nextends: rdma-dmabuf\n",
    );
    validate("name.yaml", &["name"]);
    // The root disk's driver blocked on the command line: plan refuses.
    let root = Root::example("ubuntu-22.04-h100");
    crate::guard_rails::boot_devices(&root);
    for arg in ["module_blacklist=nvme", "rd.driver.blacklist=nvme"] {
        write(
            "b.yaml",
            &format!("boot:\n  cmdline:\n    present: [\"{arg}\"]\n"),
        );
        one_document(
            d,
            &["plan", "b.yaml", "--root", root.arg()],
            "plan",
            &[arg, "the disk of the root filesystem"],
        );
    }
}

/// The journal's lock a FIFO, a generation directory a symlink out of the
/// root: `apply` and `history` refuse with one document.
#[test]
fn journal_refusals_are_one_json_document() {
    let root = Root::example("ubuntu-22.04-h100");
    let state = root.join("var/lib/gdrprov");
    std::fs::create_dir_all(&state).unwrap();
    mkfifo(&state.join("lock"));
    let apply = [
        "apply",
        "rdma-dmabuf",
        "--yes",
        "--no-exec",
        "--root",
        root.arg(),
    ];
    one_document(&root, &apply, "apply", &["lock", "a FIFO", "regular file"]);
    std::fs::remove_file(state.join("lock")).unwrap();
    let out = gdrprov().args(apply).output().unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let outside = tempfile::tempdir().unwrap();
    let g = state.join("generations");
    std::fs::rename(g.join("1"), outside.path().join("1")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("1"), g.join("1")).unwrap();
    for (args, command) in [
        (&["history"][..], "history"),
        (&["rollback", "--yes", "--no-exec"], "rollback"),
        (&["recover", "--yes", "--no-exec"], "recover"),
    ] {
        one_document(
            &root,
            &[args, &["--root", root.arg()]].concat(),
            command,
            &["is a symlink"],
        );
    }
}
