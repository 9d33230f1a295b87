//! `recover`: the one operation for a generation left unfinished (killed, a
//! power loss, a failed run whose restore failed too). Its files go back to
//! their verified backups (`apply::undo_unfinished`, the one place that does
//! it); then an interrupted rollback is rolled back again and an interrupted
//! commit applied again, so that both end as if never interrupted. An
//! interrupted apply stays undone: the operator applies again.

use super::apply::{check_boot_elsewhere, require_chroot_rights};
use super::{load_profiles, make_plan, require_root};
use super::{Ask, Confirm, Target};
use crate::apply::{self, Completed, Recovered};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::{Generation, Kind, StateStore};
use crate::names;
use std::path::PathBuf;

#[derive(Debug, Clone)]
pub struct RecoverRequest {
    pub root: PathBuf,
    /// Run no command (regeneration is left pending, as apply's --no-exec).
    pub no_exec: bool,
}

/// `recover`: asks first (`confirm` sees the files to put back), takes the
/// lock, puts back every unfinished generation, completes a rollback or
/// commit.
pub fn recover(req: &RecoverRequest, confirm: Confirm) -> Result<Recovered> {
    let host = Host::open(&req.root, req.no_exec)?;
    let store = StateStore::new(&host);
    // The journal's own files are never read or written through a link.
    apply::refuse_links(&host, &crate::plan::Plan::default())?;
    let gens = apply::unfinished(&store);
    if gens.is_empty() {
        // A journal that cannot be read may be one left unfinished: never
        // "nothing to recover" then.
        let damaged: Vec<String> = store
            .generation_dirs()
            .into_iter()
            .filter_map(|n| store.load_generation(n).err().map(|e| e.to_string()))
            .collect();
        if !damaged.is_empty() {
            return Err(Error::Journal(format!(
                "{}; gdrprov cannot tell whether that run finished, so it recovers nothing (nothing was changed). Run {} to see what is wrong, and restore {} from a backup of the host",
                damaged.join("; "),
                crate::suggest::Suggest::new(crate::names::JOURNAL_CHECK).shown(&crate::suggest::Given::none()),
                host.display(crate::journal::DIR)
            )));
        }
        // Nothing unfinished: "the host is as it was" only if the state
        // agrees with the journal.
        crate::checks::proof::refuse_unproven(&host, &store)?;
        return Ok(Recovered::Nothing { host });
    }
    if let Some(holder) = store.lock_holder() {
        return Err(Error::Locked {
            path: host.display(&format!("{}/lock", crate::journal::DIR)),
            holder,
        });
    }
    require_root(&host, names::RECOVER)?;
    let restored = apply::recovery_plan(&host, &store, &gens)?;
    let then = match gens.as_slice() {
        [g] => then_what(g),
        _ => String::new(),
    };
    let names: Vec<String> = gens
        .iter()
        .map(|g| format!("{} ({})", g.generation, apply::what_generation(g)))
        .collect();
    let profiles: Vec<String> = gens.iter().flat_map(|g| g.profiles.clone()).collect();
    confirm(&Ask {
        host: &host,
        command: names::RECOVER,
        profiles: &profiles,
        plan: &restored,
        question: format!(
            "Put back the files of unfinished generation(s) {}{then}?",
            names.join(", ")
        ),
        undoes: &[],
    })?;
    apply::refuse_links(&host, &restored)?;
    let lock = store.lock()?;
    let undone = apply::undo_unfinished(&host, &store)?;
    let notes = undone.iter().flat_map(|u| u.notes.clone()).collect();
    let completed = match undone.as_slice() {
        [one] => complete(&host, &store, &one.generation, req).map_err(|e| {
            // The files are back: say so, and how to finish by hand.
            Error::Refused(format!(
                "generation {} ({}) was put back, but carrying it out again failed: {e}. The host is as it was before that generation; run `gdrprov {}` again once the cause is fixed",
                one.generation.generation,
                apply::what_generation(&one.generation),
                if one.generation.kind == Kind::Rollback { names::ROLLBACK } else { names::COMMIT }
            ))
        })?,
        _ => None,
    };
    drop(lock);
    Ok(Recovered::Done {
        host,
        generations: gens,
        restored,
        notes,
        completed,
    })
}

/// The question's tail: what follows the restore.
fn then_what(g: &Generation) -> String {
    if g.kind == Kind::Rollback {
        ", then roll back again what it was rolling back".into()
    } else if g.command.as_deref() == Some(names::COMMIT) {
        ", then commit the trial boot again".into()
    } else {
        String::new()
    }
}

/// Carries out again the rollback or commit that `g` was.
fn complete(
    host: &Host,
    store: &StateStore,
    g: &Generation,
    req: &RecoverRequest,
) -> Result<Option<Completed>> {
    if g.kind == Kind::Rollback {
        let Some(first) = g.undoes.iter().min().copied() else {
            return Ok(None);
        };
        // The files are as they were when that rollback started (it was
        // allowed then): nothing since has edited them.
        let (plan, undoes) = apply::plan_rollback(host, store, Some(first), true)?;
        require_chroot_rights(host, &plan)?;
        let profiles = store.load_state()?.profiles;
        let outcome = apply::execute(host, store, &plan, Kind::Rollback, undoes)?;
        return Ok(Some(Completed {
            command: names::ROLLBACK,
            profiles,
            plan,
            outcome: Some(outcome),
        }));
    }
    if g.command.as_deref() != Some(names::COMMIT) {
        return Ok(None);
    }
    // The commit had checked that the trial entry runs; that decision stands.
    let Some(trial) = store.load_state()?.trial else {
        return Ok(None);
    };
    let desired = load_profiles(&trial.profiles)?;
    let target = Target {
        root: req.root.clone(),
        no_exec: req.no_exec,
        cpu_vendor: None,
        no_reboot: false,
        force: false,
        arch: None,
        boot_elsewhere: false,
    };
    let plan = make_plan(host, &desired, &target, None)?;
    check_boot_elsewhere(&plan, &target)?;
    require_chroot_rights(host, &plan)?;
    let outcome = if plan.is_empty() {
        None
    } else {
        Some(apply::execute_as(
            host,
            store,
            &plan,
            Kind::Apply,
            Vec::new(),
            Some(names::COMMIT),
        )?)
    };
    Ok(Some(Completed {
        command: names::COMMIT,
        profiles: desired.names,
        plan,
        outcome,
    }))
}
