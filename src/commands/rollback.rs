//! `gdrprov rollback`: restore the files of a generation byte for byte.

use crate::error::exit;
use crate::error::Result;
use crate::names;
use crate::ops::{self, RollbackRequest, RolledBack};
use crate::output::{self, Output};

pub fn run(out: &Output, req: &RollbackRequest, yes: bool) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, yes);
    match ops::rollback(req, &mut confirm)? {
        RolledBack::Nothing { host } => {
            if out.json() {
                out.report(output::report(
                    names::ROLLBACK,
                    &host,
                    Vec::new(),
                    &Default::default(),
                    output::Done::Nothing,
                ));
            } else {
                out.raw(&format!(
                    "Nothing to roll back: no apply of gdrprov is in effect on {}.\n",
                    host.root().display()
                ));
            }
        }
        RolledBack::Done {
            host,
            profiles,
            plan,
            outcome,
        } => out.report(output::report(
            names::ROLLBACK,
            &host,
            profiles,
            &plan,
            output::Done::Ran(&outcome),
        )),
    }
    Ok(exit::OK)
}
