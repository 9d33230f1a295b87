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

use crate::apply;
use crate::apply::journal::{Kind, StateStore};
use crate::commands::cli::{BootCommand, EntryArgs};
use crate::error::{Error, Result};
use crate::facts::boot_shape::{CmdlineHome, SdBoot};
use crate::facts::{self, OsFamily};
use crate::host::{CommandSpec, Host};
use crate::ops;
use crate::output::{Format, Output};
use crate::plan::modules::bootcfg::{BLS_DIR, GRUB_CFG};
use crate::plan::{Action, Change, Plan};
use gdrprov_boot::{cmdline, entries, grub_defaults};
use serde::Serialize;

pub use crate::ops::trial_specs;

pub fn boot(out: &Output, cmd: &BootCommand) -> Result<i32> {
    match cmd {
        BootCommand::List => list(out),
        BootCommand::SetDefault(a) => set_default(out, a),
        BootCommand::Once(a) => once(out, a),
    }
}

/// How this root boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loader {
    /// `grub.cfg` menu entries at this path.
    Grub(&'static str),
    /// BLS entries (`/boot/loader/entries`) read by GRUB's blscfg.
    Bls,
    /// systemd-boot: type #1 entries in `ESP/loader/entries`.
    SdBoot(&'static str),
}

struct Bootinfo {
    loader: Loader,
    /// `grub-` or `grub2-`.
    tool_prefix: &'static str,
    entries: Vec<EntryOut>,
    default: Option<String>,
    next_entry: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
struct EntryOut {
    /// What `boot once` and `boot set-default` take.
    id: String,
    title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel: Option<String>,
    args: Vec<String>,
    default: bool,
    running: bool,
    next_boot: bool,
    /// An entry gdrprov generated (`boot.entry`, `apply --trial`).
    gdrprov: bool,
}

fn loader(host: &Host, shape: &CmdlineHome) -> Result<Loader> {
    if let CmdlineHome::SystemdBoot(sd) = shape {
        if let Some(esp) = facts::boot_shape::ESP_DIRS.iter().find(|e| **e == sd.esp) {
            return Ok(Loader::SdBoot(esp));
        }
    }
    let family = facts::os_family(host);
    let bls = host.list_dir(BLS_DIR).iter().any(|n| n.ends_with(".conf"));
    if bls && (family == OsFamily::Rhel || host.exists("/boot/grub2")) {
        return Ok(Loader::Bls);
    }
    for cfg in [GRUB_CFG, "/boot/grub2/grub.cfg"] {
        if host.exists(cfg) {
            return Ok(Loader::Grub(cfg));
        }
    }
    if bls {
        return Ok(Loader::Bls);
    }
    Err(Error::Refused(format!(
        "no boot loader configuration in {} (neither {GRUB_CFG} nor BLS entries in {BLS_DIR} nor systemd-boot's ESP/loader): gdrprov's boot commands work with GRUB and systemd-boot",
        host.display("/")
    )))
}

fn read_info(host: &Host) -> Result<Bootinfo> {
    let shape = facts::boot_shape::probe(host, None);
    let loader = loader(host, &shape)?;
    if let (Loader::SdBoot(esp), CmdlineHome::SystemdBoot(sd)) = (loader, &shape) {
        return read_sdboot(host, esp, sd);
    }
    let grub2 = matches!(loader, Loader::Bls | Loader::Grub("/boot/grub2/grub.cfg"))
        || (facts::os_family(host) == OsFamily::Rhel && !host.exists("/usr/sbin/grub-reboot"));
    let env_path = if grub2 {
        "/boot/grub2/grubenv"
    } else {
        "/boot/grub/grubenv"
    };
    let env = host.read_fact(env_path).unwrap_or_default();
    let running: Option<Vec<String>> = host
        .read_fact("/proc/cmdline")
        .map(|s| cmdline::split(s.trim()));
    let next_entry = entries::grubenv_get(&env, "next_entry");
    let saved = entries::grubenv_get(&env, "saved_entry");
    let mut out = Vec::new();
    let default;
    match loader {
        Loader::Grub(cfg_path) => {
            let cfg = host.read_fact(cfg_path).unwrap_or_default();
            let menu = entries::parse_grub_cfg(&cfg);
            // `set default="..."` outside the next_entry branch of 00_header.
            let spec = cfg
                .lines()
                .map(str::trim)
                .filter_map(|l| l.strip_prefix("set default="))
                .map(|v| v.trim_matches(|c| c == '"' || c == '\'').to_string())
                .find(|v| v != "${next_entry}" && !v.contains("GRUB_DEFAULT_BUTTON"));
            let spec = match spec.as_deref() {
                Some("${saved_entry}") => saved.clone().unwrap_or_else(|| "0".into()),
                Some(v) => v.to_string(),
                None => "0".into(),
            };
            let find = |s: &str| -> Option<String> {
                if let Ok(n) = s.parse::<usize>() {
                    return menu
                        .iter()
                        .find(|m| m.index == Some(n))
                        .or_else(|| menu.iter().find(|m| m.index == Some(0)))
                        .map(|m| m.path.clone());
                }
                menu.iter()
                    .find(|m| m.path == s || m.id.as_deref() == Some(s) || m.title == s)
                    .map(|m| m.path.clone())
            };
            default = find(&spec).or_else(|| find("0"));
            let next = next_entry.as_deref().and_then(find);
            for m in &menu {
                out.push(EntryOut {
                    id: m.path.clone(),
                    title: m.title.clone(),
                    kernel: m.kernel.clone(),
                    args: m.args.clone(),
                    default: default.as_deref() == Some(m.path.as_str()),
                    running: running
                        .as_deref()
                        .is_some_and(|r| entries::runs(r, m.kernel.as_deref(), &m.args)),
                    next_boot: next.as_deref() == Some(m.path.as_str()),
                    gdrprov: m.id.as_deref().is_some_and(entries::is_gdrprov_id),
                });
            }
        }
        // Read by read_sdboot above: only a systemd-boot shape gives it.
        Loader::SdBoot(_) => default = None,
        Loader::Bls => {
            let kernelopts = entries::grubenv_get(&env, "kernelopts").unwrap_or_default();
            let mut bls: Vec<entries::BlsEntry> = host
                .list_dir(BLS_DIR)
                .into_iter()
                .filter_map(|n| n.strip_suffix(".conf").map(str::to_string))
                .filter_map(|id| {
                    let text = host.read_fact(&format!("{BLS_DIR}/{id}.conf"))?;
                    Some(entries::parse_bls(&id, &text, &kernelopts))
                })
                .collect();
            // blscfg shows the newest first.
            bls.sort_by(|a, b| {
                entries::version_cmp(&b.version, &a.version).then_with(|| a.id.cmp(&b.id))
            });
            default = saved
                .filter(|s| bls.iter().any(|e| e.id == *s))
                .or_else(|| bls.first().map(|e| e.id.clone()));
            for e in &bls {
                let args: Vec<String> = e.options.clone();
                out.push(EntryOut {
                    id: e.id.clone(),
                    title: e.title.clone(),
                    kernel: Some(e.linux.clone()),
                    running: running
                        .as_deref()
                        .is_some_and(|r| entries::runs(r, Some(&e.linux), &args)),
                    args,
                    default: default.as_deref() == Some(e.id.as_str()),
                    next_boot: next_entry.as_deref() == Some(e.id.as_str()),
                    gdrprov: e.id.contains(entries::BLS_INFIX),
                });
            }
        }
    }
    Ok(Bootinfo {
        loader,
        tool_prefix: if grub2 { "grub2-" } else { "grub-" },
        entries: out,
        default,
        next_entry,
    })
}

/// systemd-boot's menu: the type #1 entries in its own order; the default
/// from `LoaderEntryDefault` (`bootctl set-default`), else loader.conf's
/// `default`, else the first; on the running system, the entry that runs
/// (`LoaderEntrySelected`) and the one-shot entry of the next boot
/// (`LoaderEntryOneShot`).
fn read_sdboot(host: &Host, esp: &'static str, sd: &SdBoot) -> Result<Bootinfo> {
    let dir = format!("{esp}/loader/entries");
    let mut initrds = std::collections::BTreeMap::new();
    let mut es: Vec<entries::BlsEntry> = host
        .list_dir(&dir)
        .into_iter()
        .filter_map(|n| n.strip_suffix(".conf").map(str::to_string))
        .filter_map(|id| {
            let text = host.read_fact(&format!("{dir}/{id}.conf"))?;
            initrds.insert(id.clone(), gdrprov_boot::sdboot::initrd_args(&text));
            Some(entries::parse_bls(&id, &text, ""))
        })
        .collect();
    gdrprov_boot::sdboot::sort(&mut es);
    let (selected, oneshot) = (sd.selected_id(), sd.oneshot_id());
    let conf = host.read_fact(&format!("{esp}/loader/loader.conf"));
    let default = gdrprov_boot::sdboot::default_of(&es, sd.efi_default.as_deref(), conf.as_deref())
        .map(|e| e.id.clone());
    // Without the EFI variable (an older systemd-boot), by the command line:
    // systemd-boot puts `initrd=` on it, which tells entries of the same
    // options apart.
    let running: Option<Vec<String>> = host
        .read_fact("/proc/cmdline")
        .map(|s| cmdline::split(s.trim()));
    let runs = |e: &entries::BlsEntry| {
        if let Some(s) = &selected {
            return *s == e.id;
        }
        let Some(r) = running.as_deref() else {
            return false;
        };
        let (ird, rest): (Vec<String>, Vec<String>) =
            r.iter().cloned().partition(|a| a.starts_with("initrd="));
        entries::runs(&rest, Some(&e.linux), &e.options)
            && (ird.is_empty() || initrds.get(&e.id) == Some(&ird))
    };
    let out = es
        .iter()
        .map(|e| EntryOut {
            id: e.id.clone(),
            title: e.title.clone(),
            kernel: Some(e.linux.clone()),
            running: runs(e),
            args: e.options.clone(),
            default: default.as_deref() == Some(e.id.as_str()),
            next_boot: oneshot.as_deref() == Some(e.id.as_str()),
            gdrprov: e.id.contains(entries::BLS_INFIX),
        })
        .collect();
    Ok(Bootinfo {
        loader: Loader::SdBoot(esp),
        tool_prefix: "",
        entries: out,
        default,
        next_entry: oneshot,
    })
}

fn list(out: &Output) -> Result<i32> {
    let host = Host::open(&out.root, true)?;
    let info = read_info(&host)?;
    match out.format {
        Format::Json => {
            let v = serde_json::json!({
                "loader": match info.loader { Loader::Grub(p) => format!("grub ({p})"), Loader::Bls => "bls".into(), Loader::SdBoot(esp) => format!("systemd-boot ({esp})") },
                "default": info.default,
                "next_entry": info.next_entry,
                "entries": info.entries,
            });
            out.document("boot list", v);
        }
        Format::Text | Format::Prometheus => {
            if info.entries.is_empty() {
                println!("No boot entries found in {}.", host.display("/boot"));
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
                println!("{}{marks}", e.id);
                println!("    {}", e.title);
                println!(
                    "    {} {}",
                    e.kernel.as_deref().unwrap_or("(no linux line)"),
                    e.args.join(" ")
                );
            }
        }
    }
    Ok(crate::exit::OK)
}

/// The entry a user named: an id or path, a title, or (for gdrprov's own
/// entries) the entry name.
fn resolve(info: &Bootinfo, host: &Host, name: &str) -> Result<String> {
    if name.is_empty() || name.chars().any(|c| c.is_control()) {
        return Err(Error::Usage(format!(
            "boot entry {name:?} is empty or has a control character"
        )));
    }
    let found = info
        .entries
        .iter()
        .find(|e| e.id == name)
        .or_else(|| info.entries.iter().find(|e| e.title == name))
        // An entry inside a submenu by its own id: GRUB needs the whole path.
        .or_else(|| {
            info.entries
                .iter()
                .find(|e| e.id.rsplit_once('>').is_some_and(|(_, last)| last == name))
        })
        .or_else(|| {
            info.entries.iter().find(|e| {
                e.gdrprov
                    && (e.id.ends_with(&format!("-{name}")) || e.id.ends_with(&format!(">{name}")))
            })
        });
    match found {
        Some(e) => Ok(e.id.clone()),
        None => {
            let known: Vec<&str> = info.entries.iter().map(|e| e.id.as_str()).collect();
            Err(Error::Refused(format!(
                "no boot entry `{name}` in {}; the entries are: {} (see `gdrprov boot list`; an entry gdrprov just added appears once grub.cfg is regenerated)",
                host.display(&match info.loader {
                    Loader::Grub(p) => p.to_string(),
                    Loader::Bls => BLS_DIR.to_string(),
                    Loader::SdBoot(esp) => format!("{esp}/loader/entries"),
                }),
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )))
        }
    }
}

fn once(out: &Output, a: &EntryArgs) -> Result<i32> {
    let host = Host::open(&out.root, a.no_exec)?;
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
        let file = format!("{id}.conf");
        let spec = CommandSpec::new(
            &["bootctl", "set-oneshot", &file],
            format!("Boot {id} at the next boot only (bootctl set-oneshot)"),
        );
        run_or_show(out, &host, &spec)?;
        return Ok(crate::exit::OK);
    }
    let tool = format!("{}reboot", info.tool_prefix);
    let spec = CommandSpec::new(&[&tool, &id], format!("Boot {id} at the next boot only"));
    run_or_show(out, &host, &spec)?;
    Ok(crate::exit::OK)
}

fn run_or_show(out: &Output, host: &Host, spec: &CommandSpec) -> Result<()> {
    let line = CommandSpec {
        argv: host.effective_argv(spec),
        why: String::new(),
        regenerate: false,
    }
    .shell_line();
    let shown = crate::output::CommandOut::of(host, spec);
    if host.no_exec() {
        match out.format {
            Format::Json => {
                out.document("boot once", serde_json::json!({"run": shown, "ran": false}))
            }
            Format::Text | Format::Prometheus => println!("Would run (--no-exec): {line}"),
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
    // grubenv's next_entry must be on disk where GRUB reads it (host/durable.rs).
    let durable = host.make_boot_durable(&[])?;
    match out.format {
        Format::Json => out.document(
            "boot once",
            serde_json::json!({"run": shown, "ran": true, "durable": durable}),
        ),
        Format::Text | Format::Prometheus => println!("Ran: {line}\n{}.", spec.why),
    }
    Ok(())
}

/// `GRUB_DEFAULT=saved` as an edit of the GRUB defaults, if it is not so.
fn saved_default_edits(host: &Host) -> Result<Vec<Change>> {
    let Some(main) = host.read_text("/etc/default/grub")? else {
        return Ok(Vec::new());
    };
    let mut files = vec![("/etc/default/grub".to_string(), main)];
    let mut names: Vec<String> = host
        .list_dir("/etc/default/grub.d")
        .into_iter()
        .filter(|n| n.ends_with(".cfg"))
        .collect();
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for n in names {
        let path = format!("/etc/default/grub.d/{n}");
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
            let before = files
                .iter()
                .find(|(n, _)| *n == e.name)
                .map(|(_, c)| c.clone());
            Change {
                module: "boot".into(),
                description: format!(
                    "Set GRUB_DEFAULT=saved in {} (the default entry is then the one grub-set-default saves)",
                    e.name
                ),
                action: Action::WriteFile {
                    path: e.name.clone(),
                    before,
                    after: e.new_content,
                    new_mode: 0o644,
                    meta: None,
                },
                reboot: None,
            }
        })
        .collect())
}

fn set_default(out: &Output, a: &EntryArgs) -> Result<i32> {
    let host = Host::open(&out.root, a.no_exec)?;
    let info = read_info(&host)?;
    let id = resolve(&info, &host, &a.entry)?;
    let store = StateStore::new(&host);
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
            "boot set-default",
            &host,
            state.profiles.clone(),
            &plan,
            crate::output::Done::Planned,
        ));
        return Ok(crate::exit::OK);
    }
    ops::require_root(&host, "changing the boot entries")?;
    let _lock = store.lock()?;
    let recovered = apply::recover(&host, &store)?;
    let mut outcome = apply::execute(&host, &store, &plan, Kind::Apply, Vec::new())?;
    outcome.recovered = recovered;
    // Label the generation for `history`; state.json keeps the profiles.
    let mut g = store.load_generation(outcome.generation)?;
    g.profiles = vec![format!("boot set-default {id}")];
    store.save_generation(&g)?;
    out.report(&crate::output::report(
        "boot set-default",
        &host,
        state.profiles,
        &plan,
        crate::output::Done::Ran(&outcome),
    ));
    Ok(crate::exit::OK)
}

pub fn commit(out: &Output, target: &ops::Target) -> Result<i32> {
    let host = Host::open(&target.root, target.no_exec)?;
    let store = StateStore::new(&host);
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
    // Commit never asks: it is meant for a systemd unit.
    let done = ops::apply(
        &ops::ProfilesRequest {
            profiles: trial.profiles,
            target: target.clone(),
            trial: false,
        },
        &mut ops::yes,
    )?;
    out.report(&crate::output::report(
        "commit",
        &done.host,
        done.names.clone(),
        &done.plan,
        done.done(),
    ));
    Ok(crate::exit::OK)
}
