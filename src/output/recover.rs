//! What `gdrprov recover` prints: the generations it found unfinished, the
//! files it put back, the rollback or commit it completed, and what is left
//! to do (an undone apply is applied again by its operator).

use super::{report, Done, Output, Report};
use crate::apply::Recovered;
use crate::journal::{Generation, Kind, Status};
use crate::names;
use crate::suggest::{Given, Suggest};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One unfinished generation as `recover` found it.
#[derive(Debug, Serialize)]
struct Found {
    generation: u64,
    kind: Kind,
    /// `commit` for a trial boot's commit; absent for plain apply/rollback.
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    /// `in-progress` (killed, power loss) or `failed` (its restore failed).
    status: Status,
    what: String,
}

#[derive(Serialize)]
struct Body<'a> {
    changed: bool,
    generations: Vec<Found>,
    /// The files put back, each with its diff (from what was found to the backup).
    restored: Vec<super::ChangeOut>,
    notes: &'a [String],
    /// The rollback or commit carried out again, as its own report.
    completed: Option<Report<'a>>,
    /// What is left for the operator: apply again after an undone apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<String>,
}

/// "Put back N file(s) of generation(s) ...: PATHS", the text report's first line.
fn put_back_line(found: &[Found], changes: &[super::ChangeOut]) -> String {
    let mut t = String::new();
    let paths: Vec<&str> = changes.iter().filter_map(|c| c.path.as_deref()).collect();
    let _ = writeln!(
        t,
        "Put back {} file(s) of generation(s) {}{}{}",
        paths.len(),
        found
            .iter()
            .map(|f| format!("{} ({})", f.generation, f.what))
            .collect::<Vec<_>>()
            .join(", "),
        if paths.is_empty() { "" } else { ": " },
        paths.join(", ")
    );
    t
}

/// Prints what `recover` did, as text or JSON.
pub fn print(out: &Output, root: &Path, r: &Recovered) {
    let (host, gens, restored, notes, completed) = match r {
        Recovered::Nothing { host } => {
            if out.json() {
                out.document(
                    names::RECOVER,
                    root,
                    serde_json::json!({"changed": false, "generations": [], "restored": [], "notes": [], "completed": null}),
                );
            } else {
                out.raw(&format!(
                    "Nothing to recover: no generation in the journal of {} is unfinished.\n",
                    host.root().display()
                ));
            }
            return;
        }
        Recovered::Done {
            host,
            generations,
            restored,
            notes,
            completed,
        } => (host, generations, restored, notes, completed),
    };
    let found: Vec<Found> = gens.iter().map(found).collect();
    let completed_report = completed.as_ref().map(|c| {
        report(
            c.command,
            host,
            c.profiles.clone(),
            &c.plan,
            c.outcome.as_ref().map_or(Done::Nothing, Done::Ran),
        )
    });
    let next = next_step(gens, completed.is_some(), &out.given(root));
    let restored_report = report(names::RECOVER, host, Vec::new(), restored, Done::Planned);
    if out.json() {
        out.document(
            names::RECOVER,
            root,
            Body {
                changed: true,
                generations: found,
                restored: restored_report.changes,
                notes,
                completed: completed_report,
                next,
            },
        );
        return;
    }
    for note in notes {
        out.note(&format!("recovered: {note}"));
    }
    let t = put_back_line(&found, &restored_report.changes);
    out.text(root, &t);
    if let Some(c) = completed_report {
        out.raw(&format!("\nCompleted the interrupted {}:\n", c.command));
        out.report(c);
    }
    if let Some(n) = &next {
        out.text(root, &format!("{n}\n"));
    }
}

fn found(g: &Generation) -> Found {
    Found {
        generation: g.generation,
        kind: g.kind,
        command: g.command.clone(),
        status: g.status,
        what: crate::apply::what_generation(g),
    }
}

/// What the operator does next: an undone apply is applied again.
fn next_step(gens: &[Generation], completed: bool, given: &Given) -> Option<String> {
    if completed {
        return None;
    }
    let applies: Vec<&Generation> = gens.iter().filter(|g| g.kind == Kind::Apply).collect();
    let last = applies.last()?;
    // The journal names a profile file by its `name:`, not its path: such
    // a profile is PROFILE for the user to fill.
    let (named, files) =
        crate::suggest::recorded_profiles(&last.profiles, &crate::profile::builtin::names());
    Some(format!(
        "The host is as it was before generation {}; to make its changes, apply again: {}{files}",
        last.generation,
        Suggest::new(names::APPLY).profiles(&named).shown(given)
    ))
}
