//! What the boot module reads of GRUB and BLS: the defaults files (checked,
//! in the order GRUB reads them), the BLS default entry, whether grub.cfg or
//! the BLS entries lag behind the wanted command line, and the command that
//! regenerates grub.cfg.

use super::bootcfg_extra::Extra;
use crate::error::{Error, Result};
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::inputs::PlanFacts;
use gdrprov_boot::line::BootLine;
use gdrprov_boot::{entries, grub_defaults};

pub(super) const DEFAULTS: &str = "/etc/default/grub";
pub const BLS_DIR: &str = "/boot/loader/entries";
pub const GRUBENV_BLS: &str = "/boot/grub2/grubenv";

/// `module`'s change that writes one edit of the GRUB defaults (`files`: each defaults file's
/// name and text as read, the edit's file among them).
pub fn defaults_edit(
    module: &str,
    files: &[(String, String)],
    e: grub_defaults::FileEdit,
    description: String,
    reboot: Option<String>,
) -> Change {
    let before = files
        .iter()
        .find(|(n, _)| *n == e.name)
        .map(|(_, c)| c.clone());
    Change::write(
        module,
        description,
        &e.name,
        before,
        e.new_content,
        0o644,
        reboot,
    )
}

/// Whether a boot entry id (grub.cfg id or derived BLS id) is the extra
/// entry `name` of a profile.
pub(super) fn names_entry(id: &str, name: &str) -> bool {
    id == name
        || id.ends_with(&format!(
            "{}{}",
            entries::BLS_INFIX,
            name.strip_prefix("gdrprov-").unwrap_or(name)
        ))
}

/// The BLS entry extra entries are derived from: the one `saved_entry`
/// names, else the newest kernel's. Gives (id, text, parsed).
pub fn bls_default_entry(seen: &PlanFacts) -> Option<(String, String, entries::BlsEntry)> {
    let env = seen.grub.grubenv_bls.clone().unwrap_or_default();
    let kernelopts = entries::grubenv_get(&env, "kernelopts").unwrap_or_default();
    let saved = entries::grubenv_get(&env, "saved_entry");
    let mut all: Vec<(String, String, entries::BlsEntry)> = seen
        .grub
        .bls_entries
        .iter()
        .filter_map(|(n, text)| Some((n.strip_suffix(".conf")?.to_string(), text)))
        .filter(|(id, _)| !id.contains(entries::BLS_INFIX))
        .map(|(id, text)| {
            let e = entries::parse_bls(&id, text, &kernelopts);
            (id, text.clone(), e)
        })
        .collect();
    all.sort_by(|a, b| entries::version_cmp(&a.2.version, &b.2.version));
    if let Some(i) = saved.and_then(|s| all.iter().position(|(id, _, _)| *id == s)) {
        return Some(all.swap_remove(i));
    }
    all.pop()
}

pub(super) fn grub_error(seen: &PlanFacts, e: grub_defaults::GrubError) -> Error {
    Error::GrubDefaults {
        dir: seen.display("/etc/default"),
        source: e,
    }
}

/// `/etc/default/grub`, then `grub.d/*.cfg` in C-locale order, as
/// grub-mkconfig sources them.
pub(super) fn read_defaults(seen: &PlanFacts) -> Result<Vec<(String, String)>> {
    let mut files = Vec::new();
    for (i, (path, read)) in seen.grub.defaults.iter().enumerate() {
        match read.clone().map_err(Error::Refused)? {
            Some(text) => {
                check_defaults_text(seen, path, &text)?;
                files.push((path.clone(), text));
            }
            None if i == 0 => {
                return Err(Error::Refused(format!(
                    "{} does not exist: gdrprov sets the kernel command line through GRUB's defaults; install GRUB (grub2-common / grub2-tools) or drop `boot:` from the profile",
                    seen.display(DEFAULTS)
                )))
            }
            None => {}
        }
    }
    Ok(files)
}

