//! `gdrprov journal check`: the whole journal against the root.

use crate::error::Result;
use crate::exit;
use crate::ops::Target;
use crate::output::Output;

pub fn check(out: &Output, target: &Target) -> Result<i32> {
    let host = target.open()?;
    let report = crate::checks::journal::check(&host);
    crate::output::journal::print(out, &target.root, &report);
    Ok(if report.ok { exit::OK } else { exit::NOT_READY })
}
