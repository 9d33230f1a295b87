//! Progress on long work (issue 36): `fleet sweep report` draws a bar while it
//! reads the pair results, on a terminal only (a real pseudo-terminal, made
//! by util-linux's `script`), and never under `--format json` or into a pipe.

use crate::common::*;
use std::process::Command;

fn results(dir: &std::path::Path) {
    let d = dir.join("round-1");
    std::fs::create_dir_all(&d).unwrap();
    for i in 0..300 {
        let doc = serde_json::json!({
            "client": {"port": {"device": "mlx5_0"}},
            "results": [{"bytes": 8388608, "average_gbps": 90.0 + f64::from(i % 3), "data_check": {"passed": true}}],
            "data_check": {"passed": true}
        });
        std::fs::write(d.join(format!("a{i}+b{i}.json")), doc.to_string()).unwrap();
    }
}

/// The command's terminal output (stdout and stderr both on the pty).
fn on_a_terminal(args: &str) -> String {
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{} {args} >/dev/null", bin.display()),
            "/dev/null",
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    stdout_of(&out)
}

#[test]
fn sweep_report_shows_progress_on_a_terminal_only() {
    if !have("script") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    results(t.path());
    let dir = t.path().display().to_string();
    let tty = on_a_terminal(&format!("fleet sweep report {dir}"));
    assert!(tty.contains("reading pair results ["), "{tty:?}");
    assert!(tty.contains("/300 "), "the bar counts the files: {tty:?}");
    let json = on_a_terminal(&format!("fleet sweep report {dir} --format json"));
    assert!(!json.contains("reading pair results"), "{json:?}");
    let piped = gdrprov()
        .args(["fleet", "sweep", "report", &dir])
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(
        !stderr_of(&piped).contains("reading"),
        "{}",
        stderr_of(&piped)
    );
}
