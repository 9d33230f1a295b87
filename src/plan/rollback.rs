//! Rollback planning: the plan that puts back the files of the generations
//! still in effect, from the journal's copies. Carried out by `apply`.

use crate::error::{Error, Result};
use crate::host::{CommandSpec, Host};
use crate::journal::{Generation, Kind, StateStore, Status, Step};
use crate::plan::{Action, Change, Plan};

/// Files edited after gdrprov wrote them are not overwritten without --force.
fn refuse_drift(drifted: &[String], force: bool) -> Result<()> {
    if !drifted.is_empty() && !force {
        return Err(Error::Refused(format!(
            "these files changed after gdrprov wrote them: {}; rollback would overwrite those edits. Check them, then run again with --force (nothing was changed)",
            drifted.join(", ")
        )));
    }
    Ok(())
}

/// Whether a step still changes something: a file not yet as it was, a file still there to remove.
fn still_needed(host: &Host, c: &Change) -> bool {
    match &c.action {
        Action::WriteFile { before, after, .. } => before.as_deref() != Some(after.as_str()),
        Action::RemoveFile { path, .. } => host.exists(path),
        Action::Run { .. } => true,
    }
}

/// The undo commands of the commands apply ran, as steps (none under --no-exec: they are owed).
fn undo_runs(host: &Host, undone: &[CommandSpec]) -> Vec<Change> {
    if host.no_exec() {
        Vec::new()
    } else {
        undone
            .iter()
            .cloned()
            .map(|c| Change::run("rollback", c, None))
            .collect()
    }
}

/// The plan that undoes generations `target..=latest` (those still in
/// effect), newest first: each file back to its `before` copy.
pub fn plan_rollback(
    host: &Host,
    store: &StateStore,
    target: Option<u64>,
    force: bool,
) -> Result<(Plan, Vec<u64>)> {
    let applied = in_effect(host, store, target)?;
    let target = target.unwrap_or_else(|| applied.last().map_or(0, |g| g.generation));
    let undo: Vec<&Generation> = applied
        .iter()
        .rev()
        .filter(|g| g.generation >= target)
        .collect();
    let Restores {
        mut changes,
        drifted,
        commands,
        undone,
        notes,
    } = restores(host, store, &undo)?;
    refuse_drift(&drifted, force)?;
    // A file already as it was needs no step (e.g. removed by hand).
    changes.retain(|c| still_needed(host, c));
    let oldest = undo
        .last()
        .map(|g| g.state_before.clone())
        .unwrap_or_default();
    // Apply ran its commands after its files: their undo comes before the files go back.
    let undo_runs = undo_runs(host, &undone);
    let mut commands = commands;
    // The boot switch last (issue 37): initramfs rebuilds first, each holding
    // the boot files it switches on the initramfs they load; those files
    // (loader entries) are restored after the commands.
    commands.sort_by_key(|c| !c.rebuilds_initramfs());
    hold_what_is_put_back(&mut commands, &changes);
    let (switches, changes): (Vec<Change>, Vec<Change>) = changes
        .into_iter()
        .partition(|c| c.path().is_some_and(|p| is_held_reader(&commands, p)));
    let mut plan = Plan {
        changes: unit_stops(host, &changes)
            .into_iter()
            .chain(undo_runs)
            .chain(changes)
            .collect(),
        warnings: notes,
        ..Plan::default()
    };
    let mut state_after = oldest;
    if host.no_exec() {
        let owed: Vec<CommandSpec> = undone.into_iter().chain(commands).collect();
        plan.pending_commands = owed.clone();
        state_after.pending_commands = owed;
    } else {
        for command in commands {
            plan.changes.push(Change {
                module: "run".into(),
                description: command.why.clone(),
                action: Action::Run { command },
                reboot: None,
            });
        }
    }
    plan.changes.extend(switches);
    plan.state_after = state_after;
    Ok((plan, undo.iter().map(|g| g.generation).collect()))
}

/// A boot file that a rebuild's apply did not switch (`may_hold`: an
/// `apply --trial`) but that this rollback puts back (a later commit
/// switched it) is held during the rebuild too, and put back after it: else
/// it would name the old command line while still loading the initramfs
/// not yet rebuilt (found by the systemd-boot power-cut campaign: a
/// rollback of a trial and its commit cut during update-initramfs).
fn hold_what_is_put_back(commands: &mut [CommandSpec], changes: &[Change]) {
    let put_back: Vec<&str> = changes.iter().filter_map(|c| c.path()).collect();
    for c in commands.iter_mut() {
        for h in std::mem::take(&mut c.may_hold) {
            if put_back.contains(&h.reader.as_str()) && !c.hold.contains(&h) {
                c.hold.push(h);
            } else {
                c.may_hold.push(h);
            }
        }
    }
}

