//! `gdrprov apply`: the changes, as one journal generation.

use crate::commands::cli::ApplyArgs;
use crate::error::Result;
use crate::exit;
use crate::ops;
use crate::output::{self, Output};

pub fn run(out: &Output, a: &ApplyArgs) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, a.yes);
    let done = ops::apply(&a.request(&out.root), &mut confirm)?;
    out.report(&output::report(
        "apply",
        &done.host,
        done.names.clone(),
        &done.plan,
        done.done(),
    ));
    Ok(exit::OK)
}
