//! The operations API: plan, apply, rollback and verify, each taking a plain
//! request struct. The command line (src/commands/) and the Ansible module
//! (src/commands/ansible.rs) both build these requests; neither knows the other.
//! Nothing here prints: a caller that wants to ask before changing anything
//! passes a confirmation callback.

use crate::apply;
use crate::error::{Error, Result};
use crate::facts::{CpuVendor, Facts};
use crate::host::Host;
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::output;
use crate::plan::Plan;
use crate::profile::Composed;
use std::path::PathBuf;

pub mod bench;
mod features;
pub mod module;
pub mod node;
mod recover;
pub mod sweep;
pub use crate::apply::{Completed, Recovered};
pub use features::write_nfd;
pub use recover::{recover, RecoverRequest};

/// Where and how a plan or apply acts.
#[derive(Debug, Clone)]
pub struct Target {
    /// `/` (the running system) or an image or snapshot directory.
    pub root: PathBuf,
    /// Run no command: list them as pending instead.
    pub no_exec: bool,
    /// CPU vendor when the root's /proc/cpuinfo cannot tell (image builds).
    pub cpu_vendor: Option<CpuVendor>,
    /// Persistent state only: no module loads or unloads.
    pub no_reboot: bool,
    /// Go ahead although hard requirements fail (they become warnings).
    pub force: bool,
    /// The CPU architecture, over what the root shows (`--arch`).
    pub arch: Option<crate::facts::arch::Arch>,
    /// Apply without the boot part on a host whose command line is set
    /// outside it (`--boot-elsewhere`).
    pub boot_elsewhere: bool,
}

impl Target {
    /// Read-only on ROOT: what verify and check modes use.
    pub fn read_only(root: PathBuf, cpu_vendor: Option<CpuVendor>) -> Target {
        Target {
            root,
            no_exec: true,
            cpu_vendor,
            no_reboot: false,
            force: true,
            arch: None,
            boot_elsewhere: true,
        }
    }

    /// Read-only on ROOT, its facts probed with read-only tools too
    /// (`nvidia-smi`, `modinfo`): what inventory and doctor use.
    pub fn probing(root: PathBuf, cpu_vendor: Option<CpuVendor>) -> Target {
        Target {
            no_exec: false,
            ..Target::read_only(root, cpu_vendor)
        }
    }

    /// The root, opened: commands run only without `no_exec`.
    pub fn open(&self) -> Result<Host> {
        Host::open(&self.root, self.no_exec)
    }
}

/// `plan` and `apply`: profiles (built-in names or files) on a target.
#[derive(Debug, Clone)]
pub struct ProfilesRequest {
    pub profiles: Vec<String>,
    pub target: Target,
    /// The boot arguments go into a one-shot trial entry (`apply --trial`).
    pub trial: bool,
}

#[derive(Debug, Clone)]
pub struct RollbackRequest {
    pub root: PathBuf,
    /// Undo this generation and every later one (default: the latest in effect).
    pub generation: Option<u64>,
    pub no_exec: bool,
    /// Restore files even if they were edited after gdrprov wrote them.
    pub force: bool,
}

#[derive(Debug, Clone, Default)]
pub struct VerifyRequest {
    pub root: PathBuf,
    pub profiles: Vec<String>,
    pub no_loopback: bool,
    pub device: Option<String>,
    pub duration: Option<f64>,
    pub min_gbps: Option<f64>,
    pub cpu_vendor: Option<CpuVendor>,
    pub arch: Option<crate::facts::arch::Arch>,
    /// `--peer HOST`: the two-host check against a `bench pair` listener there.
    pub peer: Option<String>,
    /// The pair's shared secret (else $GDRPROV_PAIR_TOKEN).
    pub token_file: Option<PathBuf>,
    /// The profiles already loaded (`recheck`, which resolves them as
    /// `state.json` records them); `profiles` then only names them.
    pub composed: Option<crate::profile::Composed>,
    /// `--snapshot DIR`: copy what verify read, and the copy figures it measured, into DIR.
    pub snapshot: Option<PathBuf>,
}

/// What an operation is about to do, for its caller to show and confirm.
pub struct Ask<'a> {
    pub host: &'a Host,
    /// `plan` (what an apply will do) or `rollback`.
    pub command: &'static str,
    pub profiles: &'a [String],
    pub plan: &'a Plan,
    pub question: String,
}

/// Asked before anything is written; an error stops the operation with
/// nothing changed.
pub type Confirm<'a> = &'a mut dyn FnMut(&Ask) -> Result<()>;

/// Confirmation for callers that never ask (`--yes`, the Ansible module).
pub fn yes(_: &Ask) -> Result<()> {
    Ok(())
}

