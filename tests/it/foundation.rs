//! The foundation end to end on copies of the example roots: plan shows the
//! diff, apply writes it, a second apply changes nothing, rollback restores
//! every byte, and every bad input is refused with nothing changed.

use crate::common::*;
use crate::util::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

fn root_arg(root: &Path) -> String {
    root.display().to_string()
}

#[test]
fn plan_shows_the_diff_and_changes_nothing() {
    let root = Root::example("ubuntu-22.04-h100");
    let before = snapshot(&root);
    let out = ok(&["plan", "rdma-dmabuf", "--root", &root_arg(&root)]);
    let text = stdout_of(&out);
    assert!(text.contains("+++ b/etc/nccl.conf"), "{text}");
    assert!(text.contains("+NCCL_DMABUF_ENABLE=1"), "{text}");
    assert!(text.contains("persistent state only"), "{text}");
    assert_same(&snapshot(&root), &before, "plan changed the root");
}

#[test]
fn detailed_exitcode_apply_idempotence_and_rollback() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.arg();
    let pristine = snapshot(&root);
    exits(
        2,
        &[
            "plan",
            "rdma-dmabuf",
            "--no-exec",
            "--detailed-exitcode",
            "--root",
            r,
        ],
    );
    let out = ok(&["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", r]);
    assert!(
        stdout_of(&out).contains("Done: generation 1"),
        "{}",
        stdout_of(&out)
    );
    let conf = std::fs::read_to_string(root.join("etc/nccl.conf")).unwrap();
    assert!(conf.starts_with("# NCCL reads this file"), "{conf}");
    assert!(conf.contains("NCCL_NET_GDR_LEVEL=PHB\n"));
    assert_eq!(
        std::fs::metadata(root.join("etc/nccl.conf"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
    // Journal and state are private.
    for p in [
        "var/lib/gdrprov/state.json",
        "var/lib/gdrprov/generations/1/journal.json",
    ] {
        let mode = std::fs::metadata(root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{p}");
    }
    assert_eq!(
        std::fs::metadata(root.join("var/lib/gdrprov"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o700
    );

    // Second apply: nothing planned, nothing written, no new generation.
    let after_first = snapshot(&root);
    gdrprov()
        .args([
            "plan",
            "rdma-dmabuf",
            "--no-exec",
            "--detailed-exitcode",
            "--root",
            r,
        ])
        .assert()
        // Files are done; the commands an apply --no-exec left are owed:
        // pending, as plan says without --no-exec too (docs/commands.md).
        .code(2)
        .stdout(predicates::str::contains("Nothing to write"));
    let out = run(&["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", r]);
    assert!(out.status.success());
    assert!(
        stdout_of(&out).contains("Nothing to write"),
        "{}",
        stdout_of(&out)
    );
    assert_same(
        &snapshot(&root),
        &after_first,
        "second apply changed something",
    );
    assert!(!root.join("var/lib/gdrprov/generations/2").exists());

    // Rollback restores every byte outside gdrprov's own state directory.
    ok(&["rollback", "--yes", "--no-exec", "--root", r]);
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine.clone()),
        "rollback did not restore every byte",
    );
    let out = gdrprov().args(["history", "--root", r]).output().unwrap();
    let h = stdout_of(&out);
    assert!(
        h.contains("rolled back by 2") && h.contains("rollback of 1:"),
        "{h}"
    );
    // Nothing left to roll back: said, exit 0 (like an apply with nothing to do).
    gdrprov()
        .args(["rollback", "--yes", "--no-exec", "--root", r])
        .assert()
        .code(0)
        .stdout(predicates::str::contains("Nothing to roll back"));
}

#[test]
fn existing_file_is_replaced_then_restored_with_its_mode() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.arg();
    let conf = root.join("etc/nccl.conf");
    std::fs::write(&conf, "NCCL_DEBUG=INFO\n").unwrap();
    std::fs::set_permissions(&conf, std::fs::Permissions::from_mode(0o640)).unwrap();
    let pristine = snapshot(&root);
    let out = run(&["plan", "rdma-dmabuf", "--root", r]);
    // gdrprov owns only its keys: the user's line stays.
    assert!(
        stdout_of(&out).contains("+NCCL_DMABUF_ENABLE=1")
            && !stdout_of(&out).contains("-NCCL_DEBUG=INFO"),
        "{}",
        stdout_of(&out)
    );
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", r]);
    assert_eq!(
        std::fs::metadata(&conf).unwrap().permissions().mode() & 0o777,
        0o640,
        "mode not kept"
    );
    ok(&["rollback", "-y", "--no-exec", "--root", r]);
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine.clone()),
        "rollback did not restore every byte",
    );
}

