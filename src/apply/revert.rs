//! Undoing a generation: the commands it ran that say how to undo them,
//! its files put back, its regeneration commands run again, in the order
//! that keeps the boot loader's switch last (issue 37). Used by a failed
//! apply, `rollback`'s failure path and `recover`.

use super::durable::make_boot_durable;
use super::step::last_lines;
use super::{boot_touched, hold, remove_created_dirs};
use crate::error::Result;
use crate::host::{CommandSpec, FileMeta, Host, WriteOptions};
use crate::journal::{self, Generation, StateStore, Status, Step};
use crate::plan::modules::kmod;

/// What a revert could not finish: regeneration commands it did not run
/// (`--no-exec`: owed, like any pending command) or that failed.
#[derive(Debug, Default)]
pub(super) struct Reverted {
    pub(super) skipped: Vec<CommandSpec>,
    pub(super) failed: Vec<String>,
}

/// Undoes the commands it had started that say how (`systemctl enable` by `disable`), newest
/// first, puts back every file a generation's steps touched, newest first, then re-runs the
/// regeneration commands it had started. Marks it reverted.
pub(super) fn revert(host: &Host, store: &StateStore, g: &mut Generation) -> Result<Reverted> {
    let mut out = undo_commands(host, &g.steps);
    // The boot switch last (issue 37): the boot files a rebuild holds (loader
    // entries) are put back after the regeneration, the rest before it.
    let specs: Vec<CommandSpec> = g.steps.iter().filter_map(|s| s.command.clone()).collect();
    let switch = |s: &Step| {
        s.path
            .as_deref()
            .is_some_and(|p| crate::plan::rollback::is_held_reader(&specs, p))
    };
    restore_files(host, store, g, |s| {
        (s.done || s.path.is_some()) && !switch(s)
    })?;
    let regen = rerun_regeneration(host, &g.steps);
    out.skipped.extend(regen.skipped);
    out.failed.extend(regen.failed);
    restore_files(host, store, g, switch)?;
    remove_created_dirs(host, &g.steps)?;
    // The restored boot files must be what the next boot reads, too. Best
    // effort: the revert itself has succeeded, and this only syncs.
    if let Some(paths) = boot_touched(&g.steps) {
        let _ = make_boot_durable(host, &paths);
    }
    release_held(host, &g.steps)?;
    g.status = Status::Reverted;
    g.finished = Some(journal::now());
    store.save_generation(g)?;
    Ok(out)
}

/// The index past the last step a generation started: the step that failed,
/// or was running when the process was killed, counts (it may have
/// half-regenerated its output, grub.cfg, or half-done a change).
fn started(steps: &[Step]) -> usize {
    steps
        .iter()
        .position(|s| !s.done)
        .map_or(steps.len(), |i| i + 1)
}

/// Undoes the commands a generation had started that say how (`systemctl
/// enable` by `disable`), newest first.
fn undo_commands(host: &Host, steps: &[Step]) -> Reverted {
    let mut out = Reverted::default();
    let undos = steps[..started(steps)].iter().rev().filter_map(|s| {
        let c = s.command.as_ref()?;
        Some((c, c.undo.as_ref()?))
    });
    for (ran, argv) in undos {
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let cmd = CommandSpec::new(&argv, format!("Undo `{}`", ran.argv.join(" ")));
        if host.no_exec() {
            out.skipped.push(cmd);
            continue;
        }
        run_noting(host, &cmd, &mut out.failed);
    }
    out
}

/// Removes the held copies of a generation's rebuilds that no boot file
/// loads any more (see `host::Hold`).
pub(super) fn release_held(host: &Host, steps: &[Step]) -> Result<()> {
    let holds: Vec<&crate::host::Hold> = steps
        .iter()
        .filter_map(|s| s.command.as_ref())
        .flat_map(|c| &c.hold)
        .collect();
    if !holds.is_empty() {
        hold::release_held(host, &holds)?;
    }
    Ok(())
}