/// The largest GRUB defaults file gdrprov reads (real ones are a few KiB).
const MAX_DEFAULTS_LEN: usize = 256 * 1024;

/// Refuses what no real GRUB defaults file holds and a shell would read
/// differently from gdrprov: a NUL byte, or megabytes of text.
pub(super) fn check_defaults_text(seen: &PlanFacts, path: &str, text: &str) -> Result<()> {
    let why = if text.len() > MAX_DEFAULTS_LEN {
        format!(
            "it is {} bytes long, more than any GRUB defaults file ({} KiB)",
            text.len(),
            MAX_DEFAULTS_LEN / 1024
        )
    } else if let Some(i) = text.find('\0') {
        let line = text[..i].matches('\n').count() + 1;
        format!("line {line} holds a NUL byte, which the shell that grub-mkconfig runs reads differently")
    } else {
        return Ok(());
    };
    Err(Error::Refused(format!(
        "{}: {why}; gdrprov will not edit it: fix it by hand so that `sh -n {path}` passes",
        seen.display(path)
    )))
}

pub(super) fn regenerate_command(seen: &PlanFacts) -> CommandSpec {
    let spec = if seen.grub.has_update_grub {
        CommandSpec::new(
            &["update-grub"],
            "Regenerate /boot/grub/grub.cfg (update-grub)",
        )
    } else {
        CommandSpec::new(
            &["grub-mkconfig", "-o", "/boot/grub/grub.cfg"],
            "Regenerate /boot/grub/grub.cfg (grub-mkconfig)",
        )
    };
    spec.regenerating()
}

/// Whether an existing grub.cfg has kernel lines lacking a wanted argument
/// (its defaults were edited but it was never regenerated), or lacks an
/// extra entry or has it with other arguments.
pub(super) fn grub_cfg_stale(seen: &PlanFacts, wanted: &[String], extras: &[Extra]) -> bool {
    let Some(cfg) = &seen.grub.cfg else {
        return false;
    };
    let menu = entries::parse_grub_cfg(cfg);
    let default_stale = menu
        .iter()
        .filter(|m| !m.id.as_deref().is_some_and(entries::is_gdrprov_id))
        .filter(|m| m.kernel.as_deref().is_some_and(|k| k.contains("vmlinuz")))
        .any(|m| {
            let kernel = BootLine::from_args(&m.args).kernel;
            wanted.iter().any(|w| !kernel.contains(w))
        });
    let extra_stale = extras.iter().any(|x| {
        !menu
            .iter()
            .any(|m| m.id.as_deref() == Some(x.name.as_str()) && m.args.ends_with(&x.args))
    });
    default_stale || extra_stale
}

/// BLS entries whose `options` lack a wanted argument or hold one to remove.
pub(super) fn bls_needing_change(
    seen: &PlanFacts,
    wanted: &[String],
    remove: &[String],
) -> Vec<String> {
    let kernelopts = seen
        .grub
        .grubenv_bls
        .as_deref()
        .and_then(|env| {
            env.lines()
                .find_map(|l| l.strip_prefix("kernelopts=").map(str::to_string))
        })
        .unwrap_or_default();
    seen.grub
        .bls_entries
        .iter()
        .filter(|(n, _)| n.ends_with(".conf") && !n.contains(entries::BLS_INFIX))
        .filter(|(_, text)| {
            let options = text
                .lines()
                .find_map(|l| l.strip_prefix("options"))
                .unwrap_or("")
                .replace("$kernelopts", &kernelopts);
            let args = BootLine::parse(&options).kernel;
            wanted.iter().any(|w| !args.contains(w)) || args.iter().any(|a| remove.contains(a))
        })
        .map(|(n, _)| n.clone())
        .collect()
}

