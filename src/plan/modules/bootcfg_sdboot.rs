//! `boot:` on systemd-boot with kernel-install. Future kernels take
//! `/etc/kernel/cmdline` (kernel-install writes it into each new entry or
//! UKI); installed type #1 entries, `$ESP/loader/entries/*.conf`, carry
//! theirs in `options` lines, edited in place. A unified kernel image holds
//! its command line inside: it is rebuilt through kernel-install when the
//! host builds UKIs that way (`layout=uki`), else gdrprov says why not and
//! changes nothing. Same ownership as GRUB: gdrprov removes only arguments
//! it added, or ones the profile forbids. Pure: facts and files read
//! through `ctx.seen`.

use super::bootcfg_extra as extra;
use super::bootcfg_sdboot_extra as sd_extra;
use crate::error::{Error, Result};
use crate::facts::boot_shape::SdBoot;
use crate::host::CommandSpec;
use crate::plan::change::{Change, Part};
use crate::plan::modules::Context;
use gdrprov_boot::desired::{self, BootWants};
use gdrprov_boot::entries::{self, BlsEntry};
use gdrprov_boot::line::{self, BootLine};
use gdrprov_boot::{cmdline, sdboot};

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

/// An entry file with its `options` lines edited: removals wherever they
/// are in the kernel's part, additions at the end of the kernel's part:
/// before the `--` of the options line that has one, else at the end of the
/// last `options` line (a new one after `linux` when there is none).
/// `options` lines after the one with `--` are init's, left as they are.
pub fn edit_entry(text: &str, add: &[String], remove: &[String]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let is_options = |l: &str| {
        l.trim_start()
            .strip_prefix("options")
            .is_some_and(|r| r.starts_with([' ', '\t']) || r.is_empty())
    };
    let mut last = None;
    let mut placed = false;
    for (i, l) in lines.iter_mut().enumerate() {
        if placed || !is_options(l) {
            continue;
        }
        // Keep the key and its alignment (`options    root=...`).
        let at = l.find("options").unwrap_or(0) + "options".len();
        let value = l[at..].trim_start();
        let key = &l[..l.len() - value.len()];
        placed = BootLine::parse(value).has_separator();
        let here: &[String] = if placed { add } else { &[] };
        let edited = line::edit_text(value, here, remove);
        *l = if edited.is_empty() {
            key.trim_end().to_string()
        } else if key.ends_with([' ', '\t']) {
            format!("{key}{edited}")
        } else {
            format!("{key} {edited}")
        };
        last = Some(i);
    }
    if !add.is_empty() && !placed {
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

/// An entry file with its `options` set to `value`: the first `options`
/// line keeps its key and alignment, later ones go (kernel-install writes
/// one); a new line after `linux` when there is none.
fn set_options(text: &str, value: &str) -> String {
    let is_options = |l: &str| {
        l.trim_start()
            .strip_prefix("options")
            .is_some_and(|r| r.starts_with([' ', '\t']) || r.is_empty())
    };
    let mut out: Vec<String> = Vec::new();
    let mut done = false;
    for l in text.lines() {
        if !is_options(l) {
            out.push(l.to_string());
        } else if !done {
            let at = l.find("options").unwrap_or(0) + "options".len();
            let rest = &l[at..];
            let gap = &rest[..rest.len() - rest.trim_start().len()];
            let gap = if gap.is_empty() { " " } else { gap };
            out.push(format!("{}{gap}{value}", &l[..at]));
            done = true;
        }
    }
    if !done {
        let at = out
            .iter()
            .position(|l| l.trim_start().starts_with("linux"))
            .map_or(out.len(), |i| i + 1);
        out.insert(at, format!("options {value}"));
    }
    let mut joined = out.join("\n");
    if text.ends_with('\n') || text.is_empty() {
        joined.push('\n');
    }
    joined
}

/// The options kernel-install's 90-loaderentry writes into an entry from
/// the command line file `cmdline` (its words, in order), when the edited
/// entry holds exactly those arguments: `systemd.machine_id=` stays last
/// where the entry has one and the file does not (kernel-install appends
/// it when entries are named after the machine id). Written in that order,
/// the entry is what kernel-install's next rewrite (a kernel update,
/// update-initramfs' hook) makes of it, so a power cut between gdrprov's
/// edit and that rewrite boots the same line. `None` for an entry with
/// other arguments (written by hand): it keeps its own order.
fn kernel_install_options(edited: &[String], cmdline: &[String]) -> Option<String> {
    // With `--`, sorting would move words across it: the entry keeps its
    // own order (`edit_entry`).
    if [edited, cmdline]
        .iter()
        .any(|l| BootLine::from_args(l).has_separator())
    {
        return None;
    }
    let mid = "systemd.machine_id=";
    let mut want = cmdline.to_vec();
    if !want.iter().any(|a| a.starts_with(mid)) {
        if let Some(m) = edited.iter().find(|a| a.starts_with(mid)) {
            want.push(m.clone());
        }
    }
    let (mut a, mut b) = (edited.to_vec(), want.clone());
    a.sort();
    b.sort();
    (a == b).then(|| want.join(" "))
}

/// What systemd-boot adds to a type #1 entry's options: `initrd=PATH`
/// for each `initrd` line, the path written with `\\` as the EFI stub reads it.
fn initrd_args(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("initrd"))
        .filter(|r| r.starts_with([' ', '\t']))
        .flat_map(|r| r.split_whitespace())
        .map(|p| format!("initrd={}", p.replace('/', "\\")))
        .collect()
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

/// The boot part on a systemd-boot host. `listed` are the profiles'
/// `boot.entry` items (name and what each wants); `running_line` the
/// running command line, `None` when it is not the default entry's to
/// compare (an extra entry runs, or none is known).
pub fn plan(
    ctx: &Context,
    sd: &SdBoot,
    wants: &BootWants,
    listed: &[(String, BootWants)],
    running_line: Option<&str>,
    mut part: Part,
) -> Result<Part> {
    let seen = ctx.seen;
    let trial = ctx.trial.is_some();
    if trial && !ctx.facts.live {
        return Err(Error::Refused(format!(
            "--trial on systemd-boot boots the trial entry once through the EFI variable LoaderEntryOneShot of the running firmware (bootctl set-oneshot), and {} is not the running system; apply without --trial, or run it on the booted host",
            seen.display("/")
        )));
    }
    let running = running_line.map(BootLine::parse);
    let current_file = seen.file(KERNEL_CMDLINE)?.map(str::to_string);
    // The kernels' entries; gdrprov's own (`boot.entry`, the trial) are
    // whole files it owns, planned below.
    let mut entries: Vec<(String, String)> = Vec::new();
    for p in sd.entries.iter().filter(|p| !is_own_entry(p)) {
        if let Some(t) = seen.file(p)? {
            entries.push((p.clone(), t.to_string()));
        }
    }
    // kernel-install's own fallback when /etc/kernel/cmdline is absent.
    let base = match (&current_file, running_line) {
        (Some(text), _) => cmdline::split(&text.replace('\n', " ")),
        (None, Some(line)) => from_running(line),
        (None, None) => entries
            .first()
            .map(|(_, t)| from_running(&options_of(t)))
            .unwrap_or_default(),
    };
    let line = BootLine::from_args(&base);
    let args = desired::plan_args(&line, wants, &ctx.state.kernel_args, running.as_ref())?;
    // A trial leaves the default entry and future kernels as they are.
    let mut changed = false;
    if !trial {
        part.kernel_args = Some(args.owned.clone());
        let now = (&current_file, base.as_slice());
        changed = default_edits(ctx, wants, &args, now, &entries, &mut part)?;
    }
    if !sd.ukis.is_empty() && changed {
        uki_commands(sd, &mut part)?;
    }
    if !trial {
        if let Some(diffs) = args.reboot.as_ref().filter(|d| !d.is_empty()) {
            let text: Vec<String> = diffs.iter().map(|d| d.to_string()).collect();
            part.reboot_pending.push(format!(
                "the running kernel's command line differs: {}",
                text.join("; ")
            ));
        }
    }
    if trial || !listed.is_empty() {
        extra_entries(ctx, sd, wants, listed, &entries, &mut part)?;
    }
    cancel_replaced_trial(ctx, sd, &mut part);
    Ok(part)
}

/// Whether an entry file is one gdrprov generated.
pub fn is_own_entry(path: &str) -> bool {
    entries::is_gdrprov_id(entry_id(path))
}

/// An entry file's id: its name without `.conf`.
fn entry_id(path: &str) -> &str {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.strip_suffix(".conf").unwrap_or(name)
}

/// The longest `initrd=` arguments of the kernels' entries (the loader adds them to the command
/// line), or a long one when there is no entry yet.
fn loader_args(entries: &[(String, String)]) -> Vec<String> {
    let longest = entries
        .iter()
        .map(|(_, t)| initrd_args(t))
        .max_by_key(|v| v.iter().map(String::len).sum::<usize>());
    longest.unwrap_or_else(|| vec![format!("initrd={}", "0".repeat(80))])
}

/// /etc/kernel/cmdline and the kernels' entries. Gives whether
/// /etc/kernel/cmdline changes.
fn default_edits(
    ctx: &Context,
    wants: &BootWants,
    args: &desired::ArgPlan,
    (current_file, base): (&Option<String>, &[String]),
    entries: &[(String, String)],
    part: &mut Part,
) -> Result<bool> {
    // Not owed when the running kernel has it already (`commit` of a trial
    // that runs).
    let owed = args.reboot.is_none() || args.reboot_needed();
    let wants_reboot = |what: &str| owed.then(|| format!("kernel command line: {what}"));
    let mut changed = false;
    let line = match current_file {
        Some(t) => t.trim_end_matches('\n').replace('\n', " "),
        None => base.join(" "),
    };
    let mut new_line = line.clone();
    if !args.is_noop() {
        new_line = line::edit_text(&line, &args.add, &args.remove);
        let within = format!(
            "{} (the command line of future kernels)",
            ctx.seen.display(KERNEL_CMDLINE)
        );
        let future = cmdline::split(&new_line);
        if !args.add.is_empty() {
            super::bootcfg_arch::line_fits(&within, &future, &loader_args(entries))?;
        }
        let what = desired::describe_args(&args.add, &args.remove);
        part.edits.push(Change::write(
            MODULE,
            format!("Edit the kernel command line of future kernels in {KERNEL_CMDLINE}: {what}"),
            KERNEL_CMDLINE,
            current_file.clone(),
            format!("{new_line}\n"),
            0o644,
            wants_reboot(&what),
        ));
        changed = true;
    }
    let future = cmdline::split(&new_line);
    for (path, text) in entries {
        let old = options_of(text);
        let e = desired::plan_args(&BootLine::parse(&old), wants, &ctx.state.kernel_args, None)
            .map_err(|source| Error::BootArgsIn {
                within: path.to_string(),
                source,
            })?;
        if e.is_noop() {
            continue;
        }
        let edited = cmdline::split(&line::edit_text(&old, &e.add, &e.remove));
        let new_text = match kernel_install_options(&edited, &future) {
            Some(opts) => set_options(text, &opts),
            None => edit_entry(text, &e.add, &e.remove),
        };
        let within = format!("systemd-boot entry {}", ctx.seen.display(path));
        let after = cmdline::split(&options_of(&new_text));
        if !e.add.is_empty() {
            super::bootcfg_arch::line_fits(&within, &after, &initrd_args(text))?;
        }
        let what = desired::describe_args(&e.add, &e.remove);
        // The entry is the switch: written after the commands, once the
        // initrd it loads is rebuilt and on disk (issue 37).
        part.late_paths.push(path.clone());
        part.edits.push(Change::write(
            MODULE,
            format!("Edit the options of boot entry {path}: {what}"),
            path,
            Some(text.clone()),
            new_text,
            0o644,
            wants_reboot(&what),
        ));
    }
    Ok(changed)
}

/// The profiles' extra entries (`boot.entry`) and the trial's: copies of
/// the default entry with their own `options`, named `PREFIX-gdrprov-NAME`
/// so that systemd-boot sorts them after the kernels' entries and never
/// boots one by default (checked with its own ordering). The trial entry
/// boots once through `bootctl set-oneshot`, which systemd-boot clears as
/// it boots it: whatever that boot does, the next one is the default again.
fn extra_entries(
    ctx: &Context,
    sd: &SdBoot,
    wants: &BootWants,
    listed: &[(String, BootWants)],
    kernels: &[(String, String)],
    part: &mut Part,
) -> Result<()> {
    let dir = format!("{}/loader/entries", sd.esp);
    let mut parsed: Vec<BlsEntry> = kernels
        .iter()
        .map(|(p, t)| entries::parse_bls(entry_id(p), t, ""))
        .collect();
    sdboot::sort(&mut parsed);
    let loader_conf = ctx.seen.file(&format!("{}/loader/loader.conf", sd.esp))?;
    let default = sd_extra::default_to_copy(ctx, sd, listed, &parsed, loader_conf, &dir)?;
    let loader = sd_extra::SdExtras {
        ctx,
        wants,
        dir: &dir,
        text: kernels
            .iter()
            .find(|(p, _)| entry_id(p) == default.id)
            .map(|(_, t)| t.clone())
            .unwrap_or_default(),
        default: &default,
    };
    let planned = extra::plan(MODULE, &loader, listed, part)?;
    let mut all = parsed;
    all.extend(
        planned
            .placed
            .files
            .iter()
            .map(|f| entries::parse_bls(&f.id, &f.content, "")),
    );
    sd_extra::stays_the_default(ctx, sd, all, loader_conf, &default)?;
    if let Some(id) = planned.placed.trial_id {
        let file = format!("{id}.conf");
        let argv = ["bootctl", "set-oneshot", file.as_str()];
        let how = "bootctl set-oneshot";
        part.commands
            .push(super::bootcfg_trial::one_shot(ctx, MODULE, &argv, how, &id));
        super::bootcfg_trial::record(ctx, part, id, &planned.base_now, planned.base_after);
    }
    Ok(())
}

/// A pending trial replaced before it booted (a new apply or commit): its
/// one-shot boot would name an entry that is gone.
fn cancel_replaced_trial(ctx: &Context, sd: &SdBoot, part: &mut Part) {
    let (Some(old), None) = (&ctx.state.trial, &ctx.trial) else {
        return;
    };
    if ctx.facts.live && sd.oneshot_id().as_deref() == Some(old.entry.as_str()) {
        part.commands.push(Change::run(
            MODULE,
            CommandSpec::new(
                &["bootctl", "set-oneshot", ""],
                format!(
                    "Cancel the one-shot boot of the replaced trial entry {}",
                    old.entry
                ),
            ),
            None,
        ));
    }
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
        why_not.push(
            "no kernel image to rebuild them from (neither /usr/lib/modules/VERSION/vmlinuz nor /boot/vmlinuz-VERSION)"
                .into(),
        );
    }
    if !why_not.is_empty() {
        return Err(Error::Refused(format!(
            "the unified kernel images in {}/EFI/Linux ({}) carry their kernel command line inside, and gdrprov will not rebuild them: {}. Nothing was changed",
            sd.esp,
            sd.ukis.len(),
            why_not.join("; ")
        )));
    }
    for k in &sd.kernel_images {
        let v = &k.version;
        part.commands.push(Change::run(
            MODULE,
            CommandSpec::new(
                &["kernel-install", "add", v, &k.path],
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
    fn edit_text_keeps_everything_else() {
        let edit_args = line::edit_text;
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

    #[test]
    fn an_entry_with_a_separator_gets_its_arguments_before_it() {
        let add = v(&["iommu=pt", "intel_iommu=on"]);
        let e = "title D\nlinux /l\noptions root=UUID=1 ro quiet -- single\ninitrd /i\n";
        assert_eq!(
            edit_entry(e, &add, &[]),
            "title D\nlinux /l\noptions root=UUID=1 ro quiet iommu=pt intel_iommu=on -- single\ninitrd /i\n"
        );
        // The `--` on an earlier options line: later lines are init's.
        let e = "options ro iommu=off --\noptions iommu=off single\n";
        assert_eq!(
            edit_entry(e, &add, &v(&["iommu=off"])),
            "options ro iommu=pt intel_iommu=on --\noptions iommu=off single\n"
        );
        // kernel-install's order is not forced across a `--`.
        assert_eq!(
            kernel_install_options(&v(&["ro", "--", "s"]), &v(&["ro", "--", "s"])),
            None
        );
    }

    #[test]
    fn set_options_keeps_the_key_and_drops_later_lines() {
        let e = "title D\noptions    root=UUID=1 ro\noptions quiet\nlinux /l\n";
        assert_eq!(
            set_options(e, "root=UUID=1 ro iommu=pt"),
            "title D\noptions    root=UUID=1 ro iommu=pt\nlinux /l\n"
        );
        assert_eq!(
            set_options("title X\nlinux /l\ninitrd /i", "ro"),
            "title X\nlinux /l\noptions ro\ninitrd /i"
        );
    }

    #[test]
    fn kernel_install_order_only_for_its_own_arguments() {
        let mid = "systemd.machine_id=4a0c";
        // /etc/kernel/cmdline without the machine id: kernel-install appends it.
        assert_eq!(
            kernel_install_options(
                &v(&["root=UUID=1", "ro", mid, "iommu=pt"]),
                &v(&["root=UUID=1", "ro", "iommu=pt"])
            )
            .as_deref(),
            Some("root=UUID=1 ro iommu=pt systemd.machine_id=4a0c")
        );
        // The file made from the running line has it mid-line: kept there.
        assert_eq!(
            kernel_install_options(
                &v(&["root=UUID=1", mid, "iommu=pt"]),
                &v(&["root=UUID=1", mid, "iommu=pt"])
            )
            .as_deref(),
            Some("root=UUID=1 systemd.machine_id=4a0c iommu=pt")
        );
        // An entry with an argument of its own was written by hand.
        assert_eq!(
            kernel_install_options(
                &v(&["root=UUID=1", "quiet", mid, "iommu=pt"]),
                &v(&["root=UUID=1", "iommu=pt"])
            ),
            None
        );
    }
}
