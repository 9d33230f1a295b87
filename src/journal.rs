//! What gdrprov owns and what it did. Under `var/lib/gdrprov/` in the root:
//! `state.json` (files and kernel arguments gdrprov owns, commands still
//! owed), `generations/N/journal.json` (each apply: steps, before/after
//! copies of every file, the state before and after) and `lock`.
//! Everything here is 0600 in 0700 directories: backups can hold secrets.

use crate::error::{Error, Result};
use crate::host::{holder_of, write_pid, FileMeta, Host, ReadLimit, WriteOptions};
use serde::Serialize;

pub mod doc;
mod record;
mod rules;
pub use record::{Generation, Kind, OwnedFile, ProfileSource, State, Status, Step, Sum, Trial};
pub use rules::{created_dir_problem, mode_problem, restore_meta, restore_notes};

pub const DIR: &str = "/var/lib/gdrprov";
const STAGING_SUFFIX: &str = ".new";

/// Where generation `n` is made before it exists (relative to [`DIR`]):
/// `generations/.N.new`, renamed to `generations/N` once its backups and
/// journal are on disk ([`StateStore::publish_generation`]). So a generation
/// directory always holds its journal; a power cut while one is made leaves
/// only this, which no command reads as a generation and the next run
/// removes (nothing in the root had been changed yet).
pub fn staging_dir(n: u64) -> String {
    format!("generations/.{n}{STAGING_SUFFIX}")
}

/// Generation `n`'s directory (relative to [`DIR`]), once it exists.
pub fn generation_dir(n: u64) -> String {
    format!("generations/{n}")
}

/// Placeholder in a planned state for "the backup this generation takes".
pub const PENDING_BACKUP: &str = "<this generation>";
const PRIVATE: WriteOptions = WriteOptions {
    meta: Some(FileMeta {
        mode: 0o600,
        uid: 0,
        gid: 0,
    }),
    new_mode: 0o600,
};

/// Access to the state directory of one root.
pub struct StateStore<'a> {
    host: &'a Host,
}

impl<'a> StateStore<'a> {
    pub fn new(host: &'a Host) -> Self {
        StateStore { host }
    }

    fn path(rel: &str) -> String {
        format!("{DIR}/{rel}")
    }

    pub fn load_state(&self) -> Result<State> {
        match self
            .host
            .read_text_limited(&Self::path("state.json"), ReadLimit::State)?
        {
            None => Ok(State::default()),
            Some(text) => {
                let st: State = doc::parse(&text)
                    .map(|p| p.doc)
                    .map_err(|r| (r.field, r.why))
                    .and_then(|st| rules::state_problem(&st).map_or(Ok(st), Err))
                    .map_err(|(field, why)| {
                        Error::Journal(format!(
                            "{} {}{why}; gdrprov will not act on it (nothing was changed). Restore it from the latest generation's journal.json (its state_after) or remove {} to start over",
                            self.host.display(&Self::path("state.json")),
                            field_of(&field),
                            self.host.display(DIR)
                        ))
                    })?;
                Ok(st)
            }
        }
    }

    pub fn save_state(&self, state: &State) -> Result<()> {
        self.write_private("state.json", &to_json(state)?)
    }

    /// Reads a backup of a generation (`generations/N/I.before|after`),
    /// checked against the checksum its journal recorded: a backup that
    /// does not match is refused, never restored.
    pub fn read_backup(&self, rel: &str) -> Result<String> {
        let shown = || self.host.display(&Self::path(rel));
        let bytes = self
            .host
            .read(&Self::path(rel))?
            .ok_or_else(|| Error::Journal(format!("backup {} is missing", shown())))?;
        if let Some(expected) = self.recorded_sum(rel)? {
            let found = Sum::of(&bytes);
            if found != expected {
                return Err(Error::Journal(format!(
                    "backup {} is not what gdrprov wrote: its journal says {expected}, the file has {found}; \
                     it was changed or damaged, so gdrprov will not restore from it (nothing was changed). \
                     Put the original copy back from a backup of {}, or restore the file it stands for by hand",
                    shown(),
                    self.host.display(DIR)
                )));
            }
        }
        String::from_utf8(bytes).map_err(|_| Error::BadPath {
            path: shown(),
            why: "it is not valid UTF-8 text, so gdrprov will not edit it".into(),
        })
    }

    /// The checksum the journal of the backup's generation recorded for it;
    /// `None` for a generation written by an older version (no checksums:
    /// its backups are restored unchecked, as that version would) or a path
    /// that is not a generation's backup.
    fn recorded_sum(&self, rel: &str) -> Result<Option<Sum>> {
        let Some(n) = rel
            .strip_prefix("generations/")
            .and_then(|r| r.split_once('/'))
            .and_then(|(n, _)| n.parse::<u64>().ok())
        else {
            return Ok(None);
        };
        let g = self.load_generation(n)?;
        Ok(g.steps.iter().find_map(|s| {
            if s.before.as_deref() == Some(rel) {
                s.before_sum.clone()
            } else if s.after.as_deref() == Some(rel) {
                s.after_sum.clone()
            } else {
                None
            }
        }))
    }

