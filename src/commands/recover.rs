//! `gdrprov recover`: the one command for a generation left unfinished.

use crate::error::exit;
use crate::error::Result;
use crate::ops::{self, RecoverRequest};
use crate::output::Output;

pub fn run(out: &Output, req: &RecoverRequest, yes: bool) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, yes);
    let done = ops::recover(req, &mut confirm)?;
    crate::output::recover::print(out, &req.root, &done);
    Ok(exit::OK)
}
