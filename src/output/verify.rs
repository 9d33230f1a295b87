//! `verify`'s report for people: one line a check, then the verdict.

use crate::checks::verify::Report;
use crate::checks::Status;
use crate::suggest::Given;

/// The report with every command its checks (and its health report's)
/// suggest keeping the options GIVEN (`--root`, `--format json`), whatever
/// the format it is shown in.
pub fn keep_given(r: &mut Report, given: &Given) {
    let health = r.health.iter_mut().flat_map(|h| h.checks.iter_mut());
    for c in r.checks.iter_mut().chain(health) {
        c.evidence = crate::suggest::keep_given(&c.evidence, given);
        if let Some(fix) = &mut c.fix {
            *fix = crate::suggest::keep_given(fix, given);
        }
    }
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut out = format!(
        "gdrprov verify: {} on {}\n",
        r.profiles.join(" + "),
        if r.live {
            "the running system".to_string()
        } else {
            r.root.clone()
        }
    );
    for c in &r.checks {
        out.push_str(&format!(
            "  {}  {:<14} {}\n",
            c.status.tag(),
            c.name,
            c.detail()
        ));
    }
    let count = |s: Status| r.checks.iter().filter(|c| c.status == s).count();
    if r.ready {
        out.push_str(&match count(Status::Warn) {
            0 => "Result: READY — every check passed or does not apply.\n".to_string(),
            n => format!(
                "Result: READY — every check passed ({n} with a warning) or does not apply.\n"
            ),
        });
    } else {
        out.push_str(&format!(
            "Result: NOT READY — {} check(s) failed.\n",
            count(Status::Fail)
        ));
    }
    out
}

/// `recheck`'s summary for the unit's journal: one line, then the failed
/// checks, one a line.
pub fn recheck_summary(r: &Report, reason: &str) -> String {
    let mut s = format!(
        "gdrprov recheck ({reason}): {} for {}\n",
        if r.ready { "ready" } else { "NOT READY" },
        r.profiles.join(" ")
    );
    for c in r.checks.iter().filter(|c| c.status == Status::Fail) {
        s.push_str(&format!("  FAIL {}: {}\n", c.name, c.detail()));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::verify::Check;

    fn report(ready: bool) -> Report {
        Report {
            profiles: vec!["rdma-dmabuf".into(), "/etc/gdrprov/site a.yaml".into()],
            root: "/".into(),
            live: true,
            ready,
            checks: vec![if ready {
                Check::pass("modules", "nvidia_peermem loaded")
            } else {
                Check::fail_with_cause("modules", "nvidia_peermem loaded")
            }],
            loopback: None,
            health: None,
        }
    }

    #[test]
    fn a_recheck_summary_names_the_failed_checks() {
        let s = recheck_summary(&report(false), "dpkg trigger");
        assert!(s.starts_with("gdrprov recheck (dpkg trigger): NOT READY for rdma-dmabuf"));
        assert!(s.contains("  FAIL modules: nvidia_peermem loaded\n"), "{s}");
        assert_eq!(recheck_summary(&report(true), "x").lines().count(), 1);
    }
}