    /// Creates a directory of the state dir (0700), with `/var/lib` made
    /// 0755 first when an image root lacks it.
    fn create_private_dir(&self, dir: &str) -> Result<()> {
        if let Some((parent, _)) = DIR.rsplit_once('/') {
            self.host.create_dir_all(parent, 0o755)?;
        }
        self.host.create_dir_all(dir, 0o700)
    }

    pub fn write_private(&self, rel: &str, data: &[u8]) -> Result<()> {
        let path = Self::path(rel);
        if let Some((dir, _)) = path.rsplit_once('/') {
            self.create_private_dir(dir)?;
        }
        self.host.write_atomic(&path, data, PRIVATE)
    }

    /// A backup's bytes as they are on disk (`None`: missing), unchecked:
    /// for `journal check`, which compares them itself.
    pub fn backup_bytes(&self, rel: &str) -> Result<Option<Vec<u8>>> {
        self.host.read(&Self::path(rel))
    }

    /// Every generation directory, with a journal or not, ascending.
    pub fn generation_dirs(&self) -> Vec<u64> {
        self.all_dirs()
    }

    /// Generations with a journal, ascending; a generation directory that
    /// is a symlink or past the bound is one too, so that reading it fails
    /// ([`StateStore::load_generation`]) instead of it being passed over.
    pub fn generation_numbers(&self) -> Vec<u64> {
        self.all_dirs()
            .into_iter()
            .filter(|n| {
                self.host
                    .exists(&Self::path(&format!("generations/{n}/journal.json")))
                    || crate::journal_proof::directory_problem(self.host, DIR, *n).is_some()
            })
            .collect()
    }

    /// The number for a new generation: past every directory, even one a
    /// failed run left without a journal. Refused past the bound.
    pub fn next_generation(&self) -> Result<u64> {
        let n = self
            .all_dirs()
            .last()
            .copied()
            .unwrap_or(0)
            .saturating_add(1);
        if n > crate::journal_proof::MAX_GENERATION {
            return Err(Error::Journal(format!(
                "{} holds a generation numbered {}, past the highest gdrprov makes ({}); it was not made by gdrprov, so nothing was changed. Run {}, and remove that directory if it is not gdrprov's",
                self.host.display(&Self::path("generations")),
                n - 1,
                crate::journal_proof::MAX_GENERATION,
                crate::suggest::Suggest::new(crate::names::JOURNAL_CHECK).shown(&crate::suggest::Given::none())
            )));
        }
        Ok(n)
    }

