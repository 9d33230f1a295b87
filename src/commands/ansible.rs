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
//!
//! Each state runs the same function of `ops` as the command of the command line that
//! does the same ([`Route`]): `plan`, `apply`, `verify`, `rollback`.

use crate::error::exit;
use crate::error::{Error, Result};
use crate::names;
use crate::ops;
use crate::output::{self, ansible::result};
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// `gdrprov ARGS_FILE`, the way Ansible runs a binary module: argv has
/// exactly one argument, it is [`is_ansible_args_path`], and the file holds
/// a JSON object. Anything else is the normal command line, whatever files
/// the working directory holds.
pub fn args_file_from_argv() -> Option<PathBuf> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let [_, arg] = args.as_slice() else {
        return None;
    };
    let path = PathBuf::from(arg);
    if !is_ansible_args_path(&path) {
        return None;
    }
    let text = ops::module::read_args(&path).ok()?;
    matches!(serde_json::from_str::<Value>(&text), Ok(Value::Object(_))).then_some(path)
}

/// Ansible writes a binary module's arguments to `REMOTE_TMP/args` and runs
/// `MODULE` with that absolute path (ansible's `ActionBase._execute_module`).
/// A command word never starts with `/`, so no subcommand can be taken for
/// it, and no file in the working directory can turn one into the module
/// (issue 43: a file named `man` holding a task ran as root). The file must
/// also be a regular file (not a symlink) that neither group nor others may
/// write, as the one Ansible just wrote is. Its owner may be anyone: with
/// `become: true` Ansible writes it as the login user
/// (`/home/ubuntu/.ansible/tmp/ansible-tmp-X/args`) and runs gdrprov as root.
pub fn is_ansible_args_path(path: &Path) -> bool {
    path.is_absolute() && ops::module::is_unshared_file(path)
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
    output::json_line(&result);
    if is_failed {
        exit::ERROR
    } else {
        exit::OK
    }
}

fn failed(msg: &str) -> Value {
    json!({"failed": true, "changed": false, "msg": msg})
}

/// The task's arguments, deserialized straight from the args file (the
/// `_ansible_*` keys aside, in [`AnsibleKeys`]); unknown ones are refused.
/// Each maps onto a field of an `ops` request (see the `*_request` methods).
#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct ModuleArgs {
    #[serde(default, rename = "profile", deserialize_with = "profile_list")]
    profiles: Vec<String>,
    #[serde(default, deserialize_with = "state")]
    state: State,
    #[serde(default = "slash", deserialize_with = "root")]
    root: PathBuf,
    #[serde(default, deserialize_with = "boolish")]
    no_exec: bool,
    #[serde(default, deserialize_with = "boolish")]
    trial: bool,
    #[serde(default, deserialize_with = "boolish")]
    no_reboot: bool,
    #[serde(default, deserialize_with = "boolish")]
    force: bool,
    #[serde(default, deserialize_with = "boolish")]
    boot_elsewhere: bool,
    #[serde(default, deserialize_with = "boolish")]
    no_loopback: bool,
}

/// The `_ansible_*` keys gdrprov honours (Ansible sends more; they are ignored).
#[derive(Debug, Default, Deserialize)]
struct AnsibleKeys {
    #[serde(default, rename = "_ansible_check_mode", deserialize_with = "boolish")]
    check_mode: bool,
    #[serde(default, rename = "_ansible_diff", deserialize_with = "boolish")]
    diff: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum State {
    #[default]
    Applied,
    Verified,
    RolledBack,
}

/// The operation a task runs: for each state (and check mode), the function of `ops` that
/// the command line's command of that name runs ([`Route::command`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `ops::plan`, as `gdrprov plan` (state=applied in check mode).
    Plan,
    /// `ops::apply`, as `gdrprov apply --yes`.
    Apply,
    /// `ops::verify`, as `gdrprov verify`.
    Verify,
    /// `ops::rollback`, as `gdrprov rollback`: with `--yes`, or in check mode declined at
    /// its question, as an operator answering no (nothing is written).
    Rollback { check: bool },
}

impl Route {
    fn of(state: State, check_mode: bool) -> Route {
        match state {
            State::Applied if check_mode => Route::Plan,
            State::Applied => Route::Apply,
            State::Verified => Route::Verify,
            State::RolledBack => Route::Rollback { check: check_mode },
        }
    }

