//! `boot:` on systemd-boot with kernel-install. Future kernels take
//! `/etc/kernel/cmdline` (kernel-install writes it into each new entry or
//! UKI); installed type #1 entries, `$ESP/loader/entries/*.conf`, carry
//! theirs in `options` lines, edited in place. A unified kernel image holds
//! its command line inside: it is rebuilt through kernel-install when the
//! host builds UKIs that way (`layout=uki`), else gdrprov says why not and
//! changes nothing. Same ownership as GRUB: gdrprov removes only arguments
//! it added, or ones the profile forbids. Pure: facts and files read
//! through `ctx.seen`.

use crate::boot::cmdline;
use crate::boot::desired::{self, BootWants};
use crate::change::{Change, Part};
use crate::error::{Error, Result};
use crate::facts::boot_shape::SdBoot;
use crate::host::CommandSpec;
use crate::modules::Context;

pub const MODULE: &str = "boot";
/// Where kernel-install takes the command line of future kernels from.
pub const KERNEL_CMDLINE: &str = "/etc/kernel/cmdline";

/// Arguments kernel-install drops when it falls back to /proc/cmdline.
fn from_running(line: &str) -> Vec<String> {
    cmdline::split(line)
        .into_iter()
        .filter(|a| !a.starts_with("BOOT_IMAGE=") && !a.starts_with("initrd="))
        .collect()
}

/// A command line with `remove` taken out (every occurrence, exactly as
/// written) and `add` appended; everything else byte for byte.
pub fn edit_args(line: &str, add: &[String], remove: &[String]) -> String {
    let mut out = String::new();
    let mut last = 0;
    for (s, e) in cmdline::split_spans(line) {
        if remove.iter().any(|r| r == &line[s..e]) {
            out.push_str(line[last..s].trim_end_matches([' ', '\t']));
            last = e;
        }
    }
    out.push_str(&line[last..]);
    if !line.starts_with([' ', '\t']) {
        out = out.trim_start().to_string();
    }
    let mut out = if out.trim().is_empty() {
        String::new()
    } else {
        out
    };
    for a in add {
        if !out.is_empty() && !out.ends_with([' ', '\t']) {
            out.push(' ');
        }
        out.push_str(a);
    }
    out
}

