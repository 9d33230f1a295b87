//! The Ansible module's result (src/commands/ansible.rs): Ansible's keys (`changed`,
//! `failed`, `msg`, `diff`, `reboot_required`, `warnings`) over the report the command of
//! the same name gives, which it carries whole (`plan`, `verify`).

use crate::checks::verify::Report;
use crate::checks::Status;
use crate::host::{CommandSpec, Host};
use crate::output::{self, Done};
use crate::plan::{Action, Plan};
use serde_json::{json, Value};

/// How Ansible runs the task: `_ansible_check_mode`, `_ansible_diff`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Run {
    pub check_mode: bool,
    pub diff: bool,
}

/// The module result for a plan (check mode) or an apply/rollback.
pub fn result(
    command: &'static str,
    host: &Host,
    names: Vec<String>,
    plan: &Plan,
    done: Done,
    k: Run,
) -> Value {
    let report = output::report(command, host, names, plan, done);
    let changed = !plan.is_empty();
    let msg = if !changed {
        "nothing to change: the host already matches".to_string()
    } else if k.check_mode {
        format!("{} change(s) would be made", plan.changes.len())
    } else {
        format!("{} change(s) made", plan.changes.len())
    };
    // Ansible shows `warnings` on every run: a forced requirement is said
    // when it matters, on a run that changes something, not on every run.
    let warnings: &[String] = if changed { report.warnings } else { &[] };
    let mut v = json!({
        "changed": changed,
        "failed": false,
        "msg": msg,
        "reboot_required": report.reboot_required,
        "reboot_reasons": report.reboot_reasons,
        "pending_commands": report.pending_commands,
        "warnings": warnings,
        "plan": report,
    });
    if k.diff {
        if let Some(obj) = v.as_object_mut() {
            obj.insert("diff".into(), Value::Array(diffs(host, plan)));
        }
    }
    v
}

/// Ansible's diff format: one `{before_header, after_header, before, after}`
/// per file, and one `{prepared}` (shown as is) per command a change runs or
/// leaves owed.
fn diffs(host: &Host, plan: &Plan) -> Vec<Value> {
    let command = |verb: &str, c: &CommandSpec| {
        let c = output::CommandOut::of(host, c);
        json!({"prepared": format!("{verb}: $ {}    # {}\n", c.shell_line(), c.why)})
    };
    // Owed commands are news only on the run that leaves them owed.
    let owed = plan
        .pending_commands
        .iter()
        .filter(|_| !plan.is_empty())
        .map(|c| command("command owed (no_exec: not run)", c));
    plan.changes
        .iter()
        .map(|c| match &c.action {
            Action::WriteFile {
                path,
                before,
                after,
                ..
            } => json!({
                "before_header": if before.is_some() { path.clone() } else { "/dev/null".into() },
                "after_header": path,
                "before": before.clone().unwrap_or_default(),
                "after": after,
            }),
            Action::RemoveFile { path, before } => json!({
                "before_header": path,
                "after_header": "/dev/null",
                "before": before,
                "after": "",
            }),
            Action::Run { command: c } => command("command", c),
        })
        .chain(owed)
        .collect()
}

/// The result of state=verified: ready or not, the failing checks named.
/// Every command its checks suggest keeps the task's ROOT (as the command
/// line's `--root` does): a person reads it in Ansible's output and runs it.
pub fn verified(mut report: Report, root: &std::path::Path) -> Value {
    output::verify::keep_given(&mut report, &crate::suggest::Given::new(root, false));
    let failing: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| format!("{}: {}", c.name, c.detail()))
        .collect();
    let msg = if report.ready {
        format!("ready: {}", report.profiles.join(" + "))
    } else {
        format!("not ready: {}", failing.join("; "))
    };
    json!({
        "changed": false,
        "failed": !report.ready,
        "msg": msg,
        "ready": report.ready,
        "reboot_required": report.checks.iter().any(|c| c.name == "reboot" && c.status == Status::Fail),
        "verify": report,
    })
}
