//! The boot menu of a root as its boot loader will show it: GRUB's
//! `grub.cfg` menu entries (Debian/Ubuntu), BLS entries (RHEL family) or
//! systemd-boot's type #1 entries; the default, the next boot's one-shot
//! entry, and which one runs (from `/proc/cmdline` or systemd-boot's EFI
//! variables). Read-only.

use crate::error::{Error, Result};
use crate::facts::boot_shape::{CmdlineHome, SdBoot};
use crate::facts::{self, OsFamily};
use crate::host::Host;
use crate::plan::modules::bootcfg::{BLS_DIR, GRUB_CFG};
use gdrprov_boot::{cmdline, entries};
use serde::Serialize;

/// How this root boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    /// `grub.cfg` menu entries at this path.
    Grub(&'static str),
    /// BLS entries (`/boot/loader/entries`) read by GRUB's blscfg.
    Bls,
    /// systemd-boot: type #1 entries in `ESP/loader/entries`.
    SdBoot(&'static str),
}

pub struct Bootinfo {
    pub loader: Loader,
    /// `grub-` or `grub2-`.
    pub tool_prefix: &'static str,
    pub entries: Vec<EntryOut>,
    pub default: Option<String>,
    pub next_entry: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EntryOut {
    /// What `boot once` and `boot set-default` take.
    pub id: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    pub args: Vec<String>,
    pub default: bool,
    pub running: bool,
    pub next_boot: bool,
    /// An entry gdrprov generated (`boot.entry`, `apply --trial`).
    pub gdrprov: bool,
}

fn loader(host: &Host, shape: &CmdlineHome) -> Result<Loader> {
    match shape {
        CmdlineHome::SystemdBoot(sd) => {
            if let Some(esp) = facts::boot_shape::ESP_DIRS.iter().find(|e| **e == sd.esp) {
                return Ok(Loader::SdBoot(esp));
            }
        }
        // Booted from outside: whatever boot files the image has, they
        // do not choose what boots.
        CmdlineHome::Elsewhere {
            starter,
            evidence,
            unused_loader: Some(files),
        } => {
            return Err(Error::Refused(format!(
                "the boot loader of {files} does not start this host's kernel ({}), so its entries do not choose what boots; set the kernel and its arguments in {}",
                evidence.join("; "),
                starter.where_to_set()
            )))
        }
        CmdlineHome::Elsewhere { .. } => {}
        CmdlineHome::OnHost { .. } => {}
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

pub fn read_info(host: &Host) -> Result<Bootinfo> {
    let shape = facts::boot_shape::probe_root(host);
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
    let grubenv = Grubenv {
        saved: entries::grubenv_get(&env, "saved_entry"),
        next_entry: next_entry.clone(),
        kernelopts: entries::grubenv_get(&env, "kernelopts").unwrap_or_default(),
        running,
    };
    let (default, out) = match loader {
        Loader::Grub(cfg_path) => grub_menu(host, cfg_path, &grubenv),
        // Read by read_sdboot above: only a systemd-boot shape gives it.
        Loader::SdBoot(_) => (None, Vec::new()),
        Loader::Bls => bls_menu(host, &grubenv),
    };
    Ok(Bootinfo {
        loader,
        tool_prefix: if grub2 { "grub2-" } else { "grub-" },
        entries: out,
        default,
        next_entry,
    })
}

/// What grubenv and the running kernel say about GRUB's menu.
struct Grubenv {
    saved: Option<String>,
    next_entry: Option<String>,
    kernelopts: String,
    running: Option<Vec<String>>,
}

/// The menu entries of `grub.cfg` and its default (`set default=`, or the
/// saved entry); each entry by its `submenu>entry` path.
fn grub_menu(host: &Host, cfg_path: &str, env: &Grubenv) -> (Option<String>, Vec<EntryOut>) {
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
        Some("${saved_entry}") => env.saved.clone().unwrap_or_else(|| "0".into()),
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
    let default = find(&spec).or_else(|| find("0"));
    let next = env.next_entry.as_deref().and_then(find);
    let out = menu
        .iter()
        .map(|m| EntryOut {
            id: m.path.clone(),
            title: m.title.clone(),
            kernel: m.kernel.clone(),
            args: m.args.clone(),
            default: default.as_deref() == Some(m.path.as_str()),
            running: env
                .running
                .as_deref()
                .is_some_and(|r| entries::runs(r, m.kernel.as_deref(), &m.args)),
            next_boot: next.as_deref() == Some(m.path.as_str()),
            gdrprov: m.id.as_deref().is_some_and(entries::is_gdrprov_id),
        })
        .collect();
    (default, out)
}

/// The BLS entries as GRUB's blscfg shows them (newest first) and the
/// default (the saved entry, else the first).
fn bls_menu(host: &Host, env: &Grubenv) -> (Option<String>, Vec<EntryOut>) {
    let mut bls: Vec<entries::BlsEntry> = host
        .list_dir(BLS_DIR)
        .into_iter()
        .filter_map(|n| n.strip_suffix(".conf").map(str::to_string))
        .filter_map(|id| {
            let text = host.read_fact(&format!("{BLS_DIR}/{id}.conf"))?;
            Some(entries::parse_bls(&id, &text, &env.kernelopts))
        })
        .collect();
    // blscfg shows the newest first.
    bls.sort_by(|a, b| entries::version_cmp(&b.version, &a.version).then_with(|| a.id.cmp(&b.id)));
    let default = env
        .saved
        .clone()
        .filter(|s| bls.iter().any(|e| e.id == *s))
        .or_else(|| bls.first().map(|e| e.id.clone()));
    let out = bls
        .iter()
        .map(|e| EntryOut {
            id: e.id.clone(),
            title: e.title.clone(),
            kernel: Some(e.linux.clone()),
            running: env
                .running
                .as_deref()
                .is_some_and(|r| entries::runs(r, Some(&e.linux), &e.options)),
            args: e.options.clone(),
            default: default.as_deref() == Some(e.id.as_str()),
            next_boot: env.next_entry.as_deref() == Some(e.id.as_str()),
            gdrprov: e.id.contains(entries::BLS_INFIX),
        })
        .collect();
    (default, out)
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
    // Type #2 entries: the unified kernel images, named by their file.
    let ukis: Vec<entries::BlsEntry> = sd.ukis.iter().filter_map(|p| uki_entry(host, p)).collect();
    let uki_ids: Vec<String> = ukis.iter().map(|e| e.id.clone()).collect();
    es.extend(ukis);
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
        if uki_ids.contains(&e.id) {
            // A UKI's kernel line is its built-in command line.
            return ird.is_empty() && entries::runs(&rest, None, &e.options);
        }
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

/// A unified kernel image as systemd-boot lists it (a type #2 entry), from
/// the sections it carries; `None` when it cannot be read.
fn uki_entry(host: &Host, path: &str) -> Option<entries::BlsEntry> {
    let name = path.rsplit('/').next()?;
    // The headers, then the three small sections: not the whole image (20-100 MB).
    let head = host.read_fact_bytes(path, gdrprov_boot::uki::HEAD_BYTES)?;
    let uki =
        gdrprov_boot::uki::parse_with(&head, |at, len| host.read_fact_range(path, at as u64, len))
            .unwrap_or_default();
    Some(gdrprov_boot::uki::entry(name, path, &uki))
}

/// The entry a user named: an id or path, a title, or (for gdrprov's own
/// entries) the entry name.
pub fn resolve(info: &Bootinfo, host: &Host, name: &str) -> Result<String> {
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
                "no boot entry `{name}` in {}; the entries are: {} (see {}; an entry gdrprov just added appears once grub.cfg is regenerated)",
                host.display(&match info.loader {
                    Loader::Grub(p) => p.to_string(),
                    Loader::Bls => BLS_DIR.to_string(),
                    Loader::SdBoot(esp) => format!("{esp}/loader/entries"),
                }),
                if known.is_empty() { "none".to_string() } else { known.join(", ") },
                crate::suggest::Suggest::new(crate::names::BOOT_LIST).shown(&crate::suggest::Given::none())
            )))
        }
    }
}
