//! The command line: parsing and one function per command.

use crate::apply;
use crate::error::{Error, Result};
use crate::facts::{CpuVendor, Facts};
use crate::host::Host;
use crate::journal::{Kind, StateStore};
use crate::plan::Plan;
use crate::profile::{self, Composed};
use crate::render::{self, Format, Style};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

/// Exit codes (also in the README).
pub mod exit {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    /// `--detailed-exitcode`: changes are pending.
    pub const CHANGES: i32 = 2;
    /// `verify`: a check failed; the host is not ready.
    pub const NOT_READY: i32 = 3;
    /// `--detailed-exitcode`: nothing left to change on the host, but the kernel command line,
    /// set outside it (hypervisor, PXE), lacks what the profile wants.
    pub const BOOT_ELSEWHERE: i32 = 4;
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show every change a profile needs: diffs, commands, reboots. Changes nothing.
    Plan(PlanArgs),
    /// Make the changes (asks first on a terminal unless --yes), recorded as a journal generation.
    Apply(ApplyArgs),
    /// Undo applies: restore every file of a generation (default: the latest) byte for byte.
    Rollback(RollbackArgs),
    /// Check the host against profiles after apply and reboot, down to an RDMA loopback
    /// into GPU memory. Exit 0 ready, 3 not ready.
    Verify(VerifyArgs),
    /// List the journal's generations.
    History,
    /// Built-in profiles, validation and the JSON schema.
    #[command(subcommand)]
    Profile(ProfileCommand),
    /// RDMA loopback bandwidth with a data check (host or GPU memory), and the NIC dma-buf probe.
    Bench(crate::bench::BenchArgs),
    /// Every fact about the host (GPUs, driver, CUDA, RDMA, IOMMU, PCIe); --snapshot copies them.
    Inventory(InventoryArgs),
    /// Which profile fits this host and what stands in the way: findings with cause and fix.
    Doctor(DoctorArgs),
    /// Boot entries: list them, set the default, boot one once.
    #[command(subcommand)]
    Boot(crate::bootcmd::BootCommand),
    /// Make a trial boot (`apply --trial`) permanent, once it is what runs.
    Commit(crate::bootcmd::CommitArgs),
    /// Run as an Ansible module: read the module arguments from ARGS_FILE, print Ansible's JSON.
    /// (`gdrprov ARGS_FILE` does the same, as Ansible runs a binary module.)
    AnsibleModule {
        #[arg(value_name = "ARGS_FILE")]
        args_file: PathBuf,
    },
    /// Shell completions for bash, zsh or fish, on standard output.
    Completions {
        #[arg(value_enum)]
        shell: crate::fleet::Shell,
    },
    /// The manual page (roff), on standard output: `gdrprov man | man -l -`.
    Man,
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

/// Parses the arguments and runs the command; returns the exit code.
pub fn main() -> i32 {
    // Ansible runs a binary module as `MODULE ARGS_FILE`.
    if let Some(path) = crate::ansible::args_file_from_argv() {
        return crate::ansible::main(&path);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // Usage errors are 1, like every other error: 2 means "changes pending".
            return if e.use_stderr() {
                exit::ERROR
            } else {
                exit::OK
            };
        }
    };
    match run(&cli) {
        Ok(code) => code,
        Err(e) => {
            let _ = std::io::stdout().flush();
            eprintln!("gdrprov: error: {e}");
            exit::ERROR
        }
    }
}

pub fn run(cli: &Cli) -> Result<i32> {
    if cli.format == Format::Prometheus && !matches!(cli.command, Command::Verify(_)) {
        return Err(Error::Usage(
            "--format prometheus is only for `gdrprov verify` (metrics of its checks); use text or json here".into(),
        ));
    }
    match &cli.command {
        Command::Plan(a) => cmd_plan(cli, &a.profiles, &a.target, a.detailed_exitcode, false),
        Command::Apply(a) if a.dry_run => {
            cmd_plan(cli, &a.profiles, &a.target, a.detailed_exitcode, a.trial)
        }
        Command::Apply(a) => cmd_apply(cli, a),
        Command::Rollback(a) => cmd_rollback(cli, a),
        Command::Verify(a) => cmd_verify(cli, a),
        Command::History => cmd_history(cli),
        Command::Profile(p) => cmd_profile(cli, p),
        Command::Bench(b) => {
            let format = if cli.format == Format::Json {
                crate::bench::BenchFormat::Json
            } else {
                crate::bench::BenchFormat::Text
            };
            crate::bench::run_bench(b, format).map_err(|e| Error::Refused(e.to_string()))
        }
        Command::Inventory(a) => {
            crate::inventory::run(&cli.root, cli.format, a.snapshot.as_deref(), a.cpu_vendor)
        }
        Command::Doctor(a) => crate::doctor::run(
            &cli.root,
            cli.format,
            &a.profiles,
            a.nccl_log.as_deref(),
            a.cpu_vendor,
        ),
        Command::Boot(b) => crate::bootcmd::boot(cli, b),
        Command::Commit(a) => crate::bootcmd::commit(cli, a),
        Command::AnsibleModule { args_file } => Ok(crate::ansible::main(args_file)),
        Command::Completions { shell } => crate::fleet::completions(*shell),
        Command::Man => crate::fleet::man(),
    }
}

