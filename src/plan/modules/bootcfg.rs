//! `boot:` — the kernel command line. Debian/Ubuntu: the effective
//! `GRUB_CMDLINE_LINUX` of `/etc/default/grub` and `grub.d/*.cfg`, edited in
//! place by the careful editor in `gdrprov_boot`, then `update-grub`. RHEL
//! family (BLS): the same edit of `/etc/default/grub` for future kernels, and
//! `grubby` for the existing entries. gdrprov records the arguments it added
//! and only ever removes those, or ones the profile forbids.

use super::Part;
use crate::error::{Error, Result};
use crate::facts::OsFamily;
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::inputs::PlanFacts;
use crate::plan::modules::Context;
use crate::profile::IommuMode;
use gdrprov_boot::desired::{self, BootWants, CpuVendor as Vendor, IommuIntent};
use gdrprov_boot::line::BootLine;
use gdrprov_boot::{entries, grub_defaults};

use super::bootcfg_extra::{self as extra, Extra};
pub use super::bootcfg_grub::{bls_default_entry, BLS_DIR, GRUBENV_BLS};
use super::bootcfg_grub::{
    bls_needing_change, defaults_edit, grub_cfg_stale, grub_error, names_entry, read_defaults,
    regenerate_command, DEFAULTS,
};
use super::bootcfg_grub_extra as grub_extra;

mod regen;
use regen::regeneration;

pub const MODULE: &str = "boot";
pub const GRUB_CFG: &str = "/boot/grub/grub.cfg";

fn wants_of(boot: &crate::profile::Boot, vendor: Vendor) -> BootWants {
    BootWants {
        iommu: match boot.iommu {
            Some(IommuMode::Passthrough) => IommuIntent::Passthrough,
            Some(IommuMode::Off) => IommuIntent::Off,
            Some(IommuMode::On) => IommuIntent::On,
            Some(IommuMode::Unmanaged) | None => IommuIntent::Unmanaged,
        },
        vendor,
        present: boot.cmdline.present.clone(),
        absent: boot.cmdline.absent.clone(),
    }
}

fn is_managed(boot: &crate::profile::Boot) -> bool {
    boot.iommu.is_some_and(|m| m != IommuMode::Unmanaged) || !boot.cmdline.is_empty()
}

/// Whether a path is an extra boot entry gdrprov generates.
pub fn is_entry_file(path: &str) -> bool {
    path.starts_with(entries::GRUBD_PREFIX)
        || (path.starts_with(BLS_DIR) && path.contains(entries::BLS_INFIX))
}

fn run_change(spec: CommandSpec, reboot: Option<String>) -> Change {
    Change::run(MODULE, spec, reboot)
}

/// What the boot part refuses whatever the host: --trial with no default-entry command line,
/// an extra entry named like the trial's.
fn refusals(ctx: &Context, managed: bool) -> Result<()> {
    if ctx.trial.is_some() && !managed {
        return Err(Error::Refused(
            "--trial puts the profiles' kernel command line in a one-shot boot entry, but they set none for the default entry (`boot.iommu` or `boot.cmdline`); apply without --trial".into(),
        ));
    }
    if let Some((name, _)) = ctx
        .desired
        .entries
        .iter()
        .find(|(n, _)| n == entries::TRIAL_ENTRY)
    {
        return Err(Error::Refused(format!(
            "boot.entry `{name}` is reserved for the trial boot of `apply --trial`; name the entry differently"
        )));
    }
    Ok(())
}

/// The running command line to compare with the default entry's, unless the kernel was started
/// from one of the profile's extra entries (then a warning says so).
fn running_line<'c>(ctx: &Context<'c>, part: &mut Part) -> Option<&'c str> {
    // A running extra entry (chosen with `boot once`) has its own arguments
    // on purpose: they are not drift of the default entry.
    let chosen = ctx
        .facts
        .boot
        .running_entry
        .as_deref()
        .filter(|id| ctx.desired.entries.iter().any(|(n, _)| names_entry(id, n)));
    if let Some(id) = chosen {
        part.warnings.push(format!(
            "the running kernel was started from the extra boot entry {id}: its own arguments are not compared with the default entry's"
        ));
    }
    ctx.facts
        .proc_cmdline
        .as_deref()
        .filter(|_| chosen.is_none())
}