#[test]
fn rollback_refuses_to_overwrite_later_hand_edits_without_force() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.arg();
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", r]);
    std::fs::write(root.join("etc/nccl.conf"), "edited by hand\n").unwrap();
    let out = run(&["rollback", "-y", "--no-exec", "--root", r]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("changed after gdrprov wrote them"),
        "{}",
        stderr_of(&out)
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/nccl.conf")).unwrap(),
        "edited by hand\n"
    );
    ok(&["rollback", "-y", "--force", "--no-exec", "--root", r]);
    assert!(!root.join("etc/nccl.conf").exists());
}

#[test]
fn dropping_a_profile_file_removes_only_what_gdrprov_created() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = root_arg(&root);
    let with = t.path().join("with.yaml");
    std::fs::write(&with, "files:\n  - path: /etc/gdrprov-test.conf\n    content: \"a=1\\n\"\n  - path: /etc/nccl.conf\n    content: \"x=1\\n\"\n").unwrap();
    let without = t.path().join("without.yaml");
    std::fs::write(
        &without,
        "files:\n  - path: /etc/nccl.conf\n    content: \"x=1\\n\"\n",
    )
    .unwrap();
    ok(&["apply", with.to_str().unwrap(), "-y", "--root", &r]);
    assert!(root.join("etc/gdrprov-test.conf").exists());
    let out = ok(&["apply", without.to_str().unwrap(), "-y", "--root", &r]);
    assert!(
        stdout_of(&out).contains("Remove /etc/gdrprov-test.conf"),
        "{}",
        stdout_of(&out)
    );
    assert!(!root.join("etc/gdrprov-test.conf").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("etc/nccl.conf")).unwrap(),
        "x=1\n"
    );
}

#[test]
fn json_output_has_the_documented_shape() {
    let root = Root::example("rocky-9-a100");
    let out = run(&[
        "plan",
        "legacy-peermem",
        "--format",
        "json",
        "--root",
        &root_arg(&root),
    ]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["command"], "plan");
    assert_eq!(v["live"], false);
    assert_eq!(v["profiles"][0], "legacy-peermem");
    assert_eq!(v["changed"], true);
    let c = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "/etc/nccl.conf")
        .unwrap();
    assert_eq!(c["kind"], "write-file");
    assert_eq!(c["module"], "nccl");
    assert!(c["diff"]
        .as_str()
        .unwrap()
        .contains("+NCCL_DMABUF_ENABLE=0"));
    assert!(v["reboot_required"].is_boolean());
    assert!(v["pending_commands"].is_array());
}

#[test]
fn profiles_by_name_and_by_file_are_the_same() {
    let root = Root::example("ubuntu-22.04-h100");
    let by_name = run(&[
        "plan",
        "rdma-dmabuf",
        "--format",
        "json",
        "--root",
        &root_arg(&root),
    ]);
    let file = repo().join("profiles/rdma-dmabuf.yaml");
    let by_file = run(&[
        "plan",
        file.to_str().unwrap(),
        "--format",
        "json",
        "--root",
        &root_arg(&root),
    ]);
    assert!(by_name.status.success() && by_file.status.success());
    assert_eq!(by_name.stdout, by_file.stdout);
}

#[test]
fn extends_and_relative_templates() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let dir = t.path().join("site");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("motd.hbs"),
        "{{gdrprov_header}}\nsite {{site}} level {{nccl_net_gdr_level}}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("site.yaml"),
        "extends: rdma-dmabuf\nnccl:\n  NCCL_NET_GDR_LEVEL: PXB\nvars:\n  nccl-net-gdr-level: PXB\n  site: lab\nmodules:\n  present: [nvidia_peermem]\nfiles:\n  - path: /etc/motd\n    template: motd.hbs\n",
    )
    .unwrap();
    let out = ok(&[
        "profile",
        "show",
        dir.join("site.yaml").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = &v["profile"];
    assert_eq!(v["boot"]["iommu"], "passthrough", "parent setting lost");
    assert_eq!(v["modules"]["present"][0], "nvidia_peermem");
    assert_eq!(
        v["modules"]["absent"],
        serde_json::json!(["nv_peer_mem"]),
        "child present must cancel parent absent"
    );
    ok(&[
        "apply",
        dir.join("site.yaml").to_str().unwrap(),
        "-y",
        "--no-exec",
        "--root",
        &root_arg(&root),
    ]);
    assert!(std::fs::read_to_string(root.join("etc/motd"))
        .unwrap()
        .ends_with("site lab level PXB\n"));
    assert!(std::fs::read_to_string(root.join("etc/nccl.conf"))
        .unwrap()
        .contains("NCCL_NET_GDR_LEVEL=PXB"));
}

#[test]
fn profile_commands() {
    let out = gdrprov().args(["profile", "list"]).output().unwrap();
    let s = stdout_of(&out);
    for p in [
        "rdma-dmabuf",
        "legacy-peermem",
        "gds-iommu-off",
        "erdma-cloud",
    ] {
        assert!(s.contains(p), "{s}");
    }
    let out = gdrprov().args(["profile", "schema"]).output().unwrap();
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema["additionalProperties"], false,
        "unknown keys must be rejected by the schema too"
    );
    assert!(schema["properties"]["boot"].is_object());
    let files: Vec<String> = [
        "rdma-dmabuf",
        "legacy-peermem",
        "gds-iommu-off",
        "erdma-cloud",
    ]
    .iter()
    .map(|p| {
        repo()
            .join(format!("profiles/{p}.yaml"))
            .display()
            .to_string()
    })
    .collect();
    gdrprov()
        .arg("profile")
        .arg("validate")
        .args(&files)
        .assert()
        .success();
}

