//! `gdrprov recheck`: the quick re-check the packages' triggers run
//! (src/ops/recheck.rs), and one short summary on stdout (the unit's journal).

use crate::commands::cli::RecheckArgs;
use crate::error::{exit, Result};
use crate::names;
use crate::ops::{self, RecheckRequest, Rechecked, Target};
use crate::output::{Format, Output};

/// The request `recheck` makes of its arguments: on TARGET, read-only.
fn request(target: &Target, a: &RecheckArgs) -> RecheckRequest {
    RecheckRequest {
        target: target.clone(),
        profiles: a.profiles.clone(),
        timeout: a.timeout,
        reason: a.reason.clone(),
        marker_dir: a.marker_dir.clone(),
        textfile: a.textfile.clone(),
        nfd_file: a.nfd_file.clone(),
        nfd_expiry: a.nfd_expiry,
    }
}

pub fn run(out: &Output, target: &Target, a: &RecheckArgs) -> Result<i32> {
    let reason = a.reason.as_deref().unwrap_or("asked");
    let root = target.root.as_path();
    let report = match ops::recheck(&request(target, a))? {
        Rechecked::Checked(report) => report,
        Rechecked::NothingApplied => {
            match out.format {
                Format::Json => out.document(
                    names::RECHECK,
                    root,
                    serde_json::json!({"ready": null, "profiles": [], "note": "no profile applied on this host; nothing to re-check"}),
                ),
                _ => out.raw(&format!(
                    "gdrprov recheck ({reason}): no profile applied on this host; nothing to re-check\n"
                )),
            }
            return Ok(exit::OK);
        }
    };
    match out.format {
        Format::Json => out.document(names::RECHECK, root, &report),
        Format::Text | Format::Prometheus | Format::Html => {
            out.raw(&crate::output::verify::recheck_summary(&report, reason))
        }
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}
