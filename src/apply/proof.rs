//! The journal proves itself before it is used (issue 37). A generation's
//! journal names its own number and directory, and every backup it lists
//! lies in that directory: two generation directories swapped, or one copied
//! over another, are refused instead of restoring the wrong generation's
//! bytes. A generation directory is a real directory, never a symlink
//! (gdrprov never makes one; one leading out of the root made `history` say
//! gdrprov had not changed the root). Generation numbers are bounded.
//! `state.json` must agree with the journal (as `journal check` compares
//! them) before `apply`, `rollback`, `recover` or `history` act on it: a
//! hand-edited state would otherwise have apply remove the user's own kernel
//! arguments on its word.

use super::journal::{generation_dir, Generation, StateStore, Status};
use crate::error::{Error, Result};
use crate::host::Host;

/// The highest generation number gdrprov reads or makes: a million applies
/// and rollbacks is far beyond any host's life; a directory named past it is
/// not one gdrprov made.
pub const MAX_GENERATION: u64 = 1_000_000;

/// Why the journal read from `generations/N` is not generation `n`'s own;
/// `None` when it is. Journals of older versions have no `directory`: their
/// number and their backups' paths are checked all the same.
pub fn identity_problem(n: u64, g: &Generation) -> Option<String> {
    let dir = generation_dir(n);
    if g.generation != n {
        return Some(format!(
            "{dir}/journal.json is the journal of generation {} (generation directories swapped, renamed or copied)",
            g.generation
        ));
    }
    if let Some(d) = g.directory.as_deref().filter(|d| *d != dir) {
        return Some(format!(
            "{dir}/journal.json says it belongs in {d} (generation directories swapped, renamed or copied)"
        ));
    }
    let own = format!("{dir}/");
    let stray = g.steps.iter().find_map(|s| {
        [s.before.as_deref(), s.after.as_deref()]
            .into_iter()
            .flatten()
            .find(|b| {
                !b.strip_prefix(&own)
                    .is_some_and(|name| !name.is_empty() && !name.contains('/'))
            })
    });
    stray
        .map(|b| format!("{dir}/journal.json names a backup {b:?} outside its own directory {dir}"))
}

/// Why generation directory `n` cannot be read as one: past the bound, or a
/// symlink. `None` when it can.
pub fn directory_problem(host: &Host, store_dir: &str, n: u64) -> Option<String> {
    if n > MAX_GENERATION {
        return Some(format!(
            "generation directory {n} is past the highest number gdrprov makes ({MAX_GENERATION})"
        ));
    }
    let path = format!("{store_dir}/{}", generation_dir(n));
    host.symlink_at(&path).map(|to| {
        format!(
            "{} is a symlink (to {to}), not a directory gdrprov made",
            host.display(&path)
        )
    })
}

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
    let check = "Run `gdrprov journal check` to see every problem";
    if !damaged.is_empty() || gens.is_empty() {
        // Owned changes without a journal that proves them: the message of
        // check_nothing_owned (what is owned, what to do).
        super::check_nothing_owned(host, store)?;
    }
    if !damaged.is_empty() {
        return Err(Error::Journal(format!(
            "{}; gdrprov will not act on a journal it cannot prove (nothing was changed). Restore {} from a backup of the host. {check}",
            damaged.join("; "),
            host.display(super::journal::DIR)
        )));
    }
    if gens
        .iter()
        .any(|g| matches!(g.status, Status::InProgress | Status::Failed))
    {
        return Ok(());
    }
    let problems = crate::checks::journal::state_problems(host, &state, &gens);
    match problems.first() {
        None => Ok(()),
        Some(p) => Err(Error::Journal(format!(
            "{}, so gdrprov will not act on it (nothing was changed): {}. {check}",
            p.message, p.fix
        ))),
    }
}
