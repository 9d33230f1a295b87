//! `gdrprov apply`: the changes, as one journal generation.

use crate::cli::ApplyArgs;
use crate::error::Result;
use crate::exit;
use crate::ops;
use crate::render::{self, Output};

pub fn run(out: &Output, a: &ApplyArgs) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, a.yes);
    let done = ops::apply(&a.request(&out.root), &mut confirm)?;
    out.report(&render::report(
        "apply",
        &done.host,
        done.names.clone(),
        &done.plan,
        done.done(),
    ));
    Ok(exit::OK)
}