/// Runs gdrprov with `args` against a copy of an example root and checks it
/// fails with exit 1, a message containing `expect`, and no change at all.
fn refused(args: &[&str], expect: &str, setup: impl FnOnce(&Path, &Path)) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    setup(t.path(), &root);
    let before = snapshot(t.path());
    let args: Vec<String> = args
        .iter()
        .map(|a| {
            a.replace("ROOT", &root_arg(&root))
                .replace("TMP", &t.path().display().to_string())
        })
        .collect();
    let out = gdrprov().args(&args).output().unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "args {args:?}: {err}");
    assert!(
        err.contains(expect),
        "args {args:?}: expected {expect:?} in: {err}"
    );
    assert_eq!(
        err.trim().lines().count(),
        1,
        "want one clear message, got: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert_same(
        &snapshot(t.path()),
        &before,
        &format!("args {args:?} changed something"),
    );
}

#[test]
fn malformed_yaml_is_reported_with_file_line_col() {
    refused(
        &["apply", "TMP/p.yaml", "-y", "--root", "ROOT"],
        "p.yaml:3:",
        |t, _| {
            std::fs::write(
                t.join("p.yaml"),
                "boot:\n  iommu: off\n  cmdline: [unclosed\n",
            )
            .unwrap();
        },
    );
}

#[test]
fn unknown_key_names_the_key_and_position() {
    refused(
        &["apply", "TMP/p.yaml", "-y", "--root", "ROOT"],
        "p.yaml:2:3: modules: unknown key `absnt`",
        |t, _| {
            std::fs::write(t.join("p.yaml"), "modules:\n  absnt: [nvidia_peermem]\n").unwrap();
        },
    );
}

#[test]
fn unknown_profile_name() {
    refused(
        &["apply", "rdma-dmabuff", "-y", "--root", "ROOT"],
        "unknown profile `rdma-dmabuff`",
        |_, _| {},
    );
}

#[test]
fn contradicting_profiles_name_both_sources() {
    refused(&["apply", "rdma-dmabuf", "gds-iommu-off", "-y", "--root", "ROOT"], "rdma-dmabuf (built-in rdma-dmabuf) says passthrough, gds-iommu-off (built-in gds-iommu-off) says off", |_, _| {});
    refused(
        &["plan", "rdma-dmabuf", "legacy-peermem", "--root", "ROOT"],
        "module `nvidia_peermem`",
        |_, _| {},
    );
}

#[test]
fn file_paths_outside_the_root_or_relative_are_refused() {
    refused(
        &["apply", "TMP/p.yaml", "-y", "--root", "ROOT"],
        "are not allowed; write the plain path",
        |t, _| {
            std::fs::write(
                t.join("p.yaml"),
                "files:\n  - path: /etc/../../escape\n    content: x\n",
            )
            .unwrap();
        },
    );
    refused(
        &["apply", "TMP/p.yaml", "-y", "--root", "ROOT"],
        "must be absolute",
        |t, _| {
            std::fs::write(
                t.join("p.yaml"),
                "files:\n  - path: etc/x.conf\n    content: x\n",
            )
            .unwrap();
        },
    );
}

#[test]
fn template_that_fails_to_render() {
    refused(
        &["apply", "TMP/p.yaml", "-y", "--root", "ROOT"],
        "failed to render",
        |t, _| {
            std::fs::write(t.join("t.hbs"), "value={{no_such_variable}}\n").unwrap();
            std::fs::write(
                t.join("p.yaml"),
                "files:\n  - path: /etc/x.conf\n    template: t.hbs\n",
            )
            .unwrap();
        },
    );
}

