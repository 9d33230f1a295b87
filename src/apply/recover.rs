//! Generations left unfinished: killed, cut by a power loss, or failed with
//! a restore that failed too. Every command that reads the journal names them
//! ([`notice`], [`refuse_unfinished`]) and prints one fix, `gdrprov recover`;
//! [`undo_unfinished`] is the one place that puts their files back (the
//! `recover` operation, src/ops.rs, then completes an interrupted rollback or
//! commit).

use super::revert::{check_backups, regen_note, revert};
use super::Outcome;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::journal_path;
use crate::journal::{self, Generation, Kind, StateStore, Status};
use crate::names;
use crate::plan::{Action, Change, Plan};
use crate::suggest::{Given, Suggest};

/// The generations left in progress or failed, oldest first. A journal that
/// cannot be read is not one of them (`gdrprov journal check` names it).
pub fn unfinished(store: &StateStore) -> Vec<Generation> {
    store
        .generation_numbers()
        .into_iter()
        .filter_map(|n| store.load_generation(n).ok())
        .filter(|g| matches!(g.status, Status::InProgress | Status::Failed))
        .collect()
}

/// `gdrprov recover`, with `--root DIR` when the root is not `/`.
pub fn recover_command(host: &Host) -> String {
    let root = if host.is_live() {
        std::path::Path::new("/")
    } else {
        host.root()
    };
    Suggest::new(names::RECOVER).line(&Given::new(root, false))
}

/// A rollback, for people: `rollback of 3, 2` (the generations it undid).
pub fn rollback_of(undoes: &[u64]) -> String {
    let undone: Vec<String> = undoes.iter().map(u64::to_string).collect();
    format!("rollback of {}", undone.join(", "))
}

/// What a generation was, for people: `apply of rdma-dmabuf`, `rollback of
/// 1`, `commit of the trial boot (rdma-dmabuf)`.
pub fn what_generation(g: &Generation) -> String {
    match (g.kind, g.command.as_deref()) {
        (_, Some(names::COMMIT)) => {
            format!("commit of the trial boot ({})", g.profiles.join(" + "))
        }
        (Kind::Rollback, _) => rollback_of(&g.undoes),
        (Kind::Apply, _) => format!("apply of {}", g.profiles.join(" + ")),
    }
}

/// What `recover` does with it: undo an apply, complete a rollback or commit.
fn remedy(g: &Generation) -> &'static str {
    match (g.kind, g.command.as_deref()) {
        (_, Some(names::COMMIT)) | (Kind::Rollback, _) => "complete it",
        (Kind::Apply, _) => "put back every file it changed",
    }
}

/// One line naming an unfinished generation and the fix.
fn describe(host: &Host, g: &Generation) -> String {
    let how = match g.status {
        Status::Failed => "failed and putting its files back failed too",
        _ => "was interrupted (killed or a power loss) before it finished",
    };
    format!(
        "generation {} ({}, started {}) {how}, so files it changed may still be changed; run `{}` to {}",
        g.generation,
        what_generation(g),
        journal::rfc3339(g.started),
        recover_command(host),
        remedy(g)
    )
}

/// The unfinished generations no gdrprov is writing now: `Err(holder)` while
/// another run holds the lock. A run in progress holds the lock for as long
/// as its generation is in progress, so one seen in progress both before and
/// after the lock was found free was left so (it did not just finish).
fn settled(store: &StateStore) -> std::result::Result<Vec<Generation>, String> {
    let before = unfinished(store);
    if before.is_empty() {
        return Ok(before);
    }
    if let Some(holder) = store.lock_holder() {
        return Err(holder);
    }
    Ok(unfinished(store)
        .into_iter()
        .filter(|g| {
            before
                .iter()
                .any(|b| b.generation == g.generation && b.status == g.status)
        })
        .collect())
}

