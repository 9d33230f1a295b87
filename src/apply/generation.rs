//! Making a generation before anything is touched: the plan's files checked
//! against what the plan saw, their backups and the journal written in a
//! staging directory that becomes the generation in one rename, disk space
//! reserved for putting everything back.

use super::FAULT_ENV;
use crate::error::{Error, Result};
use crate::host::{self, Host};
use crate::journal::{self, Generation, Kind, State, StateStore, Status, Step};
use crate::plan::{Action, Change, Plan};

/// A new generation for `plan`, made and published: its backups and
/// journal on disk, nothing of the host changed yet. If making it fails (a
/// full disk), the half-made generation is removed: the host is untouched
/// and the journal holds no trace of the attempt.
pub(super) fn begin(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    kind: Kind,
    undoes: Vec<u64>,
    command: Option<&str>,
) -> Result<Generation> {
    let state_before = store.load_state()?;
    let n = store.next_generation()?;
    let mut generation = Generation {
        generation: n,
        kind,
        undoes,
        rolled_back_by: None,
        started: journal::now(),
        finished: None,
        user: Some(journal::invoking_user()),
        profiles: plan.state_after.profiles.clone(),
        command: command.map(str::to_string),
        directory: Some(journal::generation_dir(n)),
        status: Status::InProgress,
        steps: Vec::new(),
        state_before: state_before.clone(),
        state_after: State::default(),
    };
    if let Err(e) = make_generation(host, store, plan, &mut generation) {
        return Err(match store.remove_generation_dir(n) {
            Ok(()) => Error::Refused(format!(
                "{e}\nNothing was changed: the backups could not be saved, and the partial generation {n} was removed."
            )),
            Err(e2) => Error::Refused(format!(
                "{e}\nNothing was changed: the backups could not be saved (removing the partial generation {n} also failed: {e2})."
            )),
        });
    }
    Ok(generation)
}

/// Disk space set aside before the first write: enough to write back every
/// file's old content and the journal twice over, whole pages each.
fn reserve_bytes(plan: &Plan) -> u64 {
    let page = |n: usize| (n as u64).div_ceil(4096) * 4096;
    let files: u64 = plan
        .changes
        .iter()
        .map(|c| match &c.action {
            Action::WriteFile { before, after, .. } => {
                page(before.as_ref().map_or(0, String::len)) + page(after.len())
            }
            Action::RemoveFile { before, .. } => page(before.len()),
            Action::Run { .. } => 0,
        })
        .sum();
    files + 64 * 1024
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

/// Backups first: nothing is touched until every copy is safely on disk.
/// They and the journal are made in a staging dir that becomes the
/// generation in one rename: a generation never lacks its journal, even after
/// a power cut here.
fn make_generation(
    host: &Host,
    store: &StateStore,
    plan: &Plan,
    generation: &mut Generation,
) -> Result<()> {
    let n = generation.generation;
    store.remove_staged_leftovers()?;
    for (i, change) in plan.changes.iter().enumerate() {
        let step = prepare_step(host, store, n, i, change)?;
        generation.steps.push(step);
    }
    generation.state_after = finalize_state(&plan.state_after, generation, n);
    store.save_staged_generation(generation)?;
    store.reserve(&journal::staging_dir(n), reserve_bytes(plan))?;
    if std::env::var(FAULT_ENV).is_ok_and(|v| v == "0") {
        std::process::abort();
    }
    store.publish_generation(n)
}

fn prepare_step(
    host: &Host,
    store: &StateStore,
    n: u64,
    i: usize,
    change: &Change,
) -> Result<Step> {
    let mut step = Step::new(
        change.description.clone(),
        change.path().map(str::to_string),
    );
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
    // Written in the staging dir, recorded where they will be.
    let (staged, dir) = (journal::staging_dir(n), journal::generation_dir(n));
    if let Some(bytes) = current {
        let rel = format!("{dir}/{i}.before");
        store.write_private(&format!("{staged}/{i}.before"), &bytes)?;
        step.before = Some(rel);
        step.before_sum = Some(journal::Sum::of(&bytes));
        let meta = host.meta(path)?;
        refuse_unrestorable_mode(host, path, meta)?;
        step.record_before_meta(meta);
    }
    if let Action::WriteFile { after, .. } = &change.action {
        let rel = format!("{dir}/{i}.after");
        store.write_private(&format!("{staged}/{i}.after"), after.as_bytes())?;
        step.after = Some(rel);
        step.after_sum = Some(journal::Sum::of(after.as_bytes()));
        step.created_dirs = missing_dirs(host, path);
    }
    step.seal();
    Ok(step)
}

/// A file whose mode a rollback would not put back whole (setuid, setgid,
/// sticky or world-writable: `journal::mode_problem`) is not edited at all.
/// FAT (an ESP) is not such a file: its modes come from the mount options
/// (0777 with umask=000) and no write sets or restores one there.
fn refuse_unrestorable_mode(host: &Host, path: &str, meta: Option<host::FileMeta>) -> Result<()> {
    if host.on_fat(path) {
        return Ok(());
    }
    let Some(why) = meta.and_then(|m| journal::mode_problem(m.mode)) else {
        return Ok(());
    };
    Err(Error::Refused(format!(
        "{} has {why}: gdrprov does not edit such a file, since it could not put that mode back on rollback (nothing was changed). Remove those bits (`chmod ug-s,o-t,o-w {}`) and run again",
        host.display(path),
        host.display(path)
    )))
}

/// The parent directories of `path` that do not exist yet, deepest first
/// (`write_atomic` creates them).
fn missing_dirs(host: &Host, path: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut dir = std::path::Path::new(path).parent();
    while let Some(d) = dir.filter(|d| *d != std::path::Path::new("/")) {
        let d_str = d.display().to_string();
        if host.exists(&d_str) {
            break;
        }
        out.push(d_str);
        dir = d.parent();
    }
    out
}
