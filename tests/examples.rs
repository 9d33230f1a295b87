//! Every shipped example is loaded and run exactly as committed: the Ansible
//! playbook (`ansible-playbook --syntax-check`, then real runs against a copy
//! of an example root), every Packer template (`packer validate`), every
//! profile in profiles/ and examples/ (`gdrprov profile validate`).
//! tests/ansible.rs drives the module with playbooks of its own; this file
//! only uses what an operator gets.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gdrprov")
}

fn ansible_playbook() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ANSIBLE_PLAYBOOK") {
        return Some(PathBuf::from(p));
    }
    let venv = repo().join("target/ansible-venv/bin/ansible-playbook");
    if venv.exists() {
        return Some(venv);
    }
    eprintln!("SKIPPED: ansible-playbook is not installed (scripts/test.sh installs ansible-core into target/ansible-venv)");
    None
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// examples/ansible copied byte for byte, with the binary at library/gdrprov
/// where its README says to put it.
fn playbook_dir(t: &Path) -> PathBuf {
    let dir = t.join("play");
    copy_tree(&repo().join("examples/ansible"), &dir);
    let lib = dir.join("library/gdrprov");
    let _ = std::fs::remove_file(&lib);
    std::os::unix::fs::symlink(bin(), lib).unwrap();
    for f in ["site.yml", "inventory.ini"] {
        assert_eq!(
            std::fs::read(dir.join(f)).unwrap(),
            std::fs::read(repo().join("examples/ansible").join(f)).unwrap()
        );
    }
    dir
}

fn ansible(bin: &Path, dir: &Path, inventory: &str, args: &[&str]) -> Output {
    // Ansible's own modules (file, copy) run with the Python ansible runs on.
    let venv_python = bin.with_file_name("python3");
    let python = if venv_python.exists() {
        venv_python.display().to_string()
    } else {
        "auto_silent".to_string()
    };
    Command::new(bin)
        .args(["-i", inventory, "site.yml"])
        .args(args)
        .current_dir(dir)
        .env("ANSIBLE_LOCAL_TEMP", dir.join("tmp"))
        .env("ANSIBLE_REMOTE_TEMP", dir.join("tmp"))
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_PYTHON_INTERPRETER", python)
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap()
}