pub(crate) fn style(cli: &Cli) -> Style {
    Style {
        color: match cli.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
            }
        },
    }
}

pub(crate) fn load_profiles(specs: &[String]) -> Result<Composed> {
    let loaded = specs
        .iter()
        .map(|s| profile::load(s))
        .collect::<Result<Vec<_>>>()?;
    profile::compose(&loaded)
}

pub(crate) fn make_plan(
    host: &Host,
    desired: &Composed,
    target: &TargetArgs,
    trial: Option<&[String]>,
) -> Result<Plan> {
    let mut facts = Facts::gather(host, target.cpu_vendor);
    facts.arch.override_with(target.arch);
    plan_with_facts(host, desired, target, trial, &facts).map(|(plan, _)| plan)
}

/// `make_plan` for a caller that already gathered the facts (verify); gives
/// what planning read too.
fn plan_with_facts(
    host: &Host,
    desired: &Composed,
    target: &TargetArgs,
    trial: Option<&[String]>,
    facts: &Facts,
) -> Result<(Plan, crate::facts::planning::PlanFacts)> {
    let state = StateStore::new(host).load_state()?;
    let opts = crate::prepare::Options {
        live_changes: host.is_live() && !target.no_reboot,
        trial: trial.map(crate::bootcmd::trial_specs),
    };
    // Requirements first: every failed one is reported, before any
    // module can stop on a detail (a missing GRUB, a missing module).
    let reqs = crate::requirements::evaluate(&desired.doc.requires, facts);
    let warnings = crate::requirements::gate(&reqs, target.force).map_err(Error::Refused)?;
    let (mut plan, seen) = crate::prepare::plan(host, facts, desired, &state, &opts)?;
    plan.warnings.extend(warnings);
    Ok((plan, seen))
}

pub(crate) fn print_report(cli: &Cli, r: &render::Report) {
    match cli.format {
        Format::Json => println!("{}", render::json(r)),
        Format::Text | Format::Prometheus => print!("{}", render::text(r, style(cli))),
    }
}

fn cmd_plan(
    cli: &Cli,
    specs: &[String],
    target: &TargetArgs,
    detailed: bool,
    trial: bool,
) -> Result<i32> {
    let desired = load_profiles(specs)?;
    let host = Host::open(&cli.root, target.no_exec)?;
    let plan = make_plan(&host, &desired, target, trial.then_some(specs))?;
    print_report(
        cli,
        &render::report("plan", &host, desired.names.clone(), &plan, None),
    );
    let boot_owed = plan
        .boot_elsewhere
        .as_ref()
        .is_some_and(|b| b.satisfied != Some(true));
    Ok(if detailed && !plan.is_empty() {
        exit::CHANGES
    } else if detailed && boot_owed {
        exit::BOOT_ELSEWHERE
    } else {
        exit::OK
    })
}

pub(crate) fn require_root(host: &Host, action: &str) -> Result<()> {
    let uid = nix::unistd::geteuid();
    if host.is_live() && !uid.is_root() {
        return Err(Error::NotRoot {
            action: action.into(),
            uid: uid.as_raw(),
        });
    }
    Ok(())
}

/// Commands for an image root run through chroot(2), which needs root.
fn require_chroot_rights(host: &Host, plan: &Plan) -> Result<()> {
    let runs = plan
        .changes
        .iter()
        .any(|c| matches!(c.action, crate::plan::Action::Run { .. }));
    let uid = nix::unistd::geteuid();
    if runs && !host.is_live() && !uid.is_root() {
        return Err(Error::Refused(format!(
            "the plan runs commands inside {} (chroot), which needs root (running as uid {}); run it with sudo, or add --no-exec to list the commands instead (nothing was changed)",
            host.root().display(),
            uid.as_raw()
        )));
    }
    Ok(())
}

