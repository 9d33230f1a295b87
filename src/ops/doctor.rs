//! `doctor`: which profile fits this host and what stands in the way
//! (src/checks/doctor), read with the read-only probes.

use super::Target;
use crate::checks::doctor::Report;
use crate::error::Result;
use crate::facts::{Depth, Facts};
use std::path::Path;

/// What doctor found, and the facts it read (the text shows them).
pub struct Diagnosed {
    pub facts: Facts,
    pub report: Report,
}

/// `doctor [PROFILE...] [--nccl-log FILE]` on a probing target.
pub fn doctor(target: &Target, profiles: &[String], nccl_log: Option<&Path>) -> Result<Diagnosed> {
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
    let given = composed.as_ref().map(|c| (c, profiles));
    let report = crate::checks::doctor::report(&host, &facts, given, nccl)?;
    Ok(Diagnosed { facts, report })
}