pub use crate::profile::load_profiles;

/// The profile specs a trial records: files made absolute, so that `commit`
/// finds them from any directory (a systemd unit runs in `/`).
pub fn trial_specs(specs: &[String]) -> Vec<String> {
    specs
        .iter()
        .map(|s| {
            let p = std::path::Path::new(s);
            if crate::profile::spec_names_a_file(s) && crate::host::is_local_file(p) {
                crate::host::canonical_local(p)
                    .map(|c| c.display().to_string())
                    .unwrap_or_else(|| s.clone())
            } else {
                s.clone()
            }
        })
        .collect()
}

/// The generations left unfinished under ROOT, named with their fix, for a
/// command that failed for another reason (a bad profile, say): every command
/// names them, not only those that get far enough to read the journal.
pub fn unfinished_notice(root: &std::path::Path) -> Option<String> {
    let host = Target::read_only(root.to_path_buf(), None).open().ok()?;
    apply::notice(&host, &StateStore::new(&host))
}

/// A plan and what it was made from.
pub struct Planned {
    pub host: Host,
    pub names: Vec<String>,
    pub plan: Plan,
}

impl Planned {
    /// Changes to make, or commands still owed: the host does not match yet.
    pub fn pending(&self) -> bool {
        !self.plan.is_empty() || !self.plan.pending_commands.is_empty()
    }
}

/// `plan`: every change the profiles need. Changes nothing.
pub fn plan(req: &ProfilesRequest) -> Result<Planned> {
    let desired = load_profiles(&req.profiles)?;
    let host = req.target.open()?;
    let trial = req.trial.then_some(req.profiles.as_slice());
    let mut plan = make_plan(&host, &desired, &req.target, trial)?;
    // A generation left unfinished: this plan is against half-changed files.
    if let Some(n) = apply::notice(&host, &StateStore::new(&host)) {
        plan.warnings.insert(0, n);
    }
    Ok(Planned {
        host,
        names: desired.names,
        plan,
    })
}

pub fn make_plan(
    host: &Host,
    desired: &Composed,
    target: &Target,
    trial: Option<&[String]>,
) -> Result<Plan> {
    let mut facts = Facts::gather(host, target.cpu_vendor);
    // A FIFO or device node where a file should be: refused, never planned around.
    host.refuse_special_files()?;
    facts.arch.override_with(target.arch);
    let plan = plan_with_facts(host, desired, target, trial, &facts).map(|(plan, _)| plan)?;
    host.refuse_special_files()?;
    Ok(plan)
}

/// `make_plan` for a caller that already gathered the facts (verify); gives
/// what planning read too.
fn plan_with_facts(
    host: &Host,
    desired: &Composed,
    target: &Target,
    trial: Option<&[String]>,
    facts: &Facts,
) -> Result<(Plan, crate::plan::inputs::PlanFacts)> {
    let state = StateStore::new(host).load_state()?;
    let opts = crate::plan::prepare::Options {
        live_changes: host.is_live() && !target.no_reboot,
        trial: trial.map(trial_specs),
    };
    // Requirements first: every failed one is reported, before any
    // module can stop on a detail (a missing GRUB, a missing module).
    let reqs = crate::checks::requirements::for_profile(host, facts, desired);
    let warnings =
        crate::checks::requirements::gate(&reqs, target.force).map_err(Error::Refused)?;
    let (mut plan, seen) = crate::plan::prepare::plan(host, facts, desired, &state, &opts)?;
    plan.warnings.extend(warnings);
    // How each profile was found, for `recheck` to find it the same way.
    plan.state_after.profile_sources = desired
        .builtin
        .iter()
        .map(|&b| {
            if b {
                crate::journal::ProfileSource::BuiltIn
            } else {
                crate::journal::ProfileSource::File
            }
        })
        .collect();
    Ok((plan, seen))
}

pub fn require_root(host: &Host, action: &str) -> Result<()> {
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

/// What an apply did (or, with nothing to do, found): for the report.
pub struct Applied {
    pub host: Host,
    pub names: Vec<String>,
    pub plan: Plan,
    pub outcome: Option<apply::Outcome>,
}

impl Applied {
    pub fn done(&self) -> output::Done<'_> {
        self.outcome
            .as_ref()
            .map_or(output::Done::Nothing, output::Done::Ran)
    }
}

