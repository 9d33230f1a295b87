//! Output: text for people, JSON for machines, from the same data.

use crate::apply::Outcome;
use crate::host::Host;
use crate::plan::{Action, Plan};
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// Prometheus text exposition (node-exporter textfile); `verify` only.
    Prometheus,
}

/// ANSI colour for diffs, only when asked or on a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}

/// The JSON document `plan`, `apply` and `rollback` print (see README).
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub gdrprov: &'static str,
    pub command: &'static str,
    pub root: String,
    pub live: bool,
    pub profiles: Vec<String>,
    pub changed: bool,
    pub changes: Vec<ChangeOut>,
    pub pending_commands: Vec<String>,
    pub reboot_required: bool,
    pub reboot_reasons: Vec<String>,
    pub warnings: &'a [String],
    /// The boot part when this host's kernel command line is set outside it
    /// (`manageable: false`): what is wanted, and where to set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot: Option<&'a crate::modules::bootcfg_elsewhere::BootElsewhere>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<&'a Outcome>,
}

#[derive(Debug, Serialize)]
pub struct ChangeOut {
    pub module: String,
    pub description: String,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reboot: Option<String>,
}

pub fn report<'a>(
    command: &'static str,
    host: &Host,
    profiles: Vec<String>,
    plan: &'a Plan,
    outcome: Option<&'a Outcome>,
) -> Report<'a> {
    let reasons = plan.reboot_reasons();
    Report {
        gdrprov: env!("CARGO_PKG_VERSION"),
        command,
        root: host.root().display().to_string(),
        live: host.is_live(),
        profiles,
        changed: !plan.is_empty(),
        changes: plan
            .changes
            .iter()
            .map(|c| ChangeOut {
                module: c.module.clone(),
                description: c.description.clone(),
                kind: match c.action {
                    Action::WriteFile { .. } => "write-file",
                    Action::RemoveFile { .. } => "remove-file",
                    Action::Run { .. } => "run",
                },
                path: c.path().map(str::to_string),
                diff: c.diff(),
                command: match &c.action {
                    Action::Run { command } => Some(host.effective_argv(command)),
                    _ => None,
                },
                reboot: c.reboot.clone(),
            })
            .collect(),
        pending_commands: plan
            .pending_commands
            .iter()
            .map(|c| host.effective_argv(c).join(" "))
            .collect(),
        reboot_required: !reasons.is_empty(),
        reboot_reasons: reasons,
        warnings: &plan.warnings,
        boot: plan.boot_elsewhere.as_ref(),
        outcome,
    }
}

pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

pub fn text(r: &Report, style: Style) -> String {
    let mut out = String::new();
    let target = if r.live {
        "the running system (/)".to_string()
    } else {
        format!("root {} (persistent state only)", r.root)
    };
    let _ = writeln!(
        out,
        "gdrprov {}: {} on {}",
        r.command,
        r.profiles.join(" + "),
        target
    );
    for w in r.warnings {
        let _ = writeln!(out, "{} {w}", style.paint("33", "warning:"));
    }
    if let Some(b) = r.boot {
        let _ = writeln!(out, "{} {}", style.paint("33", "boot:"), b.summary());
        let _ = writeln!(out, "     wanted: {}", b.wanted.join(" "));
        let _ = writeln!(out, "     why: {}", b.evidence.join("; "));
    }
    if r.changes.is_empty() && r.boot.is_some_and(|b| b.satisfied != Some(true)) {
        let _ = writeln!(
            out,
            "\nNothing to change on this host (the boot part is set elsewhere, above)."
        );
    } else if r.changes.is_empty() {
        let _ = writeln!(out, "\nNothing to change: the host already matches.");
    } else {
        let _ = writeln!(out);
    }
    for (i, c) in r.changes.iter().enumerate() {
        let _ = writeln!(
            out,
            "{:>3}. [{}] {}",
            i + 1,
            c.module,
            style.paint("1", &c.description)
        );
        if let Some(cmd) = &c.command {
            let _ = writeln!(out, "     $ {}", cmd.join(" "));
        }
        if let Some(reason) = &c.reboot {
            let _ = writeln!(out, "     needs a reboot: {reason}");
        }
        if let Some(diff) = &c.diff {
            for line in diff.lines() {
                let painted = if line.starts_with("+++") || line.starts_with("---") {
                    style.paint("1", line)
                } else if line.starts_with('+') {
                    style.paint("32", line)
                } else if line.starts_with('-') {
                    style.paint("31", line)
                } else if line.starts_with("@@") {
                    style.paint("36", line)
                } else {
                    line.to_string()
                };
                let _ = writeln!(out, "     {painted}");
            }
        }
    }
    if !r.pending_commands.is_empty() {
        let _ = writeln!(
            out,
            "\nPending commands (--no-exec: not run; run them, or apply again without --no-exec):"
        );
        for c in &r.pending_commands {
            let _ = writeln!(out, "     $ {c}");
        }
    }
    if r.reboot_required {
        let _ = writeln!(out, "\nReboot required:");
        for reason in &r.reboot_reasons {
            let _ = writeln!(out, "     - {reason}");
        }
    }
    let files = r.changes.iter().filter(|c| c.path.is_some()).count();
    let cmds = r.changes.len() - files;
    match r.outcome {
        None => {
            let _ = writeln!(
                out,
                "\nPlan: {} change(s): {files} file(s), {cmds} command(s){}.",
                r.changes.len(),
                if r.reboot_required {
                    "; reboot required"
                } else {
                    ""
                }
            );
        }
        Some(o) => {
            for note in &o.recovered {
                let _ = writeln!(out, "recovered: {note}");
            }
            let _ = writeln!(
                out,
                "\nDone: generation {}: {} file(s) changed, {} command(s) run{}{}.",
                o.generation,
                o.changed,
                o.commands_run.len(),
                if o.pending_commands.is_empty() {
                    String::new()
                } else {
                    format!(", {} pending", o.pending_commands.len())
                },
                if r.reboot_required {
                    "; reboot required"
                } else {
                    "; no reboot needed"
                }
            );
            if !o.durable.is_empty() {
                let shown: Vec<String> = o.durable.iter().map(|d| d.to_string()).collect();
                let _ = writeln!(
                    out,
                    "Boot files on disk for the boot loader: {}.",
                    shown.join(", ")
                );
            }
        }
    }
    out
}
