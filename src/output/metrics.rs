//! verify's report for machines beside JSON: the readiness marker's text
//! (first-boot unit) and the Prometheus text exposition (node-exporter's
//! textfile collector). Labels are escaped by output/exposition.rs, as the
//! health metrics' are.

pub use super::exposition::escape_label;
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
        s.push_str(&super::health_metrics::prometheus(h));
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
    fn marker_text_names_each_check() {
        assert!(marker_text(&report()).contains("FAIL modules: nvidia_peermem loaded"));
    }
}
