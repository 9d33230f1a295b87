//! `services:` — systemd units that must be disabled, and stopped on the
//! running system (the nv_peer_mem service conflicts with nvidia_peermem).

use super::Part;
use crate::error::Result;
use crate::host::{CommandSpec, Host};
use crate::plan::{Action, Change, Context};

pub const MODULE: &str = "services";

const UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    for name in &ctx.desired.doc.services.disabled {
        let unit = unit_name(name);
        if !exists(ctx.host, &unit, name) {
            continue;
        }
        let enabled = is_enabled(ctx.host, &unit, name);
        let active = ctx.live_changes && is_active(ctx.host, &unit);
        if !enabled && !active {
            continue;
        }
        let mut argv = vec!["systemctl", "disable"];
        if ctx.live_changes {
            argv.push("--now");
        }
        argv.push(&unit);
        let why = format!(
            "Disable{} {unit} (it conflicts with the profile)",
            if ctx.live_changes { " and stop" } else { "" }
        );
        let spec = CommandSpec::new(&argv, why);
        part.commands.push(Change {
            module: MODULE.into(),
            description: spec.why.clone(),
            action: Action::Run { command: spec },
            reboot: None,
        });
    }
    Ok(part)
}

fn unit_name(name: &str) -> String {
    if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

fn exists(host: &Host, unit: &str, name: &str) -> bool {
    UNIT_DIRS
        .iter()
        .any(|d| host.exists(&format!("{d}/{unit}")))
        || host.exists(&format!("/etc/init.d/{name}"))
}

/// Enabled = a `*.wants/` link to the unit, or a SysV start link.
fn is_enabled(host: &Host, unit: &str, name: &str) -> bool {
    let wants = host
        .list_dir("/etc/systemd/system")
        .into_iter()
        .filter(|d| d.ends_with(".wants") || d.ends_with(".requires"))
        .any(|d| host.exists(&format!("/etc/systemd/system/{d}/{unit}")));
    let sysv = (2..=5).any(|level| {
        host.list_dir(&format!("/etc/rc{level}.d")).iter().any(|l| {
            l.starts_with('S')
                && l.trim_start_matches(|c: char| c == 'S' || c.is_ascii_digit()) == name
        })
    });
    wants || sysv
}

fn is_active(host: &Host, unit: &str) -> bool {
    host.query(&["systemctl", "is-active", "--quiet", unit])
        .is_some_and(|o| o.success())
}