    /// The command of the command line that runs the same operation.
    fn command(self) -> &'static str {
        match self {
            Route::Plan => names::PLAN,
            Route::Apply => names::APPLY,
            Route::Verify => names::VERIFY,
            Route::Rollback { .. } => names::ROLLBACK,
        }
    }
}

impl AnsibleKeys {
    fn run(&self) -> output::ansible::Run {
        output::ansible::Run {
            check_mode: self.check_mode,
            diff: self.diff,
        }
    }
}

impl ModuleArgs {
    fn profiles_request(&self) -> ops::ProfilesRequest {
        ops::ProfilesRequest {
            profiles: self.profiles.clone(),
            target: ops::Target {
                root: self.root.clone(),
                no_exec: self.no_exec,
                cpu_vendor: None,
                no_reboot: self.no_reboot,
                force: self.force,
                arch: None,
                boot_elsewhere: self.boot_elsewhere,
            },
            trial: self.trial,
        }
    }

    fn verify_request(&self) -> ops::VerifyRequest {
        ops::VerifyRequest {
            snapshot: None,
            root: self.root.clone(),
            profiles: self.profiles.clone(),
            no_loopback: self.no_loopback,
            ..ops::VerifyRequest::default()
        }
    }

    fn rollback_request(&self) -> ops::RollbackRequest {
        ops::RollbackRequest {
            root: self.root.clone(),
            generation: None,
            no_exec: self.no_exec,
            force: self.force,
            preview: false,
        }
    }

    /// What no single argument can say wrong on its own.
    fn check(&self) -> Result<()> {
        // verify never refuses on requirements (they are checks there), so
        // `force` would be silently ignored: refuse it instead.
        if self.state == State::Verified && self.force {
            return Err(Error::Usage(
                "force does nothing with state=verified (verify reports failed requirements as checks and never refuses); drop force, or use it with state=applied or rolled_back".into(),
            ));
        }
        if self.profiles.is_empty() && self.state != State::RolledBack {
            let state = serde_json::to_value(self.state).unwrap_or_default();
            let state = state.as_str().unwrap_or_default();
            return Err(Error::Usage(format!(
                "profile is required for state={state} (a built-in profile name or a profile file on the host)"
            )));
        }
        Ok(())
    }
}

fn parse(text: &str) -> Result<(ModuleArgs, AnsibleKeys)> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| Error::Usage(format!("the module arguments are not JSON: {e}")))?;
    let Value::Object(m) = v else {
        return Err(Error::Usage(
            "the module arguments are not a JSON object".into(),
        ));
    };
    let (ansible, task): (Map<String, Value>, Map<String, Value>) =
        m.into_iter().partition(|(k, _)| k.starts_with("_ansible_"));
    let args: ModuleArgs = from_map(task)?;
    args.check()?;
    Ok((args, from_map(ansible)?))
}

/// Deserializes one argument map; errors in the module's words, naming the argument.
fn from_map<T: DeserializeOwned>(m: Map<String, Value>) -> Result<T> {
    serde_path_to_error::deserialize(Value::Object(m)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        Error::Usage(match inner.strip_prefix("unknown field ") {
            // serde: "unknown field `x`, expected one of `a`, `b`"
            Some(rest) => {
                let rest = rest.replace('`', "");
                match rest.split_once(", expected one of ") {
                    Some((field, known)) => format!(
                        "Unsupported parameters for (gdrprov) module: {field}. Supported parameters include: {known}"
                    ),
                    None => format!("Unsupported parameters for (gdrprov) module: {rest}"),
                }
            }
            None if path == "." => inner,
            None => format!("{path} {inner}"),
        })
    })
}

fn slash() -> PathBuf {
    PathBuf::from("/")
}

/// `profile`: a name or path, a comma-separated string of them, or a list.
fn profile_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(Vec::new()),
        Value::String(s) => Ok(s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()),
        Value::Array(a) => a
            .into_iter()
            .map(|x| match x {
                Value::String(s) => Ok(s),
                other => Err(D::Error::custom(format!(
                    "entries must each be a string, not {other}"
                ))),
            })
            .collect(),
        other => Err(D::Error::custom(format!(
            "must be a string or a list of strings, not {other}"
        ))),
    }
}

fn state<'de, D: Deserializer<'de>>(d: D) -> Result<State, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(State::Applied),
        Value::String(s) if s == "applied" => Ok(State::Applied),
        Value::String(s) if s == "verified" => Ok(State::Verified),
        Value::String(s) if s == "rolled_back" => Ok(State::RolledBack),
        other => Err(D::Error::custom(format!(
            "must be one of applied, verified, rolled_back, not {other}"
        ))),
    }
}

