//! Output: text for people, JSON for machines, from the same data.

use crate::apply::Outcome;
use crate::host::{CommandSpec, Host};
use crate::plan::{Action, Plan};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// The envelope of every JSON document gdrprov prints (docs/commands.md):
/// `{"gdrprov": VERSION, "command": "boot list", "root": "/", ...body}`.
/// A body that is not an object goes under `value`.
pub fn envelope(command: &str, root: &Path, body: impl Serialize) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert("gdrprov".into(), env!("CARGO_PKG_VERSION").into());
    out.insert("command".into(), command.into());
    out.insert("root".into(), root.display().to_string().into());
    match serde_json::to_value(body) {
        Ok(serde_json::Value::Object(m)) => {
            for (k, v) in m {
                if !matches!(k.as_str(), "gdrprov" | "command" | "root") {
                    out.insert(k, v);
                }
            }
        }
        Ok(other) => {
            out.insert("value".into(), other);
        }
        Err(e) => {
            out.insert(
                "error".into(),
                serde_json::json!({"kind": "internal", "message": format!("could not serialise the output: {e}")}),
            );
        }
    }
    serde_json::Value::Object(out)
}

/// Prints a JSON document in the envelope on standard output.
pub fn print_json(command: &str, root: &Path, body: impl Serialize) {
    println!(
        "{}",
        serde_json::to_string_pretty(&envelope(command, root, body)).unwrap_or_default()
    );
}

/// The JSON of an error under `--format json`: the envelope with
/// `error: {kind, message}` (the exit code is the usual one).
pub fn error_json(command: &str, root: &Path, kind: &str, message: &str) -> String {
    serde_json::to_string_pretty(&envelope(
        command,
        root,
        serde_json::json!({"error": {"kind": kind, "message": message}}),
    ))
    .unwrap_or_default()
}

/// Every `gdrprov ...` command suggested in TEXT (between backticks) with
/// the options the user gave: `--root DIR` when not `/`, `--format json`
/// under JSON. A suggestion that names its own --root is left alone.
pub fn keep_options(text: &str, root: &Path, format: Format) -> String {
    let mut extra = String::new();
    if root != Path::new("/") {
        extra.push_str(" --root ");
        extra.push_str(&CommandSpec::new(&[&root.display().to_string()], "").shell_line());
    }
    if extra.is_empty() && format != Format::Json {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + extra.len());
    for (i, part) in text.split('`').enumerate() {
        if i > 0 {
            out.push('`');
        }
        out.push_str(part);
        if i % 2 == 1 && part.starts_with("gdrprov ") {
            if !part.contains("--root") {
                out.push_str(&extra);
            }
            if format == Format::Json && !part.contains("--format") {
                out.push_str(" --format json");
            }
        }
    }
    out
}

/// A command as every JSON document shows it: what runs (with `chroot ROOT`
/// in front on an image root) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandOut {
    pub argv: Vec<String>,
    pub why: String,
}

impl CommandOut {
    pub fn of(host: &Host, spec: &CommandSpec) -> Self {
        CommandOut {
            argv: host.effective_argv(spec),
            why: spec.why.clone(),
        }
    }

    /// The command as a shell line, for text output.
    pub fn shell_line(&self) -> String {
        CommandSpec {
            argv: self.argv.clone(),
            why: String::new(),
            regenerate: false,
        }
        .shell_line()
    }
}

