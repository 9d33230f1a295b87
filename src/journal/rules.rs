//! What a journal may say of the files it restores (issue 43), checked before
//! anything is restored: the one guard between a journal's record and the
//! root. Every generation read ([`super::StateStore::load_generation`]:
//! rollback, recover, a failed run's revert, `journal check`, `history`)
//! passes [`record_problem`]: each step's path plain and never gdrprov's own
//! state, its recorded mode without setuid, setgid, sticky or world-write
//! bits, its `created_dirs` only the missing parents of its own path, and
//! (in a versioned journal) its `meta_sum`, the checksum over all of these.
//! What needs the root itself is checked where a file is put back
//! ([`restore_meta`]: the owner the file had when apply first read it) or a
//! directory removed ([`created_dir_problem`]: one gdrprov made, never a
//! user's). `before_meta` is private to the journal: no other reader exists.

use super::{Generation, State, Step, DIR};
use crate::host::{FileMeta, Host};

/// The mode bits a restored file never gets.
const FORBIDDEN_BITS: [(u32, &str); 4] = [
    (0o4000, "the setuid bit"),
    (0o2000, "the setgid bit"),
    (0o1000, "the sticky bit"),
    (0o0002, "write permission for others"),
];

impl Step {
    /// A step of `description`, touching `path` (none for a command).
    pub fn new(description: String, path: Option<String>) -> Step {
        Step {
            description,
            path,
            before: None,
            before_meta: None,
            before_sum: None,
            after: None,
            after_sum: None,
            meta_sum: None,
            command: None,
            created_dirs: Vec::new(),
            done: false,
            pending: false,
        }
    }

    /// Records the mode and owner of the file as apply first read it.
    pub fn record_before_meta(&mut self, meta: Option<FileMeta>) {
        self.before_meta = meta;
    }

    /// Seals what the step says of its file (path, backup, metadata,
    /// directories) under `meta_sum`; called once they are all recorded.
    pub fn seal(&mut self) {
        self.meta_sum = Some(meta_sum(self));
    }
}

/// `g` as it is written: a versioned document, so every step touching a
/// file carries its `meta_sum` (a journal of an older gdrprov, read under the
/// same rules, gets them when it is written again, e.g. marked rolled back).
pub fn sealed(g: &Generation) -> std::borrow::Cow<'_, Generation> {
    if g.steps
        .iter()
        .all(|s| s.path.is_none() || s.meta_sum.is_some())
    {
        return std::borrow::Cow::Borrowed(g);
    }
    let mut g = g.clone();
    for s in g
        .steps
        .iter_mut()
        .filter(|s| s.path.is_some() && s.meta_sum.is_none())
    {
        s.seal();
    }
    std::borrow::Cow::Owned(g)
}

/// SHA-256 (hex) over a step's path, `before`, `before_meta` and
/// `created_dirs`, as JSON.
fn meta_sum(s: &Step) -> String {
    let covered = serde_json::json!([s.path, s.before, s.before_meta, s.created_dirs]);
    super::Sum::of(covered.to_string().as_bytes()).sha256
}

/// Why a mode may not be put on a file; `None` when it may.
pub fn mode_problem(mode: u32) -> Option<String> {
    if mode > 0o7777 {
        return Some(format!("{mode:o} is not a file mode (at most 7777)"));
    }
    FORBIDDEN_BITS
        .iter()
        .find(|(bit, _)| mode & bit != 0)
        .map(|(_, what)| format!("mode {mode:04o} has {what}, which gdrprov never restores"))
}

/// Why `path` cannot be a path of the journal or state: not plain, or
/// inside gdrprov's own state.
pub fn path_problem(path: &str) -> Option<String> {
    if let Err(e) = crate::host::check_profile_path(path) {
        return Some(format!("{path:?} is not a plain absolute path ({e})"));
    }
    (path == DIR || path.starts_with(&format!("{DIR}/")))
        .then(|| format!("{path} is inside gdrprov's own state ({DIR}), which no step ever writes"))
}

/// The field and the rule a generation's record breaks; `None` when it
/// keeps them all. `versioned`: written with a format version, so every
/// step touching a file carries its `meta_sum`.
pub fn record_problem(g: &Generation, versioned: bool) -> Option<(String, String)> {
    for (i, s) in g.steps.iter().enumerate() {
        if let Some(p) = step_problem(s, versioned) {
            return Some((format!("steps[{i}].{}", p.0), p.1));
        }
    }
    for (name, st) in [
        ("state_before", &g.state_before),
        ("state_after", &g.state_after),
    ] {
        if let Some((f, why)) = state_problem(st) {
            return Some((format!("{name}.{f}"), why));
        }
    }
    None
}

/// The field of `state.json` (or a journal's state) that names a path it
/// may not own, and why.
pub fn state_problem(st: &State) -> Option<(String, String)> {
    st.files
        .keys()
        .find_map(|p| path_problem(p).map(|why| (format!("files.{p:?}"), why)))
}

fn step_problem(s: &Step, versioned: bool) -> Option<(String, String)> {
    let path = s.path.as_deref()?;
    if let Some(why) = path_problem(path) {
        return Some(("path".into(), why));
    }
    if let Some(why) = s.before_meta.and_then(|m| mode_problem(m.mode)) {
        return Some(("before_meta.mode".into(), why));
    }
    if let Some(why) = dirs_problem(path, &s.created_dirs, s.after.is_some()) {
        return Some(("created_dirs".into(), why));
    }
    let sum = meta_sum(s);
    match &s.meta_sum {
        Some(recorded) if *recorded != sum => Some((
            "meta_sum".into(),
            format!("the checksum over the step's path, backup, before_meta and created_dirs is {sum}, the journal says {recorded}: it was edited or damaged"),
        )),
        None if versioned => Some((
            "meta_sum".into(),
            "missing: every step of a versioned journal that touches a file carries the checksum of what it recorded".into(),
        )),
        _ => None,
    }
}

