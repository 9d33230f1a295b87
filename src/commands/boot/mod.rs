//! `gdrprov boot list | set-default ENTRY | once ENTRY` and `gdrprov commit`
//! (src/ops/boot.rs): the arguments in, the menu and the changes out.
//!
//! `boot list` shows what the boot loader will show: the menu entries of
//! `grub.cfg` (Debian/Ubuntu), the BLS entries (RHEL family) or
//! systemd-boot's, the default, the next boot's entry and which one runs.

use crate::commands::cli::{BootCommand, EntryArgs};
use crate::error::{exit, Result};
use crate::names;
use crate::ops::{self, BootMenu, Loader, Target};
use crate::output::{Format, Output};
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
    let menu = ops::boot_list(target)?;
    let info = &menu.info;
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
        Format::Text | Format::Prometheus | Format::Html => out.raw(&list_text(&menu)),
    }
    Ok(exit::OK)
}

/// `boot list` as text: each entry's id and marks, title, kernel line.
fn list_text(menu: &BootMenu) -> String {
    let mut t = String::new();
    if menu.info.entries.is_empty() {
        let _ = writeln!(t, "No boot entries found in {}.", menu.place);
    }
    for e in &menu.info.entries {
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
    let once = ops::boot_once(target, &a.entry)?;
    let json = |v| out.document(names::BOOT_ONCE, &target.root, v);
    match (&once.ran, out.format) {
        (None, Format::Json) => json(serde_json::json!({"run": once.shown, "ran": false})),
        (None, _) => out.raw(&format!("Would run (--no-exec): {}\n", once.line)),
        (Some(durable), Format::Json) => {
            json(serde_json::json!({"run": once.shown, "ran": true, "durable": durable}))
        }
        (Some(_), _) => out.raw(&format!("Ran: {}\n{}.\n", once.line, once.why)),
    }
    Ok(exit::OK)
}

fn set_default(out: &Output, target: &Target, a: &EntryArgs) -> Result<i32> {
    let set = ops::boot_set_default(target, &a.entry)?;
    out.report(crate::output::report(
        names::BOOT_SET_DEFAULT,
        &set.host,
        set.profiles.clone(),
        &set.plan,
        set.done(),
    ));
    Ok(exit::OK)
}

pub fn commit(out: &Output, target: &Target) -> Result<i32> {
    let done = ops::commit(target)?;
    super::apply::report(out, names::COMMIT, &done);
    Ok(exit::OK)
}
