//! Carrying out a plan. Every run that changes anything is a journal
//! generation: backups of every file are on disk (fsynced) before the first
//! write, each step is marked done as it completes, and a failure puts back
//! every file already written. A run killed half-way is finished the same way
//! by the next run (`recover`), so a host is never left half-configured.

use crate::error::{Error, Result};
use crate::host::{CommandSpec, FileMeta, Host, WriteOptions};
use crate::journal::{self, Generation, Kind, State, StateStore, Status, Step};
use crate::plan::{Action, Change, Plan};

/// What an apply or rollback did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Outcome {
    pub generation: u64,
    pub changed: usize,
    pub commands_run: Vec<String>,
    pub pending_commands: Vec<CommandSpec>,
    /// Messages from recovering an interrupted earlier run.
    pub recovered: Vec<String>,
}

/// Test-only fault injection (documented in the README): abort the process
/// right after step N of an apply, as a crash would.
const FAULT_ENV: &str = "GDRPROV_FAULT_AFTER_STEP";

pub fn execute(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    kind: Kind,
    undoes: Vec<u64>,
) -> Result<Outcome> {
    let state_before = store.load_state()?;
    let n = store.next_generation();
    let mut generation = Generation {
        generation: n,
        kind,
        undoes,
        rolled_back_by: None,
        started: journal::now(),
        profiles: plan.state_after.profiles.clone(),
        status: Status::InProgress,
        steps: Vec::new(),
        state_before: state_before.clone(),
        state_after: State::default(),
    };
    // Backups first: nothing is touched until every copy is safely on disk.
    for (i, change) in plan.changes.iter().enumerate() {
        generation
            .steps
            .push(prepare_step(host, store, n, i, change)?);
    }
    generation.state_after = finalize_state(&plan.state_after, &generation, n);
    store.save_generation(&generation)?;

    let fault_after: Option<usize> = std::env::var(FAULT_ENV).ok().and_then(|v| v.parse().ok());
    let mut commands_run = Vec::new();
    for i in 0..generation.steps.len() {
        let result = run_step(host, store, &generation.steps[i], &plan.changes[i]);
        match result {
            Ok(ran) => {
                commands_run.extend(ran);
                generation.steps[i].done = true;
                store.save_generation(&generation)?;
            }
            Err(e) => {
                let reverted = revert(host, store, &mut generation);
                return Err(match reverted {
                    Ok(()) => Error::Refused(format!(
                        "{e}\nEvery file this run had changed was put back as it was (generation {n} marked reverted)."
                    )),
                    Err(e2) => Error::Journal(format!(
                        "{e}\nPutting files back ALSO failed: {e2}. Run `gdrprov rollback --generation {n}` once the cause is fixed."
                    )),
                });
            }
        }
        if fault_after == Some(i + 1) {
            std::process::abort();
        }
    }
    store.save_state(&generation.state_after)?;
    generation.status = Status::Complete;
    store.save_generation(&generation)?;
    if kind == Kind::Rollback {
        for u in &generation.undoes {
            let mut g = store.load_generation(*u)?;
            g.rolled_back_by = Some(n);
            store.save_generation(&g)?;
        }
    }
    Ok(Outcome {
        generation: n,
        changed: plan.changes.iter().filter(|c| c.path().is_some()).count(),
        commands_run,
        pending_commands: plan.pending_commands.clone(),
        recovered: Vec::new(),
    })
}

/// The planned state, with "the backup this generation takes" made concrete.
fn finalize_state(planned: &State, g: &Generation, n: u64) -> State {
    let mut s = planned.clone();
    s.generation = n;
    for (path, owned) in s.files.iter_mut() {
        if owned.original.as_deref() == Some(journal::PENDING_BACKUP) {
            owned.original = g
                .steps
                .iter()
                .find(|st| st.path.as_deref() == Some(path.as_str()))
                .and_then(|st| st.before.clone());
        }
    }
    s
}

