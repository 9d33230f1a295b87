//! The plan: every change gdrprov would make, in order, computed without side
//! effects from the facts, the desired state and what gdrprov already owns.

pub mod change;
pub mod inputs;
pub mod modules;
#[cfg(test)]
mod order_tests;
pub mod prepare;
pub mod rollback;

use crate::error::Result;
use crate::host::CommandSpec;
use crate::journal::State;
pub use crate::plan::change::{Action, Change};
pub use crate::plan::modules::Context;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct Plan {
    pub changes: Vec<Change>,
    /// Commands that cannot run here (`--no-exec`) and are still owed.
    pub pending_commands: Vec<CommandSpec>,
    /// Why the host needs a reboot even when nothing is left to change.
    pub reboot_pending: Vec<String>,
    pub warnings: Vec<String>,
    /// The boot part, when this host's kernel command line is set outside it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_elsewhere: Option<crate::plan::modules::bootcfg_elsewhere::BootElsewhere>,
    /// Profile parts whose `when:` does not hold here, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
    /// What `services.fabric-manager` decided here (skipped, and why; enabled; ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric_manager: Option<crate::plan::change::FabricManagerPlan>,
    /// Ownership after this plan is applied.
    #[serde(skip)]
    pub state_after: State,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    pub fn reboot_reasons(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .changes
            .iter()
            .filter_map(|c| c.reboot.clone())
            .collect();
        for r in &self.reboot_pending {
            if !v.contains(r) {
                v.push(r.clone());
            }
        }
        v
    }
}

/// Every module's part of the plan, the guard rails' checks first: nothing is planned for a
/// profile they refuse.
fn module_parts(ctx: &Context) -> Result<crate::plan::change::Part> {
    let guard_warnings = crate::plan::modules::guard::modules(ctx)?;
    crate::plan::modules::guard::file_targets(ctx)?;
    crate::plan::modules::guard::text(ctx)?;
    let mut part = crate::plan::modules::bootcfg::plan(ctx)?;
    part.warnings.extend(guard_warnings);
    part.absorb(crate::plan::modules::kmod::plan(ctx)?);
    part.absorb(crate::plan::modules::loadreq::plan(ctx)?);
    part.absorb(crate::plan::modules::services::plan(ctx)?);
    part.absorb(crate::plan::modules::fabric::plan(ctx)?);
    part.absorb(crate::plan::modules::network::plan(ctx)?);
    part.absorb(crate::plan::modules::pcie::plan(ctx)?);
    part.absorb(crate::plan::modules::pcie_mrrs::plan(ctx)?);
    part.absorb(crate::plan::modules::nccl::plan(ctx)?);
    part.absorb(crate::plan::modules::gds::plan(ctx)?);
    Ok(part)
}

/// What gdrprov owns once the plan is applied: the profiles, the kernel arguments, the trial,
/// the NCCL keys taken from the part, and each file by the change that writes or removes it.
fn state_after<'a>(
    ctx: &Context,
    part: &mut crate::plan::change::Part,
    edited: &[String],
    wanted: &[crate::plan::change::ManagedFile],
    planned: impl Iterator<Item = &'a Change>,
) -> State {
    let mut state_after = ctx.state.clone();
    state_after.profiles = ctx.desired.names.clone();
    if let Some(args) = part.kernel_args.take() {
        state_after.kernel_args = args;
    }
    state_after.trial = part.trial.take();
    if let Some(keys) = part.nccl_keys.take() {
        state_after.nccl_keys = keys;
    }
    for p in edited {
        if !wanted.iter().any(|f| &f.path == p) {
            state_after.files.remove(p);
        }
    }
    for c in planned {
        own_after(&mut state_after, c, wanted);
    }
    state_after
}

/// What the plan refuses of the profiles alone, whatever the host: `profile validate` runs it
/// after loading a profile, so that it passes only what `plan` could accept (issue 45).
pub fn check_profile(desired: &crate::profile::Composed) -> Result<()> {
    crate::plan::modules::services::check_profile(desired)
}

