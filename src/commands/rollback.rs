//! `gdrprov rollback`: restore the files of a generation byte for byte.

use crate::cli::RollbackArgs;
use crate::error::Result;
use crate::exit;
use crate::ops::{self, RolledBack};
use crate::plan::Plan;
use crate::render::{self, Output};

pub fn run(out: &Output, a: &RollbackArgs) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, a.yes);
    match ops::rollback(&a.request(&out.root), &mut confirm)? {
        RolledBack::Nothing { host } => {
            if out.json() {
                out.report(&render::report(
                    "rollback",
                    &host,
                    Vec::new(),
                    &Plan::default(),
                    render::Done::Nothing,
                ));
            } else {
                println!(
                    "Nothing to roll back: no apply of gdrprov is in effect on {}.",
                    host.root().display()
                );
            }
        }
        RolledBack::Recovered { notes, .. } => {
            for note in &notes {
                eprintln!("gdrprov: recovered: {note}");
            }
            if out.json() {
                out.document(
                    "rollback",
                    serde_json::json!({"changed": true, "recovered": notes}),
                );
            }
        }
        RolledBack::Done {
            host,
            profiles,
            plan,
            outcome,
        } => out.report(&render::report(
            "rollback",
            &host,
            profiles,
            &plan,
            render::Done::Ran(&outcome),
        )),
    }
    Ok(exit::OK)
}