/// What an apply or rollback did; an apply that found nothing to do has
/// one too, with no generation.
#[derive(Debug, Clone, Serialize)]
pub struct OutcomeOut {
    /// The journal generation recorded; `null` when nothing was written.
    pub generation: Option<u64>,
    /// Files written or removed.
    pub changed: usize,
    pub commands_run: Vec<CommandOut>,
    /// Commands still owed (`--no-exec`): run them, or apply without --no-exec.
    pub pending_commands: Vec<CommandOut>,
    /// Messages from recovering an interrupted earlier run.
    pub recovered: Vec<String>,
    /// The filesystems holding boot-loader files this run wrote, and how
    /// each was made durable where the boot loader reads it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub durable: Vec<crate::host::Durable>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    /// Prometheus text exposition (node-exporter textfile); `verify` only.
    Prometheus,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// ANSI colour for diffs, only when asked or on a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

/// The one output sink of the commands: the options that shape output
/// (root, format, colour), and every way a command prints.
#[derive(Debug, Clone)]
pub struct Output {
    pub root: std::path::PathBuf,
    pub format: Format,
    pub color: Color,
}

impl Output {
    pub fn style(&self) -> Style {
        use std::io::IsTerminal;
        Style {
            color: match self.color {
                Color::Always => true,
                Color::Never => false,
                Color::Auto => {
                    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
                }
            },
        }
    }

    pub fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// A plan/apply/rollback report, as text or JSON.
    pub fn report(&self, r: &Report) {
        match self.format {
            Format::Json => println!("{}", json(r)),
            Format::Text | Format::Prometheus => print!("{}", text(r, self.style())),
        }
    }

    /// A JSON document in the envelope (`--format json`).
    pub fn document(&self, command: &str, body: impl Serialize) {
        print_json(command, &self.root, body);
    }

    /// Text for people, its suggested commands keeping the user's options.
    pub fn text(&self, text: &str) {
        print!("{}", keep_options(text, &self.root, self.format));
    }

    /// An error: one line on stderr and, under JSON, the error object on stdout.
    pub fn error(&self, command: &str, e: &crate::error::Error) {
        let message = keep_options(&e.to_string(), &self.root, self.format);
        eprintln!("gdrprov: error: {message}");
        if self.json() {
            println!("{}", error_json(command, &self.root, e.kind(), &message));
        }
    }
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

/// The JSON document `plan`, `apply` and `rollback` print (docs/commands.md).
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub gdrprov: &'static str,
    pub command: &'a str,
    pub root: String,
    pub live: bool,
    pub profiles: Vec<String>,
    pub changed: bool,
    pub changes: Vec<ChangeOut>,
    /// Commands owed and not run (`--no-exec`, now or by an earlier apply).
    pub pending_commands: Vec<CommandOut>,
    pub reboot_required: bool,
    pub reboot_reasons: Vec<String>,
    pub warnings: &'a [String],
    /// The boot part when this host's kernel command line is set outside it
    /// (`manageable: false`): what is wanted, and where to set it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot: Option<&'a crate::plan::modules::bootcfg_elsewhere::BootElsewhere>,
    /// Profile parts whose `when:` does not hold on this host.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub skipped: &'a [String],
    /// Present for every apply and rollback (not for a plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeOut>,
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
    pub command: Option<CommandOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reboot: Option<String>,
}

/// What a report says about the apply itself.
#[derive(Debug, Clone, Copy)]
pub enum Done<'a> {
    /// A plan: nothing was done.
    Planned,
    /// An apply or rollback that found nothing to write.
    Nothing,
    Ran(&'a Outcome),
}

pub fn report<'a>(
    command: &'a str,
    host: &Host,
    profiles: Vec<String>,
    plan: &'a Plan,
    done: Done<'a>,
) -> Report<'a> {
    let reasons = reboot_reasons(plan);
    let cmds = |v: &[CommandSpec]| v.iter().map(|c| CommandOut::of(host, c)).collect();
    let outcome = match done {
        Done::Planned => None,
        Done::Nothing => Some(OutcomeOut {
            generation: None,
            changed: 0,
            commands_run: Vec::new(),
            pending_commands: cmds(&plan.pending_commands),
            recovered: Vec::new(),
            durable: Vec::new(),
        }),
        Done::Ran(o) => Some(OutcomeOut {
            generation: Some(o.generation),
            changed: o.changed,
            commands_run: cmds(&o.commands_run),
            pending_commands: cmds(&o.pending_commands),
            recovered: o.recovered.clone(),
            durable: o.durable.clone(),
        }),
    };
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
                    Action::Run { command } => Some(CommandOut::of(host, command)),
                    _ => None,
                },
                reboot: c.reboot.clone(),
            })
            .collect(),
        pending_commands: cmds(&plan.pending_commands),
        reboot_required: !reasons.is_empty(),
        reboot_reasons: reasons,
        warnings: &plan.warnings,
        boot: plan.boot_elsewhere.as_ref(),
        skipped: &plan.skipped,
        outcome,
    }
}

