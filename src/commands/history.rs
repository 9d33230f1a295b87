//! `gdrprov history`: the journal's generations: when, who, what, result.

use crate::error::Result;
use crate::exit;
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::ops::Target;
use crate::output::{Format, Output};
use std::fmt::Write as _;

/// One generation as `history` shows it.
#[derive(serde::Serialize)]
struct HistoryEntry {
    generation: u64,
    kind: Kind,
    /// RFC 3339 (UTC).
    started: String,
    /// RFC 3339 (UTC); `null` while in progress or for journals of older versions.
    finished: Option<String>,
    /// Who ran it (`SUDO_USER` or the user); `null` for journals of older versions.
    user: Option<String>,
    profiles: Vec<String>,
    /// `complete`, `in-progress`, `reverted` or `rolled-back`.
    result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    rolled_back_by: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    undoes: Vec<u64>,
    steps: usize,
}

fn history_entry(g: &crate::journal::Generation) -> HistoryEntry {
    use crate::journal::Status;
    let result = match (g.status, g.rolled_back_by) {
        (_, Some(_)) => "rolled-back",
        (Status::Complete, None) => "complete",
        (Status::InProgress, None) => "in-progress",
        (Status::Reverted, None) => "reverted",
        (Status::Failed, None) => "failed",
    };
    HistoryEntry {
        generation: g.generation,
        kind: g.kind,
        started: crate::journal::rfc3339(g.started),
        finished: g.finished.map(crate::journal::rfc3339),
        user: g.user.clone(),
        profiles: g.profiles.clone(),
        result: result.into(),
        rolled_back_by: g.rolled_back_by,
        undoes: g.undoes.clone(),
        steps: g.steps.len(),
    }
}

pub fn run(out: &Output, target: &Target) -> Result<i32> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let gens = store
        .generation_numbers()
        .into_iter()
        .map(|n| store.load_generation(n).map(|g| history_entry(&g)))
        .collect::<Result<Vec<_>>>()?;
    if let Some(n) = crate::apply::notice(&host, &store) {
        out.note(&format!("warning: {n}"));
    }
    match out.format {
        Format::Json => out.document(
            names::HISTORY,
            &target.root,
            serde_json::json!({ "generations": gens }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            let mut t = String::new();
            if gens.is_empty() {
                let _ = writeln!(
                    t,
                    "No generations: gdrprov has not changed {}.",
                    host.display("/")
                );
            }
            for g in &gens {
                let _ = writeln!(t, "{}", line(g));
            }
            out.raw(&t);
        }
    }
    Ok(exit::OK)
}

/// One generation as text: number, when, who, what, how it ended.
fn line(g: &HistoryEntry) -> String {
    let what = match g.kind {
        Kind::Apply => format!("apply {}", g.profiles.join(" + ")),
        Kind::Rollback => crate::apply::rollback_of(&g.undoes),
    };
    let result = match g.rolled_back_by {
        Some(by) => format!("rolled back by {by}"),
        None => g.result.replace('-', " "),
    };
    let until = g
        .finished
        .as_deref()
        .map(|f| format!(" to {f}"))
        .unwrap_or_default();
    format!(
        "{:>4}  {}{until}  by {}  {what}: {} step(s), {result}",
        g.generation,
        g.started,
        g.user.as_deref().unwrap_or("(unknown)"),
        g.steps
    )
}
