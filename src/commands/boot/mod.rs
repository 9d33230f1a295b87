//! `gdrprov boot list | set-default ENTRY | once ENTRY` and `gdrprov commit`.
//!
//! `boot list` reads what GRUB will show: the menu entries of `grub.cfg`
//! (Debian/Ubuntu) or the BLS entries (RHEL family), the default from
//! `grub.cfg` and `grubenv`, and which one runs (from `/proc/cmdline`).
//! `set-default` is a journal generation (it may edit `GRUB_DEFAULT`, which
//! `rollback` restores); `once` only sets GRUB's one-shot `next_entry`, which
//! GRUB clears itself when it boots it, so there is nothing to roll back and
//! it is not recorded. `commit` turns a pending trial (`apply --trial`) into
//! a normal apply of the same profiles, only when the trial is what runs.

mod menu;

use crate::apply;
use crate::commands::cli::{BootCommand, EntryArgs};
use crate::error::{Error, Result};
use crate::host::{CommandSpec, Host};
use crate::journal::{Kind, StateStore};
use crate::names;
use crate::ops::{self, Target};
use crate::output::{Format, Output};
use crate::plan::{Action, Change, Plan};
use gdrprov_boot::{cmdline, grub_defaults};
use menu::{read_info, resolve, Bootinfo, Loader};
use std::fmt::Write as _;

/// `boot list | set-default | once` on TARGET (its `no_exec` from `--no-exec`).
pub fn boot(out: &Output, target: &Target, cmd: &BootCommand) -> Result<i32> {
    match cmd {
        BootCommand::List => list(out, target),
        BootCommand::SetDefault(a) => set_default(out, target, a),
        BootCommand::Once(a) => once(out, target, a),
    }
}

fn list(out: &Output, target: &Target) -> Result<i32> {
    let host = target.open()?;
    let info = read_info(&host)?;
    match out.format {
        Format::Json => {
            let v = serde_json::json!({
                "loader": match info.loader { Loader::Grub(p) => format!("grub ({p})"), Loader::Bls => "bls".into(), Loader::SdBoot(esp) => format!("systemd-boot ({esp})") },
                "default": info.default,
                "next_entry": info.next_entry,
                "entries": info.entries,
            });
            out.document(names::BOOT_LIST, &target.root, v);
        }
        Format::Text | Format::Prometheus | Format::Html => out.raw(&list_text(&host, &info)),
    }
    Ok(crate::exit::OK)
}

/// `boot list` as text: each entry's id and marks, title, kernel line.
fn list_text(host: &Host, info: &Bootinfo) -> String {
    let mut t = String::new();
    if info.entries.is_empty() {
        let place = match info.loader {
            Loader::Grub(cfg) => host.display(cfg),
            Loader::Bls => host.display(crate::plan::modules::bootcfg::BLS_DIR),
            Loader::SdBoot(esp) => format!(
                "{} or {}",
                host.display(&format!("{esp}/loader/entries")),
                host.display(&format!("{esp}/EFI/Linux"))
            ),
        };
        let _ = writeln!(t, "No boot entries found in {place}.");
    }
    for e in &info.entries {
        let mut marks = Vec::new();
        if e.default {
            marks.push("default");
        }
        if e.running {
            marks.push("running");
        }
        if e.next_boot {
            marks.push("next boot");
        }
        let marks = if marks.is_empty() {
            String::new()
        } else {
            format!("  [{}]", marks.join(", "))
        };
        let _ = writeln!(t, "{}{marks}", e.id);
        let _ = writeln!(t, "    {}", e.title);
        let _ = writeln!(
            t,
            "    {} {}",
            e.kernel.as_deref().unwrap_or("(no linux line)"),
            e.args.join(" ")
        );
    }
    t
}

