//! The command line's types: clap's parser, and nothing else. The commands
//! themselves are in src/commands/, the operations they call in src/ops.rs.

use crate::facts::CpuVendor;
use crate::ops;
pub use crate::output::Color;
use crate::output::Format;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

#[derive(Debug, Parser)]
#[command(
    name = "gdrprov",
    version,
    about = "Make a Linux GPU host ready for NVIDIA GPUDirect RDMA, and prove that it is",
    max_term_width = 100
)]
pub struct Cli {
    /// The root to read and change: `/` (the running system) or an image or snapshot directory.
    #[arg(long, global = true, default_value = "/", value_name = "DIR")]
    pub root: PathBuf,
    /// Output for people or for machines.
    #[arg(long, global = true, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Colour in diffs.
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    #[command(subcommand)]
    pub command: Command,
}

impl Command {
    /// The command's name as JSON output shows it (`boot list`, `profile show`).
    pub fn name(&self) -> String {
        use crate::commands::bench::BenchCommand;
        let name = match self {
            Command::Plan(_) => "plan",
            Command::Apply(a) if a.dry_run => "plan",
            Command::Apply(_) => "apply",
            Command::Rollback(_) => "rollback",
            Command::Recover(_) => "recover",
            Command::Journal(JournalCommand::Check) => "journal check",
            Command::Verify(_) => "verify",
            Command::History => "history",
            Command::Profile(ProfileCommand::List) => "profile list",
            Command::Profile(ProfileCommand::Show { .. }) => "profile show",
            Command::Profile(ProfileCommand::Validate { .. }) => "profile validate",
            Command::Profile(ProfileCommand::Schema) => "profile schema",
            Command::Bench(b) => match b.command {
                BenchCommand::Loopback(_) => "bench loopback",
                BenchCommand::Probe(_) => "bench probe",
                BenchCommand::Copy(_) => "bench copy",
                BenchCommand::P2p(_) => "bench p2p",
                BenchCommand::Nccl(_) => "bench nccl",
                BenchCommand::Pair(_) => "bench pair",
            },
            Command::Fleet(f) => crate::commands::sweep::name(&f.command),
            Command::Inventory(_) => "inventory",
            Command::Doctor(_) => "doctor",
            Command::Boot(BootCommand::List) => "boot list",
            Command::Boot(BootCommand::SetDefault(_)) => "boot set-default",
            Command::Boot(BootCommand::Once(_)) => "boot once",
            Command::Commit(_) => "commit",
            Command::AnsibleModule { .. } => "ansible-module",
            Command::Completions { .. } => "completions",
            Command::Man => "man",
            Command::Recheck(_) => "recheck",
        };
        name.to_string()
    }
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
    /// Check the host against profiles after apply and reboot, down to an RDMA loopback
    /// into GPU memory. Exit 0 ready, 3 not ready.
    Verify(VerifyArgs),
    /// List the journal's generations.
    History,
    /// The journal itself: `journal check` verifies it against the root.
    #[command(subcommand)]
    Journal(JournalCommand),
    /// Built-in profiles, validation and the JSON schema.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// RDMA loopback bandwidth with a data check (host or GPU memory), and the NIC dma-buf probe.
    Bench(crate::commands::bench::BenchArgs),
    /// Across a fleet: the pair sweep (plan, report, simulate) that finds the bad node, rail
    /// and fabric path, and what Slurm is told.
    Fleet(crate::commands::sweep::FleetArgs),
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
        #[arg(value_name = "ARGS_FILE")]
        args_file: PathBuf,
    },
    /// Shell completions for bash, zsh or fish, on standard output.
    Completions {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// The manual page (roff), on standard output: `gdrprov man | man -l -`.
    Man,
    /// Quick verify (no loopback, bounded time) of the profiles last applied, for the packages'
    /// triggers when kernel modules change: refreshes the readiness marker and metrics.
    Recheck(crate::commands::recheck::RecheckArgs),
}

#[derive(Debug, Args)]
pub struct InventoryArgs {
    /// Copy every file the probes read, and the output of every command they ran, into DIR
    /// (a new directory): `--root DIR` then gives the same answers on any machine.
    #[arg(long, value_name = "DIR")]
    pub snapshot: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "VENDOR")]
    pub cpu_vendor: Option<CpuVendor>,
}

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Profiles to check the host against (default: every built-in profile, and the best fit).
    #[arg(value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// An NCCL log (NCCL_DEBUG=INFO) whose lines are mapped to findings.
    #[arg(long, value_name = "FILE")]
    pub nccl_log: Option<PathBuf>,
    #[arg(long, value_enum, value_name = "VENDOR")]
    pub cpu_vendor: Option<CpuVendor>,
}

#[derive(Debug, Args)]
pub struct TargetArgs {
    /// Run no command (update-grub, modprobe, ...): list them as pending instead.
    #[arg(long)]
    pub no_exec: bool,
    /// CPU vendor for the IOMMU arguments when the root's /proc/cpuinfo cannot tell (image builds).
    #[arg(long, value_enum, value_name = "VENDOR")]
    pub cpu_vendor: Option<CpuVendor>,
    /// CPU architecture for the IOMMU arguments when the root cannot tell, or to override it
    /// (image builds for another architecture): x86_64 or aarch64 (arm64).
    #[arg(long, value_enum, value_name = "ARCH")]
    pub arch: Option<crate::facts::arch::Arch>,
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
}

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