/// Builds the plan. Pure: reads only the context's facts, writes nothing.
/// Order: files first, then commands (unloads, loads, regeneration), so that
/// a command always sees the files it depends on. The context's profile is
/// the one resolved for this host (`when:` parts added in `prepare`).
pub fn build(ctx: &Context) -> Result<Plan> {
    let mut part = module_parts(ctx)?;
    let wanted = crate::plan::modules::files::desired(ctx, std::mem::take(&mut part.files))?;
    let mut changes = crate::plan::modules::files::plan(ctx, &wanted)?;
    crate::plan::modules::gds_cufile::describe(ctx, &mut changes);
    // A file an edit now manages key by key (nccl.conf) is no longer owned
    // whole: the edit's change replaces the files module's remove/restore.
    let edited: Vec<String> = part
        .edits
        .iter()
        .filter_map(|e| e.path().map(String::from))
        .collect();
    changes.retain(|c| {
        !(c.module == crate::plan::modules::files::MODULE
            && c.path().is_some_and(|p| edited.iter().any(|e| e == p)))
    });
    changes.append(&mut part.edits);
    // Changes that must follow the commands (see `Part::late_paths`).
    let (mut late, early): (Vec<Change>, Vec<Change>) = changes.into_iter().partition(|c| {
        c.path()
            .is_some_and(|p| part.late_paths.iter().any(|l| l == p))
    });
    changes = early;
    late.append(&mut part.late);

    let mut state_after = state_after(
        ctx,
        &mut part,
        &edited,
        &wanted,
        changes.iter().chain(&late),
    );

    let mut commands = commands(ctx, &state_after, std::mem::take(&mut part.commands));
    let switches = boot_switch_last(ctx, &mut commands, changes.iter().chain(&late));
    part.warnings
        .extend(crate::plan::modules::bls_switch::kernelopts_warning(
            ctx, &commands,
        ));
    let mut plan = Plan {
        reboot_pending: part.reboot_pending,
        warnings: part.warnings,
        boot_elsewhere: part.boot_elsewhere,
        skipped: ctx.skipped.to_vec(),
        fabric_manager: part.fabric_manager.take(),
        ..Plan::default()
    };
    if ctx.no_exec {
        // Nothing may run: the commands are owed, and remembered as such.
        state_after.pending_commands = commands
            .into_iter()
            .filter_map(|c| match c.action {
                Action::Run { command } => Some(command),
                _ => None,
            })
            .collect();
        plan.pending_commands = state_after.pending_commands.clone();
    } else {
        state_after.pending_commands.clear();
        // The rebuilds, then the switches gdrprov writes (RHEL's BLS
        // entries), then the other commands (grubby).
        let rebuilds = commands
            .iter()
            .take_while(
                |c| matches!(&c.action, Action::Run { command } if command.rebuilds_initramfs()),
            )
            .count();
        let rest = commands.split_off(rebuilds);
        changes.extend(commands);
        changes.extend(switches);
        changes.extend(rest);
    }
    changes.extend(late);
    note_distro_links(ctx, &mut changes);
    plan.changes = changes;
    plan.state_after = state_after;
    Ok(plan)
}

/// A change written through a distribution's own link (the one exception
/// of the write door, src/host/door.rs) says so in its description, in text
/// and JSON: "follows the distribution's link /etc/kernel/cmdline →
/// /usr/lib/kernel/cmdline".
fn note_distro_links(ctx: &Context, changes: &mut [Change]) {
    for c in changes.iter_mut() {
        let Some(link) = c
            .path()
            .and_then(|p| ctx.facts.distro_links.iter().find(|l| l.path == p))
        else {
            continue;
        };
        let note = link.note();
        c.description = format!("{} ({note})", c.description);
    }
}

