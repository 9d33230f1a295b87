//! `gdrprov boot set-default ENTRY` and `boot once ENTRY` as plans: what
//! makes an entry the default (a journal generation `rollback` undoes), and
//! the one command that boots it once (GRUB clears `next_entry` itself, so
//! it is not recorded). Pure: `ops::boot` reads the boot menu and the files
//! named here, and runs the result through apply.

use crate::error::{Error, Result};
use crate::host::CommandSpec;
use crate::plan::Change;
use gdrprov_boot::grub_defaults;

/// The module name on every change.
const MODULE: &str = "boot";

/// How a root chooses its default boot entry, as read for the plan.
pub enum Chooser<'a> {
    /// systemd-boot: `default` in loader.conf at `conf`, its text now (an
    /// EFI variable set by `bootctl set-default` would win over a file the
    /// journal can roll back).
    SdBoot {
        conf: String,
        before: Option<String>,
    },
    /// GRUB (its own menu or BLS entries): `grub-set-default`, with the
    /// tool prefix (`grub-`, `grub2-`); for a `grub.cfg` menu also
    /// `GRUB_DEFAULT=saved`, which `saved` says how to reach.
    Grub {
        tool_prefix: &'a str,
        saved: Option<SavedDefault<'a>>,
    },
}

/// What setting `GRUB_DEFAULT=saved` reads: the GRUB defaults files (main
/// first, `None`: no `/etc/default/grub`) and how to regenerate `grub.cfg`.
pub struct SavedDefault<'a> {
    /// `grub.cfg`'s path.
    pub cfg: &'a str,
    /// Each defaults file's name and text.
    pub files: Option<Vec<(String, String)>>,
    /// `/etc/default` as the user sees it, for an error.
    pub shown_dir: String,
    /// The root has `update-grub` (Debian/Ubuntu), else `*-mkconfig`.
    pub update_grub: bool,
}

/// The changes that make ENTRY (a resolved id) the default.
pub fn set_default(how: &Chooser, id: &str) -> Result<Vec<Change>> {
    match how {
        Chooser::SdBoot { conf, before } => {
            let after =
                gdrprov_boot::sdboot::set_loader_default(before.as_deref().unwrap_or(""), id);
            if before.as_deref() == Some(after.as_str()) {
                return Ok(Vec::new());
            }
            let why = format!("Make {id} the default boot entry (`default` in {conf})");
            Ok(vec![Change::write(
                MODULE,
                why,
                conf,
                before.clone(),
                after,
                0o644,
                None,
            )])
        }
        Chooser::Grub { tool_prefix, saved } => {
            let mut changes = match saved {
                Some(s) => saved_default(s, tool_prefix)?,
                None => Vec::new(),
            };
            let tool = format!("{tool_prefix}set-default");
            changes.push(Change::run(
                MODULE,
                CommandSpec::new(
                    &[&tool, id],
                    format!("Make {id} the default boot entry ({tool})"),
                ),
                None,
            ));
            Ok(changes)
        }
    }
}

/// `GRUB_DEFAULT=saved` as edits of the GRUB defaults, if it is not so:
/// each edited file checked as shell, then `grub.cfg` regenerated.
fn saved_default(s: &SavedDefault, tool_prefix: &str) -> Result<Vec<Change>> {
    let edits = saved_default_edits(s)?;
    if edits.is_empty() {
        return Ok(edits);
    }
    let checks: Vec<String> = edits
        .iter()
        .filter_map(|c| c.path())
        .map(str::to_string)
        .collect();
    let mut changes = edits;
    for p in checks {
        let why = format!("Check that {p} is still valid shell");
        changes.push(Change::run(
            MODULE,
            CommandSpec::new(&["sh", "-n", &p], why),
            None,
        ));
    }
    let cfg = s.cfg;
    let regen = if s.update_grub {
        CommandSpec::new(&["update-grub"], format!("Regenerate {cfg} (update-grub)"))
    } else {
        let tool = format!("{tool_prefix}mkconfig");
        CommandSpec::new(&[&tool, "-o", cfg], format!("Regenerate {cfg} ({tool})"))
    };
    changes.push(Change::run(MODULE, regen.regenerating(), None));
    Ok(changes)
}

