//! `gdrprov rollback`: restore the files of a generation byte for byte.

use crate::commands::cli::RollbackArgs;
use crate::error::Result;
use crate::exit;
use crate::ops::{self, RolledBack};
use crate::output::{self, Output};
use crate::plan::Plan;

pub fn run(out: &Output, a: &RollbackArgs) -> Result<i32> {
    let mut confirm = super::ask::confirmer(out, a.yes);
    match ops::rollback(&a.request(&out.root), &mut confirm)? {
        RolledBack::Nothing { host } => {
            if out.json() {
                out.report(&output::report(
                    "rollback",
                    &host,
                    Vec::new(),
                    &Plan::default(),
                    output::Done::Nothing,
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
        } => out.report(&output::report(
            "rollback",
            &host,
            profiles,
            &plan,
            output::Done::Ran(&outcome),
        )),
    }
    Ok(exit::OK)
}
