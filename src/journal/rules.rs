//! What a journal may say of the files it restores (issue 43), checked before
//! anything is restored: the one guard between a journal's record and the
//! root. Every generation read ([`super::StateStore::load_generation`]:
//! rollback, recover, a failed run's revert, `journal check`, `history`)
//! passes [`record_problem`]: each step's path plain and never gdrprov's own
//! state, its backups its generation's own `I.before`/`I.after`, its
//! recorded mode a mode, its `created_dirs` only the missing parents of its
//! own path, and (in a versioned journal) its `meta_sum`, a plain SHA-256
//! over these that catches damage, not an edit (whoever writes the journal
//! can recompute it: these rules are the guard). What needs the root itself
//! is checked where a file is put back ([`restore_meta`]: the owner the file
//! had when apply first read it; set-id, sticky and world-write bits never
//! put back) or a directory removed ([`created_dir_problem`]: one gdrprov
//! made, never a user's: left in place, said by [`restore_notes`]).
//! `before_meta` is private to the journal: no other reader exists.

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

/// [`FORBIDDEN_BITS`] together.
const FORBIDDEN_MASK: u32 = 0o7002;

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
        if let Some(p) = step_problem(g.generation, i, s, versioned) {
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

fn step_problem(n: u64, i: usize, s: &Step, versioned: bool) -> Option<(String, String)> {
    if let Some(p) = backup_problem(n, i, s) {
        return Some(p);
    }
    let path = s.path.as_deref()?;
    if let Some(why) = path_problem(path) {
        return Some(("path".into(), why));
    }
    // Only a mode that is none is refused here: set-id, sticky and
    // world-write bits are a file's own (a 0666 nccl.conf, any file of an
    // ESP mounted umask=000) in a journal an older release wrote, so they
    // are dealt with where the file is put back ([`restore_meta`]).
    if let Some(m) = s.before_meta.filter(|m| m.mode > 0o7777) {
        return Some((
            "before_meta.mode".into(),
            format!("{:o} is not a file mode (at most 7777)", m.mode),
        ));
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

/// A step's backups are its generation's own `{i}.before` and `{i}.after`,
/// the names every gdrprov release writes: a name elsewhere (another
/// generation's, one that climbs out) has no checksum in this journal and
/// would be restored unchecked, so it is refused.
fn backup_problem(n: u64, i: usize, s: &Step) -> Option<(String, String)> {
    let dir = super::generation_dir(n);
    for (field, name, kind) in [
        ("before", &s.before, "before"),
        ("after", &s.after, "after"),
    ] {
        let want = format!("{dir}/{i}.{kind}");
        match name.as_deref() {
            Some(v) if v != want || s.path.is_none() => {
                return Some((
                    field.into(),
                    format!("{v:?} is not this step's backup ({want:?}, the only name gdrprov writes there)"),
                ))
            }
            _ => {}
        }
    }
    None
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
    if meta.mode > 0o7777 {
        return Err(refuse(
            "mode",
            format!("{:o} is not a file mode", meta.mode),
        ));
    }
    // Set-id, sticky and world-write bits are never put back: the file is
    // restored without them ([`restore_notes`] says so). Safer than
    // refusing the file: a rollback stopped there would leave gdrprov's
    // content in place for good, while a mode without those bits grants
    // less than either the old or the new file did.
    let meta = FileMeta {
        mode: meta.mode & !FORBIDDEN_MASK,
        ..meta
    };
    let now = host.meta(path)?;
    let owners: Vec<(u32, u32)> = match now {
        Some(m) => vec![(m.uid, m.gid)],
        None => {
            let parent = std::path::Path::new(path)
                .parent()
                .map(|p| p.display().to_string());
            let dir = parent.and_then(|p| host.meta(&p).ok().flatten());
            // A removed file gets back root's owner or its directory's,
            // with whatever group it had (root:gpuadm 0640): a group
            // gives no set-id power, the setgid bit is refused above.
            let mut v = vec![(0, meta.gid)];
            v.extend(dir.map(|d| (d.uid, meta.gid)));
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

/// What restoring generation `g` leaves as it was, said before anything
/// is changed: a directory its steps made that another user or a package
/// took over since ([`created_dir_problem`]: never removed, the rollback
/// goes on), a mode put back without the bits gdrprov never restores.
pub fn restore_notes(host: &Host, g: &Generation) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, s) in g.steps.iter().enumerate() {
        for d in &s.created_dirs {
            if let Some(why) = created_dir_problem(host, d) {
                notes.push(format!(
                    "{} (field `steps[{i}].created_dirs`): {why}; gdrprov leaves it in place",
                    journal_file(host, g.generation)
                ));
            }
        }
        if let (Some(m), Some(path)) = (s.before_meta, s.path.as_deref()) {
            let noted = m.mode <= 0o7777 && !host.on_fat(path);
            if let Some(why) = noted.then(|| mode_problem(m.mode)).flatten() {
                notes.push(format!(
                    "{}: {why}; it is put back with mode {:04o}",
                    host.display(path),
                    m.mode & !FORBIDDEN_MASK
                ));
            }
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_file_is_put_back_with_its_own_group() {
        let t = tempfile::tempdir().unwrap();
        let host = Host::open(t.path(), true).unwrap();
        host.create_dir_all("/etc", 0o755).unwrap();
        let dir_uid = host.meta("/etc").unwrap().unwrap().uid;
        let mut s = Step::new("x".into(), Some("/etc/nccl.conf".into()));
        for (uid, gid, ok) in [
            (0, 0, true),
            (0, 1234, true),
            (dir_uid, 777, true),
            (4242, 1234, dir_uid == 4242),
        ] {
            s.before_meta = Some(FileMeta {
                mode: 0o640,
                uid,
                gid,
            });
            let r = restore_meta(&host, 1, 0, &s);
            assert_eq!(
                r.is_ok(),
                ok,
                "{uid}:{gid}: {:?}",
                r.err().map(|e| e.to_string())
            );
        }
    }
}
