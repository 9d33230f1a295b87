//! The command line's types, all of them: clap's parser and nothing else,
//! one file per command group (coreos-installer's `cmdline/` is the model).
//! The commands themselves are in src/commands/<command>.rs and take these
//! structs; the operations they call are in src/ops.rs. Options that more
//! than one command takes are one group here, flattened where they are used.
//! Every command's name is spelled once, in src/names.rs.

pub mod apply;
pub mod bench;
pub mod bench_node;
pub mod boot;
pub mod fleet;
pub mod profile;
pub mod shared;
pub mod usage;
pub mod values;
pub mod verify;

#[cfg(test)]
mod tests;

use crate::names;
pub use crate::output::Color;
use crate::output::Format;
pub use apply::{ApplyArgs, CommitArgs, PlanArgs, RecoverArgs, RollbackArgs, TargetArgs};
pub use bench::{BenchArgs, BenchCommand, CopyArgs, LoopbackArgs, PairArgs, ProbeArgs};
pub use boot::{BootCommand, EntryArgs, JournalCommand};
use clap::{Args, Parser, Subcommand, ValueEnum};
pub use fleet::FleetArgs;
pub use profile::ProfileCommand;
use std::path::PathBuf;
pub use verify::{DoctorArgs, InventoryArgs, RecheckArgs, VerifyArgs};

#[derive(Debug, Parser)]
#[command(
    name = "gdrprov",
    version,
    about = "Make a Linux GPU host ready for NVIDIA GPUDirect RDMA, and prove that it is",
    max_term_width = 100
)]
pub struct Cli {
    /// `--root` of the command that takes it (`/` where it takes none): see [`shared`].
    #[arg(skip = PathBuf::from("/"))]
    pub root: PathBuf,
    /// `--format` of the command that takes it (text where it takes none).
    #[arg(skip = Format::Text)]
    pub format: Format,
    /// `--color` of the command that takes it (auto where it takes none).
    #[arg(skip = Color::Auto)]
    pub color: Color,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show every change a profile needs: diffs, commands, reboots. Changes nothing.
    Plan(PlanArgs),
    /// Make the changes (asks first on a terminal unless --yes), recorded as a journal generation.
    Apply(ApplyArgs),
    /// Undo applies: restore every file of a generation (default: the latest) byte for byte.
    Rollback(RollbackArgs),
    /// Finish what an interrupted or failed run left: put back the files of an unfinished apply
    /// (then apply again), complete an interrupted rollback or commit.
    Recover(RecoverArgs),
    /// Check the host against profiles after apply and reboot: configuration, readiness (PCIe
    /// links, kernel log, GPUs, NICs), down to an RDMA loopback into GPU memory. Exit 0 ready, 3
    /// not ready.
    Verify(VerifyArgs),
    /// List the journal's generations.
    History,
    /// The journal itself: `journal check` verifies it against the root.
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Profiles: the built-in ones, one shown with `extends` resolved, validation, the JSON schema.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// Benchmarks of this machine's GPUs and RDMA NICs: RDMA loopback (host or GPU memory) and
    /// between two hosts (pair), each with a data check; the NIC dma-buf probe; GPU <-> host copy
    /// (each GPU, or all at once); GPU <-> GPU copy (p2p); NCCL all_reduce.
    Bench(BenchArgs),
    /// Across a fleet: the pair sweep (plan, report, simulate) that finds the bad node, rail
    /// and fabric path, and what Slurm is told.
    Fleet(FleetArgs),
    /// Every fact about the host (GPUs, driver, CUDA, RDMA, IOMMU, PCIe); --snapshot copies them.
    Inventory(InventoryArgs),
    /// Which profile fits this host and what stands in the way: findings with cause and fix.
    Doctor(DoctorArgs),
    /// Boot entries: list them, set the default, boot one once.
    #[command(subcommand)]
    Boot(BootCommand),
    /// Make a trial boot (`apply --trial`) permanent, once it is what runs.
    Commit(CommitArgs),
    /// Run as an Ansible module: read the module arguments from ARGS_FILE, print Ansible's JSON.
    /// (`gdrprov ARGS_FILE` does the same, as Ansible runs a binary module.)
    AnsibleModule {
        /// The module arguments, a JSON object (Ansible writes this file and passes its path).
        #[arg(value_name = "ARGS_FILE")]
        args_file: PathBuf,
    },
    /// Shell completions for bash, zsh or fish, on standard output.
    Completions {
        /// The shell to complete for.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// The manual page (roff), on standard output: `gdrprov man | man -l -`.
    Man,
    /// Quick verify (no loopback, bounded time) of the profiles last applied, for the packages'
    /// triggers when kernel modules change: refreshes the readiness marker and metrics.
    Recheck(RecheckArgs),
}

impl Command {
    /// The command's name as JSON output shows it (`boot list`, `profile show`).
    pub fn name(&self) -> String {
        let name = match self {
            Command::Plan(_) => names::PLAN,
            Command::Apply(a) if a.dry_run => names::PLAN,
            Command::Apply(_) => names::APPLY,
            Command::Rollback(_) => names::ROLLBACK,
            Command::Recover(_) => names::RECOVER,
            Command::Journal(JournalCommand::Check) => names::JOURNAL_CHECK,
            Command::Verify(_) => names::VERIFY,
            Command::History => names::HISTORY,
            Command::Profile(p) => p.name(),
            Command::Bench(b) => b.command.name(),
            Command::Fleet(f) => f.command.name(),
            Command::Inventory(_) => names::INVENTORY,
            Command::Doctor(_) => names::DOCTOR,
            Command::Boot(b) => b.name(),
            Command::Commit(_) => names::COMMIT,
            Command::AnsibleModule { .. } => names::ANSIBLE_MODULE,
            Command::Completions { .. } => names::COMPLETIONS,
            Command::Man => names::MAN,
            Command::Recheck(_) => names::RECHECK,
        };
        name.to_string()
    }

