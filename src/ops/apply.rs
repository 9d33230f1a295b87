//! `apply` (and `commit`'s apply): a plan made, confirmed, made again
//! under the lock and run as one journal generation.

use super::{load_profiles, make_plan, require_root, Ask, Confirm, ProfilesRequest, Target};
use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::output;
use crate::plan::Plan;

/// Commands for an image root run through chroot(2), which needs root.
pub(super) fn require_chroot_rights(host: &Host, plan: &Plan) -> Result<()> {
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
    pub outcome: Option<crate::apply::Outcome>,
}

impl Applied {
    pub fn done(&self) -> output::Done<'_> {
        self.outcome
            .as_ref()
            .map_or(output::Done::Nothing, output::Done::Ran)
    }
}

/// Refused when the host's kernel command line is set outside it and lacks
/// what the plan wants, unless `--boot-elsewhere` says to go ahead.
pub(super) fn check_boot_elsewhere(plan: &Plan, target: &Target) -> Result<()> {
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

/// `apply`: makes the changes as one journal generation. Takes the lock
/// only when something will be written; `confirm` sees the plan first.
/// Nothing half-done: on a host whose kernel command line is set outside
/// it, apply goes ahead without the boot part only when told to.
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
    crate::apply::refuse_links(&host, &crate::plan::Plan::default())?;
    // A generation left unfinished is recovered first, by `gdrprov recover`.
    crate::apply::refuse_unfinished(&host, &store)?;
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
    crate::apply::refuse_links(&host, &plan)?;
    confirm(&Ask {
        host: &host,
        command: names::PLAN,
        profiles: &names,
        plan: &plan,
        question: "Apply these changes?".into(),
        undoes: &[],
    })?;
    let lock = store.lock()?;
    crate::apply::refuse_unfinished_locked(&host, &store)?;
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
    let outcome = crate::apply::execute_as(
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