/// The boot switch last (issue 37): what a boot loader reads names a new
/// command line only once the initramfs it will load is rebuilt and durable.
/// The initramfs rebuilds run first among the commands, before update-grub
/// and grubby; the loader entries gdrprov writes come after the commands
/// (`late`); RHEL's BLS entries are switched by gdrprov's own writes, given
/// back here, which go right after the rebuilds and before grubby
/// (`bls_switch`). A boot file is held on its current initramfs during the
/// rebuild only where this plan switches it afterwards (update-grub
/// regenerates grub.cfg, or the entry is written): else it keeps its command
/// line, and the rebuilt initramfs, replaced whole, belongs with it either way.
fn boot_switch_last<'a>(
    ctx: &Context,
    commands: &mut [Change],
    files: impl Iterator<Item = &'a Change>,
) -> Vec<Change> {
    commands.sort_by_key(|c| match &c.action {
        Action::Run { command } => !command.rebuilds_initramfs(),
        _ => true,
    });
    let switches = crate::plan::modules::bls_switch::switches(ctx, commands);
    let mut switched: Vec<String> = files
        .filter_map(|c| c.path().map(String::from))
        .chain(switches.iter().filter_map(|c| c.path().map(String::from)))
        .collect();
    let regenerates_grub = commands.iter().any(|c| match &c.action {
        Action::Run { command } => command.argv.first().is_some_and(|t| {
            let t = t.rsplit('/').next().unwrap_or(t);
            [
                "update-grub",
                "update-grub2",
                "grub-mkconfig",
                "grub2-mkconfig",
            ]
            .contains(&t)
        }),
        _ => false,
    });
    if regenerates_grub {
        switched.push(crate::plan::modules::bootcfg::GRUB_CFG.to_string());
    }
    for c in commands.iter_mut() {
        if let Action::Run { command } = &mut c.action {
            let (held, not_switched) = std::mem::take(&mut command.hold)
                .into_iter()
                .partition(|h| switched.contains(&h.reader));
            command.hold = held;
            command.may_hold = not_switched;
            if command.hold.is_empty() {
                continue;
            }
            let readers: Vec<&str> = command.hold.iter().map(|h| h.reader.as_str()).collect();
            command.why = format!(
                "{}; until the boot switches to the new command line, {} keeps loading the current initrd (a copy, *{})",
                command.why,
                readers.join(", "),
                gdrprov_boot::hold::HELD_SUFFIX
            );
            c.description.clone_from(&command.why);
        }
    }
    switches
}

/// What gdrprov owns once change `c` is made.
fn own_after(state_after: &mut State, c: &Change, wanted: &[crate::plan::change::ManagedFile]) {
    match &c.action {
        Action::WriteFile { path, before, .. } if wanted.iter().any(|f| &f.path == path) => {
            state_after
                .files
                .entry(path.clone())
                .or_insert_with(|| crate::journal::OwnedFile {
                    original: before
                        .as_ref()
                        .map(|_| crate::journal::PENDING_BACKUP.to_string()),
                });
        }
        Action::WriteFile { path, .. } | Action::RemoveFile { path, .. } => {
            // An edit of a file gdrprov does not own (GRUB defaults) leaves
            // ownership alone; an owned file no longer wanted is released.
            if c.module == crate::plan::modules::files::MODULE {
                state_after.files.remove(path);
            }
        }
        Action::Run { .. } => {}
    }
}

/// The plan's commands: those owed from an earlier `--no-exec` apply first,
/// then the modules' own, each once.
fn commands(ctx: &Context, state_after: &State, own: Vec<Change>) -> Vec<Change> {
    let mut commands: Vec<Change> = ctx
        .state
        .pending_commands
        .iter()
        // A one-shot boot of a trial that is no longer pending is not owed.
        .filter(|c| {
            state_after.trial.is_some()
                || !matches!(
                    c.argv.iter().map(String::as_str).collect::<Vec<_>>()[..],
                    ["grub-reboot" | "grub2-reboot", ..] | ["bootctl", "set-oneshot", ..]
                )
        })
        .map(|c| Change {
            module: "pending".into(),
            description: format!("{} (pending from an earlier --no-exec apply)", c.why),
            // state.json does not keep the plan's marks: known again here.
            action: Action::Run {
                command: crate::plan::modules::kmod::as_planned(c.clone()),
            },
            reboot: None,
        })
        .collect();
    for c in own {
        let same = |o: &Change| match (&o.action, &c.action) {
            (Action::Run { command: a }, Action::Run { command: b }) => a.argv == b.argv,
            _ => false,
        };
        match commands.iter_mut().find(|o| same(o)) {
            // Owed and planned again: run as planned now (the way it runs
            // may have changed since: kernel-install bypassed, a placement).
            Some(owed) => owed.action = c.action,
            None => commands.push(c),
        }
    }
    commands
}