    fn all_dirs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .host
            .list_dir(&Self::path("generations"))
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }

    /// Reads generation `n`'s journal and proves it is `n`'s own
    /// ([`crate::journal_proof`]): its directory real and in bounds, its number,
    /// directory and backups its own.
    pub fn load_generation(&self, n: u64) -> Result<Generation> {
        let refuse = |why: String| {
            Error::Journal(format!(
                "generation {n}: {why}; gdrprov will not act on it (nothing was changed). Put {} back from a backup of the host",
                self.host.display(&Self::path("generations"))
            ))
        };
        if let Some(why) = crate::journal_proof::directory_problem(self.host, DIR, n) {
            return Err(refuse(why));
        }
        let g = self.load_generation_unproven(n)?;
        let seen = crate::journal_proof::Generation {
            generation: g.generation,
            directory: g.directory.as_deref(),
            backups: g
                .steps
                .iter()
                .flat_map(|s| [s.before.as_deref(), s.after.as_deref()])
                .flatten()
                .collect(),
        };
        match crate::journal_proof::identity_problem(n, &seen) {
            Some(why) => Err(refuse(why)),
            None => Ok(g),
        }
    }

    fn load_generation_unproven(&self, n: u64) -> Result<Generation> {
        let rel = format!("generations/{n}/journal.json");
        let text = self
            .host
            .read_text_limited(&Self::path(&rel), ReadLimit::Journal)?
            .ok_or_else(|| Error::Journal(format!("generation {n} has no journal.json")))?;
        doc::parse::<Generation>(&text)
            .map_err(|r| (r.field, r.why))
            .and_then(|p| rules::record_problem(&p.doc, p.versioned).map_or(Ok(p.doc), Err))
            .map_err(|(field, why)| {
                Error::Journal(format!(
                    "{} {}{why}; gdrprov will not act on it (nothing was changed). Restore it from a backup of the host (never edit a journal by hand)",
                    rules::journal_file(self.host, n),
                    field_of(&field)
                ))
            })
    }

    pub fn save_generation(&self, g: &Generation) -> Result<()> {
        self.write_private(
            &format!("generations/{}/journal.json", g.generation),
            &to_json(&rules::sealed(g))?,
        )
    }

    /// Writes the journal of a generation still being made, in its
    /// [`staging_dir`].
    pub fn save_staged_generation(&self, g: &Generation) -> Result<()> {
        self.write_private(
            &format!("{}/journal.json", staging_dir(g.generation)),
            &to_json(&rules::sealed(g))?,
        )
    }

    /// Removes a generation that could not be started (its backups could
    /// not all be written), made or half made, so that it leaves no trace.
    pub fn remove_generation_dir(&self, n: u64) -> Result<()> {
        self.host.remove_dir_all(&Self::path(&staging_dir(n)))?;
        self.host.remove_dir_all(&Self::path(&generation_dir(n)))
    }

    /// Removes what a run cut short while making its generation left
    /// ([`staging_dir`]: backups, maybe a journal, never a change to the
    /// root). Called under the lock.
    pub fn remove_staged_leftovers(&self) -> Result<()> {
        for name in self.host.list_dir(&Self::path("generations")) {
            let Some(n) = name
                .strip_prefix('.')
                .and_then(|r| r.strip_suffix(STAGING_SUFFIX))
                .and_then(|r| r.parse::<u64>().ok())
            else {
                continue;
            };
            self.host.remove_dir_all(&Self::path(&staging_dir(n)))?;
        }
        Ok(())
    }

    /// Makes generation `n` exist: its [`staging_dir`], with its backups and
    /// journal on disk, becomes `generations/N` in one rename.
    pub fn publish_generation(&self, n: u64) -> Result<()> {
        self.host.rename_dir(
            &Self::path(&staging_dir(n)),
            &Self::path(&generation_dir(n)),
        )
    }

    /// Sets aside `bytes` of disk space beside a generation's backups
    /// (`reserve` in `dir`, relative to the state dir: the generation's
    /// staging dir while it is made), so that a run that fills the disk
    /// half-way can free it and still put every file back.
    pub fn reserve(&self, dir: &str, bytes: u64) -> Result<()> {
        self.host
            .reserve_space(&Self::path(&format!("{dir}/reserve")), bytes)
    }

    /// Frees the space set aside by [`StateStore::reserve`].
    pub fn release_reserve(&self, n: u64) -> Result<()> {
        self.host
            .remove(&Self::path(&format!("generations/{n}/reserve")))
    }

    /// Whether another gdrprov holds the lock of this root right now: ` (pid
    /// N)` (or empty when it wrote no pid), `None` when no one does. Takes
    /// nothing and creates nothing.
    pub fn lock_holder(&self) -> Option<String> {
        let (file, _) = self
            .host
            .open_lock_file(&Self::path("lock"), false)
            .ok()??;
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockSharedNonblock) {
            Ok(_) => None,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => Some(holder_of(&mut file)),
            Err(_) => None,
        }
    }

    /// Takes the apply lock of this root; fails at once if another run has it.
    /// The lock must be a regular file: a device node, FIFO, socket, symlink
    /// or directory there is refused before anything is written.
    pub fn lock(&self) -> Result<Lock> {
        self.create_private_dir(DIR)?;
        let Some((file, shown)) = self.host.open_lock_file(&Self::path("lock"), true)? else {
            return Err(Error::Journal("the lock file could not be created".into()));
        };
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(mut locked) => {
                write_pid(&mut locked);
                Ok(Lock::from(locked))
            }
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => Err(Error::Locked {
                path: shown,
                holder: holder_of(&mut file),
            }),
            Err((_, errno)) => Err(Error::io("lock", shown, std::io::Error::from(errno))),
        }
    }
}

/// Held for the whole apply or rollback; released when dropped.
pub type Lock = crate::host::FileLock;

fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    doc::to_json(v).map_err(Error::Journal)
}

/// What is wrong with a document, for a message: `is damaged: field `F`: `
/// (nothing for the whole document), or, for another version, that this
/// gdrprov cannot read it.
fn field_of(field: &str) -> String {
    match field {
        "" => "is damaged: ".into(),
        doc::FIELD => format!("cannot be read by this gdrprov: field `{field}`: "),
        _ => format!("is damaged: field `{field}`: "),
    }
}

/// A step's path as a journal must hold it: absolute and plain (no `..`).
/// One that climbs (an edited journal) is refused, never skipped.
pub fn journal_path(path: &str) -> Result<()> {
    match rules::path_problem(path) {
        None => Ok(()),
        Some(e) => Err(Error::Journal(format!(
            "a step of the journal names {path:?}, which gdrprov never writes ({e}); the journal was edited or damaged, so gdrprov will not act on it (nothing was changed). Run {} to see every problem",
            crate::suggest::Suggest::new(crate::names::JOURNAL_CHECK).shown(&crate::suggest::Given::none())
        ))),
    }
}

/// Seconds since the Unix epoch as RFC 3339 UTC (`2026-11-22T20:15:03Z`).
pub fn rfc3339(secs: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// Who runs gdrprov, for the journal: the user behind sudo, else this
/// process's user.
pub fn invoking_user() -> String {
    if let Some(u) = std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    let uid = nix::unistd::geteuid();
    match nix::unistd::User::from_uid(uid) {
        Ok(Some(u)) => u.name,
        _ => format!("uid {}", uid.as_raw()),
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
