//! `boot:` — the kernel command line. Debian/Ubuntu: the effective
//! `GRUB_CMDLINE_LINUX` of `/etc/default/grub` and `grub.d/*.cfg`, edited in
//! place by the careful editor in `crate::boot`, then `update-grub`. RHEL
//! family (BLS): the same edit of `/etc/default/grub` for future kernels, and
//! `grubby` for the existing entries. gdrprov records the arguments it added
//! and only ever removes those, or ones the profile forbids.

use super::Part;
use crate::boot::desired::{self, BootWants, CpuVendor as Vendor, IommuIntent};
use crate::boot::{cmdline, grub_defaults};
use crate::error::{Error, Result};
use crate::facts::{CpuVendor, OsFamily};
use crate::host::{CommandSpec, Host};
use crate::plan::{Action, Change, Context};
use crate::profile::IommuMode;

pub const MODULE: &str = "boot";
const DEFAULTS: &str = "/etc/default/grub";
const DEFAULTS_D: &str = "/etc/default/grub.d";
const BLS_DIR: &str = "/boot/loader/entries";
const GRUB_CFG: &str = "/boot/grub/grub.cfg";

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let boot = &ctx.desired.doc.boot;
    let managed = boot.iommu.is_some_and(|m| m != IommuMode::Unmanaged) || !boot.cmdline.is_empty();
    if !managed && ctx.state.kernel_args.is_empty() {
        return Ok(part);
    }
    if !ctx.desired.entries.is_empty() {
        return Err(Error::Refused(
            "`boot.entry` (an extra boot entry) is not supported by this version of gdrprov yet; drop `entry:` to apply the arguments to the default entry".into(),
        ));
    }
    let wants = BootWants {
        iommu: match boot.iommu {
            Some(IommuMode::Passthrough) => IommuIntent::Passthrough,
            Some(IommuMode::Off) => IommuIntent::Off,
            Some(IommuMode::On) => IommuIntent::On,
            Some(IommuMode::Unmanaged) | None => IommuIntent::Unmanaged,
        },
        vendor: match ctx.facts.cpu_vendor {
            CpuVendor::Intel => Vendor::Intel,
            CpuVendor::Amd => Vendor::Amd,
            CpuVendor::Other => Vendor::Other,
            CpuVendor::Unknown => Vendor::Unknown,
        },
        present: boot.cmdline.present.clone(),
        absent: boot.cmdline.absent.clone(),
    };
    if wants.iommu == IommuIntent::Passthrough && ctx.facts.cpu_vendor == CpuVendor::Unknown {
        part.warnings.push(
            "the CPU vendor is unknown (no /proc/cpuinfo in the root): adding intel_iommu=on, which AMD hosts ignore; pass --cpu-vendor to be exact".into(),
        );
    }

    let files = read_defaults(ctx.host)?;
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let current = grub_defaults::effective_cmdline(&named).map_err(|e| grub_error(ctx.host, e))?;
    let running: Option<Vec<String>> = ctx.facts.proc_cmdline.as_deref().map(cmdline::split);
    let args = desired::plan_args(&current, &wants, &ctx.state.kernel_args, running.as_deref())
        .map_err(|e| Error::Refused(e.to_string()))?;
    part.kernel_args = Some(args.owned.clone());

    let reboot_reason = describe(&args.add, &args.remove);
    let edits = grub_defaults::plan_cmdline_edit(&named, &args.add, &args.remove)
        .map_err(|e| grub_error(ctx.host, e))?;
    let edited = !edits.is_empty();
    for e in edits {
        let before = files
            .iter()
            .find(|(n, _)| *n == e.name)
            .map(|(_, c)| c.clone());
        part.edits.push(Change {
            module: MODULE.into(),
            description: format!(
                "Edit the kernel command line in {}: {}",
                e.name, reboot_reason
            ),
            action: Action::WriteFile {
                path: e.name.clone(),
                before,
                after: e.new_content,
                new_mode: 0o644,
                meta: None,
            },
            reboot: Some(format!("kernel command line: {reboot_reason}")),
        });
    }

    match ctx.facts.os.family {
        OsFamily::Rhel => {
            let stale = bls_needing_change(ctx.host, &args.wanted, &args.remove);
            if !stale.is_empty() {
                let mut argv = vec!["grubby".to_string(), "--update-kernel=ALL".to_string()];
                let add: Vec<&String> = args.wanted.iter().collect();
                argv.push(format!(
                    "--args={}",
                    add.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
                ));
                if !args.remove.is_empty() {
                    argv.push(format!("--remove-args={}", args.remove.join(" ")));
                }
                let argv_ref: Vec<&str> = argv.iter().map(String::as_str).collect();
                let spec = CommandSpec::new(
                    &argv_ref,
                    format!(
                        "Update the kernel arguments of the boot entries ({}) with grubby",
                        stale.join(", ")
                    ),
                );
                part.commands.push(Change {
                    module: MODULE.into(),
                    description: spec.why.clone(),
                    action: Action::Run { command: spec },
                    reboot: Some(format!(
                        "kernel command line: {}",
                        describe(&args.wanted, &args.remove)
                    )),
                });
            }
        }
        _ => {
            let stale = !edited && grub_cfg_stale(ctx.host, &args.wanted);
            if edited || stale {
                if edited {
                    // /bin/sh is what grub-mkconfig sources these files with.
                    for path in std::iter::once(DEFAULTS.to_string())
                        .chain(files.iter().skip(1).map(|(n, _)| n.clone()))
                    {
                        let spec = CommandSpec::new(
                            &["sh", "-n", &path],
                            format!("Check that {path} is still valid shell"),
                        );
                        part.commands.push(Change {
                            module: MODULE.into(),
                            description: spec.why.clone(),
                            action: Action::Run { command: spec },
                            reboot: None,
                        });
                    }
                }
                let spec = regenerate_command(ctx.host);
                part.commands.push(Change {
                    module: MODULE.into(),
                    description: spec.why.clone(),
                    action: Action::Run { command: spec },
                    reboot: stale.then(|| {
                        "grub.cfg was regenerated with the wanted kernel arguments".to_string()
                    }),
                });
                // Never unbootable: GRUB's own parser checks what was
                // generated; if it refuses, the defaults are put back and
                // grub.cfg is generated again from them.
                if let Some(check) = grub_script_check(ctx.host) {
                    part.commands.push(Change {
                        module: MODULE.into(),
                        description: check.why.clone(),
                        action: Action::Run { command: check },
                        reboot: None,
                    });
                }
            }
        }
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

fn describe(add: &[String], remove: &[String]) -> String {
    let mut parts = Vec::new();
    if !add.is_empty() {
        parts.push(format!("add {}", add.join(" ")));
    }
    if !remove.is_empty() {
        parts.push(format!("remove {}", remove.join(" ")));
    }
    if parts.is_empty() {
        "unchanged".into()
    } else {
        parts.join("; ")
    }
}

fn grub_error(host: &Host, e: grub_defaults::GrubError) -> Error {
    Error::Refused(format!("{} (in {})", e, host.display("/etc/default")))
}

/// `/etc/default/grub`, then `grub.d/*.cfg` in C-locale order, as
/// grub-mkconfig sources them.
fn read_defaults(host: &Host) -> Result<Vec<(String, String)>> {
    let Some(main) = host.read_text(DEFAULTS)? else {
        return Err(Error::Refused(format!(
            "{} does not exist: gdrprov sets the kernel command line through GRUB's defaults; install GRUB (grub2-common / grub2-tools) or drop `boot:` from the profile",
            host.display(DEFAULTS)
        )));
    };
    check_defaults_text(host, DEFAULTS, &main)?;
    let mut files = vec![(DEFAULTS.to_string(), main)];
    let mut names: Vec<String> = host
        .list_dir(DEFAULTS_D)
        .into_iter()
        .filter(|n| n.ends_with(".cfg"))
        .collect();
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for n in names {
        let path = format!("{DEFAULTS_D}/{n}");
        if let Some(text) = host.read_text(&path)? {
            check_defaults_text(host, &path, &text)?;
            files.push((path, text));
        }
    }
    Ok(files)
}

/// The largest GRUB defaults file gdrprov reads (real ones are a few KiB).
const MAX_DEFAULTS_LEN: usize = 256 * 1024;

/// Refuses what no real GRUB defaults file holds and a shell would read
/// differently from gdrprov: a NUL byte, or megabytes of text.
fn check_defaults_text(host: &Host, path: &str, text: &str) -> Result<()> {
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
        host.display(path)
    )))
}

