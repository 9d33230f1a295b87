//! Carrying out a plan. Every run that changes anything is a journal
//! generation: backups of every file are on disk (fsynced) before the first
//! write, each step is marked done as it completes, and a failure puts back
//! every file already written. A run killed half-way is finished the same way
//! by the next run (`recover`), so a host is never left half-configured.

mod durable;
mod generation;
mod hold;
mod recover;
mod revert;
mod step;

pub use durable::make_boot_durable;
use revert::{regen_note, release_held, revert};

use crate::error::{Error, Result};
use crate::host::{CommandSpec, Durable, Host};
use crate::journal::{self, Generation, Kind, StateStore, Status, Step};
pub use crate::plan::rollback::plan_rollback;
use crate::plan::{Action, Change, Plan};
pub use recover::{
    any_in_effect, check_nothing_owned, notice, recover_command, recovery_plan, refuse_unfinished,
    refuse_unfinished_locked, rollback_of, undo_unfinished, unfinished, what_generation, Completed,
    Recovered, Undone,
};

/// What an apply or rollback did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub generation: u64,
    pub changed: usize,
    pub commands_run: Vec<CommandSpec>,
    pub pending_commands: Vec<CommandSpec>,
    /// Messages from recovering an interrupted earlier run.
    pub recovered: Vec<String>,
    /// The filesystems holding boot-loader files this run wrote, and how
    /// each was made durable where the boot loader reads it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub durable: Vec<Durable>,
}

/// Test-only fault injection (documented in the README): abort the process
/// right after step N of an apply, as a crash would; 0: while its generation
/// is being made (backups and journal written, not yet published).
const FAULT_ENV: &str = "GDRPROV_FAULT_AFTER_STEP";

/// Test-only fault injection at a named point between two steps of the
/// journal (documented beside `GDRPROV_FAULT_AFTER_STEP`): the process aborts
/// there, as a kill would. `rollback-marked`: a rollback has marked the
/// generations it undoes and not yet removed the directories they made.
const FAULT_AT_ENV: &str = "GDRPROV_FAULT_AT";

/// Aborts the process when [`FAULT_AT_ENV`] names `point`.
fn fault_at(point: &str) {
    if std::env::var(FAULT_AT_ENV).is_ok_and(|v| v == point) {
        std::process::abort();
    }
}

pub fn execute(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    kind: Kind,
    undoes: Vec<u64>,
) -> Result<Outcome> {
    execute_as(host, store, plan, kind, undoes, None)
}

/// [`execute`], the generation labelled with the command that made it
/// (`commit`) when that is not plain apply or rollback.
pub fn execute_as(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    kind: Kind,
    undoes: Vec<u64>,
    command: Option<&str>,
) -> Result<Outcome> {
    refuse_links(host, plan)?;
    let mut generation = generation::begin(host, store, plan, kind, undoes, command)?;
    let n = generation.generation;
    let mut done = Done::default();
    if let Err(e) = run_steps(host, store, plan, &mut generation, &mut done) {
        return Err(put_back(host, store, &mut generation, done.state_saved, e));
    }
    let _ = store.release_reserve(n);
    Ok(Outcome {
        generation: n,
        changed: plan.changes.iter().filter(|c| c.path().is_some()).count(),
        commands_run: done.commands_run,
        pending_commands: plan.pending_commands.clone(),
        recovered: Vec::new(),
        durable: done.durable,
    })
}

/// What a run has done so far.
#[derive(Default)]
struct Done {
    commands_run: Vec<CommandSpec>,
    durable: Vec<Durable>,
    /// Whether state.json holds the run's state (a revert puts the old back).
    state_saved: bool,
}

