//! `gdrprov apply`: the changes, as one journal generation.

use crate::error::exit;
use crate::error::Result;
use crate::names;
use crate::ops::{self, ProfilesRequest};
use crate::output::{self, Output};

pub fn run(out: &Output, req: &ProfilesRequest, yes: bool) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, yes);
    let done = ops::apply(req, &mut confirm)?;
    report(out, names::APPLY, &done);
    Ok(exit::OK)
}

/// What an apply did (`apply`, `commit`): the report.
pub fn report(out: &Output, command: &str, done: &ops::Applied) {
    out.report(output::report(
        command,
        &done.host,
        done.names.clone(),
        &done.plan,
        done.done(),
    ));
}