/// The GRUB defaults as they are now and the default entry's arguments planned from them.
fn grub_shared<'c>(
    ctx: &Context<'c>,
    wants: BootWants,
    running_line: Option<&str>,
) -> Result<Shared<'c>> {
    let seen = ctx.seen;
    let files = read_defaults(seen)?;
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let current = grub_defaults::effective_cmdline(&named).map_err(|e| grub_error(seen, e))?;
    let running = running_line.map(BootLine::parse);
    let line = BootLine::from_args(&current);
    let args = desired::plan_args(&line, &wants, &ctx.state.kernel_args, running.as_ref())?;
    let trial = ctx.trial.is_some();
    let bls = ctx.facts.os.family == OsFamily::Rhel;
    Ok(Shared {
        seen,
        files,
        current,
        args,
        wants,
        trial,
        bls,
    })
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let boot = &ctx.desired.doc.boot;
    let managed = is_managed(boot);
    let owned_entries: Vec<String> = ctx
        .state
        .files
        .keys()
        .filter(|p| is_entry_file(p))
        .cloned()
        .collect();
    refusals(ctx, managed)?;
    if !managed
        && ctx.state.kernel_args.is_empty()
        && ctx.desired.entries.is_empty()
        && owned_entries.is_empty()
    {
        return Ok(part);
    }
    // The platform (arm64 or the x86 vendor) decides the IOMMU arguments.
    let modes: Vec<Option<IommuMode>> = std::iter::once(boot)
        .chain(ctx.desired.entries.iter().map(|(_, b)| b))
        .map(|b| b.iommu)
        .collect();
    let (vendor, warnings) = super::bootcfg_arch::platform(ctx.facts, &modes);
    part.warnings.extend(warnings);
    let wants = wants_of(boot, vendor);
    // No boot loader on the host: the boot part is a report, not an edit.
    if ctx.facts.boot.cmdline_home.is_elsewhere() {
        let names: Vec<String> = ctx.desired.entries.iter().map(|(n, _)| n.clone()).collect();
        part.boot_elsewhere =
            super::bootcfg_elsewhere::plan(ctx.facts, &wants, &names, ctx.trial.is_some())
                .map_err(Error::Refused)?;
        return Ok(part);
    }
    let running_line = running_line(ctx, &mut part);
    let listed: Vec<(String, BootWants)> = ctx
        .desired
        .entries
        .iter()
        .map(|(n, b)| (n.clone(), wants_of(b, vendor)))
        .collect();
    if let crate::facts::boot_shape::CmdlineHome::SystemdBoot(sd) = &ctx.facts.boot.cmdline_home {
        return super::bootcfg_sdboot::plan(ctx, sd, &wants, &listed, running_line, part);
    }

    let s = grub_shared(ctx, wants, running_line)?;
    let edited = default_entry(&s, &mut part)?;
    let x = extra_entries(ctx, &s, &listed, &owned_entries, &mut part)?;
    regeneration(&s, &x, edited, &mut part)?;
    trial_boot(ctx, &s, x, &mut part);
    Ok(part)
}

/// What the parts of the boot plan share.
struct Shared<'a> {
    seen: &'a PlanFacts,
    /// The GRUB defaults (name, text), `/etc/default/grub` first.
    files: Vec<(String, String)>,
    /// The default entry's command line as the defaults give it now.
    current: Vec<String>,
    /// The default entry's arguments: wanted, to add, to remove, the result.
    args: desired::ArgPlan,
    wants: BootWants,
    trial: bool,
    bls: bool,
}

/// The extra entries (the trial's included) and their files.
struct Entries {
    extras: Vec<Extra>,
    /// Path and content of every entry file wanted.
    wanted_paths: Vec<(String, String)>,
    /// Entry files whose content changes.
    scripts_changed: Vec<String>,
    /// The trial entry's id, when there is one.
    trial_id: Option<String>,
    /// Whether an entry gdrprov owned is removed.
    removed: bool,
    /// The default entry's command line now and after this plan.
    base_now: Vec<String>,
    base_after: Vec<String>,
}