    /// `--full-diff`, for the commands that show a plan as text.
    pub fn full_diff(&self) -> bool {
        match self {
            Command::Plan(a) => a.target.diff.full_diff,
            Command::Apply(a) => a.target.diff.full_diff,
            Command::Commit(a) => a.target.diff.full_diff,
            Command::Rollback(a) => a.diff.full_diff,
            Command::Recover(a) => a.diff.full_diff,
            Command::Boot(BootCommand::SetDefault(a) | BootCommand::Once(a)) => a.diff.full_diff,
            _ => false,
        }
    }
}

/// `gdrprov completions SHELL`
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// `--cpu-vendor`, for every command that reads the IOMMU's needs from the CPU.
#[derive(Debug, Clone, Copy, Args)]
pub struct CpuVendorArg {
    /// CPU vendor for the IOMMU arguments when the root's /proc/cpuinfo cannot tell (image builds).
    #[arg(long, value_name = "VENDOR", value_parser = values::parser::<values::CpuVendorArg, crate::facts::CpuVendor>())]
    pub cpu_vendor: Option<crate::facts::CpuVendor>,
}

/// `--arch`, for the commands that plan or check the IOMMU arguments.
#[derive(Debug, Clone, Copy, Args)]
pub struct ArchArg {
    /// CPU architecture for the IOMMU arguments when the root cannot tell, or to override it
    /// (image builds for another architecture): x86_64 or aarch64 (arm64).
    #[arg(long, value_name = "ARCH", value_parser = values::parser::<values::ArchArg, crate::facts::arch::Arch>())]
    pub arch: Option<crate::facts::arch::Arch>,
}

/// `--yes`, for the commands that ask before they change anything.
#[derive(Debug, Clone, Copy, Args)]
pub struct YesArg {
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// `gdrprov completions SHELL`: the shell's completion script, from clap's tree.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut cmd = shared::command();
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut cmd, "gdrprov", &mut buf);
    buf
}

/// `gdrprov man`: the manual page (roff), from clap's tree.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(shared::command()).render(&mut buf)?;
    Ok(buf)
}

/// Parses one group of options alone, as a command that flattens it would
/// (the tests of the commands that turn the group into what they act on).
#[cfg(test)]
pub fn parse_group<A: Args>(argv: &[&str]) -> std::result::Result<A, String> {
    #[derive(Parser)]
    struct One<A: Args> {
        #[command(flatten)]
        group: A,
    }
    One::<A>::try_parse_from(argv)
        .map(|o| o.group)
        .map_err(|e| e.to_string())
}
