//! The machine interface and the surprises of issue 15, end to end on copies
//! of the example roots: one JSON envelope for every command, errors as JSON
//! objects, commands in one form, history, owed commands, words instead of
//! Rust names, suggestions that keep --root, profile errors in the
//! profile's words, and refusals that change nothing.

use crate::common::*;
use crate::util::*;
use serde_json::Value;
use std::path::Path;

fn r(p: &Path) -> String {
    p.display().to_string()
}

/// Runs gdrprov; returns (exit code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = gdrprov().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        stdout_of(&out),
        stderr_of(&out),
    )
}

/// Runs gdrprov with `--format json`; stdout must be one JSON document.
fn json(args: &[&str]) -> (i32, Value) {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let (code, out, err) = run(&all);
    let v = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}):\n{out}\nstderr:\n{err}"));
    (code, v)
}

fn assert_envelope(v: &Value, command: &str, root: &str) {
    assert_eq!(v["gdrprov"], env!("CARGO_PKG_VERSION"), "{v:#}");
    assert_eq!(v["command"], command, "{v:#}");
    assert_eq!(v["root"], root, "{v:#}");
    // The envelope comes first, for people reading it too.
    let keys: Vec<&String> = v.as_object().unwrap().keys().take(3).collect();
    assert_eq!(keys, ["gdrprov", "command", "root"], "{v:#}");
    // The document's format (issue 43): a reader of another gdrprov takes a
    // newer minor and refuses another major by name.
    assert_eq!(v["format_version"], "1.0", "{v:#}");
}