fn prepare_step(
    host: &Host,
    store: &StateStore,
    n: u64,
    i: usize,
    change: &Change,
) -> Result<Step> {
    let mut step = Step {
        description: change.description.clone(),
        path: change.path().map(str::to_string),
        before: None,
        before_meta: None,
        after: None,
        command: None,
        done: false,
        pending: false,
    };
    let expected_before = match &change.action {
        Action::WriteFile { before, .. } => before.as_deref(),
        Action::RemoveFile { before, .. } => Some(before.as_str()),
        Action::Run { command } => {
            step.command = Some(command.clone());
            return Ok(step);
        }
    };
    let path = change.path().unwrap_or_default();
    let current = host.read(path)?;
    if current.as_deref() != expected_before.map(str::as_bytes) {
        return Err(Error::Refused(format!(
            "{} changed after the plan was made; run again to plan against the new content (nothing was changed)",
            host.display(path)
        )));
    }
    if let Some(bytes) = current {
        let rel = format!("generations/{n}/{i}.before");
        store.write_private(&rel, &bytes)?;
        step.before = Some(rel);
        step.before_meta = host.meta(path)?;
    }
    if let Action::WriteFile { after, .. } = &change.action {
        let rel = format!("generations/{n}/{i}.after");
        store.write_private(&rel, after.as_bytes())?;
        step.after = Some(rel);
    }
    Ok(step)
}

/// Runs one step; gives the command line it ran, if any.
fn run_step(
    host: &Host,
    _store: &StateStore,
    step: &Step,
    change: &Change,
) -> Result<Option<String>> {
    match &change.action {
        Action::WriteFile {
            path,
            after,
            new_mode,
            meta,
            ..
        } => {
            host.write_atomic(
                path,
                after.as_bytes(),
                WriteOptions {
                    meta: *meta,
                    new_mode: *new_mode,
                },
            )?;
            Ok(None)
        }
        Action::RemoveFile { path, .. } => {
            host.remove(path)?;
            Ok(None)
        }
        Action::Run { command } => {
            let out = host.run(command)?;
            if !out.success() {
                return Err(Error::Command {
                    command: host.effective_argv(command).join(" "),
                    msg: format!(
                        "exit {}: {}",
                        out.code
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "by signal".into()),
                        last_lines(&out.stderr, &out.stdout)
                    ),
                });
            }
            let _ = step;
            Ok(Some(command.shell_line()))
        }
    }
}

fn last_lines(stderr: &str, stdout: &str) -> String {
    let text = if stderr.trim().is_empty() {
        stdout
    } else {
        stderr
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(3)..].join(" / ")
}

/// Puts back every file a generation's done steps touched, newest first,
/// then re-runs regeneration commands it had run. Marks it reverted.
fn revert(host: &Host, store: &StateStore, g: &mut Generation) -> Result<()> {
    restore_files(host, store, &g.steps, |s| s.done || s.path.is_some())?;
    if !host.no_exec() {
        for step in g.steps.iter().filter(|s| s.done) {
            if let Some(cmd) = step.command.as_ref().filter(|c| c.regenerate) {
                let _ = host.run(cmd);
            }
        }
    }
    g.status = Status::Reverted;
    store.save_generation(g)
}

