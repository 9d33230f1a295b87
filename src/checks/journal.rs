//! `gdrprov journal check`: the whole journal against the root. Every
//! generation readable and finished; every step's path plain (none climbing
//! out of the root); every backup present and matching the SHA-256 and size
//! its journal recorded; the files of the applies in effect still as gdrprov
//! wrote them; the state file agreeing with the generations. Reads only.

use crate::host::Host;
use crate::journal::{Generation, Kind, State, StateStore, Status, Sum};
use serde::Serialize;
use std::collections::BTreeMap;

/// One thing wrong, with what to do about it.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// The file it is about (in the root, or a backup in the state dir).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `state-unreadable`, `journal-unreadable`, `unfinished`, `step-path`,
    /// `backup-missing`, `backup-mismatch`, `changed-since`, `state-mismatch`,
    /// `step-meta` (a recorded mode, owner or created directory a rollback
    /// would refuse).
    pub kind: &'static str,
    pub message: String,
    pub fix: String,
}

/// One generation as the check saw it.
#[derive(Debug, Clone, Serialize)]
pub struct Checked {
    pub generation: u64,
    /// `null` when its journal cannot be read.
    pub kind: Option<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// `in-effect`, `rolled-back`, `reverted`, `complete` (a rollback),
    /// `in-progress`, `failed` or `unreadable`.
    pub result: String,
    pub steps: usize,
    /// Backups read and compared with their recorded checksum.
    pub backups_checked: usize,
    /// Backups of an older version's journal, with no checksum to compare.
    pub backups_unchecked: usize,
}

/// What `journal check` found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Nothing wrong.
    pub ok: bool,
    pub generations: Vec<Checked>,
    pub problems: Vec<Problem>,
}

/// Checks the journal of `host`'s root.
pub fn check(host: &Host) -> Report {
    let store = StateStore::new(host);
    let mut problems = Vec::new();
    let state = match store.load_state() {
        Ok(s) => Some(s),
        Err(e) => {
            problems.push(Problem {
                generation: None,
                path: Some(host.display(&format!("{}/state.json", crate::journal::DIR))),
                kind: "state-unreadable",
                message: e.to_string(),
                fix: "restore it from the latest generation's journal.json (its state_after), or from a backup of the host".into(),
            });
            None
        }
    };
    let mut gens = Vec::new();
    let mut checked = Vec::new();
    for n in store.generation_dirs() {
        match store.load_generation(n) {
            Ok(g) => {
                checked.push(check_generation(host, &store, &g, &mut problems));
                gens.push(g);
            }
            Err(e) => {
                problems.push(Problem {
                    generation: Some(n),
                    path: None,
                    kind: "journal-unreadable",
                    message: e.to_string(),
                    fix: format!(
                        "restore {} from a backup of the host; gdrprov cannot undo what this generation did without it",
                        host.display(&format!("{}/generations/{n}", crate::journal::DIR))
                    ),
                });
                checked.push(Checked {
                    generation: n,
                    kind: None,
                    command: None,
                    result: "unreadable".into(),
                    steps: 0,
                    backups_checked: 0,
                    backups_unchecked: 0,
                });
            }
        }
    }
    check_in_effect(host, &store, &gens, &mut problems);
    if let Some(state) = &state {
        check_state(host, state, &gens, &mut problems);
    }
    Report {
        ok: problems.is_empty(),
        generations: checked,
        problems,
    }
}

fn result_of(g: &Generation) -> &'static str {
    match (g.status, g.rolled_back_by, g.kind) {
        (Status::InProgress, _, _) => "in-progress",
        (Status::Failed, _, _) => "failed",
        (Status::Reverted, _, _) => "reverted",
        (Status::Complete, Some(_), _) => "rolled-back",
        (Status::Complete, None, Kind::Apply) => "in-effect",
        (Status::Complete, None, Kind::Rollback) => "complete",
    }
}

