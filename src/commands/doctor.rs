//! `gdrprov doctor [PROFILE...] [--nccl-log FILE]`: which profile fits this
//! host and what stands in the way (src/ops/doctor.rs), for people or as JSON.

use crate::error::{exit, Result};
use crate::names;
use crate::ops::{self, Target};
use crate::output::{Format, Output};
use std::path::Path;

pub fn run(
    out: &Output,
    target: &Target,
    profiles: &[String],
    nccl_log: Option<&Path>,
) -> Result<i32> {
    let root = target.root.as_path();
    let ops::Diagnosed { facts, mut report } = ops::doctor(target, profiles, nccl_log)?;
    // Suggested commands keep the user's --root (and --format).
    for f in &mut report.findings {
        f.fix = crate::output::keep_options(&f.fix, root, out.format);
        f.cause = crate::output::keep_options(&f.cause, root, out.format);
    }
    match out.format {
        Format::Json => out.document(names::DOCTOR, root, &report),
        Format::Text | Format::Prometheus | Format::Html => {
            out.text(root, &crate::output::doctor::text(&facts, &report))
        }
    }
    Ok(if report.blocked {
        exit::NOT_READY
    } else {
        exit::OK
    })
}
