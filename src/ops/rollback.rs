//! `rollback`: the files of a generation (and every later one) restored
//! byte for byte, as a journal generation of its own.

use super::apply::require_chroot_rights;
use super::{require_root, Ask, Confirm, RollbackRequest};
use crate::error::Result;
use crate::host::Host;
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::plan::Plan;

/// What a rollback came to.
#[allow(clippy::large_enum_variant)] // one per run; boxing buys nothing
pub enum RolledBack {
    /// No apply in effect: nothing was written.
    Nothing { host: Host },
    Done {
        host: Host,
        /// The profiles in effect before the rollback.
        profiles: Vec<String>,
        plan: Plan,
        outcome: crate::apply::Outcome,
    },
}

/// `rollback`: restores every file of the generation(s) byte for byte.
/// Writes nothing (not even the lock) when there is nothing to undo.
pub fn rollback(req: &RollbackRequest, confirm: Confirm) -> Result<RolledBack> {
    let host = Host::open(&req.root, req.no_exec)?;
    let store = StateStore::new(&host);
    // The journal's own files are never read or written through a link.
    crate::apply::refuse_links(&host, &crate::plan::Plan::default())?;
    // An unfinished generation first: `gdrprov recover`, never "nothing to
    // roll back" while its changes are still there.
    crate::apply::refuse_unfinished(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    if !crate::apply::any_in_effect(&store) {
        crate::apply::check_nothing_owned(&host, &store)?;
        if req.generation.is_none() {
            return Ok(RolledBack::Nothing { host });
        }
    }
    if !req.preview {
        require_root(&host, names::ROLLBACK)?;
    }
    // Planned before the lock too, so that a refused rollback (a generation
    // not in effect) writes nothing.
    let (plan, undoes) = crate::apply::plan_rollback(&host, &store, req.generation, req.force)?;
    let profiles = store.load_state()?.profiles;
    crate::apply::refuse_links(&host, &plan)?;
    confirm(&Ask {
        host: &host,
        command: names::ROLLBACK,
        profiles: &profiles,
        plan: &plan,
        question: format!("Roll back generation(s) {undoes:?}?"),
        undoes: &undoes,
    })?;
    if req.preview {
        return Err(crate::error::Error::Refused(
            "a preview of the rollback changes nothing; run it without check mode to roll back"
                .into(),
        ));
    }
    let lock = store.lock()?;
    crate::apply::refuse_unfinished_locked(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let (plan, undoes) = crate::apply::plan_rollback(&host, &store, req.generation, req.force)?;
    require_chroot_rights(&host, &plan)?;
    let profiles = store.load_state()?.profiles;
    let outcome = crate::apply::execute(&host, &store, &plan, Kind::Rollback, undoes)?;
    drop(lock);
    Ok(RolledBack::Done {
        host,
        profiles,
        plan,
        outcome,
    })
}
