//! gdrprov as an Ansible binary module. Ansible copies the module (this
//! binary, named after the module: `library/gdrprov`) to the host and runs it
//! as `gdrprov ARGS_FILE`, where ARGS_FILE is a JSON object of the task's
//! arguments plus `_ansible_*` keys. The answer is one JSON object on stdout:
//! `changed`, `failed`, `msg`, `diff`, `reboot_required` and the plan.
//!
//! Arguments: `profile` (a name or path, or a list), `state`
//! (`applied` | `verified` | `rolled_back`, default `applied`), `root`
//! (default `/`), `no_exec`, `trial`, `no_reboot`, `force`, `boot_elsewhere`, `no_loopback`.
//! Check mode (`_ansible_check_mode`) plans and changes nothing.

use crate::error::{Error, Result};
use crate::host::Host;
use crate::journal::{Kind, StateStore, Status};
use crate::ops;
use crate::plan::{Action, Plan};
use crate::render;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// `gdrprov ARGS_FILE`: argv has exactly one argument, an existing file
/// whose content is a JSON object. Anything else is the normal command line.
pub fn args_file_from_argv() -> Option<PathBuf> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.len() != 2 {
        return None;
    }
    let path = PathBuf::from(&args[1]);
    if !path.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(_)) => Some(path),
        _ => None,
    }
}

/// Runs the module; prints exactly one JSON object; exit 0, or 1 when failed.
pub fn main(args_file: &Path) -> i32 {
    let mut result = match std::panic::catch_unwind(|| run(args_file)) {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => failed(&e.to_string()),
        Err(_) => failed("gdrprov panicked; please report this as a bug"),
    };
    let is_failed = result.get("failed").and_then(Value::as_bool) == Some(true);
    if let Some(obj) = result.as_object_mut() {
        obj.entry("changed").or_insert(Value::Bool(false));
    }
    println!(
        "{}",
        serde_json::to_string(&result).unwrap_or_else(|_| {
            r#"{"failed": true, "msg": "gdrprov could not serialise its result"}"#.into()
        })
    );
    if is_failed {
        crate::exit::ERROR
    } else {
        crate::exit::OK
    }
}

fn failed(msg: &str) -> Value {
    json!({"failed": true, "changed": false, "msg": msg})
}

#[derive(Debug)]
struct ModuleArgs {
    profiles: Vec<String>,
    state: String,
    root: PathBuf,
    no_exec: bool,
    trial: bool,
    no_reboot: bool,
    force: bool,
    boot_elsewhere: bool,
    no_loopback: bool,
    check_mode: bool,
    diff: bool,
}

const KNOWN: &[&str] = &[
    "profile",
    "state",
    "root",
    "no_exec",
    "trial",
    "no_reboot",
    "force",
    "boot_elsewhere",
    "no_loopback",
];

