//! `state.json` checked against the journal before `apply`, `rollback`,
//! `commit`, `boot`, `recover` or `history` act on it (issue 37; the same
//! comparison `journal check` makes): a hand-edited state would otherwise
//! have apply remove the user's own kernel arguments on its word. A journal
//! that cannot be read or proven (`crate::journal_proof`) stops them too.

use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::{StateStore, Status};

/// Refuses when the journal cannot prove what `state.json` says: a journal
/// that cannot be read or is not its generation's own, or a state that does
/// not agree with the settled journal. Nothing is changed; the message names
/// the problem, the fix and `gdrprov journal check`. Unfinished generations
/// are left to `recover` (the state is then the one before them).
pub fn refuse_unproven(host: &Host, store: &StateStore) -> Result<()> {
    let state = store.load_state()?;
    let mut gens = Vec::new();
    let mut damaged = Vec::new();
    for n in store.generation_numbers() {
        match store.load_generation(n) {
            Ok(g) => gens.push(g),
            Err(e) => damaged.push(e.to_string()),
        }
    }
    let check = format!(
        "Run {} to see every problem",
        crate::suggest::Suggest::new(crate::names::JOURNAL_CHECK)
            .shown(&crate::suggest::Given::none())
    );
    if !damaged.is_empty() || gens.is_empty() {
        // Owned changes without a journal that proves them: the message of
        // check_nothing_owned (what is owned, what to do).
        crate::apply::check_nothing_owned(host, store)?;
    }
    if !damaged.is_empty() {
        return Err(Error::Journal(format!(
            "{}; gdrprov will not act on a journal it cannot prove (nothing was changed). Restore {} from a backup of the host. {check}",
            damaged.join("; "),
            host.display(crate::journal::DIR)
        )));
    }
    if gens
        .iter()
        .any(|g| matches!(g.status, Status::InProgress | Status::Failed))
    {
        return Ok(());
    }
    let problems = super::journal::state_problems(host, &state, &gens);
    match problems.first() {
        None => Ok(()),
        Some(p) => Err(Error::Journal(format!(
            "{}, so gdrprov will not act on it (nothing was changed): {}. {check}",
            p.message, p.fix
        ))),
    }
}