/// The edits of the defaults files that make `GRUB_DEFAULT` `saved`.
fn saved_default_edits(s: &SavedDefault) -> Result<Vec<Change>> {
    let Some(files) = &s.files else {
        return Ok(Vec::new());
    };
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let shown = |source| Error::GrubDefaults {
        dir: s.shown_dir.clone(),
        source,
    };
    let current = grub_defaults::effective_value(&named, "GRUB_DEFAULT").map_err(shown)?;
    if current == ["saved"] {
        return Ok(Vec::new());
    }
    let remove: Vec<String> = current.into_iter().filter(|a| a != "saved").collect();
    let edits = grub_defaults::plan_edit(&named, "GRUB_DEFAULT", &["saved".to_string()], &remove)
        .map_err(shown)?;
    Ok(edits
        .into_iter()
        .map(|e| {
            let description = format!(
                "Set GRUB_DEFAULT=saved in {} (the default entry is then the one grub-set-default saves)",
                e.name
            );
            super::bootcfg_grub::defaults_edit(MODULE, files, e, description, None)
        })
        .collect())
}

/// The one command that boots ENTRY at the next boot only: systemd-boot's
/// EFI variable (`bootctl set-oneshot`), else GRUB's `next_entry`
/// (`grub-reboot`, with the tool prefix).
pub fn once(sdboot: bool, tool_prefix: &str, id: &str) -> CommandSpec {
    if sdboot {
        let file = gdrprov_boot::sdboot::entry_file(id);
        return CommandSpec::new(
            &["bootctl", "set-oneshot", &file],
            format!("Boot {id} at the next boot only (bootctl set-oneshot)"),
        );
    }
    let tool = format!("{tool_prefix}reboot");
    CommandSpec::new(&[&tool, id], format!("Boot {id} at the next boot only"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grub(main: &str) -> Chooser<'static> {
        Chooser::Grub {
            tool_prefix: "grub-",
            saved: Some(SavedDefault {
                cfg: "/boot/grub/grub.cfg",
                files: Some(vec![("/etc/default/grub".into(), main.into())]),
                shown_dir: "/etc/default".into(),
                update_grub: true,
            }),
        }
    }

    fn described(c: &[Change]) -> Vec<String> {
        c.iter().map(|c| c.description.clone()).collect()
    }

    #[test]
    fn grub_saved_already_is_one_command() {
        let c = set_default(&grub("GRUB_DEFAULT=saved\n"), "gdrprov-x").unwrap();
        assert_eq!(
            described(&c),
            ["Make gdrprov-x the default boot entry (grub-set-default)"]
        );
    }

    #[test]
    fn grub_default_becomes_saved_checked_and_regenerated() {
        let c = set_default(&grub("GRUB_DEFAULT=0\n"), "e").unwrap();
        let d = described(&c);
        assert_eq!(d.len(), 4, "{d:?}");
        assert!(d[0].starts_with("Set GRUB_DEFAULT=saved in /etc/default/grub"));
        assert_eq!(d[1], "Check that /etc/default/grub is still valid shell");
        assert_eq!(d[2], "Regenerate /boot/grub/grub.cfg (update-grub)");
        assert_eq!(c[0].path(), Some("/etc/default/grub"));
    }

    #[test]
    fn sdboot_writes_loader_conf_once() {
        let how = Chooser::SdBoot {
            conf: "/boot/efi/loader/loader.conf".into(),
            before: Some("timeout 3\n".into()),
        };
        let c = set_default(&how, "gdrprov-x.conf").unwrap();
        assert_eq!(c.len(), 1);
        let Some(crate::plan::Action::WriteFile { after, .. }) = c.first().map(|c| &c.action)
        else {
            panic!("{c:?}")
        };
        let again = Chooser::SdBoot {
            conf: "/boot/efi/loader/loader.conf".into(),
            before: Some(after.clone()),
        };
        assert!(set_default(&again, "gdrprov-x.conf").unwrap().is_empty());
    }

    #[test]
    fn once_is_grub_reboot_or_bootctl() {
        assert_eq!(once(false, "grub2-", "e").argv, ["grub2-reboot", "e"]);
        assert_eq!(
            once(true, "", "x.conf").argv[..2],
            ["bootctl", "set-oneshot"]
        );
    }
}
