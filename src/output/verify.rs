//! `verify`'s report for people: one line a check, then the verdict.

use crate::checks::verify::Report;
use crate::checks::Status;

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