/// Runs the steps of a published generation, each marked done as it
/// completes, then makes what the boot loader reads durable and marks the
/// generation complete. Every failure here, of a step or of the journal
/// write after it (a full disk), is the caller's to put back.
fn run_steps(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    generation: &mut Generation,
    done: &mut Done,
) -> Result<()> {
    let fault_after: Option<usize> = std::env::var(FAULT_ENV).ok().and_then(|v| v.parse().ok());
    let n = generation.generation;
    for i in 0..generation.steps.len() {
        let ran = step::run_step(host, &plan.changes[i])?;
        done.commands_run.extend(ran);
        generation.steps[i].done = true;
        store.save_generation(generation)?;
        if fault_after == Some(i + 1) {
            std::process::abort();
        }
    }
    refresh_after_copies(host, store, generation)?;
    // What the boot loader reads is on disk before "complete" and success are reported.
    if let Some(paths) = boot_touched(&generation.steps) {
        done.durable = durable::make_boot_durable(host, &paths)?;
    }
    // The switch is durable: the held copies of the old initramfs go.
    release_held(host, &generation.steps)?;
    // A rollback marks what it undid before it calls itself complete: a
    // kill between the two must leave an unfinished rollback (which
    // `recover` reverts, unmarking them), never a complete one beside
    // applies still "in effect" that state.json no longer owns.
    if generation.kind == Kind::Rollback {
        mark_rolled_back(store, &generation.undoes, n, true)?;
        // And removes the directories they made, for the same reason: a
        // kill after "complete" would leave them for good. (A revert of
        // this rollback writes their files back, directories made anew.)
        remove_undone_dirs(host, store, &generation.undoes)?;
    }
    store.save_state(&generation.state_after)?;
    done.state_saved = true;
    generation.status = Status::Complete;
    generation.finished = Some(journal::now());
    store.save_generation(generation)
}

/// After a failed run: every file put back, the generation marked reverted
/// (or failed, when putting back failed too); the error to report.
fn put_back(
    host: &Host,
    store: &StateStore,
    generation: &mut Generation,
    state_saved: bool,
    e: Error,
) -> Error {
    let n = generation.generation;
    // Free the reserve first: putting files back needs that space.
    let _ = store.release_reserve(n);
    let reverted = revert(host, store, generation).and_then(|r| {
        if state_saved {
            store.save_state(&generation.state_before)?;
        }
        if generation.kind == Kind::Rollback {
            mark_rolled_back(store, &generation.undoes, n, false)?;
        }
        Ok(r)
    });
    match reverted {
        Ok(r) => Error::Refused(format!(
            "{e}\nEvery file this run had changed was put back as it was (generation {n} marked reverted).{}",
            regen_note(&r)
        )),
        Err(e2) => {
            // Best effort: the journal says "failed", not "in progress",
            // so that every command names it for what it is.
            generation.status = Status::Failed;
            let _ = store.save_generation(generation);
            Error::Journal(format!(
                "{e}\nPutting files back ALSO failed: {e2}. Generation {n} is marked failed and may have left files changed; fix that cause, then run `{}` to put them back",
                recover_command(host)
            ))
        }
    }
}

/// Refuses, before anything is written, a plan whose files (or the
/// journal's own: state, generations, lock) the door would refuse to write:
/// a symlink on the way or at the file (`Host::refuse_links`, src/host/door.rs).
/// The door refuses them at the write anyway; checked first, the root is
/// left as it was.
///
/// Every write counts, not only the plan's files: a command's copies to where
/// a boot loader reads them (`place[].to`, the ESP's initrd) and the held
/// copies and their readers (`*.gdrprov-held`, grub.cfg), which are written
/// after a command ran; refused there, the run would stop half done.
pub fn refuse_links(host: &Host, plan: &Plan) -> Result<()> {
    let own = ["state.json", "lock", "generations/.check"].map(|f| format!("{}/{f}", journal::DIR));
    let mut by_commands: Vec<String> = Vec::new();
    for c in &plan.changes {
        if let Action::Run { command } = &c.action {
            by_commands.extend(command.place.iter().map(|p| p.to.clone()));
            for h in command.hold.iter().chain(&command.may_hold) {
                by_commands.push(hold::held_copy(h));
                by_commands.push(h.reader.clone());
            }
        }
    }
    host.refuse_links(
        plan.changes
            .iter()
            .filter_map(Change::path)
            .chain(own.iter().map(String::as_str))
            .chain(by_commands.iter().map(String::as_str)),
    )
}

/// A regeneration command of this run may rewrite a file an earlier step wrote: Debian's
/// initramfs hook runs `kernel-install add`, which writes the systemd-boot entry again from
/// `/etc/kernel/cmdline` (the same arguments, another order). The journal's copy of what
/// gdrprov wrote is then made what the run left, so that a later rollback does not take gdrprov's
/// own regeneration for someone else's edit.
fn refresh_after_copies(host: &Host, store: &StateStore, g: &mut Generation) -> Result<()> {
    let Some(last_cmd) = g.steps.iter().rposition(|s| s.command.is_some()) else {
        return Ok(());
    };
    let mut changed = false;
    for step in g.steps[..last_cmd].iter_mut() {
        let (Some(path), Some(rel)) = (step.path.as_deref(), step.after.as_deref()) else {
            continue;
        };
        let Some(now) = host.read(path)? else {
            continue;
        };
        let sum = journal::Sum::of(&now);
        if step.after_sum.as_ref() != Some(&sum) {
            store.write_private(rel, &now)?;
            step.after_sum = Some(sum);
            changed = true;
        }
    }
    if changed {
        store.save_generation(g)?;
    }
    Ok(())
}

