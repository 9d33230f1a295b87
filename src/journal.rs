//! What gdrprov owns and what it did. Under `var/lib/gdrprov/` in the root:
//! `state.json` (files and kernel arguments gdrprov owns, commands still
//! owed), `generations/N/journal.json` (each apply: steps, before/after
//! copies of every file, the state before and after) and `lock`.
//! Everything here is 0600 in 0700 directories: backups can hold secrets.

use crate::error::{Error, Result};
use crate::host::{holder_of, write_pid, CommandSpec, FileMeta, Host, ReadLimit, WriteOptions};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub mod doc;
mod rules;
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

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// The last generation that completed, apply or rollback (0: none).
    pub generation: u64,
    pub profiles: Vec<String>,
    /// How apply found each of `profiles`, in the same order: a built-in
    /// or a file (`recheck` resolves them the same way: a file only as
    /// `/etc/gdrprov/NAME.yaml` of the root). Absent in older states.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profile_sources: Vec<ProfileSource>,
    /// Whole files gdrprov owns, with where the pre-gdrprov copy is kept.
    pub files: BTreeMap<String, OwnedFile>,
    /// Kernel arguments gdrprov added (and so may remove).
    #[serde(default)]
    pub kernel_args: Vec<String>,
    /// Commands an apply with `--no-exec` left for later.
    #[serde(default)]
    pub pending_commands: Vec<CommandSpec>,
    /// Keys of /etc/nccl.conf gdrprov set (and so may change or remove);
    /// every other line of that file belongs to the user.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nccl_keys: Vec<String>,
    /// A trial boot set up by `apply --trial` and not yet committed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trial: Option<Trial>,
}

/// Where a profile of `state.json` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProfileSource {
    BuiltIn,
    File,
}

/// A pending trial boot: the profiles whose command line the one-shot entry
/// holds, and how to recognise that it is what runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trial {
    /// The profiles as given to `apply` (files made absolute), for `commit`.
    pub profiles: Vec<String>,
    /// The boot entry id given to grub-reboot / grub2-reboot.
    pub entry: String,
    /// The entry's kernel arguments (root= and ro aside).
    pub args: Vec<String>,
    /// Arguments of the default entry that the trial entry does not have:
    /// when one of them is running, the trial is not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OwnedFile {
    /// Backup of the file as it was before gdrprov first wrote it, relative
    /// to the state directory; `None` when gdrprov created it.
    pub original: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    InProgress,
    Complete,
    /// Failed and every written file was put back.
    Reverted,
    /// Failed, and putting its files back failed too: `gdrprov recover`
    /// finishes the job once the cause is fixed.
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Apply,
    Rollback,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub path: Option<String>,
    /// Backup of the file before this step (relative to the state dir);
    /// `None` when the file did not exist.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub before: Option<String>,
    /// Mode and owner as apply first read the file: read only through
    /// [`restore_meta`], which checks them against the root.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    before_meta: Option<FileMeta>,
    /// Checksum and size of the `before` copy, checked before it is restored.
    /// Absent in journals of older versions: their backups are restored
    /// unchecked, as those versions did.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub before_sum: Option<Sum>,
    /// Copy of what this step wrote; `None` for a removal.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub after: Option<String>,
    /// Checksum and size of the `after` copy (absent in older journals).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub after_sum: Option<Sum>,
    /// SHA-256 over `path`, `before`, `before_meta` and `created_dirs`
    /// (`rules`); absent in journals without a format version.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub meta_sum: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub command: Option<CommandSpec>,
    /// Directories this step's write creates (they did not exist when the
    /// generation was prepared), deepest first: a rollback removes those
    /// left empty.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub created_dirs: Vec<String>,
    pub done: bool,
    #[serde(default)]
    pub pending: bool,
}

/// What a backup held when gdrprov wrote it: its SHA-256 (hex) and size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sum {
    pub sha256: String,
    pub size: u64,
}

impl Sum {
    pub fn of(bytes: &[u8]) -> Sum {
        use sha2::Digest;
        let digest = sha2::Sha256::digest(bytes);
        Sum {
            sha256: digest.iter().map(|b| format!("{b:02x}")).collect(),
            size: bytes.len() as u64,
        }
    }
}

impl std::fmt::Display for Sum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sha256 {} ({} bytes)", self.sha256, self.size)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generation {
    pub generation: u64,
    pub kind: Kind,
    /// For a rollback: the generations it undid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub undoes: Vec<u64>,
    /// For an apply: the rollback generation that undid it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_back_by: Option<u64>,
    /// Seconds since the Unix epoch.
    pub started: u64,
    /// When the run ended (complete or reverted), seconds since the Unix
    /// epoch; absent in journals of older versions and while in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<u64>,
    /// Who ran it: `SUDO_USER` when run through sudo, else the user name
    /// (or `uid N`); absent in journals of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub profiles: Vec<String>,
    /// The command that made it when that is not plain `apply` or
    /// `rollback`: `commit` (a trial boot made permanent), so that
    /// `recover` completes an interrupted commit instead of undoing it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its own directory, relative to the state dir (`generations/N`),
    /// checked when it is read; absent in journals of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    pub status: Status,
    pub steps: Vec<Step>,
    pub state_before: State,
    pub state_after: State,
}

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
                "{} holds a generation numbered {}, past the highest gdrprov makes ({}); it was not made by gdrprov, so nothing was changed. Run `gdrprov journal check`, and remove that directory if it is not gdrprov's",
                self.host.display(&Self::path("generations")),
                n - 1,
                crate::journal_proof::MAX_GENERATION
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
            "a step of the journal names {path:?}, which gdrprov never writes ({e}); the journal was edited or damaged, so gdrprov will not act on it (nothing was changed). Run `gdrprov journal check` to see every problem"
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