/// `created_dirs` must be the parents of `path` that a write created,
/// deepest first, as apply records them: nothing else.
fn dirs_problem(path: &str, dirs: &[String], writes: bool) -> Option<String> {
    if dirs.is_empty() {
        return None;
    }
    if !writes {
        return Some(format!(
            "{dirs:?}: a step that writes no file creates no directory"
        ));
    }
    let mut parent = std::path::Path::new(path).parent();
    for d in dirs {
        let want = parent.filter(|p| *p != std::path::Path::new("/"));
        if want.map(|p| p.to_string_lossy()) != Some(d.as_str().into()) {
            return Some(format!(
                "{d} is not the next parent of {path} (a step records only the parents of its own file that it created, deepest first)"
            ));
        }
        parent = want.and_then(|p| p.parent());
    }
    None
}

/// The journal file of generation `n`, as shown.
pub fn journal_file(host: &Host, n: u64) -> String {
    host.display(&format!("{DIR}/generations/{n}/journal.json"))
}

/// The mode and owner to put back on step `i` of generation `n`'s file:
/// its recorded `before_meta`, once checked against the root. gdrprov keeps
/// a file's owner when it writes it, so the file, where it is, has the owner
/// apply first read; one it removed takes root's or its directory's owner
/// only. A journal that says otherwise is refused, naming the field.
pub fn restore_meta(
    host: &Host,
    n: u64,
    i: usize,
    s: &Step,
) -> crate::error::Result<Option<FileMeta>> {
    let (Some(meta), Some(path)) = (s.before_meta, s.path.as_deref()) else {
        return Ok(None);
    };
    let refuse = |field: &str, why: String| {
        crate::error::Error::Journal(format!(
            "{}: field `steps[{i}].before_meta.{field}`: {why}; gdrprov will not restore {} with it (nothing was changed). \
             Restore the journal from a backup of the host (never edit it by hand){}",
            journal_file(host, n),
            host.display(path),
            if field == "mode" { "" } else { ", or chown the file back if it was changed since" }
        ))
    };
    if let Some(why) = mode_problem(meta.mode) {
        return Err(refuse("mode", why));
    }
    let now = host.meta(path)?;
    let owners: Vec<(u32, u32)> = match now {
        Some(m) => vec![(m.uid, m.gid)],
        None => {
            let parent = std::path::Path::new(path)
                .parent()
                .map(|p| p.display().to_string());
            let dir = parent.and_then(|p| host.meta(&p).ok().flatten());
            let mut v = vec![(0, 0)];
            v.extend(dir.map(|d| (d.uid, d.gid)));
            v
        }
    };
    if !owners.iter().any(|(u, _)| *u == meta.uid) {
        return Err(refuse(
            "uid",
            owner_why(path, "uid", meta.uid, now.map(|m| m.uid)),
        ));
    }
    if !owners.iter().any(|(u, g)| *u == meta.uid && *g == meta.gid) {
        return Err(refuse(
            "gid",
            owner_why(path, "gid", meta.gid, now.map(|m| m.gid)),
        ));
    }
    Ok(Some(meta))
}

fn owner_why(path: &str, what: &str, recorded: u32, now: Option<u32>) -> String {
    match now {
        Some(now) => format!(
            "it records {what} {recorded} for {path}, which has {what} {now}; gdrprov keeps a file's owner when it writes it, so that is not the owner apply first read"
        ),
        None => format!(
            "it records {what} {recorded} for {path}, which is not there now; a file gdrprov puts back gets root's owner or its directory's, never another"
        ),
    }
}

/// Why directory `d`, named by a step's `created_dirs`, is not one gdrprov
/// made and may remove: a symlink, not a directory, or owned by another
/// user than gdrprov's own state. `None` when it may go (once empty), or is
/// gone already.
pub fn created_dir_problem(host: &Host, d: &str) -> Option<String> {
    if let Some(to) = host.symlink_at(d) {
        return Some(format!(
            "{} is a symlink (to {to}), not a directory gdrprov made",
            host.display(d)
        ));
    }
    let m = host.meta(d).ok().flatten()?;
    let state_owner = host.meta(DIR).ok().flatten().map_or(0, |s| s.uid);
    (m.uid != state_owner).then(|| {
        format!(
            "{} is owned by uid {}, not by the user gdrprov runs as here (uid {state_owner}, the owner of {}): a user's directory, never one gdrprov made",
            host.display(d),
            m.uid,
            host.display(DIR)
        )
    })
}

/// Refuses, before anything is changed, a generation whose `created_dirs`
/// name a directory gdrprov did not make ([`created_dir_problem`]).
pub fn check_created_dirs(host: &Host, g: &Generation) -> crate::error::Result<()> {
    for (i, s) in g.steps.iter().enumerate() {
        for d in &s.created_dirs {
            if let Some(why) = created_dir_problem(host, d) {
                return Err(crate::error::Error::Journal(format!(
                    "{}: field `steps[{i}].created_dirs`: {why}; gdrprov will not remove it (nothing was changed). Restore the journal from a backup of the host (never edit it by hand)",
                    journal_file(host, g.generation)
                )));
            }
        }
    }
    Ok(())
}