#[test]
fn missing_root() {
    refused(
        &["apply", "rdma-dmabuf", "-y", "--root", "TMP/no-such-dir"],
        "does not exist",
        |_, _| {},
    );
}

#[test]
fn kernel_argument_with_shell_syntax() {
    refused(
        &["plan", "TMP/p.yaml", "--root", "ROOT"],
        "contains a dollar sign",
        |t, _| {
            std::fs::write(
                t.join("p.yaml"),
                "boot:\n  cmdline:\n    present: [\"x=$(reboot)\"]\n",
            )
            .unwrap();
        },
    );
}

#[test]
fn apply_without_yes_and_without_a_terminal_is_refused() {
    refused(
        &["apply", "rdma-dmabuf", "--root", "ROOT"],
        "pass --yes",
        |_, _| {},
    );
}

#[test]
fn a_held_lock_is_refused() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("var/lib/gdrprov")).unwrap();
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(root.join("var/lib/gdrprov/lock"))
        .unwrap();
    let _held = nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusiveNonblock).unwrap();
    let before = snapshot(t.path());
    let out = run(&["apply", "rdma-dmabuf", "-y", "--root", &root_arg(&root)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("holds the lock"),
        "{}",
        stderr_of(&out)
    );
    assert_same(
        &snapshot(t.path()),
        &before,
        "a refused apply changed something",
    );
}

#[test]
fn not_root_when_writing_to_slash() {
    // Run as `nobody` through util-linux's setpriv when we are root; as
    // ourselves when we already are not.
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin);
        c
    } else {
        std::process::Command::new(&bin)
    };
    let out = cmd
        .args(["apply", "rdma-dmabuf", "-y", "--root", "/"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert!(
        stderr_of(&out).contains("needs root privileges"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn an_apply_killed_half_way_is_put_back_by_the_next_run() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = root_arg(&root);
    std::fs::write(root.join("etc/two.conf"), "old two\n").unwrap();
    let p = t.path().join("p.yaml");
    std::fs::write(&p, "files:\n  - path: /etc/one.conf\n    content: \"new one\\n\"\n  - path: /etc/two.conf\n    content: \"new two\\n\"\n").unwrap();
    let pristine = snapshot(&root);
    let out = gdrprov()
        .env("GDRPROV_FAULT_AFTER_STEP", "1")
        .args(["apply", p.to_str().unwrap(), "-y", "--root", &r])
        .output()
        .unwrap();
    assert!(!out.status.success(), "fault hook did not fire");
    // Half-way: the first file is new, the second wholly old.
    assert_eq!(
        std::fs::read_to_string(root.join("etc/one.conf")).unwrap(),
        "new one\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/two.conf")).unwrap(),
        "old two\n"
    );
    // The next apply names the interrupted generation and the fix, and
    // changes nothing; `recover` puts file one back; apply then applies in full.
    let out = exits(1, &["apply", p.to_str().unwrap(), "-y", "--root", &r]);
    let err = stderr_of(&out);
    assert!(
        err.contains("generation 1 (apply of") && err.contains("`gdrprov recover --root"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/one.conf")).unwrap(),
        "new one\n"
    );
    let out = ok(&["recover", "-y", "--root", &r]);
    assert!(
        stderr_of(&out).contains("generation 1 (apply of"),
        "{}",
        stderr_of(&out)
    );
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine.clone()),
        "recover did not put every file back",
    );
    ok(&["apply", p.to_str().unwrap(), "-y", "--root", &r]);
    assert_eq!(
        std::fs::read_to_string(root.join("etc/two.conf")).unwrap(),
        "new two\n"
    );
    ok(&["rollback", "-y", "--no-exec", "--root", &r]);
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine.clone()),
        "rollback did not restore every byte",
    );
}

#[test]
fn commands_in_an_image_root_need_root_unless_no_exec() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    // Let `nobody` write the copy, so only the chroot is missing.
    let chown = |p: &Path| {
        std::process::Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(p)
            .status()
            .unwrap();
    };
    if !nix::unistd::geteuid().is_root() {
        return; // Running as a normal user already: covered by the plain run below.
    }
    chown(t.path());
    let bin = assert_cmd::cargo::cargo_bin("gdrprov");
    let as_nobody = |extra: &[&str]| {
        std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&bin)
            .args(["apply", "rdma-dmabuf", "-y", "--root", &root_arg(&root)])
            .args(extra)
            .output()
            .unwrap()
    };
    let before = snapshot(t.path());
    let out = as_nobody(&[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("needs root") && stderr_of(&out).contains("--no-exec"),
        "{}",
        stderr_of(&out)
    );
    assert_same(&snapshot(t.path()), &before, "refused apply");
    let out = as_nobody(&["--no-exec"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
}