fn once(out: &Output, target: &Target, a: &EntryArgs) -> Result<i32> {
    let host = target.open()?;
    let info = read_info(&host)?;
    let id = resolve(&info, &host, &a.entry)?;
    if let Loader::SdBoot(_) = info.loader {
        // The one-shot entry is an EFI variable of the running firmware.
        if !host.is_live() {
            return Err(Error::Refused(format!(
                "`boot once` on systemd-boot sets the EFI variable LoaderEntryOneShot of the running firmware (bootctl set-oneshot); {} is not the running system",
                host.root().display()
            )));
        }
        let file = gdrprov_boot::sdboot::entry_file(&id);
        let spec = CommandSpec::new(
            &["bootctl", "set-oneshot", &file],
            format!("Boot {id} at the next boot only (bootctl set-oneshot)"),
        );
        run_or_show(out, target, &host, &spec)?;
        return Ok(crate::exit::OK);
    }
    let tool = format!("{}reboot", info.tool_prefix);
    let spec = CommandSpec::new(&[&tool, &id], format!("Boot {id} at the next boot only"));
    run_or_show(out, target, &host, &spec)?;
    Ok(crate::exit::OK)
}

fn run_or_show(out: &Output, target: &Target, host: &Host, spec: &CommandSpec) -> Result<()> {
    let line = CommandSpec {
        argv: host.effective_argv(spec),
        ..spec.clone()
    }
    .shell_line();
    let shown = crate::output::CommandOut::of(host, spec);
    if host.no_exec() {
        match out.format {
            Format::Json => out.document(
                names::BOOT_ONCE,
                &target.root,
                serde_json::json!({"run": shown, "ran": false}),
            ),
            Format::Text | Format::Prometheus | Format::Html => {
                out.raw(&format!("Would run (--no-exec): {line}\n"))
            }
        }
        return Ok(());
    }
    ops::require_root(host, "changing the boot entries")?;
    let ran = host.run(spec)?;
    if !ran.success() {
        return Err(Error::Command {
            command: line,
            msg: format!(
                "exit {}: {}",
                ran.code
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "by signal".into()),
                ran.stderr.trim()
            ),
        });
    }
    // grubenv's next_entry must be on disk where GRUB reads it (apply/durable.rs).
    let durable = crate::apply::make_boot_durable(host, &[])?;
    match out.format {
        Format::Json => out.document(
            names::BOOT_ONCE,
            &target.root,
            serde_json::json!({"run": shown, "ran": true, "durable": durable}),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            out.raw(&format!("Ran: {line}\n{}.\n", spec.why))
        }
    }
    Ok(())
}

/// `GRUB_DEFAULT=saved` as an edit of the GRUB defaults, if it is not so.
fn saved_default_edits(host: &Host) -> Result<Vec<Change>> {
    let Some(main) = host.read_text("/etc/default/grub")? else {
        return Ok(Vec::new());
    };
    let mut files = vec![("/etc/default/grub".to_string(), main)];
    for (path, named) in crate::plan::inputs::grub_defaults_set(host) {
        named.map_err(Error::Refused)?;
        if let Some(text) = host.read_text(&path)? {
            files.push((path, text));
        }
    }
    let named: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let shown = |source| Error::GrubDefaults {
        dir: host.display("/etc/default"),
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
            crate::plan::modules::bootcfg_grub::defaults_edit("boot", &files, e, description, None)
        })
        .collect())
}