fn root<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(slash()),
        Value::String(s) => Ok(PathBuf::from(s)),
        other => Err(D::Error::custom(format!("must be a path, not {other}"))),
    }
}

/// Ansible's booleans: true/false, 0/1, and the strings yes/no/true/false/1/0/on/off/y/n.
fn boolish<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(b),
        Value::Number(n) if n.as_u64() == Some(0) || n.as_u64() == Some(1) => {
            Ok(n.as_u64() == Some(1))
        }
        Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "yes" | "true" | "on" | "1" | "y" => Ok(true),
            "no" | "false" | "off" | "0" | "n" | "" => Ok(false),
            _ => Err(D::Error::custom(format!("must be a boolean, not {s:?}"))),
        },
        other => Err(D::Error::custom(format!("must be a boolean, not {other}"))),
    }
}

fn run(args_file: &Path) -> Result<Value> {
    let text = ops::module::read_args(args_file)?;
    let (a, k) = parse(&text)?;
    let route = Route::of(a.state, k.check_mode);
    let mut out = match route {
        Route::Verify => output::ansible::verified(ops::verify(&a.verify_request())?, &a.root),
        Route::Rollback { check } => rolled_back(&a, &k, check)?,
        Route::Plan => {
            let p = ops::plan(&a.profiles_request())?;
            let done = output::Done::Planned;
            result(route.command(), &p.host, p.names, &p.plan, done, k.run())
        }
        Route::Apply => {
            let applied = ops::apply(&a.profiles_request(), &mut ops::yes)?;
            let (host, plan) = (&applied.host, &applied.plan);
            let names = applied.names.clone();
            result(route.command(), host, names, plan, applied.done(), k.run())
        }
    };
    if let Some(obj) = out.as_object_mut() {
        obj.insert("invocation".into(), json!({ "module_args": a }));
    }
    Ok(out)
}

fn nothing_to_roll_back() -> Value {
    json!({
        "changed": false,
        "failed": false,
        "msg": "nothing to roll back: no apply of gdrprov is in effect",
        "reboot_required": false,
    })
}

/// `ops::rollback`, as `gdrprov rollback`: with `--yes`; in check mode, the plan it asks
/// about, then declined (nothing is written, not even the lock).
fn rolled_back(a: &ModuleArgs, k: &AnsibleKeys, check: bool) -> Result<Value> {
    let req = ops::RollbackRequest {
        preview: check,
        ..a.rollback_request()
    };
    if !check {
        return Ok(rollback_result(ops::rollback(&req, &mut ops::yes)?, k));
    }
    let mut shown = None;
    let ran = ops::rollback(&req, &mut |ask: &ops::Ask| {
        shown = Some(would_roll_back(ask, k));
        Err(Error::Refused(
            "check mode: the rollback is shown, not made (nothing was changed)".into(),
        ))
    });
    match (ran, shown) {
        (_, Some(v)) => Ok(v),
        (Ok(r), None) => Ok(rollback_result(r, k)),
        (Err(e), None) => Err(e),
    }
}

/// Check mode's result: what the rollback would restore.
fn would_roll_back(ask: &ops::Ask, k: &AnsibleKeys) -> Value {
    let profiles = ask.profiles.to_vec();
    let done = output::Done::Planned;
    let mut v = result(names::ROLLBACK, ask.host, profiles, ask.plan, done, k.run());
    if let Some(obj) = v.as_object_mut() {
        // Undoing a generation is a change even when its files are already back.
        obj.insert("changed".into(), Value::Bool(true));
        obj.insert(
            "msg".into(),
            json!(format!("would roll back {:?}", ask.undoes)),
        );
    }
    v
}

