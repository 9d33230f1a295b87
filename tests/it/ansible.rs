//! gdrprov as an Ansible binary module, driven by real ansible-core
//! (installed into target/ansible-venv by scripts/test.sh) against localhost
//! and a copy of an example root: check mode with --diff reports a change and
//! changes nothing, apply changes, a second apply changes nothing.

use crate::common::*;
use std::path::{Path, PathBuf};

fn ansible_playbook() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ANSIBLE_PLAYBOOK") {
        return Some(PathBuf::from(p));
    }
    let venv = repo().join("target/ansible-venv/bin/ansible-playbook");
    if venv.exists() {
        return Some(venv);
    }
    std::process::Command::new("ansible-playbook")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| PathBuf::from("ansible-playbook"))
}

/// Runs the playbook; returns the module's result for localhost.
fn play(bin: &Path, dir: &Path, extra: &[&str]) -> serde_json::Value {
    // The Python modules (copy) run with the Python ansible itself runs on.
    let venv_python = bin.with_file_name("python3");
    let python = if venv_python.exists() {
        venv_python.display().to_string()
    } else {
        "auto_silent".to_string()
    };
    let out = std::process::Command::new(bin)
        .args(["-i", "localhost,", "-c", "local", "site.yml"])
        .args(extra)
        .current_dir(dir)
        .env("ANSIBLE_LOCAL_TEMP", dir.join("tmp"))
        .env("ANSIBLE_REMOTE_TEMP", dir.join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_PYTHON_INTERPRETER", python)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    // ansible-core has no json stdout callback (that is ansible.posix's), so
    // the playbook writes the registered result to result.json.
    assert!(
        out.status.success(),
        "ansible-playbook failed:\n{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    let text = std::fs::read_to_string(dir.join("result.json")).unwrap();
    std::fs::remove_file(dir.join("result.json")).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn check_mode_diff_then_apply_then_idempotent() {
    let Some(bin) = ansible_playbook() else {
        eprintln!("SKIPPED: ansible-playbook is not installed (scripts/test.sh installs ansible-core into target/ansible-venv)");
        return;
    };
    let (t, root) = example_root("ubuntu-22.04-h100");
    let dir = t.path().join("play");
    std::fs::create_dir_all(dir.join("library")).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_gdrprov"), dir.join("library/gdrprov")).unwrap();
    std::fs::write(
        dir.join("site.yml"),
        format!(
            "- hosts: all\n  gather_facts: false\n  tasks:\n    - gdrprov:\n        profile: rdma-dmabuf\n        root: {}\n        no_exec: true\n      register: r\n    - copy:\n        content: \"{{{{ r | to_json }}}}\"\n        dest: {}/result.json\n      check_mode: false\n      diff: false\n",
            root.display(),
            dir.display()
        ),
    )
    .unwrap();
    let pristine = snapshot(&root);

    let check = play(&bin, &dir, &["--check", "--diff"]);
    assert_eq!(check["changed"], true, "{check:#}");
    let diff = check["diff"].as_array().expect("a diff list");
    let nccl = diff
        .iter()
        .find(|d| d["after_header"] == "/etc/nccl.conf")
        .unwrap_or_else(|| panic!("{diff:#?}"));
    assert_eq!(nccl["before"], "");
    assert!(nccl["after"]
        .as_str()
        .unwrap()
        .contains("NCCL_DMABUF_ENABLE=1"));
    assert!(diff.iter().any(|d| d["after_header"] == "/etc/default/grub"
        && d["after"].as_str().unwrap().contains("iommu=pt")));
    assert_eq!(check["reboot_required"], true, "{check:#}");
    assert_eq!(check["plan"]["command"], "plan");
    assert_same(&snapshot(&root), &pristine, "check mode changed the root");

    let apply = play(&bin, &dir, &[]);
    assert_eq!(apply["changed"], true, "{apply:#}");
    assert_eq!(apply["plan"]["outcome"]["generation"], 1, "{apply:#}");
    assert!(std::fs::read_to_string(root.join("etc/nccl.conf"))
        .unwrap()
        .contains("NCCL_DMABUF_ENABLE=1"));

    let again = play(&bin, &dir, &["--diff"]);
    assert_eq!(again["changed"], false, "{again:#}");
    assert_eq!(again["diff"], serde_json::json!([]), "{again:#}");
}

#[test]
fn module_mode_without_ansible() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let args = t.path().join("args.json");
    let pristine = snapshot(&root);
    // Errors are one JSON object with failed: true, exit 1.
    std::fs::write(
        &args,
        r#"{"profile": "no-such-profile", "no_exec": true, "root": "/nonexistent-root"}"#,
    )
    .unwrap();
    let out = gdrprov().arg(&args).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["failed"], true, "{v}");
    assert_eq!(v["changed"], false);
    assert!(
        v["msg"].as_str().unwrap().contains("no-such-profile"),
        "{v}"
    );
    // Rolled back with nothing applied: no change.
    std::fs::write(
        &args,
        format!(
            r#"{{"state": "rolled_back", "no_exec": true, "root": "{}"}}"#,
            root.display()
        ),
    )
    .unwrap();
    let out = gdrprov()
        .args(["ansible-module".as_ref(), args.as_os_str()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["changed"], false, "{v}");
    assert_eq!(v["failed"], false, "{v}");
    // Apply; verify fails (with --no-exec update-grub is still owed, and msg says so); roll back.
    for (state, changed) in [
        ("applied", true),
        ("verified", false),
        ("rolled_back", true),
    ] {
        std::fs::write(
            &args,
            format!(
                r#"{{"profile": "rdma-dmabuf", "state": "{state}", "no_exec": true, "root": "{}", "_ansible_check_mode": false}}"#,
                root.display()
            ),
        )
        .unwrap();
        let out = gdrprov().arg(&args).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["changed"], changed, "{state}: {v}");
        if state == "verified" {
            assert_eq!(out.status.code(), Some(1));
            assert_eq!(v["failed"], true, "{v}");
            let msg = v["msg"].as_str().unwrap();
            assert!(
                msg.starts_with("not ready: configuration:")
                    && msg.contains("still owed: `update-grub`"),
                "{msg}"
            );
        } else {
            assert_eq!(v["failed"], false, "{state}: {v}");
        }
    }
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "apply then rollback through the module",
    );
}