fn parse(text: &str) -> Result<ModuleArgs> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Error::Usage(format!("the module arguments are not JSON: {e}")))?;
    let Value::Object(m) = v else {
        return Err(Error::Usage(
            "the module arguments are not a JSON object".into(),
        ));
    };
    let unknown: Vec<&str> = m
        .keys()
        .map(String::as_str)
        .filter(|k| !k.starts_with("_ansible_") && !KNOWN.contains(k))
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Usage(format!(
            "Unsupported parameters for (gdrprov) module: {}. Supported parameters include: {}",
            unknown.join(", "),
            KNOWN.join(", ")
        )));
    }
    let flag = |k: &str| -> Result<bool> { boolish(&m, k) };
    let profiles = match m.get("profile") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                other => Err(Error::Usage(format!(
                    "profile: each entry must be a string, not {other}"
                ))),
            })
            .collect::<Result<Vec<_>>>()?,
        Some(other) => {
            return Err(Error::Usage(format!(
                "profile must be a string or a list of strings, not {other}"
            )))
        }
    };
    let state = match m.get("state") {
        None | Some(Value::Null) => "applied".to_string(),
        Some(Value::String(s)) if ["applied", "verified", "rolled_back"].contains(&s.as_str()) => {
            s.clone()
        }
        Some(other) => {
            return Err(Error::Usage(format!(
                "state must be one of applied, verified, rolled_back, not {other}"
            )))
        }
    };
    // verify never refuses on requirements (they are checks there), so
    // `force` would be silently ignored: refuse it instead.
    if state == "verified" && boolish(&m, "force")? {
        return Err(Error::Usage(
            "force does nothing with state=verified (verify reports failed requirements as checks and never refuses); drop force, or use it with state=applied or rolled_back".into(),
        ));
    }
    if profiles.is_empty() && state != "rolled_back" {
        return Err(Error::Usage(format!(
            "profile is required for state={state} (a built-in profile name or a profile file on the host)"
        )));
    }
    let root = match m.get("root") {
        None | Some(Value::Null) => PathBuf::from("/"),
        Some(Value::String(s)) => PathBuf::from(s),
        Some(other) => return Err(Error::Usage(format!("root must be a path, not {other}"))),
    };
    Ok(ModuleArgs {
        profiles,
        state,
        root,
        no_exec: flag("no_exec")?,
        trial: flag("trial")?,
        no_reboot: flag("no_reboot")?,
        force: flag("force")?,
        boot_elsewhere: flag("boot_elsewhere")?,
        no_loopback: flag("no_loopback")?,
        check_mode: flag("_ansible_check_mode")?,
        diff: flag("_ansible_diff")?,
    })
}

/// Ansible's booleans: true/false, and the strings yes/no/true/false/1/0/on/off.
fn boolish(m: &Map<String, Value>, k: &str) -> Result<bool> {
    match m.get(k) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Number(n)) if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
            Ok(n.as_u64() == Some(1))
        }
        Some(Value::String(s)) => match s.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" | "1" | "y" => Ok(true),
            "no" | "false" | "off" | "0" | "n" | "" => Ok(false),
            _ => Err(Error::Usage(format!("{k} must be a boolean, not {s:?}"))),
        },
        Some(other) => Err(Error::Usage(format!("{k} must be a boolean, not {other}"))),
    }
}

fn run(args_file: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(args_file)
        .map_err(|e| Error::io("read", args_file.display().to_string(), e))?;
    let a = parse(&text)?;
    // The same requests the command line builds (src/ops.rs).
    let request = ops::ProfilesRequest {
        profiles: a.profiles.clone(),
        target: ops::Target {
            root: a.root.clone(),
            no_exec: a.no_exec,
            cpu_vendor: None,
            no_reboot: a.no_reboot,
            force: a.force,
            arch: None,
            boot_elsewhere: a.boot_elsewhere,
        },
        trial: a.trial,
    };
    let mut out = match a.state.as_str() {
        "verified" => verified(&a)?,
        "rolled_back" => rolled_back(&a)?,
        _ if a.check_mode => {
            let p = ops::plan(&request)?;
            result(&p.host, p.names, &p.plan, render::Done::Planned, &a, "plan")
        }
        _ => {
            let applied = ops::apply(&request, &mut ops::yes)?;
            result(
                &applied.host,
                applied.names.clone(),
                &applied.plan,
                applied.done(),
                &a,
                "apply",
            )
        }
    };
    if let Some(obj) = out.as_object_mut() {
        obj.insert(
            "invocation".into(),
            json!({"module_args": {
                "profile": a.profiles, "state": a.state, "root": a.root.display().to_string(),
                "no_exec": a.no_exec, "trial": a.trial, "no_reboot": a.no_reboot,
                "force": a.force, "no_loopback": a.no_loopback,
            }}),
        );
    }
    Ok(out)
}