/// One generation's own record: finished, plain paths, backups whole.
fn check_generation(
    host: &Host,
    store: &StateStore,
    g: &Generation,
    problems: &mut Vec<Problem>,
) -> Checked {
    let n = g.generation;
    let mut out = Checked {
        generation: n,
        kind: Some(g.kind),
        command: g.command.clone(),
        result: result_of(g).into(),
        steps: g.steps.len(),
        backups_checked: 0,
        backups_unchecked: 0,
    };
    if matches!(g.status, Status::InProgress | Status::Failed) {
        problems.push(Problem {
            generation: Some(n),
            path: None,
            kind: "unfinished",
            message: format!(
                "generation {n} ({}) is {}; {}",
                crate::apply::what_generation(g),
                result_of(g),
                still_changed(host, store, g)
            ),
            fix: format!("`{}`", crate::apply::recover_command(host)),
        });
    }
    // What a rollback or recover would put back: its recorded owners,
    // against the root (a directory another user took over since is left
    // in place, a set-id bit never put back: noted when it runs).
    if matches!(result_of(g), "in-effect" | "in-progress" | "failed") {
        let owners = (0..g.steps.len())
            .map(|i| crate::journal::restore_meta(host, n, i, &g.steps[i]).map(|_| ()));
        for e in owners.filter_map(|r| r.err()) {
            problems.push(Problem {
                generation: Some(n),
                path: None,
                kind: "step-meta",
                message: e.to_string(),
                fix: "restore the generation's journal.json from a backup of the host; never edit it by hand".into(),
            });
        }
    }
    for step in &g.steps {
        if let Some(path) = &step.path {
            if let Err(e) = crate::host::check_profile_path(path) {
                problems.push(Problem {
                    generation: Some(n),
                    path: Some(path.clone()),
                    kind: "step-path",
                    message: format!(
                        "a step of generation {n} names {path:?}, which gdrprov never writes ({e}): the journal was edited or damaged; rollback and recover refuse it"
                    ),
                    fix: "restore the generation's journal.json from a backup of the host; never edit it by hand".into(),
                });
            }
        }
        let copies = [
            (&step.before, &step.before_sum),
            (&step.after, &step.after_sum),
        ];
        for (rel, sum) in copies {
            let Some(rel) = rel else { continue };
            match check_backup(host, store, n, rel, sum.as_ref()) {
                Ok(true) => out.backups_checked += 1,
                Ok(false) => out.backups_unchecked += 1,
                Err(p) => problems.push(p),
            }
        }
    }
    out
}

/// Which of an unfinished generation's files are still as it wrote them.
fn still_changed(host: &Host, store: &StateStore, g: &Generation) -> String {
    let changed: Vec<String> = g
        .steps
        .iter()
        .filter(|s| {
            let Some(path) = &s.path else { return false };
            let now = host.read(path).ok().flatten();
            let before = s
                .before
                .as_ref()
                .and_then(|rel| store.backup_bytes(rel).ok().flatten());
            now != before
        })
        .filter_map(|s| s.path.as_deref().map(|p| host.display(p)))
        .collect();
    if changed.is_empty() {
        "none of its files differs from its backups".into()
    } else {
        format!("still changed: {}", changed.join(", "))
    }
}

/// A backup present and as recorded: `Ok(true)` checked, `Ok(false)` an
/// older journal with no checksum.
fn check_backup(
    host: &Host,
    store: &StateStore,
    n: u64,
    rel: &str,
    sum: Option<&Sum>,
) -> Result<bool, Problem> {
    let shown = host.display(&format!("{}/{rel}", crate::journal::DIR));
    let problem = |kind, message: String| {
        Problem {
        generation: Some(n),
        path: Some(shown.clone()),
        kind,
        message,
        fix: format!(
            "put the original copy back from a backup of {}; until then gdrprov will not restore from it",
            host.display(crate::journal::DIR)
        ),
    }
    };
    match store.backup_bytes(rel) {
        Ok(Some(bytes)) => match sum {
            None => Ok(false),
            Some(expected) => {
                let found = Sum::of(&bytes);
                if &found == expected {
                    Ok(true)
                } else {
                    Err(problem(
                        "backup-mismatch",
                        format!("backup {shown} is not what gdrprov wrote: its journal says {expected}, the file has {found}"),
                    ))
                }
            }
        },
        Ok(None) => Err(problem(
            "backup-missing",
            format!("backup {shown} is missing"),
        )),
        Err(e) => Err(problem(
            "backup-missing",
            format!("backup {shown} cannot be read: {e}"),
        )),
    }
}

/// The profiles generation N applied, as its journal names them.
fn applied_by(gens: &[Generation], n: u64) -> Vec<String> {
    gens.iter()
        .find(|g| g.generation == n)
        .map(|g| g.profiles.clone())
        .unwrap_or_default()
}