/// Runs the module with these arguments (a JSON object's body); returns
/// (exit code, result).
fn module(t: &Path, body: &str) -> (i32, serde_json::Value) {
    let args = t.join("args.json");
    std::fs::write(&args, format!("{{{body}}}")).unwrap();
    let out = gdrprov().arg(&args).output().unwrap();
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout_of(&out)));
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn module_results_are_what_an_operator_expects() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let rr = root.display().to_string();
    let pristine = snapshot(&root);

    // force with state=verified would be ignored: refused, nothing changed.
    let (code, v) = module(
        t.path(),
        &format!(r#""profile": "rdma-dmabuf", "state": "verified", "force": true, "root": "{rr}""#),
    );
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["failed"], true);
    assert!(
        v["msg"]
            .as_str()
            .unwrap()
            .contains("force does nothing with state=verified"),
        "{v}"
    );
    assert_same(
        &snapshot(&root),
        &pristine,
        "a refused verify changed the root",
    );

    // Check mode with diff: every reason once, the commands in the diff.
    let (code, v) = module(
        t.path(),
        &format!(
            r#""profile": "rdma-dmabuf", "root": "{rr}", "_ansible_check_mode": true, "_ansible_diff": true"#
        ),
    );
    assert_eq!(code, 0, "{v}");
    let reasons: Vec<&str> = v["reboot_reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| r.contains("iommu=pt")).count(),
        1,
        "{reasons:#?}"
    );
    let prepared: Vec<&str> = v["diff"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["prepared"].as_str())
        .collect();
    assert!(
        prepared.iter().any(|p| p.contains("update-grub")),
        "the diff shows no command: {:#}",
        v["diff"]
    );
    assert_same(&snapshot(&root), &pristine, "check mode changed the root");

    // A forced requirement warns on the run that changes something, not on
    // every later run.
    let forced = t.path().join("new-kernel.yaml");
    std::fs::write(
        &forced,
        "extends: [rdma-dmabuf]\nrequires:\n  kernel: \">= 99\"\n",
    )
    .unwrap();
    let body = format!(
        r#""profile": "{}", "root": "{rr}", "no_exec": true, "force": true"#,
        forced.display()
    );
    let (code, first) = module(t.path(), &body);
    assert_eq!(code, 0, "{first}");
    assert_eq!(first["changed"], true);
    assert!(
        first["warnings"]
            .to_string()
            .contains("requirement (forced): kernel"),
        "{first:#}"
    );
    let (code, again) = module(t.path(), &body);
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["changed"], false, "{again:#}");
    assert_eq!(again["warnings"], serde_json::json!([]), "{again:#}");
}

