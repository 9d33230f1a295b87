//! `gdrprov plan` (and `apply --dry-run`): every change, changing nothing.

use crate::error::exit;
use crate::error::Result;
use crate::names;
use crate::ops::{self, Target};
use crate::output::{self, Output};

pub fn run(
    out: &Output,
    target: &Target,
    profiles: &[String],
    detailed: bool,
    trial: bool,
) -> Result<i32> {
    let planned = ops::plan(&ops::ProfilesRequest {
        profiles: profiles.to_vec(),
        target: target.clone(),
        trial,
    })?;
    out.report(output::report(
        names::PLAN,
        &planned.host,
        planned.names.clone(),
        &planned.plan,
        output::Done::Planned,
    ));
    // Commands owed by an earlier --no-exec apply are pending changes too:
    // the host does not match until they run (docs/commands.md).
    // Only the command line, set outside this host, is owed: exit 4.
    let boot_owed = planned
        .plan
        .boot_elsewhere
        .as_ref()
        .is_some_and(|b| b.satisfied != Some(true));
    Ok(if detailed && planned.pending() {
        exit::CHANGES
    } else if detailed && boot_owed {
        exit::BOOT_ELSEWHERE
    } else {
        exit::OK
    })
}