/// The default entry: the GRUB defaults edit (a trial leaves them exactly
/// as they are). Gives whether they are edited.
fn default_entry(s: &Shared, part: &mut Part) -> Result<bool> {
    let (seen, files, args, trial) = (s.seen, &s.files, &s.args, s.trial);
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let reboot_reason = desired::describe_args(&args.add, &args.remove);
    let mut edited = false;
    if !trial {
        part.kernel_args = Some(args.owned.clone());
        if !args.add.is_empty() {
            let within = format!(
                "the GRUB defaults ({} and its drop-ins)",
                seen.display(DEFAULTS)
            );
            let loader = super::bootcfg_grub::grub_loader_args(seen);
            super::bootcfg_arch::line_fits(&within, &args.result, &loader)?;
        }
        let edits = grub_defaults::plan_cmdline_edit(&named, &args.add, &args.remove)
            .map_err(|e| grub_error(seen, e))?;
        edited = !edits.is_empty();
        for e in edits {
            let description = format!(
                "Edit the kernel command line in {}: {}",
                e.name, reboot_reason
            );
            // Not when the running kernel already has it (`commit` of a
            // trial that runs).
            let reboot = (args.reboot.is_none() || args.reboot_needed())
                .then(|| format!("kernel command line: {reboot_reason}"));
            part.edits
                .push(defaults_edit(MODULE, files, e, description, reboot));
        }
        if let Some(diffs) = args.reboot.as_ref().filter(|d| !d.is_empty()) {
            let text: Vec<String> = diffs.iter().map(|d| d.to_string()).collect();
            part.reboot_pending.push(format!(
                "the running kernel's command line differs: {}",
                text.join("; ")
            ));
        }
    }
    Ok(edited)
}

/// Extra entries start from the default entry's command line (as it will
/// be after this plan) and apply their own profile's rules to it; the
/// trial is one more. Their files (GRUB: `grub.d` scripts; BLS: copies of
/// the default entry), and whether any changes.
fn extra_entries(
    ctx: &Context,
    s: &Shared,
    listed: &[(String, BootWants)],
    owned_entries: &[String],
    part: &mut Part,
) -> Result<Entries> {
    let seen = s.seen;
    let loader = grub_extra::GrubExtras {
        ctx,
        seen,
        current: &s.current,
        args: &s.args,
        wants: &s.wants,
        trial: s.trial,
        bls: s.bls,
        bls_default: if s.bls { bls_default_entry(seen) } else { None },
        header: crate::plan::modules::files::header(ctx),
    };
    let planned = extra::plan(MODULE, &loader, listed, part)?;
    // The entry files, and whether any will change.
    let wanted_paths: Vec<(String, String)> = planned
        .placed
        .files
        .into_iter()
        .map(|f| (f.path, f.content))
        .collect();
    let mut scripts_changed = Vec::new();
    for (path, content) in &wanted_paths {
        if seen.file(path)? != Some(content.as_str()) {
            scripts_changed.push(path.clone());
        }
    }
    let removed = owned_entries
        .iter()
        .any(|p| !wanted_paths.iter().any(|(w, _)| w == p) && !matches!(seen.file(p), Ok(None)));
    Ok(Entries {
        extras: planned.extras,
        wanted_paths,
        scripts_changed,
        trial_id: planned.placed.trial_id,
        removed,
        base_now: planned.base_now,
        base_after: planned.base_after,
    })
}

/// grubenv's `kernelopts` value, where it is plain (grub2-editenv escapes
/// a backslash or newline; such a value is not set back).
pub(super) fn kernelopts(grubenv: &str) -> Option<&str> {
    let value = grubenv
        .lines()
        .find_map(|l| l.strip_prefix("kernelopts="))?;
    (!value.contains('\\')).then_some(value)
}