/// An entry file with its `options` lines edited: removals wherever they
/// are, additions at the end of the last `options` line (a new one after
/// `linux` when there is none).
pub fn edit_entry(text: &str, add: &[String], remove: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let is_options = |l: &str| {
        l.trim_start()
            .strip_prefix("options")
            .is_some_and(|r| r.starts_with([' ', '\t']) || r.is_empty())
    };
    let mut last = None;
    for (i, l) in lines.iter_mut().enumerate() {
        if is_options(l) {
            // Keep the key and its alignment (`options    root=...`).
            let at = l.find("options").unwrap_or(0) + "options".len();
            let value = l[at..].trim_start();
            let key = &l[..l.len() - value.len()];
            let edited = edit_args(value, &[], remove);
            *l = if edited.is_empty() {
                key.trim_end().to_string()
            } else if key.ends_with([' ', '\t']) {
                format!("{key}{edited}")
            } else {
                format!("{key} {edited}")
            };
            last = Some(i);
        }
    }
    if !add.is_empty() {
        match last {
            Some(i) => {
                let l = &mut lines[i];
                if !l.ends_with([' ', '\t']) {
                    l.push(' ');
                }
                l.push_str(&add.join(" "));
            }
            None => {
                let at = lines
                    .iter()
                    .position(|l| l.trim_start().starts_with("linux"))
                    .map_or(lines.len(), |i| i + 1);
                lines.insert(at, format!("options {}", add.join(" ")));
            }
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') || text.is_empty() {
        out.push('\n');
    }
    out
}

fn options_of(text: &str) -> String {
    text.lines()
        .filter_map(|l| {
            let r = l.trim_start().strip_prefix("options")?;
            (r.starts_with([' ', '\t']) || r.is_empty()).then_some(r)
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn describe(add: &[String], remove: &[String]) -> String {
    let mut parts = Vec::new();
    if !add.is_empty() {
        parts.push(format!("add {}", add.join(" ")));
    }
    if !remove.is_empty() {
        parts.push(format!("remove {}", remove.join(" ")));
    }
    parts.join("; ")
}

pub fn plan(ctx: &Context, sd: &SdBoot, wants: &BootWants, mut part: Part) -> Result<Part> {
    if ctx.trial.is_some() {
        return Err(Error::Refused(format!(
            "--trial is not available on systemd-boot yet (this host boots entries from {}/loader/entries); apply without --trial",
            sd.esp
        )));
    }
    if let Some((name, _)) = ctx.desired.entries.first() {
        return Err(Error::Refused(format!(
            "boot.entry `{name}`: gdrprov makes extra boot entries for GRUB only so far, and this host boots with systemd-boot ({}/loader/entries); drop boot.entry from the profile here",
            sd.esp
        )));
    }
    let seen = ctx.seen;
    let running: Option<Vec<String>> = ctx.facts.proc_cmdline.as_deref().map(cmdline::split);
    let current_file = seen.file(KERNEL_CMDLINE)?.map(str::to_string);
    let entries: Vec<(String, String)> = sd
        .entries
        .iter()
        .filter_map(|p| Some((p.clone(), seen.file(p).ok()??.to_string())))
        .collect();
    // kernel-install's own fallback when /etc/kernel/cmdline is absent.
    let base = match (&current_file, ctx.facts.proc_cmdline.as_deref()) {
        (Some(text), _) => cmdline::split(&text.replace('\n', " ")),
        (None, Some(line)) => from_running(line),
        (None, None) => entries
            .first()
            .map(|(_, t)| from_running(&options_of(t)))
            .unwrap_or_default(),
    };
    let args = desired::plan_args(&base, wants, &ctx.state.kernel_args, running.as_deref())?;
    part.kernel_args = Some(args.owned.clone());
    let reboot = |what: &str| Some(format!("kernel command line: {what}"));
    let mut changed = false;
    if !args.is_noop() {
        let line = match &current_file {
            Some(t) => t.trim_end_matches('\n').replace('\n', " "),
            None => base.join(" "),
        };
        let what = describe(&args.add, &args.remove);
        part.edits.push(Change::write(
            MODULE,
            format!("Edit the kernel command line of future kernels in {KERNEL_CMDLINE}: {what}"),
            KERNEL_CMDLINE,
            current_file.clone(),
            format!("{}\n", edit_args(&line, &args.add, &args.remove)),
            0o644,
            reboot(&what),
        ));
        changed = true;
    }
    for (path, text) in &entries {
        let opts = cmdline::split(&options_of(text));
        let e =
            desired::plan_args(&opts, wants, &ctx.state.kernel_args, None).map_err(|source| {
                Error::BootArgsIn {
                    within: path.to_string(),
                    source,
                }
            })?;
        if e.is_noop() {
            continue;
        }
        let what = describe(&e.add, &e.remove);
        part.edits.push(Change::write(
            MODULE,
            format!("Edit the options of boot entry {path}: {what}"),
            path,
            Some(text.clone()),
            edit_entry(text, &e.add, &e.remove),
            0o644,
            reboot(&what),
        ));
    }
    if !sd.ukis.is_empty() && changed {
        uki_commands(sd, &mut part)?;
    }
    if let Some(diffs) = args.reboot.as_ref().filter(|d| !d.is_empty()) {
        let text: Vec<String> = diffs.iter().map(|d| d.to_string()).collect();
        part.reboot_pending.push(format!(
            "the running kernel's command line differs: {}",
            text.join("; ")
        ));
    }
    Ok(part)
}

/// UKIs carry their command line inside: rebuilt by kernel-install from
/// /etc/kernel/cmdline when the host is set up for that, else refused.
fn uki_commands(sd: &SdBoot, part: &mut Part) -> Result<()> {
    let mut why_not = Vec::new();
    if !sd.uki_layout() {
        why_not.push(format!(
            "/etc/kernel/install.conf does not say layout=uki (it says {}), so kernel-install did not build them; rebuild them with the tool that did (ukify, dracut --uefi) after gdrprov's edit, or set layout=uki",
            sd.layout.as_deref().map_or("nothing".into(), |l| format!("layout={l}"))
        ));
    }
    if !sd.kernel_install {
        why_not.push("kernel-install is not installed (/usr/bin/kernel-install)".into());
    }
    if sd.kernel_images.is_empty() {
        why_not
            .push("no kernel image to rebuild them from (/usr/lib/modules/VERSION/vmlinuz)".into());
    }
    if !why_not.is_empty() {
        return Err(Error::Refused(format!(
            "the unified kernel images in {}/EFI/Linux ({}) carry their kernel command line inside, and gdrprov will not rebuild them: {}. Nothing was changed",
            sd.esp,
            sd.ukis.len(),
            why_not.join("; ")
        )));
    }
    for v in &sd.kernel_images {
        let image = format!("/usr/lib/modules/{v}/vmlinuz");
        part.commands.push(Change::run(
            MODULE,
            CommandSpec::new(
                &["kernel-install", "add", v, &image],
                format!(
                    "Rebuild the unified kernel image of {v} with the new /etc/kernel/cmdline (kernel-install, layout=uki)"
                ),
            )
            .regenerating(),
            Some(format!("the unified kernel image of {v} was rebuilt")),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn edit_args_keeps_everything_else() {
        assert_eq!(
            edit_args("root=UUID=1 ro  quiet", &v(&["iommu=pt"]), &[]),
            "root=UUID=1 ro  quiet iommu=pt"
        );
        assert_eq!(
            edit_args(
                "root=UUID=1 iommu=off ro acpi_osi=\"A B\"",
                &[],
                &v(&["iommu=off"])
            ),
            "root=UUID=1 ro acpi_osi=\"A B\""
        );
        assert_eq!(
            edit_args("iommu=off", &v(&["iommu=pt"]), &v(&["iommu=off"])),
            "iommu=pt"
        );
        assert_eq!(edit_args("iommu=off ro", &[], &v(&["iommu=off"])), "ro");
    }

    #[test]
    fn edit_entry_options_lines() {
        let e = "title Debian\nversion 6.12\nlinux /vmlinuz\noptions root=UUID=1 ro\noptions quiet iommu=off\ninitrd /initrd\n";
        assert_eq!(
            edit_entry(e, &v(&["iommu=pt"]), &v(&["iommu=off"])),
            "title Debian\nversion 6.12\nlinux /vmlinuz\noptions root=UUID=1 ro\noptions quiet iommu=pt\ninitrd /initrd\n"
        );
        let bare = "title X\nlinux /vmlinuz\ninitrd /initrd";
        assert_eq!(
            edit_entry(bare, &v(&["iommu=pt"]), &[]),
            "title X\nlinux /vmlinuz\noptions iommu=pt\ninitrd /initrd"
        );
    }
}