#[test]
fn every_command_has_the_same_json_envelope() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let rr = r(&root);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["plan", "rdma-dmabuf", "--root", &rr], "plan"),
        (vec!["verify", "rdma-dmabuf", "--root", &rr], "verify"),
        (vec!["history", "--root", &rr], "history"),
        (vec!["profile", "list"], "profile list"),
        (vec!["profile", "show", "rdma-dmabuf"], "profile show"),
        (vec!["boot", "list", "--root", &rr], "boot list"),
        (vec!["doctor", "--root", &rr], "doctor"),
        (vec!["inventory", "--root", &rr], "inventory"),
        (
            vec!["boot", "once", "0", "--no-exec", "--root", &rr],
            "boot once",
        ),
    ];
    for (args, command) in &cases {
        let (_, v) = json(args);
        let root = if args.contains(&"--root") {
            rr.as_str()
        } else {
            "/"
        };
        assert_envelope(&v, command, root);
    }
    // Fields kept inside the envelope.
    let (_, v) = json(&["verify", "rdma-dmabuf", "--root", &rr]);
    assert!(v["checks"].is_array() && v["ready"].is_boolean(), "{v:#}");
    let (_, v) = json(&["profile", "list"]);
    assert!(v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "rdma-dmabuf"));
    let (_, v) = json(&["profile", "show", "rdma-dmabuf"]);
    assert!(v["profile"]["modules"]["absent"].is_array(), "{v:#}");
    let (_, v) = json(&["boot", "list", "--root", &rr]);
    assert!(v["entries"].is_array(), "{v:#}");

    // profile validate, with one good and one bad file.
    let good = t.path().join("good.yaml");
    std::fs::write(&good, "modules:\n  absent: [nvidia_peermem]\n").unwrap();
    let bad = t.path().join("bad.yaml");
    std::fs::write(&bad, "modules:\n  absent: nvidia_peermem\n").unwrap();
    let (code, v) = json(&["profile", "validate", &r(&good), &r(&bad)]);
    assert_eq!(code, 1);
    assert_envelope(&v, "profile validate", "/");
    assert_eq!(v["files"][0]["ok"], true, "{v:#}");
    assert_eq!(v["files"][1]["ok"], false, "{v:#}");
    assert_eq!(v["files"][1]["error"]["kind"], "profile-syntax", "{v:#}");

    // apply, rollback and commit.
    let (code, v) = json(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{v:#}");
    assert_envelope(&v, "apply", &rr);
    let (code, v) = json(&["rollback", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{v:#}");
    assert_envelope(&v, "rollback", &rr);
    let (code, v) = json(&["commit", "--root", &rr]);
    assert_eq!(code, 1, "{v:#}");
    assert_envelope(&v, "commit", &rr);
    assert_eq!(v["error"]["kind"], "refused", "{v:#}");
}

#[test]
fn errors_are_json_objects_with_the_usual_exit_code() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let pristine = snapshot(&root);
    // An error of the command itself.
    let (code, v) = json(&["plan", "no-such-profile", "--root", &rr]);
    assert_eq!(code, 1);
    assert_envelope(&v, "plan", &rr);
    assert_eq!(v["error"]["kind"], "unknown-profile", "{v:#}");
    assert!(v["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-profile"));
    // A usage error from the argument parser, --format before or after.
    let (code, out, err) = run(&["--format", "json", "boot", "set-default", "--bogus"]);
    assert_eq!(code, 1);
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_envelope(&v, "boot set-default", "/");
    assert_eq!(v["error"]["kind"], "usage", "{v:#}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("--bogus"),
        "{v:#}"
    );
    assert!(err.contains("--bogus"), "people still read stderr: {err}");
    let (code, v) = json(&["verify", "--root", &rr]);
    assert_eq!(code, 1);
    assert_eq!(v["error"]["kind"], "usage", "{v:#}");
    assert_eq!(v["command"], "verify");
    assert_eq!(v["root"], rr.as_str());
    // Text output stays prose, with nothing on stdout.
    let (code, out, _) = run(&["plan", "no-such-profile", "--root", &rr]);
    assert_eq!(code, 1);
    assert!(out.is_empty(), "{out}");
    assert_same(&snapshot(&root), &pristine, "errors changed the root");
}

fn assert_command_form(c: &Value) {
    let obj = c
        .as_object()
        .unwrap_or_else(|| panic!("not {{argv, why}}: {c}"));
    assert!(obj["argv"].as_array().is_some_and(|a| !a.is_empty()), "{c}");
    assert!(obj["why"].as_str().is_some_and(|w| !w.is_empty()), "{c}");
}

#[test]
fn commands_have_one_form_and_every_apply_has_an_outcome() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let (_, plan) = json(&["plan", "rdma-dmabuf", "--root", &rr]);
    let runs: Vec<&Value> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "run")
        .collect();
    assert!(!runs.is_empty(), "{plan:#}");
    for c in &runs {
        assert_command_form(&c["command"]);
    }
    assert!(plan.get("outcome").is_none(), "a plan has no outcome");

    let (code, apply) = json(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0);
    let pending = apply["pending_commands"].as_array().unwrap();
    assert_eq!(pending.len(), runs.len(), "{apply:#}");
    for c in pending {
        assert_command_form(c);
    }
    // The same commands, in the same form, in the plan, the report and the outcome.
    let argvs = |v: &[Value]| v.iter().map(|c| c["argv"].clone()).collect::<Vec<_>>();
    let planned: Vec<Value> = runs.iter().map(|c| c["command"].clone()).collect();
    assert_eq!(argvs(pending), argvs(&planned));
    assert_eq!(
        apply["outcome"]["pending_commands"],
        apply["pending_commands"]
    );
    assert_eq!(apply["outcome"]["generation"], 1);

    // A no-op apply has an outcome too, with no generation.
    let (_, again) = json(&["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", &rr]);
    assert_eq!(again["changed"], false, "{again:#}");
    let o = &again["outcome"];
    assert!(o.is_object(), "a no-op apply has an outcome: {again:#}");
    assert_eq!(o["generation"], Value::Null, "{again:#}");
    assert_eq!(o["changed"], 0);
    assert_eq!(o["commands_run"], serde_json::json!([]));
}

#[test]
fn owed_commands_are_pending_for_plan_and_apply_alike() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let (code, _, err) = run(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{err}");
    // plan (it would run them), plan --no-exec and a dry run: all say pending.
    for args in [
        vec!["plan", "rdma-dmabuf", "--detailed-exitcode", "--root", &rr],
        vec![
            "plan",
            "rdma-dmabuf",
            "--no-exec",
            "--detailed-exitcode",
            "--root",
            &rr,
        ],
        vec![
            "apply",
            "rdma-dmabuf",
            "--no-exec",
            "--dry-run",
            "--detailed-exitcode",
            "--root",
            &rr,
        ],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(!out.contains("the host already matches"), "{args:?}: {out}");
    }
    // A second apply --no-exec writes nothing and says the commands are still owed.
    let before = snapshot(&root);
    let (code, out, err) = run(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("the host already matches"), "{out}");
    assert!(out.contains("2 command(s) are still owed"), "{out}");
    assert!(out.contains("update-grub"), "{out}");
    assert_same(
        &snapshot(&root),
        &before,
        "the second apply wrote something",
    );
    let (_, v) = json(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(v["changed"], false);
    assert_eq!(v["pending_commands"].as_array().unwrap().len(), 2, "{v:#}");
    assert_eq!(v["outcome"]["pending_commands"], v["pending_commands"]);
}

#[test]
fn history_says_when_who_what_and_how_it_ended() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let out = gdrprov()
        .args(["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr])
        .env("SUDO_USER", "alice")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    run(&["rollback", "--no-exec", "--yes", "--root", &rr]);
    let (_, v) = json(&["history", "--root", &rr]);
    let g = v["generations"].as_array().unwrap();
    assert_eq!(g.len(), 2, "{v:#}");
    let rfc3339 = |s: &Value| {
        let s = s.as_str().unwrap_or_else(|| panic!("not a time: {v:#}"));
        assert!(
            s.len() == 20 && s.ends_with('Z') && &s[4..5] == "-" && &s[10..11] == "T",
            "{s}"
        );
    };
    rfc3339(&g[0]["started"]);
    rfc3339(&g[0]["finished"]);
    assert_eq!(g[0]["user"], "alice");
    assert_eq!(g[0]["profiles"], serde_json::json!(["rdma-dmabuf"]));
    assert_eq!(g[0]["result"], "rolled-back");
    assert_eq!(g[1]["kind"], "rollback");
    assert_eq!(g[1]["result"], "complete");
    let (_, text, _) = run(&["history", "--root", &rr]);
    assert!(text.contains("by alice"), "{text}");
    assert!(text.contains("rolled back by 2"), "{text}");

    // A journal of an older version (no finished, no user) still loads.
    let j = root.join("var/lib/gdrprov/generations/1/journal.json");
    let mut old: Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    let o = old.as_object_mut().unwrap();
    o.remove("finished");
    o.remove("user");
    std::fs::write(&j, serde_json::to_string(&old).unwrap()).unwrap();
    let (code, v) = json(&["history", "--root", &rr]);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["generations"][0]["user"], Value::Null);
    assert_eq!(v["generations"][0]["finished"], Value::Null);
}

#[test]
fn unchecked_requirements_on_an_image_are_one_line() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    // An image root: nothing of the running driver or tools can be read.
    let (_, v) = json(&["plan", "rdma-dmabuf", "--no-exec", "--root", &rr]);
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|w| w.contains("not checked") || w.contains("could not be determined"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(warnings[0].contains("perftest >= 6.26"), "{warnings:?}");
}

#[test]
fn text_output_has_no_rust_names() {
    for host in ["ubuntu-22.04-h100", "rocky-9-a100", "alinux3-erdma"] {
        let root = Root::example(host);
        let rr = r(&root);
        let (_, inv, _) = run(&["inventory", "--root", &rr]);
        let (_, doc, _) = run(&["doctor", "--root", &rr]);
        let (_, erdma, _) = run(&["doctor", "erdma-cloud", "--root", &rr]);
        for text in [&inv, &doc, &erdma] {
            for rust in [
                "GrubBios",
                "GrubBls",
                "GrubEfi",
                "CPU Unknown",
                "Unknown family",
                "Rhel family",
                "Passthrough",
                "Translated",
                ">= 0",
            ] {
                assert!(!text.contains(rust), "{host}: `{rust}` in:\n{text}");
            }
        }
        assert!(inv.contains("Boot: GRUB"), "{host}: {inv}");
    }
    let root = Root::example("alinux3-erdma");
    let (_, erdma, _) = run(&["doctor", "erdma-cloud", "--root", &r(&root)]);
    assert!(erdma.contains("wanted present"), "{erdma}");
}

#[test]
fn suggested_commands_keep_root_and_format() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let (_, text, _) = run(&["doctor", "--root", &rr]);
    assert!(
        text.contains(&format!("`gdrprov doctor erdma-cloud --root {rr}`")),
        "{text}"
    );
    assert!(!text.contains("`gdrprov doctor erdma-cloud`"), "{text}");
    // An error's suggestion too, with --format json kept.
    let (_, v) = json(&["plan", "no-such", "--root", &rr]);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`gdrprov profile list --format json`"),
        "{v:#}"
    );
}

