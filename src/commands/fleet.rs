//! Fleet and image-build glue: readiness markers for the first-boot unit,
//! Prometheus metrics for node-exporter's textfile collector, shell
//! completions and the manual page.

use crate::checks::verify::{Report, Status};
use crate::commands::cli::{Cli, Shell};
use crate::error::{Error, Result};
use crate::host::{Host, WriteOptions};
use clap::CommandFactory;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

pub fn completions(shell: Shell) -> Result<i32> {
    let mut cmd = Cli::command();
    let mut out = std::io::stdout();
    match shell {
        Shell::Bash => {
            clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, "gdrprov", &mut out)
        }
        Shell::Zsh => {
            clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, "gdrprov", &mut out)
        }
        Shell::Fish => {
            clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, "gdrprov", &mut out)
        }
    }
    Ok(crate::exit::OK)
}

pub fn man() -> Result<i32> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| Error::io("render", "the manual page", e))?;
    std::io::stdout()
        .write_all(&buf)
        .map_err(|e| Error::io("write", "standard output", e))?;
    Ok(crate::exit::OK)
}

/// One line per check for the marker file: what passed, what failed and why.
pub fn marker_text(r: &Report) -> String {
    let mut s = format!(
        "{} {}\n",
        if r.ready { "ready" } else { "not ready" },
        r.profiles.join(" ")
    );
    for c in &r.checks {
        let status = match c.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        let _ = writeln!(s, "{status} {}: {}", c.name, c.detail());
    }
    s
}

/// Writes `DIR/ready` or `DIR/failed` (atomically) and removes the other, so
/// exactly one says how the last verify went.
pub fn write_marker(dir: &Path, ready: bool, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir.display().to_string(), e))?;
    let (name, other) = if ready {
        ("ready", "failed")
    } else {
        ("failed", "ready")
    };
    write_textfile(&dir.join(name), text)?;
    match std::fs::remove_file(dir.join(other)) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(
            "remove",
            dir.join(other).display().to_string(),
            e,
        )),
    }
}

/// Writes a file atomically through the host layer (temp file in the same
/// directory, fsync, rename): the textfile collector never reads half a file,
/// and ignores the temp file (`.NAME.gdrprov-PID.tmp`, not `*.prom`).
pub fn write_textfile(path: &Path, text: &str) -> Result<()> {
    let shown = path.display().to_string();
    let absolute = std::path::absolute(path).map_err(|e| Error::io("write", &shown, e))?;
    let Some(absolute) = absolute.to_str() else {
        return Err(Error::Usage(format!("{shown} is not a UTF-8 path")));
    };
    Host::open(Path::new("/"), true)?.write_atomic(
        absolute,
        text.as_bytes(),
        WriteOptions::default(),
    )
}

