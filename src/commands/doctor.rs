//! `gdrprov doctor [PROFILE...] [--nccl-log FILE]`: which profile fits this
//! host and what stands in the way (src/checks/doctor), for people or as JSON.

use crate::error::Result;
use crate::facts::{Depth, Facts};
use crate::names;
use crate::ops::Target;
use crate::output::{Format, Output};
use std::path::Path;

pub fn run(
    out: &Output,
    target: &Target,
    profiles: &[String],
    nccl_log: Option<&Path>,
) -> Result<i32> {
    let root = target.root.as_path();
    let log = match nccl_log {
        // Bounded, regular files only; an invalid byte is shown as `\xNN`,
        // not a reason to refuse the whole log; lines cut at 4 KiB.
        Some(p) => Some((
            crate::host::log_text(&crate::host::read_local(
                p,
                crate::host::ReadLimit::NcclLog,
            )?),
            p.display().to_string(),
        )),
        None => None,
    };
    let composed = if profiles.is_empty() {
        None
    } else {
        Some(crate::profile::load_profiles(profiles)?)
    };
    let host = target.open()?;
    let facts = Facts::gather_with(&host, target.cpu_vendor, Depth::WithCuda);
    host.refuse_special_files()?;
    let nccl = log
        .as_ref()
        .map(|(text, name)| (text.as_str(), name.as_str()));
    let mut report = crate::checks::doctor::report(&host, &facts, composed.as_ref(), nccl)?;
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
        crate::exit::NOT_READY
    } else {
        crate::exit::OK
    })
}