/// Asks on a terminal; refuses without one (no silent yes in scripts).
pub(crate) fn confirm(question: &str) -> Result<()> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(Error::Refused(
            "not changing anything without confirmation: standard input is not a terminal; review the plan above and pass --yes".into(),
        ));
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::io("read", "standard input", e))?;
    if matches!(line.trim(), "y" | "Y" | "yes" | "YES") {
        Ok(())
    } else {
        Err(Error::Refused("cancelled; nothing was changed".into()))
    }
}

/// What an apply did (or, with nothing to do, found): for the report.
pub(crate) struct Applied {
    pub host: Host,
    pub names: Vec<String>,
    pub plan: Plan,
    pub outcome: Option<apply::Outcome>,
}

pub(crate) fn cmd_apply(cli: &Cli, a: &ApplyArgs) -> Result<i32> {
    let done = apply_profiles(cli, a)?;
    print_report(
        cli,
        &render::report(
            "apply",
            &done.host,
            done.names.clone(),
            &done.plan,
            done.outcome.as_ref(),
        ),
    );
    Ok(exit::OK)
}

/// The apply itself, printing nothing but the confirmation prompt (without --yes).
pub(crate) fn apply_profiles(cli: &Cli, a: &ApplyArgs) -> Result<Applied> {
    let trial = a.trial.then_some(a.profiles.as_slice());
    let desired = load_profiles(&a.profiles)?;
    let host = Host::open(&cli.root, a.target.no_exec)?;
    require_root(&host, "apply")?;
    let store = StateStore::new(&host);
    // Plan first, without the lock: an apply with nothing to do writes
    // nothing at all, not even the lock file.
    let plan = make_plan(&host, &desired, &a.target, trial)?;
    check_boot_elsewhere(&plan, &a.target)?;
    let names = desired.names.clone();
    if plan.is_empty() && !apply::interrupted(&store) {
        return Ok(Applied {
            host,
            names,
            plan,
            outcome: None,
        });
    }
    require_chroot_rights(&host, &plan)?;
    if !a.yes {
        if cli.format == Format::Text {
            print!(
                "{}",
                render::text(
                    &render::report("plan", &host, names.clone(), &plan, None),
                    style(cli)
                )
            );
        }
        confirm("Apply these changes?")?;
    }
    let lock = store.lock()?;
    let recovered = apply::recover(&host, &store)?;
    // Plan again under the lock; what runs must be what was shown.
    let locked_plan = make_plan(&host, &desired, &a.target, trial)?;
    if recovered.is_empty() && !same_changes(&host, &plan, &locked_plan) {
        return Err(Error::Refused(
            "the host changed between the plan and the apply (another tool edited a file); run again to see the new plan (nothing was changed)".into(),
        ));
    }
    if locked_plan.is_empty() {
        for note in &recovered {
            eprintln!("gdrprov: recovered: {note}");
        }
        drop(lock);
        return Ok(Applied {
            host,
            names,
            plan: locked_plan,
            outcome: None,
        });
    }
    let mut outcome = apply::execute(&host, &store, &locked_plan, Kind::Apply, Vec::new())?;
    outcome.recovered = recovered;
    drop(lock);
    Ok(Applied {
        host,
        names,
        plan: locked_plan,
        outcome: Some(outcome),
    })
}

/// Nothing half-done: on a host whose kernel command line is set outside
/// it, apply goes ahead without the boot part only when told to.
fn check_boot_elsewhere(plan: &Plan, target: &TargetArgs) -> Result<()> {
    match &plan.boot_elsewhere {
        Some(b) if b.satisfied != Some(true) && !target.boot_elsewhere => {
            Err(Error::Refused(format!(
                "{}; gdrprov cannot change it here. Set it there, then apply again; or pass --boot-elsewhere to apply the rest of the profile now and set the command line there yourself (nothing was changed)",
                b.summary()
            )))
        }
        _ => Ok(()),
    }
}

fn same_changes(host: &Host, a: &Plan, b: &Plan) -> bool {
    let shown = |p: &Plan| {
        serde_json::to_string(&render::report("plan", host, Vec::new(), p, None).changes)
            .unwrap_or_default()
    };
    shown(a) == shown(b)
}

