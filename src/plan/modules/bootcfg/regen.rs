//! The boot part's last step: making the boot loader read the new command
//! line and entries. grubby on BLS entries (RHEL), else `update-grub` after
//! checking the shell files it sources; then GRUB's own check of what it
//! generated.

use super::{bls_needing_change, grub_cfg_stale, regenerate_command, DEFAULTS};
use super::{kernelopts, run_change, Entries, Shared, GRUB_CFG, MODULE};
use crate::error::Result;
use crate::host::CommandSpec;
use crate::plan::change::{Action, Change};
use crate::plan::modules::Part;
use gdrprov_boot::desired;

/// Making the boot loader read the new command line and entries: grubby on
/// BLS entries, else `update-grub` after checking the shell files, and
/// GRUB's own check of what it generated.
pub(super) fn regeneration(s: &Shared, x: &Entries, edited: bool, part: &mut Part) -> Result<()> {
    if s.bls {
        grubby(s, x, part)
    } else {
        update_grub(s, x, edited, part);
        Ok(())
    }
}

/// On BLS entries (RHEL): grubby updates every entry whose arguments are not the wanted ones.
fn grubby(s: &Shared, x: &Entries, part: &mut Part) -> Result<()> {
    let (seen, args, trial) = (s.seen, &s.args, s.trial);
    let stale = if trial {
        Vec::new()
    } else {
        bls_needing_change(seen, &args.wanted, &args.remove)
    };
    if !stale.is_empty() {
        super::super::bootcfg_grub::grubby_separator(seen)?;
        super::super::bootcfg_grub::grubby_fits(seen, &args.wanted, &args.remove)?;
        let mut argv = vec!["grubby".to_string(), "--update-kernel=ALL".to_string()];
        argv.push(format!("--args={}", args.wanted.join(" ")));
        if !args.remove.is_empty() {
            argv.push(format!("--remove-args={}", args.remove.join(" ")));
        }
        let argv_ref: Vec<&str> = argv.iter().map(String::as_str).collect();
        let mut spec = CommandSpec::new(
            &argv_ref,
            format!(
                "Update the kernel arguments of the boot entries ({}) with grubby",
                stale.join(", ")
            ),
        );
        // grubby also edits grubenv's kernelopts (RHEL 8's `options
        // $kernelopts`), which no file gdrprov writes keeps: rollback
        // sets that key back, and only it (saved_entry, next_entry may
        // have changed since).
        if let Some(old) = seen.grub.grubenv_bls.as_deref().and_then(kernelopts) {
            let set = format!("kernelopts={old}");
            spec = spec.undone_by(&["grub2-editenv", "-", "set", &set]);
        }
        part.commands.push(run_change(
            spec,
            Some(format!(
                "kernel command line: {}",
                desired::describe_args(&args.wanted, &args.remove)
            )),
        ));
        rewrite_after_grubby(x, part);
    }
    Ok(())
}

/// grubby --update-kernel=ALL edits gdrprov's entries too: they are written after it, even
/// when they are already right.
fn rewrite_after_grubby(x: &Entries, part: &mut Part) {
    let (wanted_paths, scripts_changed) = (x.wanted_paths.as_slice(), x.scripts_changed.as_slice());
    for (path, content) in wanted_paths {
        part.late_paths.push(path.clone());
        if !scripts_changed.contains(path) {
            part.late.push(Change {
                module: MODULE.into(),
                description: format!(
                    "Write {path} again after grubby (grubby --update-kernel=ALL edits every entry)"
                ),
                action: Action::WriteFile {
                    path: path.clone(),
                    before: Some(content.clone()),
                    after: content.clone(),
                    new_mode: 0o644,
                    meta: None,
                },
                reboot: None,
            });
        }
    }
}

/// Elsewhere: update-grub, after checking the shell files it sources, when a file changed or
/// grub.cfg is stale; then GRUB's own check of what it generated.
fn update_grub(s: &Shared, x: &Entries, edited: bool, part: &mut Part) {
    let (seen, files, args, trial) = (s.seen, &s.files, &s.args, s.trial);
    let (extras, scripts_changed, removed) = (&x.extras, x.scripts_changed.as_slice(), x.removed);
    let wanted_default: &[String] = if trial { &[] } else { &args.wanted };
    let stale = !edited
        && scripts_changed.is_empty()
        && !removed
        && grub_cfg_stale(seen, wanted_default, extras);
    if edited || stale || removed || !scripts_changed.is_empty() {
        if edited {
            // /bin/sh is what grub-mkconfig sources these files with.
            for path in std::iter::once(DEFAULTS.to_string())
                .chain(files.iter().skip(1).map(|(n, _)| n.clone()))
            {
                part.commands.push(run_change(
                    CommandSpec::new(
                        &["sh", "-n", &path],
                        format!("Check that {path} is still valid shell"),
                    ),
                    None,
                ));
            }
        }
        for path in scripts_changed {
            part.commands.push(run_change(
                CommandSpec::new(
                    &["sh", "-n", path],
                    format!("Check that the generated {path} is valid shell"),
                ),
                None,
            ));
        }
        part.commands.push(run_change(
            regenerate_command(seen),
            stale.then(|| "grub.cfg was regenerated with the wanted kernel arguments".to_string()),
        ));
        // Never unbootable: GRUB's own parser checks what was generated;
        // if it refuses, the defaults are put back and grub.cfg is
        // generated again from them.
        if !extras.is_empty() || seen.grub.has_grub_script_check {
            part.commands.push(run_change(
                CommandSpec::new(
                    &["grub-script-check", GRUB_CFG],
                    format!("Check that GRUB accepts the regenerated {GRUB_CFG}"),
                ),
                None,
            ));
        }
    }
}
