//! `history` and `journal check`: the journal read back, changing nothing.

use super::Target;
use crate::error::Result;
use crate::host::Host;
use crate::journal::{Generation, Kind, StateStore, Status};

/// One generation as `history` shows it.
#[derive(serde::Serialize)]
pub struct HistoryEntry {
    pub generation: u64,
    pub kind: Kind,
    /// RFC 3339 (UTC).
    pub started: String,
    /// RFC 3339 (UTC); `null` while in progress or for journals of older versions.
    pub finished: Option<String>,
    /// Who ran it (`SUDO_USER` or the user); `null` for journals of older versions.
    pub user: Option<String>,
    pub profiles: Vec<String>,
    /// `complete`, `in-progress`, `reverted` or `rolled-back`.
    pub result: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back_by: Option<u64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undoes: Vec<u64>,
    pub steps: usize,
    /// What it did, in words (`apply a + b`, `rollback of 3`): for the text.
    #[serde(skip)]
    pub what: String,
}

fn history_entry(g: &Generation) -> HistoryEntry {
    let result = match (g.status, g.rolled_back_by) {
        (_, Some(_)) => "rolled-back",
        (Status::Complete, None) => "complete",
        (Status::InProgress, None) => "in-progress",
        (Status::Reverted, None) => "reverted",
        (Status::Failed, None) => "failed",
    };
    let what = match g.kind {
        Kind::Apply => format!("apply {}", g.profiles.join(" + ")),
        Kind::Rollback => crate::apply::rollback_of(&g.undoes),
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
        what,
    }
}

/// The journal's generations, oldest first.
pub struct History {
    pub host: Host,
    pub generations: Vec<HistoryEntry>,
    /// A generation left unfinished, named with its fix.
    pub unfinished: Option<String>,
}

/// `history`: every generation: when, who, what, result.
pub fn history(target: &Target) -> Result<History> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let generations = store
        .generation_numbers()
        .into_iter()
        .map(|n| store.load_generation(n).map(|g| history_entry(&g)))
        .collect::<Result<Vec<_>>>()?;
    let unfinished = crate::apply::notice(&host, &store);
    Ok(History {
        host,
        generations,
        unfinished,
    })
}

/// `journal check`: the whole journal against the root.
pub fn journal_check(target: &Target) -> Result<crate::checks::journal::Report> {
    let host = target.open()?;
    Ok(crate::checks::journal::check(&host))
}
