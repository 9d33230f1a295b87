//! No file in the working directory steers a command (issue 43). Generated
//! over every command word, every built-in profile name and every program
//! name gdrprov may run: the working directory holds a file of that name
//! (an Ansible task, another profile, a program that leaves a mark), and the
//! command does exactly what it does from an empty directory.

use super::harness::{assert_unchanged, run_in, tree};
use crate::common::{stderr_of, stdout_of};
use crate::util::Root;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Every first word of a command (`fleet sweep plan` → `fleet`), and the
/// words of every command.
fn command_words() -> Vec<String> {
    let mut words: Vec<String> = gdrprov::names::ALL
        .iter()
        .flat_map(|c| c.split(' '))
        .map(str::to_string)
        .collect();
    words.sort();
    words.dedup();
    words
}

/// Commands that, run bare, may write on the machine running the tests
/// (their marker directory, the journal's lock): run bare they are left out
/// here; `is_ansible_args_path` refuses their word like every other below.
const WRITES_ON_SLASH: &[&str] = &["recheck", "recover"];

#[test]
fn a_file_named_like_any_command_word_never_runs_as_the_ansible_module() {
    let root = Root::example("ubuntu-22.04-h100");
    let task = format!(r#"{{"profile":"rdma-dmabuf","root":"{}"}}"#, root.arg());
    let before = tree(&root);
    let clean = tempfile::tempdir().unwrap();
    for word in command_words() {
        assert!(
            !gdrprov::commands::ansible::is_ansible_args_path(Path::new(&word)),
            "`{word}` could be taken for Ansible's arguments file"
        );
        if WRITES_ON_SLASH.contains(&word.as_str()) {
            continue;
        }
        let poisoned = tempfile::tempdir().unwrap();
        std::fs::write(poisoned.path().join(&word), &task).unwrap();
        let got = run_in(Some(poisoned.path()), &[&word]);
        let want = run_in(Some(clean.path()), &[&word]);
        let text = format!("{}{}", stdout_of(&got), stderr_of(&got));
        assert!(
            !text.contains("\"changed\""),
            "gdrprov {word}: ran as the module\n{text}"
        );
        assert_eq!(
            got.status.code(),
            want.status.code(),
            "gdrprov {word}: another exit\n{text}"
        );
        assert_unchanged(
            &before,
            &tree(&root),
            &format!("gdrprov {word} beside a task file"),
        );
    }
}

#[test]
fn ansible_still_reaches_the_module_through_its_arguments_file() {
    let root = Root::example("ubuntu-22.04-h100");
    let tmp = tempfile::tempdir().unwrap();
    let args = tmp.path().join("ansible-tmp-1-2").join("args");
    std::fs::create_dir_all(args.parent().unwrap()).unwrap();
    let task = format!(
        r#"{{"profile":"rdma-dmabuf","root":"{}","_ansible_check_mode":true}}"#,
        root.arg()
    );
    std::fs::write(&args, task).unwrap();
    let out = run_in(None, &[args.to_str().unwrap()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout_of(&out), stderr_of(&out)));
    assert_eq!(doc["changed"], true, "{doc:#}");
    // The same file by a relative path, or by another name, is not the module.
    for other in ["args", "./args"] {
        let out = run_in(Some(args.parent().unwrap()), &[other]);
        assert!(
            !stdout_of(&out).contains("\"changed\""),
            "{other}: {}",
            stdout_of(&out)
        );
        assert_eq!(out.status.code(), Some(1), "{other}: {}", stderr_of(&out));
    }
}

/// Under `become: true` Ansible writes the arguments file as the login user
/// (`/home/ubuntu/.ansible/tmp/ansible-tmp-X/args`) and runs gdrprov as
/// root: a file of another owner is the module's, as long as only its owner
/// may write it; one that group or others may write is not, whoever owns it.
#[test]
fn an_args_file_of_the_login_user_runs_the_module_under_become_and_a_writable_one_does_not() {
    let root = Root::example("ubuntu-22.04-h100");
    let task = format!(
        r#"{{"profile":"rdma-dmabuf","root":"{}","_ansible_check_mode":true}}"#,
        root.arg()
    );
    let tmp = tempfile::tempdir().unwrap();
    for (owner, mode, module) in [
        (65534, 0o600, true),
        (65534, 0o644, true),
        (0, 0o644, true),
        (65534, 0o666, false),
        (0, 0o666, false),
        (0, 0o620, false),
    ] {
        let dir = tmp.path().join(format!("ansible-tmp-{owner}-{mode:o}"));
        std::fs::create_dir_all(&dir).unwrap();
        let args = dir.join("args");
        std::fs::write(&args, &task).unwrap();
        std::fs::set_permissions(&args, std::fs::Permissions::from_mode(mode)).unwrap();
        std::os::unix::fs::chown(&args, Some(owner), Some(owner)).unwrap();
        let out = run_in(None, &[args.to_str().unwrap()]);
        let case = format!("args file of uid {owner}, mode {mode:o}");
        let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert_eq!(
            gdrprov::commands::ansible::is_ansible_args_path(&args),
            module,
            "{case}"
        );
        if module {
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{case}: {e}: {text}"));
            assert_eq!(doc["changed"], true, "{case}: {doc:#}");
        } else {
            assert!(
                !text.contains("\"changed\""),
                "{case}: ran as the module\n{text}"
            );
            assert_eq!(out.status.code(), Some(1), "{case}: {text}");
        }
    }
}

#[test]
fn a_file_named_like_a_built_in_profile_never_replaces_it() {
    let root = Root::example("ubuntu-22.04-h100");
    let evil = "name: evil\nfiles:\n  - path: /etc/gdrprov-evil.conf\n    content: \"owned\\n\"\n";
    let clean = tempfile::tempdir().unwrap();
    let poisoned = tempfile::tempdir().unwrap();
    let names = gdrprov::profile::builtin::names();
    for name in &names {
        std::fs::write(poisoned.path().join(name), evil).unwrap();
        std::fs::write(poisoned.path().join(format!("{name}.yaml")), evil).unwrap();
    }
    for name in &names {
        for args in [
            vec!["profile", "show", name],
            vec!["plan", name, "--root", root.arg(), "--format", "json"],
        ] {
            let got = run_in(Some(poisoned.path()), &args);
            let want = run_in(Some(clean.path()), &args);
            let case = args.join(" ");
            assert!(
                !stdout_of(&got).contains("gdrprov-evil"),
                "{case}: read the file\n{}",
                stdout_of(&got)
            );
            assert_eq!(got.status.code(), want.status.code(), "{case}");
            assert_eq!(stdout_of(&got), stdout_of(&want), "{case}: other output");
        }
    }
    // The file is used when the operator says it is a file, and a bare
    // name that is not built in says how.
    std::fs::write(poisoned.path().join("site"), evil).unwrap();
    let out = run_in(Some(poisoned.path()), &["profile", "show", "site"]);
    let text = super::harness::assert_refused(&out, "./site", "profile show site");
    assert!(text.contains("working directory"), "{text}");
    let out = run_in(Some(poisoned.path()), &["profile", "show", "./site"]);
    assert!(
        stdout_of(&out).contains("gdrprov-evil"),
        "{}",
        stderr_of(&out)
    );
}

/// The programs gdrprov may run on a host (probes and changes).
const PROGRAMS: &[&str] = &[
    "chroot",
    "modprobe",
    "lsmod",
    "modinfo",
    "nvidia-smi",
    "ibv_devinfo",
    "ibv_devices",
    "rdma",
    "ip",
    "lspci",
    "setpci",
    "update-grub",
    "grub-mkconfig",
    "grub2-mkconfig",
    "grub-editenv",
    "grub2-editenv",
    "grubby",
    "update-initramfs",
    "dracut",
    "bootctl",
    "kernel-install",
    "uname",
    "systemctl",
    "ofed_info",
    "ib_write_bw",
    "nvcc",
    "gdscheck",
    "eadm",
    "sh",
    "true",
];

#[test]
fn a_program_in_the_working_directory_is_never_run_even_with_dot_in_path() {
    let poisoned = tempfile::tempdir().unwrap();
    let mark = poisoned.path().join("ran");
    for p in PROGRAMS {
        let f = poisoned.path().join(p);
        std::fs::write(&f, format!("#!/bin/sh\necho {p} >> '{}'\n", mark.display())).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let path = format!(".::{}", std::env::var("PATH").unwrap_or_default());
    for args in [
        vec!["doctor"],
        vec!["inventory"],
        vec!["verify", "rdma-dmabuf", "--no-loopback"],
    ] {
        let out = crate::common::gdrprov()
            .current_dir(poisoned.path())
            .env("PATH", &path)
            .args(&args)
            .timeout(super::harness::LIMIT)
            .output()
            .unwrap();
        assert!(
            !mark.exists(),
            "gdrprov {}: ran {} from the working directory\n{}",
            args.join(" "),
            std::fs::read_to_string(&mark).unwrap_or_default(),
            stderr_of(&out)
        );
    }
}