/// The files of the applies in effect: each still as the latest of them
/// wrote it (or still absent, where it removed one).
fn check_in_effect(
    host: &Host,
    store: &StateStore,
    gens: &[Generation],
    problems: &mut Vec<Problem>,
) {
    let mut last: BTreeMap<&str, (u64, Option<&str>)> = BTreeMap::new();
    for g in gens.iter().filter(|g| result_of(g) == "in-effect") {
        for s in &g.steps {
            if let Some(path) = &s.path {
                last.insert(path, (g.generation, s.after.as_deref()));
            }
        }
    }
    for (path, (n, after)) in last {
        if crate::host::check_profile_path(path).is_err() {
            continue; // reported as step-path
        }
        let now = match host.read(path) {
            Ok(now) => now,
            Err(e) => {
                problems.push(Problem {
                    generation: Some(n),
                    path: Some(host.display(path)),
                    kind: "changed-since",
                    message: format!("{path}, written by generation {n}, cannot be read: {e}"),
                    fix: "make it a readable regular file again".into(),
                });
                continue;
            }
        };
        let wrote = after.and_then(|rel| store.backup_bytes(rel).ok().flatten());
        if now == wrote {
            continue;
        }
        let what = match (&now, after) {
            (None, Some(_)) => "was removed after gdrprov wrote it",
            (Some(_), None) => "was created again after gdrprov removed it",
            _ => "was edited after gdrprov wrote it",
        };
        // The journal names a profile file by its `name:`: PROFILE then.
        let (named, files) = crate::suggest::recorded_profiles(
            &applied_by(gens, n),
            &crate::profile::builtin::names(),
        );
        problems.push(Problem {
            generation: Some(n),
            path: Some(host.display(path)),
            kind: "changed-since",
            message: format!("{} {what} (generation {n})", host.display(path)),
            fix: format!(
                "check the edit: {}{files} puts gdrprov's content back; {} restores what was there before",
                crate::suggest::Suggest::new(crate::names::APPLY)
                    .profiles(&named)
                    .shown(&crate::suggest::Given::none()),
                crate::suggest::Suggest::new(crate::names::ROLLBACK)
                    .arg("--generation")
                    .arg(n.to_string())
                    .arg("--force")
                    .shown(&crate::suggest::Given::none())
            ),
        });
    }
}

/// The state file against the generations: it owns what the applies in
/// effect made it own, and names the latest of them.
/// What `journal check` finds wrong between `state.json` and the journal's
/// generations (`state-mismatch`), for the commands that act on the state.
pub fn state_problems(host: &Host, state: &State, gens: &[Generation]) -> Vec<Problem> {
    let mut problems = Vec::new();
    check_state(host, state, gens, &mut problems);
    problems
}

fn check_state(host: &Host, state: &State, gens: &[Generation], problems: &mut Vec<Problem>) {
    let in_effect: Vec<&Generation> = gens
        .iter()
        .filter(|g| result_of(g) == "in-effect")
        .collect();
    // The state names the last generation that completed (an apply or a
    // rollback: a rollback's state is the one before what it undid).
    let latest = gens
        .iter()
        .filter(|g| g.status == Status::Complete)
        .map(|g| g.generation)
        .max()
        .unwrap_or(0);
    let unfinished = gens
        .iter()
        .any(|g| matches!(g.status, Status::InProgress | Status::Failed));
    let shown = host.display(&format!("{}/state.json", crate::journal::DIR));
    // While a run is unfinished, the state is the one before it (recover
    // restores it); compare only a settled journal.
    if unfinished {
        return;
    }
    if state.generation != latest {
        problems.push(Problem {
            generation: None,
            path: Some(shown.clone()),
            kind: "state-mismatch",
            message: format!(
                "{shown} names generation {} as the last one completed, the journal {}",
                state.generation,
                if latest == 0 { "has none completed".to_string() } else { format!("says {latest}") }
            ),
            fix: match in_effect.last() {
                Some(g) => format!("restore {shown} from generation {}'s journal.json (its state_after)", g.generation),
                None => format!("restore {shown} from a backup of the host, or remove it if gdrprov owns nothing here"),
            },
        });
        return;
    }
    if let Some(g) = in_effect.last() {
        // What it owns; owed commands and a pending trial change otherwise.
        let owns = |s: &State| {
            (
                s.files.keys().cloned().collect::<Vec<_>>(),
                s.kernel_args.clone(),
                s.nccl_keys.clone(),
            )
        };
        if owns(&g.state_after) != owns(state) {
            problems.push(Problem {
                generation: Some(g.generation),
                path: Some(shown.clone()),
                kind: "state-mismatch",
                message: format!(
                    "{shown} does not own what generation {} recorded after it (its files, kernel arguments or nccl.conf keys)",
                    g.generation
                ),
                fix: format!("restore {shown} from generation {}'s journal.json (its state_after)", g.generation),
            });
        }
    } else if !state.files.is_empty()
        || !state.kernel_args.is_empty()
        || !state.nccl_keys.is_empty()
    {
        problems.push(Problem {
            generation: None,
            path: Some(shown.clone()),
            kind: "state-mismatch",
            message: format!("{shown} says gdrprov owns changes on this root, but no apply in the journal is in effect"),
            fix: format!(
                "restore {} from a backup of the host; or put those files back by hand, then remove it to start over",
                host.display(crate::journal::DIR)
            ),
        });
    }
}
