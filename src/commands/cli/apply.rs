//! `plan`, `apply`, `rollback`, `recover`, `commit`: the commands that change
//! a root (or show what they would change), and what they act on.

use super::{ArchArg, CpuVendorArg, YesArg};
use crate::ops;
use clap::Args;
use std::path::Path;

/// `--full-diff`, for the commands that show a plan.
#[derive(Debug, Clone, Copy, Args)]
pub struct DiffArg {
    /// Show every file's whole diff. Without it a file gdrprov creates whole (a GRUB entry
    /// script) in more than 20 lines is one summary line; --format json always has it.
    #[arg(long)]
    pub full_diff: bool,
}

/// What plan, apply and commit act on, besides `--root`.
#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Run no command (update-grub, modprobe, ...): list them as pending instead.
    #[arg(long)]
    pub no_exec: bool,
    #[command(flatten)]
    pub cpu: CpuVendorArg,
    #[command(flatten)]
    pub arch: ArchArg,
    /// Change nothing in the running kernel (no module loads or unloads): persistent state only,
    /// taking effect at the next boot. For image builds.
    #[arg(long)]
    pub no_reboot: bool,
    /// Go ahead even though the profile's hard requirements fail (they become warnings).
    #[arg(long)]
    pub force: bool,
    /// This host's kernel command line is set outside it (hypervisor, PXE, container): apply
    /// the rest of the profile and leave the boot part for you to set there.
    #[arg(long)]
    pub boot_elsewhere: bool,
    #[command(flatten)]
    pub diff: DiffArg,
}

/// `gdrprov plan`
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Built-in profile names or profile files.
    #[arg(required = true, value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Exit 0 when nothing is left to change, 2 when changes are pending, 1 on error.
    #[arg(long)]
    pub detailed_exitcode: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `gdrprov apply`
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// Built-in profile names or profile files (later ones override earlier ones).
    #[arg(required = true, value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Only show the plan (exactly `gdrprov plan`).
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub yes: YesArg,
    /// With --dry-run: exit 2 when changes are pending.
    #[arg(long)]
    pub detailed_exitcode: bool,
    /// Put the boot arguments in a one-shot entry for the next boot only
    /// (`gdrprov commit` makes them the default); other changes apply as usual.
    #[arg(long)]
    pub trial: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

/// `gdrprov rollback`
#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Undo this generation and every later one (default: the latest apply in effect).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub generation: Option<u64>,
    #[command(flatten)]
    pub yes: YesArg,
    /// Run no command: list the regeneration commands as pending.
    #[arg(long)]
    pub no_exec: bool,
    /// Restore files even if they were edited after gdrprov wrote them.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub diff: DiffArg,
}

/// `gdrprov recover`
#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    pub yes: YesArg,
    #[command(flatten)]
    pub diff: DiffArg,
    /// Run no command: list the regeneration commands as pending.
    #[arg(long)]
    pub no_exec: bool,
}

/// `gdrprov commit`
#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Accepted for symmetry with apply: commit never asks (it is meant for a systemd unit).
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

impl TargetArgs {
    pub fn to_target(&self, root: &Path) -> ops::Target {
        ops::Target {
            root: root.to_path_buf(),
            no_exec: self.no_exec,
            cpu_vendor: self.cpu.cpu_vendor,
            no_reboot: self.no_reboot,
            force: self.force,
            arch: self.arch.arch,
            boot_elsewhere: self.boot_elsewhere,
        }
    }
}

impl ApplyArgs {
    pub fn request(&self, root: &Path) -> ops::ProfilesRequest {
        ops::ProfilesRequest {
            profiles: self.profiles.clone(),
            target: self.target.to_target(root),
            trial: self.trial,
        }
    }
}

impl RecoverArgs {
    pub fn request(&self, root: &Path) -> ops::RecoverRequest {
        ops::RecoverRequest {
            root: root.to_path_buf(),
            no_exec: self.no_exec,
        }
    }
}

impl RollbackArgs {
    pub fn request(&self, root: &Path) -> ops::RollbackRequest {
        ops::RollbackRequest {
            root: root.to_path_buf(),
            generation: self.generation,
            no_exec: self.no_exec,
            force: self.force,
            preview: false,
        }
    }
}