#[test]
fn rollback_with_nothing_to_undo_says_so_and_writes_nothing() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let pristine = snapshot(&root);
    let (code, out, err) = run(&["rollback", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Nothing to roll back"), "{out}");
    assert!(
        !root.join("var/lib/gdrprov").exists(),
        "the state dir was created"
    );
    assert_same(&snapshot(&root), &pristine, "rollback wrote something");
    let (code, v) = json(&["rollback", "--yes", "--root", &rr]);
    assert_eq!(code, 0);
    assert_eq!(v["changed"], false, "{v:#}");
    // A generation that is not there: refused, and still nothing written.
    let (code, _, err) = run(&["rollback", "--yes", "--generation", "3", "--root", &rr]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing to roll back"), "{err}");
    assert_same(
        &snapshot(&root),
        &pristine,
        "a refused rollback wrote something",
    );
}

/// Validates a profile with this text; returns the error line.
fn profile_error(t: &Path, name: &str, text: &str) -> String {
    let f = t.join(name);
    std::fs::write(&f, text).unwrap();
    let (code, out, err) = run(&["profile", "validate", &r(&f)]);
    assert_eq!(code, 1, "{name} accepted: {out}");
    err.trim().to_string()
}

#[test]
fn profile_errors_speak_the_profiles_language() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let f = |n: &str| r(&dir.join(n));

    let e = profile_error(dir, "empty.yaml", "");
    assert!(e.contains("empty"), "{e}");
    let e = profile_error(
        dir,
        "comments.yaml",
        "# only a comment\n\n   # and another\n",
    );
    assert!(e.contains("the profile is empty"), "{e}");

    let e = profile_error(dir, "one.yaml", "modules:\n  present: nvidia_peermem\n");
    assert!(
        e.ends_with(&format!(
            "{}:2:12: modules.present: expected a list of module names, got one name (write [nvidia_peermem])",
            f("one.yaml")
        )),
        "{e}"
    );
    assert!(!e.contains("sequence start"), "{e}");

    let e = profile_error(
        dir,
        "dup.yaml",
        "modules:\n  present: [a]\nboot:\n  iommu: passthrough\nmodules:\n  absent: [b]\n",
    );
    assert!(e.contains("duplicate key `modules`"), "{e}");
    assert!(e.contains("line 1") && e.contains("line 5"), "{e}");
    assert!(!e.contains("DuplicateKeyPolicy"), "{e}");

    let e = profile_error(dir, "type.yaml", "verify:\n  loopback: maybe\n");
    assert!(
        e.contains(":2:13: verify.loopback: expected true or false, got the value `maybe`"),
        "{e}"
    );
    let e = profile_error(dir, "desc.yaml", "description: [a, b]\n");
    assert!(e.contains("description: expected a single value"), "{e}");
    let e = profile_error(dir, "unknown.yaml", "modules:\n  presnt: [a]\n");
    assert!(e.contains(":2:3: modules: unknown key `presnt`"), "{e}");

    let e = profile_error(
        dir,
        "ext.yaml",
        "description: x\nextends: [no-such-parent]\n",
    );
    assert!(
        e.contains(&format!("{}:2:1: extends: `no-such-parent`", f("ext.yaml"))),
        "{e}"
    );

    std::fs::create_dir(dir.join("adir")).unwrap();
    let (code, _, e) = run(&["plan", &f("adir"), "--no-exec", "--root", &f("adir")]);
    assert_eq!(code, 1);
    assert!(e.contains("is a directory"), "{e}");
}

#[test]
fn an_empty_profile_changes_nothing() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let rr = r(&root);
    let (code, _, err) = run(&["apply", "rdma-dmabuf", "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 0, "{err}");
    let applied = snapshot(&root);
    // A truncated copy of the profile would undo everything: refused.
    let empty = t.path().join("rdma-dmabuf.yaml");
    std::fs::write(&empty, "# truncated\n").unwrap();
    let (code, _, err) = run(&["apply", &r(&empty), "--no-exec", "--yes", "--root", &rr]);
    assert_eq!(code, 1);
    assert!(err.contains("the profile is empty"), "{err}");
    assert_same(
        &snapshot(&root),
        &applied,
        "an empty profile changed the root",
    );
}

#[test]
fn commands_of_the_running_system_refuse_another_root() {
    let root = Root::example("ubuntu-22.04-h100");
    let rr = r(&root);
    let pristine = snapshot(&root);
    for args in [
        vec!["bench", "probe", "--root", &rr],
        vec!["bench", "loopback", "--memory", "host", "--root", &rr],
        vec!["verify", "rdma-dmabuf", "--device", "mlx5_0", "--root", &rr],
        vec!["verify", "rdma-dmabuf", "--duration", "1", "--root", &rr],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, 1, "{args:?}: {out}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        // bench takes no --root (its parser refuses it); verify's loopback
        // options refuse another root.
        assert!(
            err.contains("not on --root") || err.contains("takes no --root"),
            "{args:?}: {err}"
        );
        assert!(out.is_empty(), "{args:?}: {out}");
    }
    assert_same(&snapshot(&root), &pristine, "a refusal changed the root");
}