/// A label value in the exposition format: `\`, `"` and newlines escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The verify report as Prometheus text exposition format (0.0.4).
pub fn prometheus(r: &Report) -> String {
    let profiles = escape_label(&r.profiles.join(","));
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# HELP gdrprov_ready 1 when every check of `gdrprov verify` passed or was skipped."
    );
    let _ = writeln!(s, "# TYPE gdrprov_ready gauge");
    let _ = writeln!(
        s,
        "gdrprov_ready{{profiles=\"{profiles}\"}} {}",
        u8::from(r.ready)
    );
    let _ = writeln!(
        s,
        "# HELP gdrprov_check_ok 1 when the check passed, 0 when it failed; skipped checks are absent from this metric."
    );
    let _ = writeln!(s, "# TYPE gdrprov_check_ok gauge");
    for c in r.checks.iter().filter(|c| c.status != Status::Skip) {
        let _ = writeln!(
            s,
            "gdrprov_check_ok{{check=\"{}\",profiles=\"{profiles}\"}} {}",
            escape_label(&c.name),
            // A warning passed.
            u8::from(c.status != Status::Fail)
        );
    }
    let _ = writeln!(
        s,
        "# HELP gdrprov_check_skipped 1 when the check was skipped (not the running system, turned off)."
    );
    let _ = writeln!(s, "# TYPE gdrprov_check_skipped gauge");
    for c in r.checks.iter().filter(|c| c.status == Status::Skip) {
        let _ = writeln!(
            s,
            "gdrprov_check_skipped{{check=\"{}\",profiles=\"{profiles}\"}} 1",
            escape_label(&c.name)
        );
    }
    if let Some(h) = &r.health {
        s.push_str(&crate::checks::health::metrics::prometheus(h));
    }
    if let Some(lb) = &r.loopback {
        let memory = serde_json::to_value(lb.memory)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let best = lb.results.iter().max_by_key(|x| x.bytes);
        let labels = format!(
            "device=\"{}\",memory=\"{}\"",
            escape_label(&lb.from.device),
            escape_label(&memory)
        );
        if let Some(b) = best {
            let _ = writeln!(
                s,
                "# HELP gdrprov_loopback_gbps Average RDMA WRITE loopback bandwidth at the largest message size, Gb/s."
            );
            let _ = writeln!(s, "# TYPE gdrprov_loopback_gbps gauge");
            let _ = writeln!(s, "gdrprov_loopback_gbps{{{labels}}} {}", b.average_gbps);
            if let Some(f) = b.line_rate_fraction {
                let _ = writeln!(
                    s,
                    "# HELP gdrprov_line_rate_fraction Loopback bandwidth as a fraction of the port's line rate."
                );
                let _ = writeln!(s, "# TYPE gdrprov_line_rate_fraction gauge");
                let _ = writeln!(s, "gdrprov_line_rate_fraction{{{labels}}} {f}");
            }
        }
        let _ = writeln!(
            s,
            "# HELP gdrprov_loopback_data_ok 1 when the data written by the loopback read back intact."
        );
        let _ = writeln!(s, "# TYPE gdrprov_loopback_data_ok gauge");
        let _ = writeln!(
            s,
            "gdrprov_loopback_data_ok{{{labels}}} {}",
            u8::from(lb.data_check.passed)
        );
    }
    let _ = writeln!(
        s,
        "# HELP gdrprov_verify_timestamp_seconds When this verify ran (Unix time)."
    );
    let _ = writeln!(s, "# TYPE gdrprov_verify_timestamp_seconds gauge");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let _ = writeln!(s, "gdrprov_verify_timestamp_seconds {now}");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::verify::Check;

    fn report() -> Report {
        Report {
            profiles: vec!["rdma-dmabuf".into(), "site \"a\"\\b".into()],
            root: "/".into(),
            live: true,
            ready: false,
            checks: vec![
                Check::pass("configuration", "ok"),
                Check::fail_with_cause("modules", "nvidia_peermem loaded"),
                Check::skip("loopback", "off"),
            ],
            loopback: None,
            health: None,
        }
    }

    #[test]
    fn exposition_format_with_help_type_and_escaped_labels() {
        let text = prometheus(&report());
        assert!(text.contains("# TYPE gdrprov_check_ok gauge\n"), "{text}");
        assert!(text.contains("# HELP gdrprov_check_ok "), "{text}");
        assert!(
            text.contains(
                "gdrprov_check_ok{check=\"modules\",profiles=\"rdma-dmabuf,site \\\"a\\\"\\\\b\"} 0\n"
            ),
            "{text}"
        );
        assert!(text.contains("gdrprov_check_ok{check=\"configuration\""));
        assert!(text.contains("gdrprov_check_skipped{check=\"loopback\""));
        assert!(text.contains("gdrprov_ready{"));
        // Every sample line is `name{labels} value` or `name value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        assert_eq!(escape_label("a\nb"), "a\\nb");
    }

    #[test]
    fn marker_replaces_the_other_one() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("run/gdrprov");
        write_marker(&dir, false, "why").unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("failed")).unwrap(), "why");
        write_marker(&dir, true, "ok").unwrap();
        assert!(!dir.join("failed").exists());
        assert_eq!(std::fs::read_to_string(dir.join("ready")).unwrap(), "ok");
        assert!(marker_text(&report()).contains("FAIL modules: nvidia_peermem loaded"));
    }
}
