//! The operations API, the stages' only door for the front door: plan,
//! apply (`ops/apply.rs`), rollback, recover, verify and recheck, the boot
//! menu's commands and commit (`ops/boot.rs`), inventory, doctor, history
//! and journal check, the profiles; each taking a plain request (a `Target`
//! for what reads one root). The command line (src/commands/, which imports
//! only `ops`, `output`, `names` and `error`: tests/house/front_door.rs) and
//! the Ansible module (src/commands/ansible.rs) both build these requests;
//! neither knows the other. Nothing here prints: a caller that wants to ask
//! before changing anything passes a confirmation callback.
use crate::error::{Error, Result};
use crate::facts::{CpuVendor, Facts};
use crate::host::Host;
use crate::journal::StateStore;
use crate::plan::Plan;
use crate::profile::Composed;
use std::path::PathBuf;

mod apply;
pub mod bench;
mod boot;
mod doctor;
mod features;
pub mod gds;
mod inventory;
mod journal;
pub mod module;
pub mod node;
mod profile;
mod recheck;
mod recover;
mod rollback;
pub mod sweep;
mod verify;
pub use crate::apply::{Completed, Recovered};
pub use apply::{apply, apply_as, Applied};
pub use boot::{
    boot_list, boot_once, boot_set_default, commit, BootDefault, BootMenu, BootOnce, Bootinfo,
    EntryOut, Loader,
};
pub use doctor::{doctor, Diagnosed};
pub use features::write_nfd;
pub use inventory::{inventory, Inventory, Snapshotted};
pub use journal::{history, journal_check, History, HistoryEntry};
pub use profile::{profile_list, profile_load, profile_schema, profile_validate};
pub use recheck::{recheck, RecheckRequest, Rechecked};
pub use recover::{recover, RecoverRequest};
pub use rollback::{rollback, RolledBack};
pub use verify::{verify, verify_in_job, verify_writing, VerifyFiles};

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
    /// Only show the rollback (Ansible's check mode): no root needed, and it stops at its question
    /// whatever the answer, so nothing is written.
    pub preview: bool,
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
    /// The generations a rollback undoes (empty for an apply or a recovery).
    pub undoes: &'a [u64],
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
    crate::apply::notice(&host, &StateStore::new(&host))
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
    if let Some(n) = crate::apply::notice(&host, &StateStore::new(&host)) {
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
    let warnings = crate::checks::requirements::gate(&reqs, target.force, &desired.named)
        .map_err(Error::Refused)?;
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