/// The module result for a plan (check mode) or an apply/rollback.
fn result(
    host: &Host,
    names: Vec<String>,
    plan: &Plan,
    done: render::Done,
    a: &ModuleArgs,
    command: &'static str,
) -> Value {
    let report = render::report(command, host, names, plan, done);
    let changed = !plan.is_empty();
    let msg = if !changed {
        "nothing to change: the host already matches".to_string()
    } else if a.check_mode {
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
    if a.diff {
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
    let command = |verb: &str, c: &crate::host::CommandSpec| {
        let c = render::CommandOut::of(host, c);
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

fn verified(a: &ModuleArgs) -> Result<Value> {
    let report = ops::verify(&ops::VerifyRequest {
        root: a.root.clone(),
        profiles: a.profiles.clone(),
        no_loopback: a.no_loopback,
        ..ops::VerifyRequest::default()
    })?;
    let failing: Vec<String> = report
        .checks
        .iter()
        .filter(|c| c.status == crate::verify::Status::Fail)
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    let msg = if report.ready {
        format!("ready: {}", report.profiles.join(" + "))
    } else {
        format!("not ready: {}", failing.join("; "))
    };
    Ok(json!({
        "changed": false,
        "failed": !report.ready,
        "msg": msg,
        "ready": report.ready,
        "reboot_required": report.checks.iter().any(|c| c.name == "reboot" && c.status == crate::verify::Status::Fail),
        "verify": report,
    }))
}

fn rolled_back(a: &ModuleArgs) -> Result<Value> {
    let host = Host::open(&a.root, a.no_exec)?;
    let store = StateStore::new(&host);
    let in_effect = store.generation_numbers().into_iter().any(|n| {
        store.load_generation(n).is_ok_and(|g| {
            g.kind == Kind::Apply && g.status == Status::Complete && g.rolled_back_by.is_none()
        })
    });
    if !in_effect {
        return Ok(json!({
            "changed": false,
            "failed": false,
            "msg": "nothing to roll back: no apply of gdrprov is in effect",
            "reboot_required": false,
        }));
    }
    if a.check_mode {
        let (plan, undoes) = crate::apply::plan_rollback(&host, &store, None, a.force)?;
        let profiles = store.load_state()?.profiles;
        let mut v = result(&host, profiles, &plan, render::Done::Planned, a, "rollback");
        if let Some(obj) = v.as_object_mut() {
            // Undoing a generation is a change even when its files are already back.
            obj.insert("changed".into(), Value::Bool(true));
            obj.insert("msg".into(), json!(format!("would roll back {undoes:?}")));
        }
        return Ok(v);
    }
    let request = ops::RollbackRequest {
        root: a.root.clone(),
        generation: None,
        no_exec: a.no_exec,
        force: a.force,
    };
    let (host, profiles, plan, outcome) = match ops::rollback(&request, &mut ops::yes)? {
        ops::RolledBack::Done {
            host,
            profiles,
            plan,
            outcome,
        } => (host, profiles, plan, outcome),
        ops::RolledBack::Nothing { .. } | ops::RolledBack::Recovered { .. } => {
            return Ok(json!({
                "changed": true,
                "failed": false,
                "msg": "an interrupted gdrprov run was put back; no apply was in effect",
                "reboot_required": false,
            }));
        }
    };
    let mut v = result(
        &host,
        profiles,
        &plan,
        render::Done::Ran(&outcome),
        a,
        "rollback",
    );
    if let Some(obj) = v.as_object_mut() {
        obj.insert("changed".into(), Value::Bool(true));
        obj.insert(
            "msg".into(),
            json!(format!("rolled back (generation {})", outcome.generation)),
        );
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_checked() {
        let a = parse(r#"{"profile": "rdma-dmabuf", "no_exec": "yes", "_ansible_check_mode": true, "_ansible_diff": false}"#).unwrap();
        assert_eq!(a.profiles, ["rdma-dmabuf"]);
        assert!(a.no_exec && a.check_mode && !a.diff);
        assert_eq!(a.state, "applied");
        let e = parse(r#"{"profile": "x", "colour": 1}"#).unwrap_err();
        assert!(e.to_string().contains("Unsupported parameters"), "{e}");
        assert!(parse(r#"{"state": "applied"}"#).is_err());
        assert!(parse(r#"{"profile": "x", "state": "gone"}"#).is_err());
        assert!(parse(r#"{"profile": "x", "trial": "maybe"}"#).is_err());
        assert!(parse(r#"{"state": "rolled_back"}"#).is_ok());
    }
}
