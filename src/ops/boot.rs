//! `boot list | set-default ENTRY | once ENTRY` and `commit`: the boot menu
//! read (boot/menu.rs), and the changes planned by
//! `plan::modules::boot_entry`. `set-default` is a journal generation (it
//! may edit `GRUB_DEFAULT`, which `rollback` restores); `once` only sets the
//! boot loader's one-shot entry, cleared when it boots, so there is nothing
//! to roll back and it is not recorded. `commit` turns a pending trial
//! (`apply --trial`) into a normal apply of the same profiles, only when
//! the trial is what runs.

mod menu;

use super::{require_root, Applied, ProfilesRequest, Target};
use crate::apply;
use crate::checks::proof::refuse_unproven;
use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::output::{CommandOut, Done};
use crate::plan::modules::boot_entry::{self, Chooser, SavedDefault};
use crate::plan::Plan;
use gdrprov_boot::cmdline;
use menu::{read_info, resolve};
pub use menu::{Bootinfo, EntryOut, Loader};

/// The boot menu of a root, and where its entries are (for "none found").
pub struct BootMenu {
    pub host: Host,
    pub info: Bootinfo,
    /// Where the entries were looked for, as the user sees it.
    pub place: String,
}

/// `boot list`: the entries, the default, the next boot's, the running one.
pub fn boot_list(target: &Target) -> Result<BootMenu> {
    let host = target.open()?;
    let info = read_info(&host)?;
    let place = match info.loader {
        Loader::Grub(cfg) => host.display(cfg),
        Loader::Bls => host.display(crate::plan::modules::bootcfg::BLS_DIR),
        Loader::SdBoot(esp) => format!(
            "{} or {}",
            host.display(&format!("{esp}/loader/entries")),
            host.display(&format!("{esp}/EFI/Linux"))
        ),
    };
    Ok(BootMenu { host, info, place })
}

/// What `boot once` ran, or would run (`--no-exec`).
pub struct BootOnce {
    /// The command as a shell line (chrooted on an image root).
    pub line: String,
    /// Why it runs.
    pub why: String,
    pub shown: CommandOut,
    /// `None`: not run (`--no-exec`); else what was made durable after.
    pub ran: Option<Vec<crate::host::Durable>>,
}

/// `boot once ENTRY`: the entry boots at the next boot only.
pub fn boot_once(target: &Target, entry: &str) -> Result<BootOnce> {
    let host = target.open()?;
    let info = read_info(&host)?;
    let id = resolve(&info, &host, entry)?;
    let sdboot = matches!(info.loader, Loader::SdBoot(_));
    // The one-shot entry is an EFI variable of the running firmware.
    if sdboot && !host.is_live() {
        return Err(Error::Refused(format!(
            "`boot once` on systemd-boot sets the EFI variable LoaderEntryOneShot of the running firmware (bootctl set-oneshot); {} is not the running system",
            host.root().display()
        )));
    }
    let spec = boot_entry::once(sdboot, info.tool_prefix, &id);
    let line = crate::host::CommandSpec {
        argv: host.effective_argv(&spec),
        ..spec.clone()
    }
    .shell_line();
    let mut once = BootOnce {
        shown: CommandOut::of(&host, &spec),
        why: spec.why.clone(),
        line,
        ran: None,
    };
    if host.no_exec() {
        return Ok(once);
    }
    require_root(&host, "changing the boot entries")?;
    let ran = host.run(&spec)?;
    if !ran.success() {
        return Err(Error::Command {
            command: once.line,
            msg: format!(
                "exit {}: {}",
                ran.code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "by signal".into()),
                ran.stderr.trim()
            ),
        });
    }
    // grubenv's next_entry must be on disk where GRUB reads it (apply/durable.rs decides how, host/flush.rs does it).
    once.ran = Some(crate::apply::make_boot_durable(&host, &[])?);
    Ok(once)
}

/// What `boot set-default` planned, and did unless `--no-exec`.
pub struct BootDefault {
    pub host: Host,
    /// The profiles in effect (state.json's, unchanged).
    pub profiles: Vec<String>,
    pub plan: Plan,
    pub outcome: Option<apply::Outcome>,
}

impl BootDefault {
    pub fn done(&self) -> Done<'_> {
        self.outcome.as_ref().map_or(Done::Planned, Done::Ran)
    }
}