/// Whether `path` is a boot file one of `commands` holds on its initramfs
/// while rebuilding it: the switch, restored after them.
pub fn is_held_reader(commands: &[CommandSpec], path: &str) -> bool {
    commands
        .iter()
        .flat_map(|c| &c.hold)
        .any(|h| h.reader == path)
}

/// The applies still in effect, oldest first; refused when there is none
/// or `target` is not one of them.
fn in_effect(host: &Host, store: &StateStore, target: Option<u64>) -> Result<Vec<Generation>> {
    let applied: Vec<Generation> = store
        .generation_numbers()
        .into_iter()
        .map(|n| store.load_generation(n))
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .filter(|g| {
            g.kind == Kind::Apply && g.status == Status::Complete && g.rolled_back_by.is_none()
        })
        .collect();
    let Some(last) = applied.last() else {
        return Err(Error::Refused(format!(
            "nothing to roll back: no apply of gdrprov is in effect on {}",
            host.display("/")
        )));
    };
    let target = target.unwrap_or(last.generation);
    if !applied.iter().any(|g| g.generation == target) {
        let live: Vec<String> = applied.iter().map(|g| g.generation.to_string()).collect();
        return Err(Error::Refused(format!(
            "generation {target} is not an apply still in effect; those are: {} (see {})",
            live.join(", "),
            crate::suggest::Suggest::new(crate::names::HISTORY)
                .shown(&crate::suggest::Given::none())
        )));
    }
    Ok(applied)
}

/// What undoing some generations restores.
struct Restores {
    /// One change per file, to its content before the oldest undone generation.
    changes: Vec<Change>,
    /// Files edited by someone else since gdrprov wrote them.
    drifted: Vec<String>,
    /// Regeneration commands to run again once the files are back.
    commands: Vec<CommandSpec>,
    /// What undoes the commands the generations ran (`systemctl disable` for an `enable`),
    /// newest first.
    undone: Vec<CommandSpec>,
    /// What is left as it was ([`crate::journal::restore_notes`]).
    notes: Vec<String>,
}

/// Walks the generations to undo, newest first, each one's steps backwards.
/// What undoes the command a step ran, when it has an undo.
fn undo_of(step: &Step, generation: u64) -> Option<CommandSpec> {
    let cmd = step.command.as_ref()?;
    let argv: Vec<&str> = cmd.undo.as_ref()?.iter().map(String::as_str).collect();
    Some(CommandSpec::new(
        &argv,
        format!("Undo `{}` of generation {generation}", cmd.argv.join(" ")),
    ))
}

/// The step putting a file back: written as it was before generation `g`, or removed when
/// the generation created it.
fn restore_change(
    host: &Host,
    g: &Generation,
    i: usize,
    step: &Step,
    path: &str,
    current: Option<String>,
    original: Option<String>,
) -> Result<Change> {
    let description = format!(
        "Restore {path} as it was before generation {}",
        g.generation
    );
    Ok(match original {
        Some(after) => Change {
            module: "rollback".into(),
            description,
            action: Action::WriteFile {
                path: path.to_string(),
                before: current,
                after,
                new_mode: 0o644,
                meta: crate::journal::restore_meta(host, g.generation, i, step)?,
            },
            reboot: boot_time_effect(path),
        },
        None => Change {
            module: "rollback".into(),
            description: match step.created_dirs.as_slice() {
                [] => format!("Remove {path} (created by generation {})", g.generation),
                dirs => format!(
                    "Remove {path} (created by generation {}), and the directories it created once empty: {}",
                    g.generation,
                    dirs.join(", ")
                ),
            },
            action: Action::RemoveFile {
                path: path.to_string(),
                before: current.unwrap_or_default(),
            },
            reboot: boot_time_effect(path),
        },
    })
}