/// `apply --trial`: the one-shot boot of the trial entry; a replaced pending
/// trial's one-shot boot is cancelled; the trial is recorded.
fn trial_boot(ctx: &Context, s: &Shared, x: Entries, part: &mut Part) {
    let (seen, bls) = (s.seen, s.bls);
    let Entries {
        trial_id,
        base_now,
        base_after,
        ..
    } = x;
    if let Some(id) = &trial_id {
        let tool = if bls { "grub2-reboot" } else { "grub-reboot" };
        let one_shot = super::bootcfg_trial::one_shot(ctx, MODULE, &[tool, id], tool, id);
        part.commands.push(one_shot);
    }

    // A pending trial replaced before it booted: its one-shot next_entry
    // would name an entry that is gone (GRUB would then boot entry 0 once).
    if let (Some(old), None) = (&ctx.state.trial, &ctx.trial) {
        let (env, tool, text) = if bls {
            (GRUBENV_BLS, "grub2-editenv", &seen.grub.grubenv_bls)
        } else {
            ("/boot/grub/grubenv", "grub-editenv", &seen.grub.grubenv)
        };
        let next = text
            .as_deref()
            .and_then(|t| entries::grubenv_get(t, "next_entry"));
        if next.as_deref() == Some(old.entry.as_str()) {
            part.commands.push(run_change(
                CommandSpec::new(
                    &[tool, env, "unset", "next_entry"],
                    format!(
                        "Cancel the one-shot boot of the replaced trial entry {}",
                        old.entry
                    ),
                ),
                None,
            ));
        }
    }
    if let Some(id) = trial_id {
        super::bootcfg_trial::record(ctx, part, id, &base_now, base_after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::CpuVendor;
    use crate::plan::change::Action;
    use crate::plan::modules::testkit::{commands, desired, written, World};

    const PASSTHROUGH: &str = "boot: { iommu: passthrough }";

    fn debian(defaults: &str) -> World {
        let mut w = World::image(OsFamily::Debian);
        w.seen.grub.defaults = vec![(DEFAULTS.into(), Ok(Some(defaults.into())))];
        w.seen.grub.has_update_grub = true;
        w
    }

    #[test]
    fn passthrough_edits_grub_defaults_checks_them_and_regenerates() {
        let w = debian("GRUB_DEFAULT=0\nGRUB_CMDLINE_LINUX=\"quiet\"\n");
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        let after = written(&p, DEFAULTS).unwrap();
        assert!(
            after.contains("GRUB_CMDLINE_LINUX=\"quiet iommu=pt intel_iommu=on\""),
            "{after}"
        );
        assert_eq!(
            commands(&p),
            ["sh -n /etc/default/grub", "update-grub"],
            "no grub-script-check in this root"
        );
        assert_eq!(p.state_after.kernel_args, ["iommu=pt", "intel_iommu=on"]);
        assert!(p.changes[0].reboot.is_some());
    }

    #[test]
    fn amd_gets_iommu_pt_only_and_grub_mkconfig_without_update_grub() {
        let mut w = debian("GRUB_CMDLINE_LINUX=\"\"\n");
        w.facts.cpu_vendor = CpuVendor::Amd;
        w.seen.grub.has_update_grub = false;
        w.seen.grub.has_grub_script_check = true;
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        assert!(written(&p, DEFAULTS)
            .unwrap()
            .contains("GRUB_CMDLINE_LINUX=\"iommu=pt\""));
        assert_eq!(
            commands(&p)[1..],
            [
                "grub-mkconfig -o /boot/grub/grub.cfg",
                "grub-script-check /boot/grub/grub.cfg"
            ]
        );
    }

    #[test]
    fn nothing_to_do_when_the_arguments_are_there_and_grub_cfg_has_them() {
        let mut w = debian("GRUB_CMDLINE_LINUX=\"iommu=pt intel_iommu=on\"\n");
        w.state.kernel_args = vec!["iommu=pt".into(), "intel_iommu=on".into()];
        w.seen.grub.cfg = Some("menuentry 'Debian' --id gnulinux-simple {\n\tlinux /boot/vmlinuz-6.1 root=/dev/sda1 ro iommu=pt intel_iommu=on\n}\n".into());
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        assert!(p.changes.is_empty(), "{:?}", p.changes);
        // A grub.cfg never regenerated after the edit is regenerated.
        w.seen.grub.cfg =
            Some("menuentry 'Debian' {\n\tlinux /boot/vmlinuz-6.1 root=/dev/sda1 ro\n}\n".into());
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        assert_eq!(commands(&p), ["update-grub"]);
    }

    #[test]
    fn missing_or_broken_defaults_are_refused_naming_the_file() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.grub.defaults = vec![(DEFAULTS.into(), Ok(None))];
        let e = w.plan(&desired(PASSTHROUGH)).0.unwrap_err().to_string();
        assert!(e.starts_with("/img/etc/default/grub does not exist"), "{e}");
        let w = debian("GRUB_CMDLINE_LINUX=\"a\"\n\0\n");
        let e = w.plan(&desired(PASSTHROUGH)).0.unwrap_err().to_string();
        assert!(e.contains("line 2 holds a NUL byte"), "{e}");
        // Unmanaged boot reads no GRUB file at all.
        let w = World::image(OsFamily::Debian);
        assert!(w
            .plan(&desired("modules: {}"))
            .0
            .unwrap()
            .changes
            .is_empty());
    }

    #[test]
    fn bls_entries_lacking_the_arguments_get_grubby() {
        let mut w = World::image(OsFamily::Rhel);
        w.seen.grub.defaults = vec![(
            DEFAULTS.into(),
            Ok(Some(
                "GRUB_CMDLINE_LINUX=\"rhgb iommu=pt intel_iommu=on\"\n".into(),
            )),
        )];
        w.state.kernel_args = vec!["iommu=pt".into(), "intel_iommu=on".into()];
        w.seen.grub.grubenv_bls = Some("kernelopts=root=/dev/vda1 ro\n".into());
        w.seen.grub.bls_entries = vec![
            ("abc-5.14.0.conf".into(), "title R\nversion 5.14.0\nlinux /vmlinuz-5.14.0\noptions $kernelopts iommu=pt intel_iommu=on\n".into()),
            ("abc-5.14.1.conf".into(), "title R\nversion 5.14.1\nlinux /vmlinuz-5.14.1\noptions $kernelopts\n".into()),
        ];
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        assert_eq!(
            commands(&p),
            ["grubby --update-kernel=ALL --args=iommu=pt intel_iommu=on"]
        );
        assert!(p.changes[0].description.contains("(abc-5.14.1.conf)"));
        // grubby edits grubenv's kernelopts too: rollback sets it back.
        let Action::Run { command } = &p.changes[0].action else {
            panic!("{:?}", p.changes[0]);
        };
        assert_eq!(
            command.undo.as_deref(),
            Some(
                &[
                    "grub2-editenv".to_string(),
                    "-".into(),
                    "set".into(),
                    "kernelopts=root=/dev/vda1 ro".into()
                ][..]
            )
        );
    }

    #[test]
    fn an_extra_entry_is_a_grub_d_script_from_the_edited_defaults() {
        let w = debian("GRUB_CMDLINE_LINUX=\"quiet\"\n");
        let mut d = desired(PASSTHROUGH);
        let off = desired("boot: { iommu: off }");
        d.entries.push(("gds".into(), off.doc.boot.clone()));
        let p = w.plan(&d).0.unwrap();
        let path = entries::grubd_path("gds");
        let script = written(&p, &path).unwrap();
        assert!(
            script.contains("quiet") && script.contains("iommu=off"),
            "{script}"
        );
        assert!(commands(&p).contains(&format!("sh -n {path}")));
        assert!(commands(&p).contains(&"grub-script-check /boot/grub/grub.cfg".to_string()));
    }

    #[test]
    fn trial_needs_boot_arguments_and_leaves_the_default_alone() {
        let mut w = debian("GRUB_CMDLINE_LINUX=\"quiet\"\n");
        w.trial = Some(vec!["x".into()]);
        let e = w.plan(&desired("modules: {}")).0.unwrap_err().to_string();
        assert!(e.contains("--trial"), "{e}");
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        assert!(written(&p, DEFAULTS).is_none());
        let trial = p.state_after.trial.as_ref().unwrap();
        assert_eq!(trial.args, ["quiet", "iommu=pt", "intel_iommu=on"]);
        assert!(commands(&p).last().unwrap().starts_with("grub-reboot "));
    }

    #[test]
    fn extra_and_trial_entries_put_their_arguments_before_the_separator() {
        let mut w = debian("GRUB_CMDLINE_LINUX=\"quiet -- single\"\n");
        let mut d = desired(PASSTHROUGH);
        d.entries.push((
            "gds".into(),
            desired("boot: { iommu: off }").doc.boot.clone(),
        ));
        let p = w.plan(&d).0.unwrap();
        let gds = written(&p, &entries::grubd_path("gds")).unwrap();
        assert!(gds.contains("quiet iommu=off -- single"), "{gds}");
        w.trial = Some(vec!["x".into()]);
        let p = w.plan(&desired(PASSTHROUGH)).0.unwrap();
        let trial = written(&p, &entries::grubd_path(entries::TRIAL_ENTRY)).unwrap();
        assert!(
            trial.contains("quiet iommu=pt intel_iommu=on gdrprov.trial=1 -- single"),
            "{trial}"
        );
    }
}