fn rollback_result(r: ops::RolledBack, k: &AnsibleKeys) -> Value {
    let ops::RolledBack::Done {
        host,
        profiles,
        plan,
        outcome,
    } = r
    else {
        return nothing_to_roll_back();
    };
    let done = output::Done::Ran(&outcome);
    let mut v = result(names::ROLLBACK, &host, profiles, &plan, done, k.run());
    if let Some(obj) = v.as_object_mut() {
        obj.insert("changed".into(), Value::Bool(true));
        obj.insert(
            "msg".into(),
            json!(format!("rolled back (generation {})", outcome.generation)),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        parse(text).unwrap_err().to_string()
    }

    #[test]
    fn arguments_are_checked() {
        let (a, k) = parse(r#"{"profile": "rdma-dmabuf", "no_exec": "yes", "_ansible_check_mode": true, "_ansible_diff": false, "_ansible_verbosity": 3}"#).unwrap();
        assert_eq!(a.profiles, ["rdma-dmabuf"]);
        assert!(a.no_exec && k.check_mode && !k.diff);
        assert_eq!(a.state, State::Applied);
        assert_eq!(a.root, Path::new("/"));
        let e = message(r#"{"profile": "x", "colour": 1}"#);
        assert!(
            e.starts_with("Unsupported parameters for (gdrprov) module: colour. Supported parameters include: profile, state, root,"),
            "{e}"
        );
        assert!(
            message(r#"{"state": "applied"}"#).contains("profile is required for state=applied")
        );
        assert_eq!(
            message(r#"{"profile": "x", "state": "gone"}"#),
            r#"state must be one of applied, verified, rolled_back, not "gone""#
        );
        assert_eq!(
            message(r#"{"profile": "x", "trial": "maybe"}"#),
            r#"trial must be a boolean, not "maybe""#
        );
        assert_eq!(
            message(r#"{"profile": "x", "root": 3}"#),
            "root must be a path, not 3"
        );
        assert_eq!(
            message(r#"{"profile": ["a", 1]}"#),
            "profile entries must each be a string, not 1"
        );
        assert_eq!(
            message(r#"{"profile": "x", "_ansible_diff": "perhaps"}"#),
            r#"_ansible_diff must be a boolean, not "perhaps""#
        );
        let (a, _) = parse(r#"{"state": "rolled_back", "force": 1, "root": null}"#).unwrap();
        assert!(a.force && a.profiles.is_empty() && a.state == State::RolledBack);
        let (a, _) = parse(r#"{"profile": "a, b", "state": null, "trial": "on"}"#).unwrap();
        assert_eq!(a.profiles, ["a", "b"]);
        assert!(a.trial && a.state == State::Applied);
    }

    /// Each state (and check mode) runs the operation of the command of that name: the
    /// same function of `ops` (tests/it/ansible.rs compares their results).
    #[test]
    fn each_state_runs_the_operation_of_a_command() {
        for (args, command) in [
            (r#"{"profile": "p", "_ansible_check_mode": true}"#, "plan"),
            (r#"{"profile": "p"}"#, "apply"),
            (r#"{"profile": "p", "state": "verified"}"#, "verify"),
            (
                r#"{"profile": "p", "state": "verified", "_ansible_check_mode": true}"#,
                "verify",
            ),
            (r#"{"state": "rolled_back"}"#, "rollback"),
            (
                r#"{"state": "rolled_back", "_ansible_check_mode": 1}"#,
                "rollback",
            ),
        ] {
            let (a, k) = parse(args).unwrap();
            assert_eq!(
                Route::of(a.state, k.check_mode).command(),
                command,
                "{args}"
            );
        }
        let (a, k) = parse(r#"{"state": "rolled_back", "_ansible_check_mode": 1}"#).unwrap();
        assert_eq!(
            Route::of(a.state, k.check_mode),
            Route::Rollback { check: true }
        );
    }

    #[test]
    fn arguments_map_onto_the_ops_requests() {
        let (a, _) = parse(r#"{"profile": ["p"], "root": "/r", "no_exec": true, "no_reboot": true, "force": true, "boot_elsewhere": true, "trial": true, "no_loopback": true}"#).unwrap();
        let p = a.profiles_request();
        assert_eq!(p.profiles, ["p"]);
        assert_eq!(p.target.root, Path::new("/r"));
        assert!(p.target.no_exec && p.target.no_reboot && p.target.force);
        assert!(p.target.boot_elsewhere && p.trial);
        let v = a.verify_request();
        assert!(v.no_loopback && v.root == Path::new("/r") && v.profiles == ["p"]);
        let r = a.rollback_request();
        assert!(r.no_exec && r.force && r.generation.is_none());
        // The invocation Ansible shows: the arguments under their own names.
        let inv = serde_json::to_value(&a).unwrap();
        assert_eq!(inv["profile"], json!(["p"]));
        assert_eq!(inv["state"], "applied");
        assert_eq!(inv["root"], "/r");
    }
}