#[derive(Debug, Args)]
pub struct ApplyArgs {
    #[arg(required = true, value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Only show the plan (exactly `gdrprov plan`).
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
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

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// Undo this generation and every later one (default: the latest apply in effect).
    #[arg(long, value_name = "N")]
    pub generation: Option<u64>,
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Run no command: list the regeneration commands as pending.
    #[arg(long)]
    pub no_exec: bool,
    /// Restore files even if they were edited after gdrprov wrote them.
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[arg(required = true, value_name = "PROFILE")]
    pub profiles: Vec<String>,
    /// Skip the RDMA loopback bandwidth test.
    #[arg(long)]
    pub no_loopback: bool,
    /// RDMA device for the loopback (default: the first ACTIVE port).
    #[arg(long, value_name = "DEV")]
    pub device: Option<String>,
    /// Seconds the loopback runs (default 3).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Loopback floor in Gb/s instead of the line-rate fraction (software RDMA devices).
    #[arg(long, value_name = "GBPS")]
    pub min_gbps: Option<f64>,
    /// CPU vendor when the root cannot tell (see plan).
    #[arg(long, value_enum, value_name = "VENDOR")]
    pub cpu_vendor: Option<CpuVendor>,
    /// CPU architecture when the root cannot tell (see plan).
    #[arg(long, value_enum, value_name = "ARCH")]
    pub arch: Option<crate::facts::arch::Arch>,
    /// Write a readiness marker into DIR: `ready` (with the summary) or `failed` (with the
    /// reasons), removing the other; for the first-boot unit (`/run/gdrprov`).
    #[arg(long, value_name = "DIR")]
    pub marker_dir: Option<PathBuf>,
    /// Also write Prometheus metrics to FILE atomically (node-exporter's textfile collector,
    /// e.g. /var/lib/node_exporter/textfile_collector/gdrprov.prom).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// Add the two-host check: `bench pair` from this host (client) to a listener on HOST
    /// (`gdrprov bench pair --listen` there), WRITE into its memory, data check and line rate.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub peer: Option<String>,
    /// The pair's shared secret [default: $GDRPROV_PAIR_TOKEN].
    #[arg(long, value_name = "FILE", requires = "peer")]
    pub token_file: Option<PathBuf>,
    /// Also write node-feature-discovery labels to FILE (gdrprov.ready, gdrprov.profile,
    /// gdrprov.rdma-path), e.g. /etc/kubernetes/node-feature-discovery/features.d/gdrprov.
    #[arg(long, value_name = "FILE")]
    pub nfd_file: Option<PathBuf>,
    /// How long NFD keeps those labels unless verify writes them again.
    #[arg(long, value_name = "DURATION", default_value = "1h", value_parser = humantime::parse_duration)]
    pub nfd_expiry: std::time::Duration,
}

#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// The built-in profiles.
    List,
    /// A profile after `extends` is resolved, as YAML.
    Show {
        #[arg(value_name = "PROFILE")]
        name: String,
    },
    /// Check profile files; every error is reported as file:line:col.
    Validate {
        #[arg(required = true, value_name = "FILE")]
        files: Vec<String>,
    },
    /// The JSON schema of the profile format, for editors.
    Schema,
}

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

#[derive(Debug, Args)]
pub struct EntryArgs {
    /// An entry as `gdrprov boot list` shows it (its id, `submenu>entry` path or title; for
    /// gdrprov's own entries also the entry name, e.g. gdrprov-gds).
    #[arg(value_name = "ENTRY")]
    pub entry: String,
    /// Run nothing: print the commands (and the GRUB_DEFAULT edit) that would run.
    #[arg(long)]
    pub no_exec: bool,
}

#[derive(Debug, Args)]
pub struct CommitArgs {
    /// Accepted for symmetry with apply: commit never asks (it is meant for a systemd unit).
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub target: TargetArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

impl TargetArgs {
    pub fn to_target(&self, root: &Path) -> ops::Target {
        ops::Target {
            root: root.to_path_buf(),
            no_exec: self.no_exec,
            cpu_vendor: self.cpu_vendor,
            no_reboot: self.no_reboot,
            force: self.force,
            arch: self.arch,
            boot_elsewhere: self.boot_elsewhere,
        }
    }
}

impl BootCommand {
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

impl ApplyArgs {
    pub fn request(&self, root: &Path) -> ops::ProfilesRequest {
        ops::ProfilesRequest {
            profiles: self.profiles.clone(),
            target: self.target.to_target(root),
            trial: self.trial,
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

#[derive(Debug, Args)]
pub struct RecoverArgs {
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Run no command: list the regeneration commands as pending.
    #[arg(long)]
    pub no_exec: bool,
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
        }
    }
}

impl VerifyArgs {
    pub fn request(&self, root: &Path) -> ops::VerifyRequest {
        ops::VerifyRequest {
            root: root.to_path_buf(),
            profiles: self.profiles.clone(),
            no_loopback: self.no_loopback,
            device: self.device.clone(),
            duration: self.duration,
            min_gbps: self.min_gbps,
            cpu_vendor: self.cpu_vendor,
            arch: self.arch,
            peer: self.peer.clone(),
            token_file: self.token_file.clone(),
        }
    }
}