/// A report of one root as one of the other: the root's path named alike, the times a
/// check took and the envelope (which the module's result leaves to Ansible) aside.
fn comparable(v: &serde_json::Value, root: &Path) -> serde_json::Value {
    fn strip(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => {
                o.remove("duration_seconds");
                o.values_mut().for_each(strip);
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    // The command line's JSON keeps `--format json` in the commands it
    // suggests (issue 45); the module's result, read by a person in Ansible's
    // output, keeps only the root.
    let text = v
        .to_string()
        .replace(&root.display().to_string(), "ROOT")
        .replace(" --format json`", "`");
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    strip(&mut v);
    if let Some(o) = v.as_object_mut() {
        for envelope in ["format_version", "gdrprov", "command"] {
            o.remove(envelope);
        }
    }
    v
}

/// Issue 44: the module and the command line reach the same operations (`ops::plan`,
/// `apply`, `verify`, `rollback`). On two copies of one example root, each task's result
/// carries the report the command of that name gives, and the trees end alike.
#[test]
fn the_module_and_the_command_line_reach_the_same_operations() {
    let (t, m) = example_root("ubuntu-22.04-h100");
    let (_c_dir, c) = example_root("ubuntu-22.04-h100");
    let pristine = snapshot(&c);
    let cli = |args: &[&str]| {
        let out = gdrprov()
            .args(args)
            .args([
                "--root".as_ref(),
                c.as_os_str(),
                "--format".as_ref(),
                "json".as_ref(),
            ])
            .output()
            .unwrap();
        (out.status.code().unwrap_or(-1), json_of(&out))
    };
    let task = |body: &str| {
        module(
            t.path(),
            &format!(r#"{body}, "root": "{}", "no_exec": true"#, m.display()),
        )
    };
    let same = |what: &str, from_module: &serde_json::Value, from_cli: &serde_json::Value| {
        assert_eq!(
            comparable(from_module, &m),
            comparable(from_cli, &c),
            "{what}: the module's result is not the command's report"
        );
    };

    let (_, planned) = task(r#""profile": "rdma-dmabuf", "_ansible_check_mode": true"#);
    let (code, plan) = cli(&["plan", "rdma-dmabuf", "--no-exec"]);
    assert_eq!(code, 0, "{plan}");
    assert_eq!(planned["plan"]["command"], plan["command"]);
    same("check mode / plan", &planned["plan"], &plan);

    let (_, applied) = task(r#""profile": "rdma-dmabuf""#);
    let (code, apply) = cli(&["apply", "rdma-dmabuf", "--no-exec", "--yes"]);
    assert_eq!(code, 0, "{apply}");
    assert_eq!(applied["plan"]["command"], apply["command"]);
    same("applied / apply", &applied["plan"], &apply);
    assert_same(
        &without_state(snapshot(&m)),
        &without_state(snapshot(&c)),
        "the module's apply and the command's",
    );

    let (_, verified) = task(r#""profile": "rdma-dmabuf", "state": "verified""#);
    let (_, verify) = cli(&["verify", "rdma-dmabuf"]);
    same("verified / verify", &verified["verify"], &verify);
    assert_eq!(verified["ready"], verify["ready"]);

    // Check mode shows what `rollback` asks about, and declines.
    let (_, would) = task(r#""state": "rolled_back", "_ansible_check_mode": true"#);
    let (code, rollback) = cli(&["rollback", "--no-exec", "--yes"]);
    assert_eq!(code, 0, "{rollback}");
    assert_eq!(would["msg"], "would roll back [1]", "{would}");
    same(
        "rolled_back in check mode / rollback's changes",
        &would["plan"]["changes"],
        &rollback["changes"],
    );
    let (_, rolled) = task(r#""state": "rolled_back""#);
    same("rolled_back / rollback", &rolled["plan"], &rollback);
    assert_same(
        &without_state(snapshot(&m)),
        &without_state(pristine),
        "apply then rollback through the module, beside the command line",
    );
}