fn set_default(out: &Output, target: &Target, a: &EntryArgs) -> Result<i32> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    // Planned against half-changed files otherwise: `gdrprov recover` first.
    apply::refuse_unfinished(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let info = read_info(&host)?;
    let id = resolve(&info, &host, &a.entry)?;
    let state = store.load_state()?;
    let run = |spec: CommandSpec| Change {
        module: "boot".into(),
        description: spec.why.clone(),
        action: Action::Run { command: spec },
        reboot: None,
    };
    let mut changes = Vec::new();
    // systemd-boot: loader.conf's `default` (a file, so the journal can
    // roll it back); an EFI variable set by `bootctl set-default` would win.
    if let Loader::SdBoot(esp) = info.loader {
        let path = format!("{esp}/loader/loader.conf");
        let before = host.read_text(&path)?;
        let after = gdrprov_boot::sdboot::set_loader_default(before.as_deref().unwrap_or(""), &id);
        if before.as_deref() != Some(after.as_str()) {
            changes.push(Change {
                module: "boot".into(),
                description: format!("Make {id} the default boot entry (`default` in {path})"),
                action: Action::WriteFile {
                    path: path.clone(),
                    before,
                    after,
                    new_mode: 0o644,
                    meta: None,
                },
                reboot: None,
            });
        }
    }
    if let Loader::Grub(cfg) = info.loader {
        let edits = saved_default_edits(&host)?;
        if !edits.is_empty() {
            let checks: Vec<String> = edits
                .iter()
                .filter_map(|c| c.path())
                .map(str::to_string)
                .collect();
            changes.extend(edits);
            for p in checks {
                changes.push(run(CommandSpec::new(
                    &["sh", "-n", &p],
                    format!("Check that {p} is still valid shell"),
                )));
            }
            let regen = if host.exists("/usr/sbin/update-grub") || host.exists("/sbin/update-grub")
            {
                CommandSpec::new(&["update-grub"], format!("Regenerate {cfg} (update-grub)"))
            } else {
                let tool = format!("{}mkconfig", info.tool_prefix);
                CommandSpec::new(&[&tool, "-o", cfg], format!("Regenerate {cfg} ({tool})"))
            };
            changes.push(run(regen.regenerating()));
        }
    }
    if !matches!(info.loader, Loader::SdBoot(_)) {
        let tool = format!("{}set-default", info.tool_prefix);
        changes.push(run(CommandSpec::new(
            &[&tool, &id],
            format!("Make {id} the default boot entry ({tool})"),
        )));
    }
    let plan = Plan {
        changes,
        state_after: state.clone(),
        ..Plan::default()
    };
    if host.no_exec() {
        out.report(&crate::output::report(
            names::BOOT_SET_DEFAULT,
            &host,
            state.profiles.clone(),
            &plan,
            crate::output::Done::Planned,
        ));
        return Ok(crate::exit::OK);
    }
    ops::require_root(&host, "changing the boot entries")?;
    let _lock = store.lock()?;
    apply::refuse_unfinished_locked(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let outcome = apply::execute(&host, &store, &plan, Kind::Apply, Vec::new())?;
    // Label the generation for `history`; state.json keeps the profiles.
    let mut g = store.load_generation(outcome.generation)?;
    g.profiles = vec![format!("{} {id}", names::BOOT_SET_DEFAULT)];
    store.save_generation(&g)?;
    out.report(&crate::output::report(
        names::BOOT_SET_DEFAULT,
        &host,
        state.profiles,
        &plan,
        crate::output::Done::Ran(&outcome),
    ));
    Ok(crate::exit::OK)
}

pub fn commit(out: &Output, target: &Target) -> Result<i32> {
    let host = target.open()?;
    let store = StateStore::new(&host);
    // An interrupted commit (or any unfinished run) first: `gdrprov recover`.
    apply::refuse_unfinished(&host, &store)?;
    crate::checks::proof::refuse_unproven(&host, &store)?;
    let state = store.load_state()?;
    let Some(trial) = state.trial else {
        return Err(Error::Refused(
            "no trial boot is pending (`gdrprov apply PROFILE --trial` sets one up); nothing committed".into(),
        ));
    };
    let Some(running) = host.read_fact("/proc/cmdline") else {
        return Err(Error::Refused(format!(
            "cannot tell what runs: {} does not exist; run `gdrprov commit` on the booted host; nothing committed",
            host.display("/proc/cmdline")
        )));
    };
    let running = cmdline::split(running.trim());
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
    if !lacks.is_empty() || !has.is_empty() {
        let mut why = Vec::new();
        if !lacks.is_empty() {
            why.push(format!("lacks {}", lacks.join(" ")));
        }
        if !has.is_empty() {
            why.push(format!("has {}, which the trial removes", has.join(" ")));
        }
        return Err(Error::Refused(format!(
            "the trial entry ({}) is not what is running; it did not boot or was not chosen; nothing committed (the running command line {}). To try again: `gdrprov boot once {}`, reboot, `gdrprov commit`; or apply without --trial",
            trial.entry,
            why.join(" and "),
            trial.entry
        )));
    }
    // Commit never asks: it is meant for a systemd unit. Its generation is
    // labelled, so that `recover` completes it when it is interrupted.
    let done = ops::apply_as(
        &ops::ProfilesRequest {
            profiles: trial.profiles,
            target: target.clone(),
            trial: false,
        },
        &mut ops::yes,
        Some(names::COMMIT),
    )?;
    super::apply::report(out, names::COMMIT, &done);
    Ok(crate::exit::OK)
}