fn restores(host: &Host, store: &StateStore, undo: &[&Generation]) -> Result<Restores> {
    let mut changes = Vec::new();
    let mut drifted = Vec::new();
    let mut commands: Vec<CommandSpec> = Vec::new();
    let mut undone: Vec<CommandSpec> = Vec::new();
    let mut notes = Vec::new();
    for g in undo {
        notes.extend(crate::journal::restore_notes(host, g));
        for (i, step) in g.steps.iter().enumerate().rev() {
            if let Some(cmd) = step.command.as_ref().filter(|c| c.regenerate) {
                let cmd = super::modules::kmod::as_planned(cmd.clone());
                if !commands.contains(&cmd) {
                    commands.push(cmd);
                }
            }
            undone.extend(undo_of(step, g.generation));
            let Some(path) = &step.path else { continue };
            // A path that climbs (an edited journal) is refused, never skipped.
            crate::journal::journal_path(path)?;
            let current = host.read_text(path)?;
            let wrote = match &step.after {
                Some(rel) => Some(store.read_backup(rel)?),
                None => None,
            };
            if current != wrote
                && !changes
                    .iter()
                    .any(|c: &Change| c.path() == Some(path.as_str()))
            {
                drifted.push(host.display(path));
            }
            let original = match &step.before {
                Some(rel) => Some(store.read_backup(rel)?),
                None => None,
            };
            // Only the oldest undo of a path decides its final content.
            changes.retain(|c: &Change| c.path() != Some(path.as_str()));
            changes.push(restore_change(host, g, i, step, path, current, original)?);
        }
    }
    Ok(Restores {
        changes,
        drifted,
        commands,
        undone,
        notes,
    })
}

/// A unit whose file goes while it is active stays active with nothing
/// behind it (no ExecStop, no PartOf=): gdrprov-peermem.service would
/// then no longer unload nvidia_peermem before openibd stops. Stopped
/// first, on the running system when systemd runs it (sd_booted's test).
fn unit_stops(host: &Host, changes: &[Change]) -> Vec<Change> {
    let systemd = host.is_live() && host.exists("/run/systemd/system");
    if !systemd || host.no_exec() {
        return Vec::new();
    }
    changes
        .iter()
        .filter_map(|c| match &c.action {
            Action::RemoveFile { path, .. } => path
                .strip_prefix("/etc/systemd/system/")
                .filter(|u| !u.contains('/') && u.ends_with(".service")),
            _ => None,
        })
        .map(|unit| Change {
            module: "rollback".into(),
            description: format!("Stop {unit} before its unit file is removed"),
            action: Action::Run {
                command: CommandSpec::new(
                    &["systemctl", "stop", unit],
                    format!("Stop {unit} before its unit file is removed"),
                ),
            },
            reboot: None,
        })
        .collect()
}

/// Restoring these files only changes the host at the next boot: the kernel
/// command line, boot entries, module blocks and loads, link settings.
fn boot_time_effect(path: &str) -> Option<String> {
    // What the file holds, and its verb (one command line takes effect,
    // entries take effect).
    const BOOT_TIME: &[(&str, &str, &str)] = &[
        ("/etc/default/grub", "the kernel command line", "takes"),
        ("/etc/grub.d/", "the boot entries", "take"),
        ("/boot/loader/entries/", "the boot entries", "take"),
        ("/boot/efi/loader/", "the boot entries", "take"),
        ("/efi/loader/", "the boot entries", "take"),
        (
            "/etc/kernel/cmdline",
            "the kernel command line of future kernels",
            "takes",
        ),
        // Not /etc/modprobe.d: modprobe reads it at every run, so a module
        // the rollback unblocks loads again at once, with no reboot.
        ("/etc/modules-load.d/", "modules loaded at boot", "take"),
        ("/etc/systemd/network/", "network link settings", "take"),
    ];
    BOOT_TIME
        .iter()
        .find(|(prefix, _, _)| path.starts_with(prefix))
        .map(|(_, what, verb)| {
            format!("{what} restored by the rollback {verb} effect at the next boot ({path})")
        })
}

#[cfg(test)]
mod tests {
    use super::boot_time_effect;

    #[test]
    fn one_command_line_takes_effect_entries_take_effect() {
        assert_eq!(
            boot_time_effect("/etc/default/grub").as_deref(),
            Some("the kernel command line restored by the rollback takes effect at the next boot (/etc/default/grub)")
        );
        let entries = boot_time_effect("/boot/loader/entries/x.conf").unwrap();
        assert!(
            entries.contains("the boot entries restored by the rollback take effect"),
            "{entries}"
        );
        assert_eq!(boot_time_effect("/etc/modprobe.d/x.conf"), None);
    }
}