/// Restores the `before` copy of each selected file step, newest first. A
/// step not marked done may still have been written just before a crash;
/// restoring its `before` is right either way, since writes are atomic.
fn restore_files(
    host: &Host,
    store: &StateStore,
    steps: &[Step],
    select: impl Fn(&Step) -> bool,
) -> Result<()> {
    for step in steps.iter().rev().filter(|s| select(s)) {
        let Some(path) = &step.path else { continue };
        match &step.before {
            Some(rel) => {
                let bytes = store.read_backup(rel)?;
                let meta: Option<FileMeta> = step.before_meta;
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

/// Whether a run was killed half-way and needs `recover`.
pub fn interrupted(store: &StateStore) -> bool {
    store.generation_numbers().into_iter().any(|n| {
        store
            .load_generation(n)
            .map(|g| g.status == Status::InProgress)
            .unwrap_or(false)
    })
}

/// Finishes a run that was killed half-way: its files are put back and it is
/// marked reverted. Called under the lock before any new apply or rollback.
pub fn recover(host: &Host, store: &StateStore) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for n in store.generation_numbers() {
        let mut g = store.load_generation(n)?;
        if g.status == Status::InProgress {
            revert(host, store, &mut g)?;
            store.save_state(&g.state_before)?;
            notes.push(format!(
                "generation {n} was interrupted; every file it touched was put back as it was before it"
            ));
        }
    }
    Ok(notes)
}

/// The plan that undoes generations `target..=latest` (those still in
/// effect), newest first: each file back to its `before` copy.
pub fn plan_rollback(
    host: &Host,
    store: &StateStore,
    target: Option<u64>,
    force: bool,
) -> Result<(Plan, Vec<u64>)> {
    let applied: Vec<Generation> = store
        .generation_numbers()
        .into_iter()
        .map(|n| store.load_generation(n))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .filter(|g| {
            g.kind == Kind::Apply && g.status == Status::Complete && g.rolled_back_by.is_none()
        })
        .collect();
    let Some(last) = applied.last() else {
        return Err(Error::Refused(format!(
            "nothing to roll back: no apply of gdrprov is in effect on {}",
            host.display("/")
        )));
    };
    let target = target.unwrap_or(last.generation);
    if !applied.iter().any(|g| g.generation == target) {
        let live: Vec<String> = applied.iter().map(|g| g.generation.to_string()).collect();
        return Err(Error::Refused(format!(
            "generation {target} is not an apply still in effect; those are: {} (see `gdrprov history`)",
            live.join(", ")
        )));
    }
    let undo: Vec<&Generation> = applied
        .iter()
        .rev()
        .filter(|g| g.generation >= target)
        .collect();
    let mut changes = Vec::new();
    let mut drifted = Vec::new();
    let mut commands: Vec<CommandSpec> = Vec::new();
    for g in &undo {
        for step in g.steps.iter().rev() {
            if let Some(cmd) = step.command.as_ref().filter(|c| c.regenerate) {
                if !commands.contains(cmd) {
                    commands.push(cmd.clone());
                }
            }
            let Some(path) = &step.path else { continue };
            let current = host.read_text(path)?;
            let wrote = match &step.after {
                Some(rel) => Some(store.read_backup(rel)?),
                None => None,
            };
            if current != wrote
                && !changes
                    .iter()
                    .any(|c: &Change| c.path() == Some(path.as_str()))
            {
                drifted.push(host.display(path));
            }
            let original = match &step.before {
                Some(rel) => Some(store.read_backup(rel)?),
                None => None,
            };
            // Only the oldest undo of a path decides its final content.
            changes.retain(|c: &Change| c.path() != Some(path.as_str()));
            let description = format!(
                "Restore {path} as it was before generation {}",
                g.generation
            );
            changes.push(match original {
                Some(after) => Change {
                    module: "rollback".into(),
                    description,
                    action: Action::WriteFile {
                        path: path.clone(),
                        before: current,
                        after,
                        new_mode: 0o644,
                        meta: step.before_meta,
                    },
                    reboot: None,
                },
                None => Change {
                    module: "rollback".into(),
                    description: format!("Remove {path} (created by generation {})", g.generation),
                    action: Action::RemoveFile {
                        path: path.clone(),
                        before: current.unwrap_or_default(),
                    },
                    reboot: None,
                },
            });
        }
    }
    if !drifted.is_empty() && !force {
        return Err(Error::Refused(format!(
            "these files changed after gdrprov wrote them: {}; rollback would overwrite those edits. Check them, then run again with --force (nothing was changed)",
            drifted.join(", ")
        )));
    }
    // A file already as it was needs no step (e.g. removed by hand).
    changes.retain(|c| match &c.action {
        Action::WriteFile { before, after, .. } => before.as_deref() != Some(after.as_str()),
        Action::RemoveFile { path, .. } => host.exists(path),
        Action::Run { .. } => true,
    });
    let oldest = undo
        .last()
        .map(|g| g.state_before.clone())
        .unwrap_or_default();
    let mut plan = Plan {
        changes,
        ..Plan::default()
    };
    let mut state_after = oldest;
    if host.no_exec() {
        plan.pending_commands = commands.clone();
        state_after.pending_commands = commands;
    } else {
        for command in commands {
            plan.changes.push(Change {
                module: "run".into(),
                description: command.why.clone(),
                action: Action::Run { command },
                reboot: None,
            });
        }
    }
    plan.state_after = state_after;
    Ok((plan, undo.iter().map(|g| g.generation).collect()))
}
