//! One door for reading (issues 34 and 37): every file named on the command
//! line goes through the host layer, which refuses what is not a regular file
//! without blocking on it. A FIFO (no writer: a plain open would wait for one
//! for ever) and `/dev/zero` (a read that never ends) given as a sweep results
//! file, a `--verify-dir` report, `--drained`, `--nccl-log`, `--token-file` or
//! a profile: each is one clear message naming the file, a non-zero exit, and
//! it comes at once. Each run has a timeout, so a hang fails the test instead
//! of hanging it.

use crate::common::{gdrprov, stderr_of, stdout_of};
use crate::util::Root;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Far above what a refusal takes (milliseconds), far below a hang.
const LIMIT: Duration = Duration::from_secs(20);

/// The two hostile files: a FIFO with no writer, and `/dev/zero` reached
/// through a symlink with the expected name.
fn hostile(dir: &Path, name: &str) -> [(PathBuf, &'static str); 2] {
    std::fs::create_dir_all(dir).unwrap();
    let fifo = dir.join(format!("fifo-{name}"));
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let zero = dir.join(format!("zero-{name}"));
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    [(fifo, "a FIFO"), (zero, "a device node")]
}

/// Runs gdrprov with `args` under [`LIMIT`]: it must end by itself, fail,
/// and say that `file` is `kind`, not a regular file.
fn refused(args: &[&str], extra: &[&Path], file: &Path, kind: &str) {
    let start = Instant::now();
    let out = gdrprov()
        .timeout(LIMIT)
        .args(args)
        .args(extra)
        .env_remove("GDRPROV_PAIR_TOKEN")
        .output()
        .unwrap();
    let what = format!("gdrprov {} {extra:?}", args.join(" "));
    assert!(
        out.status.code().is_some() && start.elapsed() < LIMIT,
        "{what}: hung, killed after {LIMIT:?}"
    );
    let err = stderr_of(&out);
    assert!(
        out.status.code().is_some_and(|c| c != 0),
        "{what}: exit {:?}\nstdout:\n{}\nstderr:\n{err}",
        out.status,
        stdout_of(&out)
    );
    assert!(
        err.contains(&file.display().to_string())
            && err.contains(kind)
            && err.contains("not a regular file"),
        "{what}: the message must name {} as {kind}:\n{err}",
        file.display()
    );
    assert_eq!(err.trim().lines().count(), 1, "{what}: one message:\n{err}");
}

/// A results directory with one good pair result, so that only the hostile
/// file is wrong.
fn results_dir(dir: &Path) -> PathBuf {
    let d = dir.join("results/round-1");
    std::fs::create_dir_all(&d).unwrap();
    let doc = serde_json::json!({
        "gdrprov": "0.1.0", "command": "bench pair", "role": "client",
        "client": {"port": {"device": "mlx5_0", "mtu": 4096}},
        "listener": {"port": {"device": "mlx5_0", "mtu": 4096}},
        "line_rate_gbps": 100.0,
        "results": [{"bytes": 8388608, "average_gbps": 96.0, "line_rate_fraction": 0.96,
                     "data_check": {"passed": true}}],
        "data_check": {"passed": true}, "passed": true
    });
    std::fs::write(d.join("n1+n2+mlx5_0.json"), doc.to_string()).unwrap();
    dir.join("results")
}

#[test]
fn a_fifo_or_dev_zero_as_a_sweep_results_file_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let results = results_dir(t.path());
    for (file, kind) in hostile(&results.join("round-2"), "n3+n4+mlx5_0.json") {
        // Only this one in round-2: rename it to the name the sweep expects.
        let named = file.with_file_name("n3+n4+mlx5_0.json");
        std::fs::rename(&file, &named).unwrap();
        refused(&["fleet", "sweep", "report"], &[&results], &named, kind);
        std::fs::remove_file(&named).unwrap();
    }
}

#[test]
fn a_fifo_or_dev_zero_as_a_verify_report_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let results = results_dir(t.path());
    let reports = t.path().join("verify");
    for (file, kind) in hostile(&reports, "x") {
        let named = reports.join("n1.json");
        std::fs::rename(&file, &named).unwrap();
        refused(
            &["fleet", "sweep", "report"],
            &[&results, Path::new("--verify-dir"), &reports],
            &named,
            kind,
        );
        std::fs::remove_file(&named).unwrap();
    }
}

#[test]
fn a_fifo_or_dev_zero_as_the_drained_list_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    let results = results_dir(t.path());
    for (file, kind) in hostile(t.path(), "drained") {
        refused(
            &["fleet", "sweep", "report"],
            &[&results, Path::new("--drained"), &file],
            &file,
            kind,
        );
    }
}

#[test]
fn a_fifo_or_dev_zero_as_the_nccl_log_is_refused_at_once() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    for (file, kind) in hostile(t.path(), "nccl.log") {
        refused(
            &["doctor", "rdma-dmabuf", "--root", root.arg(), "--nccl-log"],
            &[&file],
            &file,
            kind,
        );
    }
}

#[test]
fn a_fifo_or_dev_zero_as_the_token_file_is_refused_at_once() {
    let t = tempfile::tempdir().unwrap();
    for (file, kind) in hostile(t.path(), "token") {
        // The client reads its secret before it connects: nothing listens on 127.0.0.1:9.
        refused(
            &["bench", "pair", "127.0.0.1", "--port", "9", "--token-file"],
            &[&file],
            &file,
            kind,
        );
    }
}

#[test]
fn a_fifo_or_dev_zero_as_a_profile_is_refused_at_once() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    for (file, kind) in hostile(t.path(), "profile.yaml") {
        refused(&["plan", "--root", root.arg()], &[&file], &file, kind);
    }
}

#[test]
fn a_results_file_over_its_limit_is_refused_naming_it_and_the_limit() {
    let t = tempfile::tempdir().unwrap();
    let results = results_dir(t.path());
    let big = results.join("round-1/n5+n6+mlx5_0.json");
    // 4 MiB is the most read of one pair result: one byte more, sparse.
    let f = std::fs::File::create(&big).unwrap();
    f.set_len((4 << 20) + 1).unwrap();
    let out = gdrprov()
        .timeout(LIMIT)
        .args(["fleet", "sweep", "report"])
        .arg(&results)
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert!(out.status.code().is_some_and(|c| c != 0), "{err}");
    assert!(
        err.contains(&big.display().to_string())
            && err.contains("over 4194304 bytes")
            && err.contains("a pair result"),
        "{err}"
    );
}