/// Each reason once: a pending reason ("the running kernel's command line
/// differs: iommu=pt is not on ...") whose kernel arguments a change's
/// reason already names ("kernel command line: add iommu=pt") is the same
/// reason in other words.
fn reboot_reasons(plan: &Plan) -> Vec<String> {
    let args = |s: &str| -> Vec<String> {
        s.split(|c: char| c.is_whitespace() || matches!(c, ';' | ',' | '`' | '(' | ')'))
            .filter(|w| w.contains('=') && !w.starts_with('=') && !w.ends_with(':'))
            .map(str::to_string)
            .collect()
    };
    let from_changes: Vec<String> = plan
        .changes
        .iter()
        .filter_map(|c| c.reboot.clone())
        .collect();
    let named: Vec<String> = from_changes.iter().flat_map(|r| args(r)).collect();
    let mut out: Vec<String> = Vec::new();
    for r in plan.reboot_reasons() {
        let mine = args(&r);
        let said = !from_changes.contains(&r)
            && !mine.is_empty()
            && mine.iter().all(|a| named.contains(a));
        if !said && !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(&envelope(r.command, Path::new(&r.root), r)).unwrap_or_default()
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
    for s in r.skipped {
        let _ = writeln!(out, "when: {s}");
    }
    if let Some(b) = r.boot {
        let _ = writeln!(out, "{} {}", style.paint("33", "boot:"), b.summary());
        let _ = writeln!(out, "     wanted: {}", b.wanted.join(" "));
        let _ = writeln!(out, "     why: {}", b.evidence.join("; "));
    }
    let boot_owed = r.boot.is_some_and(|b| b.satisfied != Some(true));
    if r.changes.is_empty() && r.pending_commands.is_empty() && boot_owed {
        let _ = writeln!(
            out,
            "\nNothing to change on this host (the boot part is set elsewhere, above)."
        );
    } else if r.changes.is_empty() && r.pending_commands.is_empty() {
        let _ = writeln!(out, "\nNothing to change: the host already matches.");
    } else if r.changes.is_empty() {
        let _ = writeln!(
            out,
            "\nNothing to write, but {} command(s) are still owed: the host does not match until they run.",
            r.pending_commands.len()
        );
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
            let _ = writeln!(out, "     $ {}", cmd.shell_line());
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
            let _ = writeln!(out, "     $ {}    # {}", c.shell_line(), c.why);
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
    let pending = if r.pending_commands.is_empty() {
        String::new()
    } else {
        format!(", {} command(s) pending", r.pending_commands.len())
    };
    let reboot = if r.reboot_required {
        "; reboot required"
    } else {
        ""
    };
    match &r.outcome {
        None => {
            let _ = writeln!(
                out,
                "\nPlan: {} change(s): {files} file(s), {cmds} command(s){pending}{reboot}.",
                r.changes.len(),
            );
        }
        Some(o) => {
            for note in &o.recovered {
                let _ = writeln!(out, "recovered: {note}");
            }
            let pending = if o.pending_commands.is_empty() {
                String::new()
            } else {
                format!(", {} command(s) pending", o.pending_commands.len())
            };
            let reboot = if r.reboot_required {
                "; reboot required"
            } else {
                "; no reboot needed"
            };
            match o.generation {
                Some(g) => {
                    let _ = writeln!(
                        out,
                        "\nDone: generation {g}: {} file(s) changed, {} command(s) run{pending}{reboot}.",
                        o.changed,
                        o.commands_run.len(),
                    );
                }
                // "Nothing to change" above already said it all.
                None if o.pending_commands.is_empty() => {}
                None => {
                    let _ = writeln!(
                        out,
                        "\nDone: nothing written, no generation recorded{pending}{reboot}."
                    );
                }
            }
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