fn regenerate_command(host: &Host) -> CommandSpec {
    let spec = if host.exists("/usr/sbin/update-grub") || host.exists("/sbin/update-grub") {
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

/// `grub-script-check /boot/grub/grub.cfg` when the root has the tool.
fn grub_script_check(host: &Host) -> Option<CommandSpec> {
    ["/usr/bin/grub-script-check", "/bin/grub-script-check"]
        .iter()
        .any(|p| host.exists(p))
        .then(|| {
            CommandSpec::new(
                &["grub-script-check", GRUB_CFG],
                format!("Check that GRUB accepts the regenerated {GRUB_CFG} (grub-script-check)"),
            )
        })
}

/// Whether an existing grub.cfg has kernel lines lacking a wanted argument
/// (its defaults were edited but it was never regenerated).
fn grub_cfg_stale(host: &Host, wanted: &[String]) -> bool {
    let Some(cfg) = host.read_fact("/boot/grub/grub.cfg") else {
        return false;
    };
    cfg.lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("linux") && l.contains("vmlinuz"))
        .any(|l| {
            let args = cmdline::split(l);
            wanted.iter().any(|w| !args.contains(w))
        })
}

/// BLS entries whose `options` lack a wanted argument or hold one to remove.
fn bls_needing_change(host: &Host, wanted: &[String], remove: &[String]) -> Vec<String> {
    let kernelopts = host
        .read_fact("/boot/grub2/grubenv")
        .and_then(|env| {
            env.lines()
                .find_map(|l| l.strip_prefix("kernelopts=").map(str::to_string))
        })
        .unwrap_or_default();
    host.list_dir(BLS_DIR)
        .into_iter()
        .filter(|n| n.ends_with(".conf"))
        .filter(|n| {
            let text = host
                .read_fact(&format!("{BLS_DIR}/{n}"))
                .unwrap_or_default();
            let options = text
                .lines()
                .find_map(|l| l.strip_prefix("options"))
                .unwrap_or("")
                .replace("$kernelopts", &kernelopts);
            let args = cmdline::split(&options);
            wanted.iter().any(|w| !args.contains(w)) || args.iter().any(|a| remove.contains(a))
        })
        .collect()
}