/// grubby (`--update-kernel=ALL`, RHEL's BLS) puts the arguments it adds at
/// the end of each entry's `options` and of grubenv's `kernelopts`: after a
/// `--` there, where they would go to init. Refused, naming the file,
/// before anything is written.
pub(super) fn grubby_separator(seen: &PlanFacts) -> Result<()> {
    let env = seen.grub.grubenv_bls.as_deref().unwrap_or_default();
    let kernelopts = entries::grubenv_get(env, "kernelopts");
    let mut holders: Vec<String> = Vec::new();
    if kernelopts
        .as_deref()
        .is_some_and(|k| BootLine::parse(k).has_separator())
    {
        holders.push(format!("{} (kernelopts)", seen.display(GRUBENV_BLS)));
    }
    for (name, text) in &seen.grub.bls_entries {
        let options: Vec<&str> = text
            .lines()
            .filter_map(|l| {
                let r = l.trim_start().strip_prefix("options")?;
                (r.starts_with([' ', '\t']) || r.is_empty()).then_some(r)
            })
            .collect();
        if BootLine::parse(&options.join(" ")).has_separator() {
            holders.push(seen.display(&format!("{}/{name}", BLS_DIR)));
        }
    }
    if holders.is_empty() {
        return Ok(());
    }
    Err(Error::Refused(format!(
        "{}: the kernel command line has `--`, which ends the kernel's arguments (what follows goes to init), and grubby, which gdrprov runs to update the BLS entries, appends the arguments it adds at the end of the line, after `--`, where init would get them instead of the kernel. Move init's arguments after `--` into init's own configuration (or remove `--`) there, then run gdrprov again; nothing was changed",
        holders.join(", ")
    )))
}

/// What GRUB puts on a kernel's line besides the defaults' arguments:
/// `BOOT_IMAGE=` and the kernel's path (GRUB's `linux` command, x86 and
/// arm64), and grub-mkconfig's `root=` and `ro` (10_linux). The longest
/// kernel path grub.cfg names, else one of 64 bytes; `root=` as a UUID.
pub(super) fn grub_loader_args(seen: &PlanFacts) -> Vec<String> {
    let longest = seen.grub.cfg.as_deref().and_then(|cfg| {
        entries::parse_grub_cfg(cfg)
            .into_iter()
            .filter_map(|m| m.kernel)
            .max_by_key(String::len)
    });
    let path = longest.unwrap_or_else(|| format!("/boot/vmlinuz-{}", "0".repeat(50)));
    vec![
        format!("BOOT_IMAGE={path}"),
        format!("root=UUID={}", "0".repeat(36)),
        "ro".into(),
    ]
}

/// Each BLS entry's line after grubby (`gdrprov_boot::hold::grubby_options`
/// of its options, `$kernelopts` written out) fits the kernel's buffer,
/// with GRUB's `BOOT_IMAGE=(hdX,gptY)/vmlinuz-...` before it.
pub(super) fn grubby_fits(seen: &PlanFacts, wanted: &[String], remove: &[String]) -> Result<()> {
    let env = seen.grub.grubenv_bls.as_deref().unwrap_or_default();
    let kernelopts = entries::grubenv_get(env, "kernelopts").unwrap_or_default();
    let add: Vec<&str> = wanted.iter().map(String::as_str).collect();
    let remove: Vec<&str> = remove.iter().map(String::as_str).collect();
    for (name, text) in &seen.grub.bls_entries {
        let e = entries::parse_bls(name.trim_end_matches(".conf"), text, &kernelopts);
        let after = gdrprov_boot::hold::grubby_options(&e.options.join(" "), &add, &remove);
        let loader = [format!("BOOT_IMAGE=(hd0,gpt2){}", e.linux)];
        let within = format!(
            "BLS entry {} (after grubby)",
            seen.display(&format!("{}/{name}", BLS_DIR))
        );
        let args: Vec<String> = after.split_whitespace().map(str::to_string).collect();
        super::bootcfg_arch::line_fits(&within, &args, &loader)?;
    }
    Ok(())
}
