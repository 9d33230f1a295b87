//! verify's report for machines beside JSON: the readiness marker's text
//! (first-boot unit) and the Prometheus text exposition (node-exporter's
//! textfile collector). Labels are escaped by output/exposition.rs, as the
//! health metrics' are.

pub use super::exposition::escape_label;
use crate::bench::LoopbackReport;
use crate::checks::verify::{Report, Status};
use std::fmt::Write as _;

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

/// Each check's metrics: passed, skipped, and how long it took.
fn checks(s: &mut String, r: &Report, profiles: &str) {
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
    let timed: Vec<_> = r
        .checks
        .iter()
        .filter(|c| c.status != Status::Skip)
        .filter_map(|c| c.duration.map(|d| (c, d)))
        .collect();
    if !timed.is_empty() {
        let _ = writeln!(
            s,
            "# HELP gdrprov_check_duration_seconds How long the check took, its measurement included.\n# TYPE gdrprov_check_duration_seconds gauge"
        );
        for (c, d) in timed {
            let _ = writeln!(
                s,
                "gdrprov_check_duration_seconds{{check=\"{}\"}} {:.6}",
                escape_label(&c.name),
                d.as_secs_f64()
            );
        }
    }
}

/// The loopback's metrics: its bandwidth at the largest size, against the line rate, and its data check.
fn loopback(s: &mut String, lb: &LoopbackReport) {
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
    checks(&mut s, r, &profiles);
    if let Some(h) = &r.health {
        s.push_str(&super::health_metrics::prometheus(h));
    }
    if let Some(lb) = &r.loopback {
        loopback(&mut s, lb);
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

/// What caused a re-check, as a bounded label: `package` (the dpkg or rpm
/// trigger), `kernel` (a kernel installed), `modules` (the path unit: a
/// DKMS build or any change under /lib/modules), `manual` (no reason given),
/// `other`. A reason that is one of those words is that label
/// (`--reason kernel`: `kernel`, as docs/commands.md says). The free text
/// stays in the summary line, never in a label.
pub fn trigger(reason: Option<&str>) -> &'static str {
    const LABELS: [&str; 5] = ["package", "kernel", "modules", "manual", "other"];
    let Some(r) = reason.map(str::to_ascii_lowercase) else {
        return "manual";
    };
    if let Some(label) = LABELS.iter().find(|l| **l == r.trim()) {
        return label;
    }
    if r.starts_with("package") || r.contains("dpkg") || r.contains("rpm") {
        "package"
    } else if r.starts_with("kernel ") && r.contains("install") {
        "kernel"
    } else if r.contains("modules") || r.contains("dkms") {
        "modules"
    } else if r.is_empty() || r == "asked" || r == "by hand" {
        "manual"
    } else {
        "other"
    }
}

/// A re-check's own metrics, appended to verify's in the textfile: its
/// result and what triggered it, whether it finished in time, how long it
/// took and when it ran (`now`, Unix seconds).
pub fn recheck(r: &Report, trigger: &str, finished: bool, took: f64, now: u64) -> String {
    let labels = format!("trigger=\"{}\"", escape_label(trigger));
    let mut s = String::new();
    for (name, help, value) in [
        (
            "gdrprov_recheck_ready",
            "1 when the last re-check found the host ready (trigger: package, kernel, modules, manual, other).",
            format!("{}", u8::from(r.ready)),
        ),
        (
            "gdrprov_recheck_finished",
            "1 when the last re-check finished within its --timeout, 0 when it was given up.",
            format!("{}", u8::from(finished)),
        ),
        (
            "gdrprov_recheck_duration_seconds",
            "How long the last re-check took.",
            format!("{took:.6}"),
        ),
        (
            "gdrprov_recheck_timestamp_seconds",
            "When the last re-check ran (Unix time).",
            now.to_string(),
        ),
    ] {
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
        let _ = writeln!(s, "{name}{{{labels}}} {value}");
    }
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
    fn triggers_are_a_bounded_set() {
        assert_eq!(trigger(Some("package trigger /lib/modules")), "package");
        assert_eq!(trigger(Some("kernel 6.8.0-45 installed")), "kernel");
        assert_eq!(trigger(Some("kernel modules changed")), "modules");
        assert_eq!(trigger(None), "manual");
        assert_eq!(trigger(Some("my \"own\" words 12:00")), "other");
        let text = recheck(&report(), "package", true, 0.25, 7);
        assert!(
            text.contains("gdrprov_recheck_ready{trigger=\"package\"} 0\n"),
            "{text}"
        );
        assert!(text.contains("gdrprov_recheck_timestamp_seconds{trigger=\"package\"} 7\n"));
    }

    #[test]
    fn each_documented_reason_word_is_its_own_label() {
        // docs/commands.md: the trigger is a fixed word from --reason
        // (package, kernel, modules, manual, other).
        for word in ["package", "kernel", "modules", "manual", "other", "Kernel "] {
            assert_eq!(trigger(Some(word)), word.trim().to_ascii_lowercase());
        }
    }

    #[test]
    fn check_durations_are_values_of_non_skipped_checks() {
        let mut r = report();
        r.checks[0].duration = Some(std::time::Duration::from_millis(1500));
        r.checks[2].duration = Some(std::time::Duration::from_millis(3));
        let text = prometheus(&r);
        assert!(
            text.contains("gdrprov_check_duration_seconds{check=\"configuration\"} 1.500000\n"),
            "{text}"
        );
        assert!(!text.contains("gdrprov_check_duration_seconds{check=\"loopback\""));
    }

    #[test]
    fn marker_text_names_each_check() {
        assert!(marker_text(&report()).contains("FAIL modules: nvidia_peermem loaded"));
    }
}
