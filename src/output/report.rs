//! The report of `plan`, `apply` and `rollback` (and of `boot set-default`
//! and `commit`): one data structure, as JSON or as text for people.

use super::{envelope, escape, CommandOut, Style};
use crate::apply::Outcome;
use crate::host::{CommandSpec, Host};
use crate::plan::{Action, Plan};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

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
    /// What `services.fabric-manager` decided here (absent when the profile leaves it alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fabric_manager: Option<&'a crate::plan::change::FabricManagerPlan>,
    /// Present for every apply and rollback (not for a plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeOut>,
}

impl Report<'_> {
    /// Its suggested commands (the reboot reasons' next steps) with the
    /// options GIVEN.
    pub fn keep_given(&mut self, given: &crate::suggest::Given) {
        for r in &mut self.reboot_reasons {
            *r = crate::suggest::keep_given(r, given);
        }
        for c in &mut self.changes {
            if let Some(r) = &mut c.reboot {
                *r = crate::suggest::keep_given(r, given);
            }
        }
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
        fabric_manager: plan.fabric_manager.as_ref(),
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

/// The report as text. What it shows of files, profiles and commands is
/// escaped piece by piece ([`super::escape`]) before the diff is coloured,
/// so the only escape sequences in it are the colours.
pub fn text(r: &Report, style: Style) -> String {
    let mut out = String::new();
    header(&mut out, r, style);
    for (i, c) in r.changes.iter().enumerate() {
        change(&mut out, i + 1, c, style);
    }
    let mut rest = String::new();
    owed(&mut rest, r);
    match &r.outcome {
        None => plan_summary(&mut rest, r),
        Some(o) => outcome_summary(&mut rest, r, o),
    }
    out.push_str(&escape(&rest));
    out
}

/// What runs where, the warnings, the `when:` skips, the boot part set
/// elsewhere, and whether there is anything to change.
fn header(out: &mut String, r: &Report, style: Style) {
    let target = if r.live {
        "the running system (/)".to_string()
    } else {
        format!("root {} (persistent state only)", r.root)
    };
    let _ = writeln!(
        out,
        "{}",
        escape(&format!(
            "gdrprov {}: {} on {}",
            r.command,
            r.profiles.join(" + "),
            target
        ))
    );
    for w in r.warnings {
        let _ = writeln!(out, "{} {}", style.paint("33", "warning:"), escape(w));
    }
    for s in r.skipped {
        let _ = writeln!(out, "when: {}", escape(s));
    }
    // A warning already says it (auto, with a problem).
    if let Some(f) = r.fabric_manager.filter(|f| f.action != "warn") {
        let _ = writeln!(
            out,
            "fabric-manager ({}): {}: {}",
            f.setting.word(),
            f.action,
            f.why
        );
    }
    if let Some(b) = r.boot {
        let _ = writeln!(
            out,
            "{} {}",
            style.paint("33", "boot:"),
            escape(&b.summary())
        );
        let _ = writeln!(out, "     wanted: {}", escape(&b.wanted.join(" ")));
        let _ = writeln!(out, "     why: {}", escape(&b.evidence.join("; ")));
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
}

/// A diff longer than this many lines is one summary line unless `--full-diff` (issue 45: a
/// trial's or an entry's generated GRUB script was 78 lines of every plan).
pub const LONG_DIFF: usize = 20;

/// The line that stands for a long diff: what it adds and removes, and where the whole is.
fn diff_summary(diff: &str) -> String {
    let count = |sign: char, header: &str| {
        diff.lines()
            .filter(|l| l.starts_with(sign) && !l.starts_with(header))
            .count()
    };
    format!(
        "diff: {} line(s) added, {} removed ({} lines; --full-diff shows it, --format json has it)",
        count('+', "+++"),
        count('-', "---"),
        diff.lines().count()
    )
}

/// One numbered change: its command, its reboot, its diff (coloured), or the diff's summary
/// line when it creates a file, is long and `--full-diff` was not given.
fn change(out: &mut String, n: usize, c: &ChangeOut, style: Style) {
    let _ = writeln!(
        out,
        "{:>3}. [{}] {}",
        n,
        escape(&c.module),
        style.paint("1", &escape(&c.description))
    );
    if let Some(cmd) = &c.command {
        let _ = writeln!(out, "     $ {}", escape(&cmd.shell_line()));
    }
    if let Some(reason) = &c.reboot {
        let _ = writeln!(out, "     needs a reboot: {}", escape(reason));
    }
    let diff = escape(c.diff.as_deref().unwrap_or(""));
    // Only a file gdrprov creates whole (a generated GRUB script, a unit) is
    // summed up: an edit of a file the user has is always shown, to be read
    // before the question.
    let created = diff.lines().next() == Some("--- /dev/null");
    if !style.full_diff && created && diff.lines().count() > LONG_DIFF {
        let _ = writeln!(out, "     {}", diff_summary(&diff));
        return;
    }
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

/// The commands still owed and the reasons to reboot.
fn owed(out: &mut String, r: &Report) {
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
}

/// `Plan: N change(s): ...`.
fn plan_summary(out: &mut String, r: &Report) {
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
    let _ = writeln!(
        out,
        "\nPlan: {} change(s): {files} file(s), {cmds} command(s){pending}{reboot}.",
        r.changes.len(),
    );
}

/// `Done: generation N: ...`, what was recovered, where the boot files are durable.
fn outcome_summary(out: &mut String, r: &Report, o: &OutcomeOut) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn created(lines: usize) -> ChangeOut {
        let body: String = (0..lines).map(|i| format!("+line {i}\n")).collect();
        ChangeOut {
            module: "boot".into(),
            description: "Create /etc/grub.d/42_gdrprov_x".into(),
            kind: "write-file",
            path: Some("/etc/grub.d/42_gdrprov_x".into()),
            diff: Some(format!(
                "--- /dev/null\n+++ b/etc/grub.d/42_gdrprov_x\n@@ -0,0 +1,{lines} @@\n{body}"
            )),
            command: None,
            reboot: None,
        }
    }

    /// A long diff is one summary line unless --full-diff; a short one is always whole
    /// (issue 45: a 78-line generated GRUB script in every trial plan).
    #[test]
    fn a_long_diff_is_a_summary_line_unless_full_diff() {
        let style = |full_diff| Style {
            color: false,
            full_diff,
        };
        let mut out = String::new();
        change(&mut out, 1, &created(78), style(false));
        assert_eq!(
            out,
            "  1. [boot] Create /etc/grub.d/42_gdrprov_x\n     diff: 78 line(s) added, 0 removed (81 lines; --full-diff shows it, --format json has it)\n"
        );
        let mut full = String::new();
        change(&mut full, 1, &created(78), style(true));
        assert_eq!(full.lines().count(), 82, "{full}");
        let mut short = String::new();
        change(&mut short, 1, &created(7), style(false));
        assert!(
            short.contains("+line 6") && !short.contains("diff:"),
            "{short}"
        );
        // An edit of a file the host has is shown whole, however long.
        let mut edit = created(78);
        edit.diff = edit
            .diff
            .map(|d| d.replace("--- /dev/null", "--- a/etc/grub.d/42_gdrprov_x"));
        let mut edited = String::new();
        change(&mut edited, 1, &edit, style(false));
        assert!(
            edited.contains("+line 77") && !edited.contains("diff:"),
            "{edited}"
        );
    }
}