fn cmd_rollback(cli: &Cli, a: &RollbackArgs) -> Result<i32> {
    let Some((host, profiles, plan, outcome)) = rollback_generations(cli, a)? else {
        return Ok(exit::OK);
    };
    print_report(
        cli,
        &render::report("rollback", &host, profiles, &plan, Some(&outcome)),
    );
    Ok(exit::OK)
}

/// What a rollback did: the host, the profiles it undid, its plan and outcome.
pub(crate) type RolledBack = (Host, Vec<String>, Plan, apply::Outcome);

/// The rollback itself; `None` when the only thing to undo was an
/// interrupted run, now put back.
pub(crate) fn rollback_generations(cli: &Cli, a: &RollbackArgs) -> Result<Option<RolledBack>> {
    let host = Host::open(&cli.root, a.no_exec)?;
    require_root(&host, "rollback")?;
    let store = StateStore::new(&host);
    // Only an interrupted run to undo (its apply never completed): putting
    // its files back is the whole rollback.
    let only_recovery =
        a.generation.is_none() && apply::interrupted(&store) && !apply::any_in_effect(&store);
    if only_recovery {
        if !a.yes {
            confirm("An interrupted gdrprov run left files half-changed; put them back?")?;
        }
        let _lock = store.lock()?;
        for note in apply::recover(&host, &store)? {
            eprintln!("gdrprov: recovered: {note}");
        }
        return Ok(None);
    }
    if !a.yes {
        let (plan, undoes) = apply::plan_rollback(&host, &store, a.generation, a.force)?;
        if cli.format == Format::Text {
            let profiles = store.load_state()?.profiles;
            print!(
                "{}",
                render::text(
                    &render::report("rollback", &host, profiles, &plan, None),
                    style(cli)
                )
            );
        }
        confirm(&format!("Roll back generation(s) {undoes:?}?"))?;
    }
    let lock = store.lock()?;
    let recovered = apply::recover(&host, &store)?;
    let (plan, undoes) = apply::plan_rollback(&host, &store, a.generation, a.force)?;
    require_chroot_rights(&host, &plan)?;
    let profiles = store.load_state()?.profiles;
    let mut outcome = apply::execute(&host, &store, &plan, Kind::Rollback, undoes)?;
    outcome.recovered = recovered;
    drop(lock);
    Ok(Some((host, profiles, plan, outcome)))
}

fn cmd_verify(cli: &Cli, a: &VerifyArgs) -> Result<i32> {
    let report = match verify_host(cli, a) {
        Ok(r) => r,
        Err(e) => {
            // The marker says why, so that a unit's failure is visible without the journal.
            if let Some(dir) = &a.marker_dir {
                let _ = crate::fleet::write_marker(dir, false, &e.to_string());
            }
            return Err(e);
        }
    };
    if let Some(dir) = &a.marker_dir {
        crate::fleet::write_marker(dir, report.ready, &crate::fleet::marker_text(&report))?;
    }
    if let Some(path) = &a.textfile {
        crate::fleet::write_textfile(path, &crate::fleet::prometheus(&report))?;
    }
    match cli.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        Format::Text => print!("{}", crate::verify::text(&report)),
        Format::Prometheus => print!("{}", crate::fleet::prometheus(&report)),
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}