/// The boot-loader files a generation's steps write or remove, when any
/// step writes one or runs a tool that does (update-grub, grub-reboot, ...);
/// `None` when nothing a boot loader reads was touched.
fn boot_touched(steps: &[Step]) -> Option<Vec<&str>> {
    let paths: Vec<&str> = steps
        .iter()
        .filter_map(|s| s.path.as_deref())
        .filter(|p| durable::is_boot_path(p))
        .collect();
    let ran_tool = steps
        .iter()
        .filter_map(|s| s.command.as_ref())
        .any(|c| durable::is_boot_command(&c.argv));
    (ran_tool || !paths.is_empty()).then_some(paths)
}

/// Removes the directories the steps created that are empty now (their
/// files were removed), deepest first; never one gdrprov did not create.
fn remove_created_dirs(host: &Host, steps: &[Step]) -> Result<()> {
    for step in steps.iter().rev() {
        // Never one gdrprov did not make (refused before anything changed).
        for d in &step.created_dirs {
            if journal::created_dir_problem(host, d).is_none() {
                host.remove_empty_dir(d)?;
            }
        }
    }
    Ok(())
}

/// Marks the generations a rollback (`by`) undoes as rolled back by it, or,
/// with `on` false, takes back that mark where it names `by` (the rollback
/// was reverted: what it undid is in effect again).
pub(super) fn mark_rolled_back(
    store: &StateStore,
    undoes: &[u64],
    by: u64,
    on: bool,
) -> Result<()> {
    for u in undoes {
        let mut g = store.load_generation(*u)?;
        let mark = if on {
            Some(by)
        } else if g.rolled_back_by == Some(by) {
            None
        } else {
            continue;
        };
        if g.rolled_back_by != mark {
            g.rolled_back_by = mark;
            store.save_generation(&g)?;
        }
    }
    Ok(())
}

/// A complete rollback removes the directories the applies it undid had
/// created (empty once their files are gone).
fn remove_undone_dirs(host: &Host, store: &StateStore, undoes: &[u64]) -> Result<()> {
    fault_at("rollback-marked");
    for u in undoes {
        let g = store.load_generation(*u)?;
        remove_created_dirs(host, &g.steps)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use crate::host::{CommandSpec, Hold, Placement};

    /// A link where a command's copy lands (`place[].to`, the ESP's initrd) or where a held copy
    /// is written is refused before anything runs, as a link at a plan's file is. Failed before
    /// the fix: only the plan's files were checked, so the refusal came after update-initramfs.
    #[test]
    fn a_link_where_a_command_writes_is_refused_up_front() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("boot/efi/K")).unwrap();
        std::fs::create_dir_all(r.join("boot/grub")).unwrap();
        std::fs::write(r.join("secret"), "x").unwrap();
        std::fs::write(r.join("boot/grub/grub.cfg"), "menuentry\n").unwrap();
        let host = Host::open(r, true).unwrap();
        let plan_with = |spec: CommandSpec| Plan {
            changes: vec![Change::run("kmod", spec, None)],
            ..Plan::default()
        };
        let mut placed = CommandSpec::new(&["update-initramfs", "-u"], "rebuild");
        placed.place.push(Placement {
            from: "/boot/initrd.img-1".into(),
            to: "/boot/efi/K/initrd".into(),
        });
        let mut held = CommandSpec::new(&["update-initramfs", "-u"], "rebuild");
        held.hold.push(Hold {
            reader: "/boot/grub/grub.cfg".into(),
            file: "/boot/initrd.img-1".into(),
            kernelopts: None,
        });
        refuse_links(&host, &plan_with(placed.clone())).unwrap();
        refuse_links(&host, &plan_with(held.clone())).unwrap();
        std::os::unix::fs::symlink("/secret", r.join("boot/efi/K/initrd")).unwrap();
        std::os::unix::fs::symlink("/secret", r.join("boot/initrd.img-1.gdrprov-held")).unwrap();
        for (spec, link) in [
            (placed, "/boot/efi/K/initrd"),
            (held, "/boot/initrd.img-1.gdrprov-held"),
        ] {
            let err = refuse_links(&host, &plan_with(spec))
                .unwrap_err()
                .to_string();
            assert!(err.contains(&format!("{link} is a symlink")), "{err}");
        }
        assert_eq!(std::fs::read_to_string(r.join("secret")).unwrap(), "x");
    }
}