/// `apply`: makes the changes as one journal generation. Takes the lock
/// only when something will be written; `confirm` sees the plan first.
/// Nothing half-done: on a host whose kernel command line is set outside
/// it, apply goes ahead without the boot part only when told to.
fn check_boot_elsewhere(plan: &Plan, target: &Target) -> Result<()> {
    match &plan.boot_elsewhere {
        Some(b) if b.satisfied != Some(true) && !target.boot_elsewhere => {
            Err(Error::Refused(format!(
                "{}; gdrprov cannot change it here. Set it there, then apply again; or pass --boot-elsewhere (Ansible: boot_elsewhere: true) to apply the rest of the profile now and set the command line there yourself (nothing was changed)",
                b.summary()
            )))
        }
        _ => Ok(()),
    }
}

pub fn apply(req: &ProfilesRequest, confirm: Confirm) -> Result<Applied> {
    apply_as(req, confirm, None)
}

/// `apply`, its generation labelled with the command that made it when that
/// is not `apply` (`commit`: `recover` completes an interrupted one).
pub fn apply_as(req: &ProfilesRequest, confirm: Confirm, command: Option<&str>) -> Result<Applied> {
    let trial = req.trial.then_some(req.profiles.as_slice());
    let desired = load_profiles(&req.profiles)?;
    let host = req.target.open()?;
    require_root(&host, names::APPLY)?;
    let store = StateStore::new(&host);
    // The journal's own files are never read or written through a link.
    apply::refuse_links(&host, &crate::plan::Plan::default())?;
    // A generation left unfinished is recovered first, by `gdrprov recover`.
    apply::refuse_unfinished(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    // Plan first, without the lock: an apply with nothing to do writes
    // nothing at all, not even the lock file.
    let plan = make_plan(&host, &desired, &req.target, trial)?;
    check_boot_elsewhere(&plan, &req.target)?;
    let names = desired.names.clone();
    if plan.is_empty() {
        return Ok(Applied {
            host,
            names,
            plan,
            outcome: None,
        });
    }
    require_chroot_rights(&host, &plan)?;
    apply::refuse_links(&host, &plan)?;
    confirm(&Ask {
        host: &host,
        command: names::PLAN,
        profiles: &names,
        plan: &plan,
        question: "Apply these changes?".into(),
    })?;
    let lock = store.lock()?;
    apply::refuse_unfinished_locked(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    // Plan again under the lock; what runs must be what was shown.
    let locked_plan = make_plan(&host, &desired, &req.target, trial)?;
    if !same_changes(&host, &plan, &locked_plan) {
        return Err(Error::Refused(
            "the host changed between the plan and the apply (another tool edited a file); run again to see the new plan (nothing was changed)".into(),
        ));
    }
    if locked_plan.is_empty() {
        drop(lock);
        return Ok(Applied {
            host,
            names,
            plan: locked_plan,
            outcome: None,
        });
    }
    let outcome = apply::execute_as(
        &host,
        &store,
        &locked_plan,
        Kind::Apply,
        Vec::new(),
        command,
    )?;
    drop(lock);
    Ok(Applied {
        host,
        names,
        plan: locked_plan,
        outcome: Some(outcome),
    })
}

fn same_changes(host: &Host, a: &Plan, b: &Plan) -> bool {
    let shown = |p: &Plan| {
        serde_json::to_string(
            &output::report(names::PLAN, host, Vec::new(), p, output::Done::Planned).changes,
        )
        .unwrap_or_default()
    };
    shown(a) == shown(b)
}

/// What a rollback came to.
#[allow(clippy::large_enum_variant)] // one per run; boxing buys nothing
pub enum RolledBack {
    /// No apply in effect: nothing was written.
    Nothing { host: Host },
    Done {
        host: Host,
        /// The profiles in effect before the rollback.
        profiles: Vec<String>,
        plan: Plan,
        outcome: apply::Outcome,
    },
}

/// `rollback`: restores every file of the generation(s) byte for byte.
/// Writes nothing (not even the lock) when there is nothing to undo.
pub fn rollback(req: &RollbackRequest, confirm: Confirm) -> Result<RolledBack> {
    let host = Host::open(&req.root, req.no_exec)?;
    let store = StateStore::new(&host);
    // The journal's own files are never read or written through a link.
    apply::refuse_links(&host, &crate::plan::Plan::default())?;
    // An unfinished generation first: `gdrprov recover`, never "nothing to
    // roll back" while its changes are still there.
    apply::refuse_unfinished(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    if !apply::any_in_effect(&store) {
        apply::check_nothing_owned(&host, &store)?;
        if req.generation.is_none() {
            return Ok(RolledBack::Nothing { host });
        }
    }
    require_root(&host, names::ROLLBACK)?;
    // Planned before the lock too, so that a refused rollback (a generation
    // not in effect) writes nothing.
    let (plan, undoes) = apply::plan_rollback(&host, &store, req.generation, req.force)?;
    let profiles = store.load_state()?.profiles;
    apply::refuse_links(&host, &plan)?;
    confirm(&Ask {
        host: &host,
        command: names::ROLLBACK,
        profiles: &profiles,
        plan: &plan,
        question: format!("Roll back generation(s) {undoes:?}?"),
    })?;
    let lock = store.lock()?;
    apply::refuse_unfinished_locked(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let (plan, undoes) = apply::plan_rollback(&host, &store, req.generation, req.force)?;
    require_chroot_rights(&host, &plan)?;
    let profiles = store.load_state()?.profiles;
    let outcome = apply::execute(&host, &store, &plan, Kind::Rollback, undoes)?;
    drop(lock);
    Ok(RolledBack::Done {
        host,
        profiles,
        plan,
        outcome,
    })
}

/// Commands that act on the running system refuse another root in one line
/// instead of silently working on this machine.
pub fn refuse_other_root(root: &std::path::Path, what: &str, fix: &str) -> Result<()> {
    let host = Host::open(root, true)?;
    if host.is_live() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{what} runs on the RDMA devices and GPUs of this machine, not on --root {}: {fix}",
        root.display()
    )))
}

/// `verify`: verify's checks (and the loopback) as a report.
pub fn verify(req: &VerifyRequest) -> Result<crate::checks::verify::Report> {
    for (flag, v) in [("--duration", req.duration), ("--min-gbps", req.min_gbps)] {
        if let Some(x) = v.filter(|x| !(x.is_finite() && *x > 0.0 && *x < 86_400.0)) {
            return Err(Error::Usage(format!(
                "{flag} {x}: give a positive number (seconds below one day, Gb/s)"
            )));
        }
    }
    if let Some(d) = &req.device {
        crate::bench::parse::parse_dev_port(d)
            .map_err(|e| Error::Usage(format!("--device: {e}")))?;
    }
    // The loopback runs on this machine's devices; on another root verify
    // skips it, so options for it would be silently ignored.
    let loopback_opts = [
        ("--device", req.device.is_some()),
        ("--duration", req.duration.is_some()),
        ("--min-gbps", req.min_gbps.is_some()),
    ];
    if let Some((flag, _)) = loopback_opts.iter().find(|(_, given)| *given) {
        refuse_other_root(
            &req.root,
            &format!("verify's loopback ({flag})"),
            &format!("drop {flag} (verify skips the loopback on another root), or run verify on the host itself"),
        )?;
    }
    let desired = match &req.composed {
        Some(c) => c.clone(),
        None => load_profiles(&req.profiles)?,
    };
    // Verify changes nothing and runs nothing but read-only probes.
    let mut host = Host::open(&req.root, true)?;
    if req.snapshot.is_some() {
        host = host.recording();
    }
    // Requirements are a check of their own here, not a gate.
    let target = Target::read_only(req.root.clone(), req.cpu_vendor);
    // During a trial boot the configuration to compare with is the trial's.
    let trial = StateStore::new(&host)
        .load_state()?
        .trial
        .map(|t| t.profiles);
    // One gathering of the facts serves the plan and the requirements check.
    let mut facts = Facts::gather(&host, req.cpu_vendor);
    host.refuse_special_files()?;
    facts.arch.override_with(req.arch);
    // The GPUs together (NVLink, fabric, pairs): verify asks NVML and CUDA on the running system.
    if host.is_live() && facts.gpu_topology.live.is_none() && !facts.gpus.is_empty() {
        facts.gpu_topology.live = crate::facts::gpu_topo::recorded(&host);
    }
    // A plan that cannot be made is one failed check, not the end of verify.
    let (plan, seen) = match plan_with_facts(&host, &desired, &target, trial.as_deref(), &facts) {
        Ok((p, seen)) => (Ok(p), seen),
        Err(e @ (Error::Refused(_) | Error::Io { .. })) => {
            let state = StateStore::new(&host).load_state()?;
            let seen = crate::plan::prepare::inputs(&host, &facts, &desired, &state);
            (Err(e.to_string()), seen)
        }
        Err(e) => return Err(e),
    };
    let reqs = crate::checks::requirements::for_profile(&host, &facts, &desired);
    let choice = crate::checks::verify::LoopbackChoice {
        skip: req.no_loopback,
        device: req.device.clone(),
        seconds: req.duration,
        min_gbps: req.min_gbps,
        peer: req.peer.clone(),
        token_file: req.token_file.clone(),
    };
    let report = crate::checks::verify::run(
        &host,
        &facts,
        &seen,
        &desired,
        plan.as_ref().map_err(String::as_str),
        &reqs,
        &choice,
    )?;
    if let Some(dir) = &req.snapshot {
        let rec = host.recorded().unwrap_or_default();
        crate::host::snapshot::write(&host, &rec, dir)?;
    }
    Ok(report)
}
