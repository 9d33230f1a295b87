//! `gdrprov boot ...` and `gdrprov journal ...`: the boot entries, and the
//! journal of what gdrprov changed.

use crate::names;
use crate::ops;
use clap::{Args, Subcommand};
use std::path::Path;

#[derive(Debug, Subcommand)]
pub enum BootCommand {
    /// The boot entries with their kernel arguments: which is the default, which runs.
    List,
    /// Make ENTRY the default boot entry (grub-set-default / grub2-set-default; on Debian this
    /// also sets GRUB_DEFAULT=saved). Recorded in the journal.
    SetDefault(EntryArgs),
    /// Boot ENTRY at the next boot only (grub-reboot / grub2-reboot); later boots use the
    /// default again.
    Once(EntryArgs),
}

/// The entry of `boot set-default` and `boot once`.
#[derive(Debug, Args)]
pub struct EntryArgs {
    /// An entry as `gdrprov boot list` shows it (its id, `submenu>entry` path or title; for
    /// gdrprov's own entries also the entry name, e.g. gdrprov-gds).
    #[arg(value_name = "ENTRY")]
    pub entry: String,
    /// Run nothing: print the commands (and the GRUB_DEFAULT edit) that would run.
    #[arg(long)]
    pub no_exec: bool,
    #[command(flatten)]
    pub diff: super::apply::DiffArg,
}

impl BootCommand {
    pub fn name(&self) -> &'static str {
        match self {
            BootCommand::List => names::BOOT_LIST,
            BootCommand::SetDefault(_) => names::BOOT_SET_DEFAULT,
            BootCommand::Once(_) => names::BOOT_ONCE,
        }
    }

    /// What a boot command acts on: ROOT, read-only but for `--no-exec`.
    pub fn target(&self, root: &Path) -> ops::Target {
        let no_exec = match self {
            BootCommand::List => true,
            BootCommand::SetDefault(a) | BootCommand::Once(a) => a.no_exec,
        };
        ops::Target {
            no_exec,
            ..ops::Target::read_only(root.to_path_buf(), None)
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Verify the whole journal against the root: every generation finished, every backup as its
    /// checksum says, every step's path inside the root, the files in effect as gdrprov wrote
    /// them, the state file agreeing. Exit 0 when all is well, 3 when anything is wrong.
    Check,
}