/// Runs verify's checks (and the loopback) and returns the report.
pub(crate) fn verify_host(cli: &Cli, a: &VerifyArgs) -> Result<crate::verify::Report> {
    for (flag, v) in [("--duration", a.duration), ("--min-gbps", a.min_gbps)] {
        if let Some(x) = v.filter(|x| !(x.is_finite() && *x > 0.0 && *x < 86_400.0)) {
            return Err(Error::Usage(format!(
                "{flag} {x}: give a positive number (seconds below one day, Gb/s)"
            )));
        }
    }
    if let Some(d) = &a.device {
        crate::bench::cli::parse_dev_port(d).map_err(|e| Error::Usage(format!("--device: {e}")))?;
    }
    let desired = load_profiles(&a.profiles)?;
    // Verify changes nothing and runs nothing but read-only probes.
    let host = Host::open(&cli.root, true)?;
    // Requirements are a check of their own here, not a gate.
    let target = TargetArgs {
        no_exec: true,
        cpu_vendor: a.cpu_vendor,
        arch: a.arch,
        no_reboot: false,
        force: true,
        boot_elsewhere: true,
    };
    // During a trial boot the configuration to compare with is the trial's.
    let trial = StateStore::new(&host)
        .load_state()?
        .trial
        .map(|t| t.profiles);
    // One gathering of the facts serves the plan and the requirements check.
    let mut facts = Facts::gather(&host, a.cpu_vendor);
    facts.arch.override_with(a.arch);
    // A plan that cannot be made is one failed check, not the end of verify.
    let (plan, seen) = match plan_with_facts(&host, &desired, &target, trial.as_deref(), &facts) {
        Ok((p, seen)) => (Ok(p), seen),
        Err(e @ (Error::Refused(_) | Error::Io { .. })) => {
            let state = StateStore::new(&host).load_state()?;
            let seen =
                crate::facts::planning::PlanFacts::gather(&host, &facts, &desired, &state, false);
            (Err(e.to_string()), seen)
        }
        Err(e) => return Err(e),
    };
    let reqs = crate::requirements::evaluate(&desired.doc.requires, &facts);
    let choice = crate::verify::LoopbackChoice {
        skip: a.no_loopback,
        device: a.device.clone(),
        seconds: a.duration,
        min_gbps: a.min_gbps,
    };
    crate::verify::run(
        &host,
        &facts,
        &seen,
        &desired,
        plan.as_ref().map_err(String::as_str),
        &reqs,
        &choice,
    )
}

fn cmd_history(cli: &Cli) -> Result<i32> {
    let host = Host::open(&cli.root, true)?;
    let store = StateStore::new(&host);
    let gens = store
        .generation_numbers()
        .into_iter()
        .map(|n| store.load_generation(n))
        .collect::<Result<Vec<_>>>()?;
    match cli.format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&gens).unwrap_or_default()
        ),
        Format::Text | Format::Prometheus => {
            if gens.is_empty() {
                println!(
                    "No generations: gdrprov has not changed {}.",
                    host.display("/")
                );
            }
            for g in &gens {
                let status = match (g.status, g.rolled_back_by) {
                    (_, Some(by)) => format!("rolled back by {by}"),
                    (s, None) => format!("{s:?}").to_lowercase(),
                };
                let what = match g.kind {
                    Kind::Apply => format!("apply {}", g.profiles.join(" + ")),
                    Kind::Rollback => format!("rollback of {:?}", g.undoes),
                };
                println!(
                    "{:>4}  {:<40} {} step(s), {status}",
                    g.generation,
                    what,
                    g.steps.len()
                );
            }
        }
    }
    Ok(exit::OK)
}

fn cmd_profile(cli: &Cli, p: &ProfileCommand) -> Result<i32> {
    match p {
        ProfileCommand::List => {
            let mut rows = Vec::new();
            for name in profile::builtin::names() {
                let loaded = profile::load(name)?;
                rows.push((name, loaded.doc.description.unwrap_or_default()));
            }
            match cli.format {
                Format::Json => {
                    let v: Vec<_> = rows
                        .iter()
                        .map(|(n, d)| serde_json::json!({"name": n, "description": d}))
                        .collect();
                    println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
                }
                Format::Text | Format::Prometheus => {
                    for (n, d) in rows {
                        println!(
                            "{n:<16} {}",
                            d.split_whitespace().collect::<Vec<_>>().join(" ")
                        );
                    }
                }
            }
        }
        ProfileCommand::Show { name } => {
            let loaded = profile::load(name)?;
            match cli.format {
                Format::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&loaded.doc).unwrap_or_default()
                ),
                Format::Text | Format::Prometheus => {
                    let yaml = serde_saphyr::to_string(&loaded.doc)
                        .map_err(|e| Error::Usage(e.to_string()))?;
                    print!(
                        "# {} ({}), extends resolved\n{yaml}",
                        loaded.name, loaded.source
                    );
                }
            }
        }
        ProfileCommand::Validate { files } => {
            let mut failed = 0;
            for f in files {
                match profile::load(f) {
                    Ok(p) => println!("{f}: ok ({})", p.name),
                    Err(e) => {
                        eprintln!("gdrprov: error: {e}");
                        failed += 1;
                    }
                }
            }
            if failed > 0 {
                return Ok(exit::ERROR);
            }
        }
        ProfileCommand::Schema => println!("{}", profile::schema_json()),
    }
    Ok(exit::OK)
}