/// The PLAY RECAP counters of the one host: (ok, changed, failed, skipped).
fn recap(out: &Output) -> (u32, u32, u32, u32) {
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = s
        .lines()
        .rev()
        .find(|l| l.contains("ok=") && l.contains("changed="))
        .unwrap_or_else(|| panic!("no recap:\n{}", text(out)));
    let n = |key: &str| -> u32 {
        let at = line.find(&format!("{key}=")).unwrap() + key.len() + 1;
        line[at..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (n("ok"), n("changed"), n("failed"), n("skipped"))
}

/// The status line Ansible printed for the task named `task`.
fn task_status(out: &Output, task: &str) -> String {
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = s
        .lines()
        .skip_while(|l| !l.starts_with(&format!("TASK [{task}")));
    lines
        .next()
        .unwrap_or_else(|| panic!("no task {task}:\n{}", text(out)));
    lines
        .find(|l| {
            ["ok:", "changed:", "skipping:", "fatal:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
        .unwrap_or_default()
        .to_string()
}

#[test]
fn shipped_playbook_passes_syntax_check() {
    let Some(ap) = ansible_playbook() else { return };
    let t = tempfile::tempdir().unwrap();
    let dir = playbook_dir(t.path());
    let out = ansible(&ap, &dir, "inventory.ini", &["--syntax-check"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// The shipped playbook against a copy of the Ubuntu example root, as the
/// operator runs it (preview, apply, run again), parameterized only by its
/// documented variables. The inventory is this machine over the local
/// connection; become is off because the test already runs as the user that
/// owns the root copy (the shipped `become: true` would need sudo).
#[test]
fn shipped_playbook_runs_against_an_example_root() {
    let Some(ap) = ansible_playbook() else { return };
    let (t, root) = example_root("ubuntu-22.04-h100");
    let dir = playbook_dir(t.path());
    let inv = t.path().join("inventory.ini");
    std::fs::write(&inv, "[gpu_nodes]\nlocalhost ansible_connection=local\n").unwrap();
    let inv = inv.display().to_string();
    let vars = |no_exec: bool| {
        format!(
            "gdrprov_root={} gdrprov_no_exec={no_exec} ansible_become=false",
            root.display()
        )
    };
    let pristine = snapshot(&root);

    // Preview: reports the changes and a diff, changes nothing.
    let out = ansible(&ap, &dir, &inv, &["--check", "--diff", "-e", &vars(true)]);
    assert!(out.status.success(), "{}", text(&out));
    let s = stdout_of(&out);
    assert!(s.contains("+++ after: /etc/nccl.conf"), "{s}");
    assert!(s.contains("iommu=pt"), "{s}");
    assert!(
        task_status(&out, "Apply the profile").starts_with("changed:"),
        "{s}"
    );
    assert!(task_status(&out, "Verify").starts_with("skipping:"), "{s}");
    assert_same(&snapshot(&root), &pristine, "check mode changed the root");

    // Apply with no command run (the example root has no GRUB): the binary
    // lands in the root's /usr/local/bin, the files are written, no reboot
    // (not the running system), nothing to verify while update-grub is owed.
    let out = ansible(&ap, &dir, &inv, &["-e", &vars(true)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(recap(&out), (3, 3, 0, 2), "{}", text(&out));
    assert!(task_status(&out, "Reboot").starts_with("skipping:"));
    let installed = root.join("usr/local/bin/gdrprov");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(bin()).unwrap()
    );
    assert!(std::fs::read_to_string(root.join("etc/nccl.conf"))
        .unwrap()
        .contains("NCCL_DMABUF_ENABLE=1"));
    assert!(std::fs::read_to_string(root.join("etc/default/grub"))
        .unwrap()
        .contains("iommu=pt"));

    // The owed commands run at the image's first real apply; settle them as
    // tests/fleet.rs does, then run the playbook as on a prepared host:
    // nothing changes and the verify task passes.
    let state_path = root.join("var/lib/gdrprov/state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    assert!(
        state["pending_commands"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "{state:#}"
    );
    state["pending_commands"] = serde_json::json!([]);
    std::fs::write(&state_path, state.to_string()).unwrap();
    let out = ansible(&ap, &dir, &inv, &["--diff", "-e", &vars(false)]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(recap(&out), (4, 0, 0, 1), "{}", text(&out));
    assert!(
        task_status(&out, "Verify").starts_with("ok:"),
        "{}",
        text(&out)
    );
}

/// Every Packer template in examples/packer passes `packer validate` with
/// only the variables its own comments ask for.
#[test]
fn shipped_packer_templates_validate() {
    let found = Command::new("sh")
        .args(["-c", "command -v packer"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("SKIPPED: packer is not installed (scripts/test.sh installs it)");
        return;
    }
    let dir = repo().join("examples/packer");
    let mut templates: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json" || e == "hcl"))
        .collect();
    templates.sort();
    assert!(templates.len() >= 2, "{templates:?}");
    for template in &templates {
        let body = std::fs::read_to_string(template).unwrap();
        let mut cmd = Command::new("packer");
        cmd.arg("validate");
        // The SSH template needs a credential; `ssh_password` is one of the
        // two it documents.
        if body.contains("\"ssh_password\"") {
            cmd.arg("-var=ssh_password=unused");
        }
        if body.contains("\"gdrprov_binary\"") {
            cmd.arg(format!("-var=gdrprov_binary={}", bin()));
        }
        // validate only checks that the file to upload exists.
        if body.contains("\"gdrprov_package\"") {
            cmd.arg(format!("-var=gdrprov_package={}", bin()));
        }
        let out = cmd
            .arg(template.file_name().unwrap())
            .current_dir(&dir)
            .env("CHECKPOINT_DISABLE", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "packer validate {}: {}",
            template.display(),
            text(&out)
        );
    }
}

/// Every profile shipped in profiles/ and examples/ (every .yaml file there;
/// the playbook is .yml) is valid.
#[test]
fn shipped_profiles_validate() {
    let mut files = Vec::new();
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() && !p.ends_with("hosts") {
                walk(&p, out);
            } else if p.extension().is_some_and(|e| e == "yaml") {
                out.push(p);
            }
        }
    }
    walk(&repo().join("profiles"), &mut files);
    walk(&repo().join("examples"), &mut files);
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    for f in &files {
        let out = gdrprov()
            .args(["profile", "validate"])
            .arg(f)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {}", f.display(), text(&out));
        assert!(stdout_of(&out).contains(": ok ("), "{}", text(&out));
    }
}
