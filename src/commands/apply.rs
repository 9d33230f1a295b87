//! `gdrprov apply`: the changes, as one journal generation.

use crate::error::Result;
use crate::exit;
use crate::ops::{self, ProfilesRequest};
use crate::output::{self, Output};

pub fn run(out: &Output, req: &ProfilesRequest, yes: bool) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, yes);
    let done = ops::apply(req, &mut confirm)?;
    report(out, "apply", &done);
    Ok(exit::OK)
}

/// What an apply did (`apply`, `commit`): the notes of a recovered run, the report.
pub fn report(out: &Output, command: &str, done: &ops::Applied) {
    for note in &done.recovered {
        out.note(&format!("recovered: {note}"));
    }
    out.report(&output::report(
        command,
        &done.host,
        done.names.clone(),
        &done.plan,
        done.done(),
    ));
}
