//! The journal's records: what gdrprov owns ([`State`]: files, kernel
//! arguments, commands still owed, a pending trial) and what each run did
//! ([`Generation`]: its steps, each with its before/after copies and sums).
//! Where they are kept is [`super::StateStore`].

use crate::host::{CommandSpec, FileMeta};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// [`super::restore_meta`], which checks them against the root.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub(super) before_meta: Option<FileMeta>,
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