/// For commands that only read: a warning naming each unfinished generation
/// and `gdrprov recover`, or `None` when there is none. A generation being
/// written right now by another gdrprov (it holds the lock) is not one.
pub fn notice(host: &Host, store: &StateStore) -> Option<String> {
    let gens = settled(store).ok()?;
    if gens.is_empty() {
        return None;
    }
    Some(
        gens.iter()
            .map(|g| describe(host, g))
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// For commands that change the root: refused while a generation is
/// unfinished (its files may be half-changed), naming it and the fix; a
/// generation another gdrprov is writing now is reported as the lock.
pub fn refuse_unfinished(host: &Host, store: &StateStore) -> Result<()> {
    let gens = settled(store).map_err(|holder| Error::Locked {
        path: host.display(&format!("{}/lock", journal::DIR)),
        holder,
    })?;
    refuse(host, &gens)
}

/// [`refuse_unfinished`] for a caller that holds the lock itself: every
/// unfinished generation is one left so.
pub fn refuse_unfinished_locked(host: &Host, store: &StateStore) -> Result<()> {
    refuse(host, &unfinished(store))
}

fn refuse(host: &Host, gens: &[Generation]) -> Result<()> {
    if gens.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = gens.iter().map(|g| describe(host, g)).collect();
    Err(Error::Journal(format!(
        "{} (nothing was changed)",
        lines.join("; ")
    )))
}

/// Whether an apply is in effect (complete and not rolled back).
pub fn any_in_effect(store: &StateStore) -> bool {
    store.generation_numbers().into_iter().any(|n| {
        store.load_generation(n).is_ok_and(|g| {
            g.kind == Kind::Apply && g.status == Status::Complete && g.rolled_back_by.is_none()
        })
    })
}

/// With no apply in effect and none interrupted, the state file must own
/// nothing: owned files or kernel arguments with no journal left to undo
/// them mean the journal was deleted or damaged, and "nothing to roll back"
/// would be a lie.
pub fn check_nothing_owned(host: &Host, store: &StateStore) -> Result<()> {
    let state = store.load_state()?;
    let mut owned: Vec<String> = state.files.keys().map(|p| host.display(p)).collect();
    if !state.kernel_args.is_empty() {
        owned.push(format!("kernel arguments {}", state.kernel_args.join(" ")));
    }
    if !state.nccl_keys.is_empty() {
        owned.push(format!(
            "{} keys {}",
            host.display("/etc/nccl.conf"),
            state.nccl_keys.join(", ")
        ));
    }
    if owned.is_empty() {
        return Ok(());
    }
    let damaged: Vec<String> = store
        .generation_numbers()
        .into_iter()
        .filter_map(|n| store.load_generation(n).err().map(|e| e.to_string()))
        .collect();
    let why = if damaged.is_empty() {
        format!(
            "no journal of the apply that made them is left under {} (deleted?)",
            host.display(&format!("{}/generations", journal::DIR))
        )
    } else {
        format!("the journal cannot be read ({})", damaged.join("; "))
    };
    Err(Error::Journal(format!(
        "{} says gdrprov owns changes on this root ({}), but {why}, so gdrprov cannot undo them (nothing was changed). \
         Restore {} from a backup of the host; or put those files back by hand, then remove {} to start over",
        host.display(&format!("{}/state.json", journal::DIR)),
        owned.join(", "),
        host.display(journal::DIR),
        host.display(journal::DIR),
    )))
}

/// What putting back an unfinished generation did, and what is left for
/// `recover` to complete.
pub struct Undone {
    pub generation: Generation,
    pub notes: Vec<String>,
}

/// The plan `recover` shows before it acts: every file of the unfinished
/// generations back to its verified backup (newest generation first), each
/// a diff. Reads the backups (checksums checked); writes nothing.
pub fn recovery_plan(host: &Host, store: &StateStore, gens: &[Generation]) -> Result<Plan> {
    let mut changes: Vec<Change> = Vec::new();
    let mut notes = Vec::new();
    for g in gens.iter().rev() {
        notes.extend(journal::restore_notes(host, g));
        for (i, step) in g.steps.iter().enumerate().rev() {
            let Some(path) = &step.path else { continue };
            journal_path(path)?;
            let current = host.read_text(path).ok().flatten();
            let before = match &step.before {
                Some(rel) => Some(store.read_backup(rel)?),
                None => None,
            };
            changes.retain(|c| c.path() != Some(path.as_str()));
            let description = format!(
                "Put back {path} as it was before generation {}",
                g.generation
            );
            let action = match before {
                Some(after) => Action::WriteFile {
                    path: path.clone(),
                    before: current,
                    after,
                    new_mode: 0o644,
                    meta: journal::restore_meta(host, g.generation, i, step)?,
                },
                None => Action::RemoveFile {
                    path: path.clone(),
                    before: current.unwrap_or_default(),
                },
            };
            changes.push(Change {
                module: "recover".into(),
                description,
                action,
                reboot: None,
            });
        }
    }
    // A file already as its backup says needs nothing.
    changes.retain(|c| match &c.action {
        Action::WriteFile { before, after, .. } => before.as_deref() != Some(after.as_str()),
        Action::RemoveFile { path, .. } => host.exists(path),
        Action::Run { .. } => true,
    });
    Ok(Plan {
        changes,
        warnings: notes,
        ..Plan::default()
    })
}

/// Puts back every file of each unfinished generation (newest first): its
/// backups checked first, its regeneration commands run again, the state
/// before it restored, leftovers of a killed write removed; marks it
/// reverted. Called under the lock. A restore that fails marks the
/// generation failed and names the fix.
pub fn undo_unfinished(host: &Host, store: &StateStore) -> Result<Vec<Undone>> {
    let mut done = Vec::new();
    for mut g in unfinished(store).into_iter().rev() {
        let n = g.generation;
        // Every backup checked against its checksum before the space set
        // aside is freed or any file is put back.
        check_backups(store, &g.steps)?;
        let _ = store.release_reserve(n);
        // What a kill during a write leaves first: its temporary file beside
        // the target (in a directory the step may have made); then the
        // revert puts files back and removes the directories the steps
        // made, which the temporary file would keep (issue 37: a kill in a
        // file step left `etc/modprobe.d` behind).
        let mut leftovers = Vec::new();
        for path in g.steps.iter().filter_map(|s| s.path.as_deref()) {
            journal_path(path)?;
            leftovers.extend(host.remove_leftover_temps(path)?);
        }
        leftovers.sort();
        leftovers.dedup();
        // Said before the revert: what it leaves as it is.
        let kept = journal::restore_notes(host, &g);
        let r = match revert(host, store, &mut g) {
            Ok(r) => r,
            Err(e) => {
                g.status = Status::Failed;
                let _ = store.save_generation(&g);
                return Err(Error::Journal(format!(
                    "putting back the files of generation {n} ({}) failed: {e}. Fix that cause, then run `{}` again (what was put back stays put back)",
                    what_generation(&g),
                    recover_command(host)
                )));
            }
        };
        if g.kind == Kind::Rollback {
            // What it had marked as undone is in effect again (its files are back).
            super::mark_rolled_back(store, &g.undoes, n, false)?;
        }
        let mut state = g.state_before.clone();
        for cmd in &r.skipped {
            if !state.pending_commands.contains(cmd) {
                state.pending_commands.push(cmd.clone());
            }
        }
        store.save_state(&state)?;
        let mut notes = vec![format!(
            "generation {n} ({}) was not finished; every file it touched was put back as it was before it{}",
            what_generation(&g),
            regen_note(&r)
        )];
        if !leftovers.is_empty() {
            notes.push(format!(
                "removed what the interrupted write left behind: {}",
                leftovers.join(", ")
            ));
        }
        notes.extend(kept);
        done.push(Undone {
            generation: g,
            notes,
        });
    }
    Ok(done)
}

/// What `recover` did.
#[allow(clippy::large_enum_variant)] // one per run; boxing buys nothing
pub enum Recovered {
    /// No generation is unfinished: nothing was written.
    Nothing { host: Host },
    Done {
        host: Host,
        /// The generations put back, as they were when found.
        generations: Vec<Generation>,
        /// The files put back (each a change, with its diff).
        restored: Plan,
        notes: Vec<String>,
        /// The interrupted rollback or commit, carried out again.
        completed: Option<Completed>,
    },
}

/// A rollback or commit that `recover` completed.
pub struct Completed {
    /// `rollback` or `commit`.
    pub command: &'static str,
    pub profiles: Vec<String>,
    pub plan: Plan,
    /// `None` when there was nothing left to write.
    pub outcome: Option<Outcome>,
}
