//! The journal proves itself before it is used (issue 37): a generation's
//! journal names its own number and directory, and every backup it lists
//! lies in that directory (two generation directories swapped, or one copied
//! over another, are refused instead of restoring the wrong generation's
//! bytes); a generation directory is a real directory, never a symlink
//! (gdrprov never makes one; one leading out of the root made `history` say
//! gdrprov had not changed the root); generation numbers are bounded. Read
//! by [`crate::journal`] each time it loads a generation; the state's check
//! against the journal is `apply::proof`.

use crate::host::Host;

/// What [`identity_problem`] reads of a journal (kept apart from
/// `journal::Generation` so that this file imports nothing of the journal).
pub struct Generation<'a> {
    pub generation: u64,
    pub directory: Option<&'a str>,
    pub backups: Vec<&'a str>,
}

/// The highest generation number gdrprov reads or makes: a million applies
/// and rollbacks is far beyond any host's life; a directory named past it is
/// not one gdrprov made.
pub const MAX_GENERATION: u64 = 1_000_000;

/// Why the journal read from `generations/N` is not generation `n`'s own;
/// `None` when it is. Journals of older versions have no `directory`: their
/// number and their backups' paths are checked all the same.
pub fn identity_problem(n: u64, g: &Generation) -> Option<String> {
    let dir = format!("generations/{n}");
    if g.generation != n {
        return Some(format!(
            "{dir}/journal.json is the journal of generation {} (generation directories swapped, renamed or copied)",
            g.generation
        ));
    }
    if let Some(d) = g.directory.filter(|d| *d != dir) {
        return Some(format!(
            "{dir}/journal.json says it belongs in {d} (generation directories swapped, renamed or copied)"
        ));
    }
    let own = format!("{dir}/");
    let stray = g.backups.iter().find(|b| {
        !b.strip_prefix(&own)
            .is_some_and(|name| !name.is_empty() && !name.contains('/'))
    });
    stray
        .map(|b| format!("{dir}/journal.json names a backup {b:?} outside its own directory {dir}"))
}

/// Why generation directory `n` cannot be read as one: past the bound, or a
/// symlink. `None` when it can.
pub fn directory_problem(host: &Host, store_dir: &str, n: u64) -> Option<String> {
    if n > MAX_GENERATION {
        return Some(format!(
            "generation directory {n} is past the highest number gdrprov makes ({MAX_GENERATION})"
        ));
    }
    let path = format!("{store_dir}/generations/{n}");
    host.symlink_at(&path).map(|to| {
        format!(
            "{} is a symlink (to {to}), not a directory gdrprov made",
            host.display(&path)
        )
    })
}