/// Runs again the regeneration commands a reverted generation had started,
/// initramfs rebuilds first; all of its regeneration commands when one of
/// them holds a boot file (its switch, update-grub, must follow).
fn rerun_regeneration(host: &Host, steps: &[Step]) -> Reverted {
    let started = started(steps);
    let regenerating = |s: &&Step| s.command.as_ref().is_some_and(|c| c.regenerate);
    let mut rerun: Vec<&Step> = steps[..started].iter().filter(regenerating).collect();
    if rerun
        .iter()
        .any(|s| s.command.as_ref().is_some_and(|c| !c.hold.is_empty()))
    {
        rerun = steps.iter().filter(regenerating).collect();
    }
    rerun.sort_by_key(|s| s.command.as_ref().is_none_or(|c| !kmod::rebuilds(c)));
    let mut out = Reverted::default();
    for step in rerun {
        let Some(cmd) = step.command.as_ref() else {
            continue;
        };
        if host.no_exec() {
            if !out.skipped.contains(cmd) {
                out.skipped.push(cmd.clone());
            }
            continue;
        }
        run_noting(host, cmd, &mut out.failed);
    }
    out
}

/// Runs `cmd`, noting a failure in `failed`.
fn run_noting(host: &Host, cmd: &CommandSpec, failed: &mut Vec<String>) {
    match hold::run(host, cmd) {
        Ok(o) if o.success() => {}
        Ok(o) => failed.push(format!(
            "`{}` (exit {}: {})",
            cmd.shell_line(),
            o.code.map_or_else(|| "by signal".into(), |c| c.to_string()),
            last_lines(&o.stderr, &o.stdout)
        )),
        Err(e) => failed.push(format!("`{}` ({e})", cmd.shell_line())),
    }
}

/// The message tail for regeneration a revert could not do.
pub(super) fn regen_note(r: &Reverted) -> String {
    if r.failed.is_empty() {
        String::new()
    } else {
        format!(
            "\nUndoing a command it ran, or regenerating from the restored files, ALSO failed: {}; fix the cause and run it by hand before rebooting.",
            r.failed.join("; ")
        )
    }
}

/// Restores the `before` copy of each selected file step, newest first. A
/// step not marked done may still have been written just before a crash;
/// restoring its `before` is right either way, since writes are atomic.
fn restore_files(
    host: &Host,
    store: &StateStore,
    g: &Generation,
    select: impl Fn(&Step) -> bool,
) -> Result<()> {
    // Every backup is read and checked against its checksum, and every
    // recorded mode and owner against the root, before the first file is
    // written: a damaged one stops the restore with nothing changed.
    let mut backups = Vec::new();
    for (i, step) in g.steps.iter().enumerate().rev().filter(|(_, s)| select(s)) {
        let Some(path) = &step.path else { continue };
        journal::journal_path(path)?;
        let bytes = match &step.before {
            Some(rel) => Some(store.read_backup(rel)?),
            None => None,
        };
        let meta = journal::restore_meta(host, g.generation, i, step)?;
        backups.push((path, bytes, meta));
    }
    for (path, bytes, meta) in backups {
        if already_back(host, path, bytes.as_deref(), meta) {
            continue;
        }
        match bytes {
            Some(bytes) => {
                host.write_atomic(
                    path,
                    bytes.as_bytes(),
                    WriteOptions {
                        meta,
                        new_mode: 0o644,
                    },
                )?;
            }
            None => host.remove(path)?,
        }
    }
    Ok(())
}

/// A file already as its backup says (content, mode and owner; or absent
/// when it did not exist): nothing to write. A file that a failed step never
/// changed is left alone, so that one made immutable (`chattr +i`) or
/// read-only does not stop the rest from being put back.
fn already_back(host: &Host, path: &str, before: Option<&str>, meta: Option<FileMeta>) -> bool {
    match before {
        None => !host.exists(path),
        Some(bytes) => {
            host.read(path).ok().flatten().as_deref() == Some(bytes.as_bytes())
                && meta.is_none_or(|m| host.meta(path).ok().flatten() == Some(m))
        }
    }
}

/// Reads every `before` copy of `steps` (each checked against the checksum
/// its journal recorded); the first that fails stops everything.
pub(super) fn check_backups(store: &StateStore, steps: &[Step]) -> Result<()> {
    for rel in steps.iter().filter_map(|s| s.before.as_deref()) {
        store.read_backup(rel)?;
    }
    Ok(())
}