/// `boot set-default ENTRY`: a journal generation labelled
/// `boot set-default ENTRY`; with `--no-exec`, the plan only.
pub fn boot_set_default(target: &Target, entry: &str) -> Result<BootDefault> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    // Planned against half-changed files otherwise: `gdrprov recover` first.
    apply::refuse_unfinished(&host, &store)?;
    refuse_unproven(&host, &store)?;
    let info = read_info(&host)?;
    let id = resolve(&info, &host, entry)?;
    let state = store.load_state()?;
    let plan = Plan {
        changes: boot_entry::set_default(&chooser(&host, &info)?, &id)?,
        state_after: state.clone(),
        ..Plan::default()
    };
    let profiles = state.profiles;
    if host.no_exec() {
        return Ok(BootDefault {
            host,
            profiles,
            plan,
            outcome: None,
        });
    }
    require_root(&host, "changing the boot entries")?;
    let lock = store.lock()?;
    apply::refuse_unfinished_locked(&host, &store)?;
    refuse_unproven(&host, &store)?;
    let outcome = apply::execute(&host, &store, &plan, Kind::Apply, Vec::new())?;
    // Label the generation for `history`; state.json keeps the profiles.
    let mut g = store.load_generation(outcome.generation)?;
    g.profiles = vec![format!("{} {id}", names::BOOT_SET_DEFAULT)];
    store.save_generation(&g)?;
    drop(lock);
    Ok(BootDefault {
        host,
        profiles,
        plan,
        outcome: Some(outcome),
    })
}

/// How this root chooses its default, read for the plan.
fn chooser<'a>(host: &Host, info: &'a Bootinfo) -> Result<Chooser<'a>> {
    let tool_prefix = info.tool_prefix;
    Ok(match info.loader {
        Loader::SdBoot(esp) => {
            let conf = format!("{esp}/loader/loader.conf");
            let before = host.read_text(&conf)?;
            Chooser::SdBoot { conf, before }
        }
        Loader::Bls => Chooser::Grub {
            tool_prefix,
            saved: None,
        },
        Loader::Grub(cfg) => Chooser::Grub {
            tool_prefix,
            saved: Some(SavedDefault {
                cfg,
                files: grub_defaults_files(host)?,
                shown_dir: host.display("/etc/default"),
                update_grub: host.exists("/usr/sbin/update-grub")
                    || host.exists("/sbin/update-grub"),
            }),
        },
    })
}

/// The GRUB defaults files, main first (`None`: no `/etc/default/grub`).
fn grub_defaults_files(host: &Host) -> Result<Option<Vec<(String, String)>>> {
    let Some(main) = host.read_text("/etc/default/grub")? else {
        return Ok(None);
    };
    let mut files = vec![("/etc/default/grub".to_string(), main)];
    for (path, named) in crate::plan::inputs::grub_defaults_set(host) {
        named.map_err(Error::Refused)?;
        if let Some(text) = host.read_text(&path)? {
            files.push((path, text));
        }
    }
    Ok(Some(files))
}

/// `commit`: the pending trial, once it is what runs, applied for good.
/// It never asks: it is meant for a systemd unit. Its generation is
/// labelled, so that `recover` completes it when it is interrupted.
pub fn commit(target: &Target) -> Result<Applied> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    // An interrupted commit (or any unfinished run) first: `gdrprov recover`.
    apply::refuse_unfinished(&host, &store)?;
    refuse_unproven(&host, &store)?;
    let state = store.load_state()?;
    let Some(trial) = state.trial else {
        return Err(Error::Refused(format!(
            "no trial boot is pending ({} sets one up); nothing committed",
            crate::suggest::Suggest::new(names::APPLY)
                .profiles::<String>(&[])
                .arg("--trial")
                .shown(&crate::suggest::Given::none())
        )));
    };
    let Some(running) = host.read_fact("/proc/cmdline") else {
        return Err(Error::Refused(format!(
            "cannot tell what runs: {} does not exist; run {} on the booted host; nothing committed",
            host.display("/proc/cmdline"),
            crate::suggest::Suggest::new(names::COMMIT).shown(&crate::suggest::Given::none())
        )));
    };
    trial_runs(&trial, &cmdline::split(running.trim()))?;
    super::apply_as(
        &ProfilesRequest {
            profiles: trial.profiles,
            target: target.clone(),
            trial: false,
        },
        &mut super::yes,
        Some(names::COMMIT),
    )
}

/// Refused unless the running command line is the trial's: it has every
/// argument the trial adds and none it removes.
fn trial_runs(trial: &crate::journal::Trial, running: &[String]) -> Result<()> {
    let lacks: Vec<&str> = trial
        .args
        .iter()
        .filter(|a| !running.contains(a))
        .map(String::as_str)
        .collect();
    let has: Vec<&str> = trial
        .removed
        .iter()
        .filter(|a| running.contains(a))
        .map(String::as_str)
        .collect();
    if lacks.is_empty() && has.is_empty() {
        return Ok(());
    }
    let mut why = Vec::new();
    if !lacks.is_empty() {
        why.push(format!("lacks {}", lacks.join(" ")));
    }
    if !has.is_empty() {
        why.push(format!("has {}, which the trial removes", has.join(" ")));
    }
    Err(Error::Refused(format!(
        "the trial entry ({}) is not what is running; it did not boot or was not chosen; nothing committed (the running command line {}). To try again: {}, reboot, {}; or apply without --trial",
        trial.entry,
        why.join(" and "),
        crate::suggest::Suggest::new(names::BOOT_ONCE).arg(trial.entry.as_str()).shown(&crate::suggest::Given::none()),
        crate::suggest::Suggest::new(names::COMMIT).shown(&crate::suggest::Given::none())
    )))
}
