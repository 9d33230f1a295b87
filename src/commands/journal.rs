//! `gdrprov journal check`: the whole journal against the root.

use crate::error::exit;
use crate::error::Result;
use crate::ops::{self, Target};
use crate::output::Output;

pub fn check(out: &Output, target: &Target) -> Result<i32> {
    let report = ops::journal_check(target)?;
    crate::output::journal::print(out, &target.root, &report);
    Ok(if report.ok { exit::OK } else { exit::NOT_READY })
}
