//! Fleet and image-build glue with the real tools: the first-boot unit
//! (`systemd-analyze verify`), Packer templates (`packer validate`, and a
//! real `packer build` of the chroot template into a copy of an example
//! root), Prometheus metrics, shell completions and the manual page.

use crate::common::*;
use crate::util::*;
use std::path::{Path, PathBuf};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gdrprov")
}

/// A profile file that installs the first-boot unit, pointing at the test binary.
fn first_boot_profile(dir: &Path) -> PathBuf {
    let p = dir.join("fb.yaml");
    std::fs::write(
        &p,
        format!(
            "extends: rdma-dmabuf\nverify: {{ first-boot: true }}\nvars:\n  gdrprov-bin: {}\n  first-boot-profiles: rdma-dmabuf\n",
            bin()
        ),
    )
    .unwrap();
    p
}

const UNIT: &str = "etc/systemd/system/gdrprov-verify.service";
const WANTS: &str = "etc/systemd/system/multi-user.target.d/gdrprov-verify.conf";

#[test]
fn first_boot_unit_is_installed_verified_by_systemd_and_rolled_back() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let profile = first_boot_profile(t.path());
    let p = profile.display().to_string();
    let pristine = snapshot(&root);
    ok(&["apply", &p, "--yes", "--no-exec", "--root", &r]);
    let unit = std::fs::read_to_string(root.join(UNIT)).unwrap();
    assert!(unit.starts_with("# Managed by gdrprov"), "{unit}");
    assert!(
        unit.contains(&format!(
            "\nExecStart={} verify --marker-dir /run/gdrprov rdma-dmabuf\n",
            bin()
        )),
        "{unit}"
    );
    assert!(unit.contains("Type=oneshot"));
    assert!(!unit.contains("commit"), "no trial, no commit: {unit}");
    let wants = std::fs::read_to_string(root.join(WANTS)).unwrap();
    assert!(
        wants.ends_with("[Unit]\nWants=gdrprov-verify.service\n"),
        "{wants}"
    );

    if have("systemd-analyze") {
        {
            let file = UNIT;
            let out = std::process::Command::new("systemd-analyze")
                .args(["verify", &root.join(file).display().to_string()])
                .output()
                .unwrap();
            assert!(
                out.status.success() && stderr_of(&out).trim().is_empty(),
                "systemd-analyze verify {file}: {}{}",
                stdout_of(&out),
                stderr_of(&out)
            );
        }
    }

    // A trial apply: the unit commits once verify passes.
    ok(&["apply", &p, "--trial", "--yes", "--no-exec", "--root", &r]);
    let unit = std::fs::read_to_string(root.join(UNIT)).unwrap();
    assert!(
        unit.contains(&format!("\nExecStartPost={} commit --yes\n", bin())),
        "{unit}"
    );
    // Verify compares with the trial's configuration: only the commands
    // --no-exec left owed stand between it and ready.
    let out = run(&["verify", &p, "--root", &r, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let detail = v["checks"][1]["detail"].as_str().unwrap().to_string();
    assert!(
        !detail.contains("Create") && !detail.contains("Update"),
        "{detail}"
    );

    // Rollback of both generations removes the unit and the drop-in.
    ok(&[
        "rollback",
        "--generation",
        "1",
        "--yes",
        "--no-exec",
        "--root",
        &r,
    ]);
    // Every file is back, and the directories apply created (etc/systemd/
    // system/multi-user.target.d and its parents) are gone again.
    assert!(!root.join("etc/systemd/system/multi-user.target.d").exists());
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of the first-boot unit",
    );
}

#[test]
fn first_boot_needs_loadable_profile_names() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("site.yaml");
    std::fs::write(&p, "extends: rdma-dmabuf\nverify: { first-boot: true }\n").unwrap();
    let out = run(&[
        "plan",
        &p.display().to_string(),
        "--root",
        &root.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out)
            .contains("`site` is not a built-in profile; set vars: { first-boot-profiles:"),
        "{}",
        stderr_of(&out)
    );
    std::fs::write(
        &p,
        "extends: rdma-dmabuf\nverify: { first-boot: true }\nvars: { first-boot-profiles: \"a;b\" }\n",
    )
    .unwrap();
    let out = run(&[
        "plan",
        &p.display().to_string(),
        "--root",
        &root.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("which systemd would interpret"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn verify_writes_markers_and_prometheus_textfile() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let markers = t.path().join("run/gdrprov");
    let prom = t.path().join("gdrprov.prom");
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root", &r, "--marker-dir"])
        .arg(&markers)
        .arg("--textfile")
        .arg(&prom)
        .args(["--format", "prometheus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let failed = std::fs::read_to_string(markers.join("failed")).unwrap();
    assert!(failed.starts_with("not ready rdma-dmabuf\n"), "{failed}");
    assert!(failed.contains("FAIL configuration:"), "{failed}");
    assert!(!markers.join("ready").exists());
    let text = stdout_of(&out);
    let file = std::fs::read_to_string(&prom).unwrap();
    // The file and stdout carry the same samples (the timestamp may tick).
    let strip = |s: &str| -> String {
        s.lines()
            .filter(|l| !l.starts_with("gdrprov_verify_timestamp_seconds"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&text), strip(&file));
    assert!(text.contains("# TYPE gdrprov_check_ok gauge"), "{text}");
    assert!(
        text.contains("gdrprov_check_ok{check=\"configuration\",profiles=\"rdma-dmabuf\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("gdrprov_ready{profiles=\"rdma-dmabuf\"} 0"),
        "{text}"
    );
    // No stray temp files beside the textfile.
    let names: Vec<String> = std::fs::read_dir(t.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");

    // After an apply (no commands owed) the marker flips to ready.
    ok(&["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", &r]);
    // --no-exec leaves update-grub owed; an image root is ready once it ran, so
    // settle it the way the image's first boot would: record it as done.
    let state_path = root.join("var/lib/gdrprov/state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    state["pending_commands"] = serde_json::json!([]);
    std::fs::write(&state_path, state.to_string()).unwrap();
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root", &r, "--marker-dir"])
        .arg(&markers)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(markers.join("ready").exists());
    assert!(!markers.join("failed").exists());

    // Other commands refuse the prometheus format.
    let out = run(&[
        "plan",
        "rdma-dmabuf",
        "--root",
        &r,
        "--format",
        "prometheus",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("`gdrprov plan` writes --format text or json, not \"prometheus\"")
    );
}

#[test]
fn completions_and_man_page() {
    for shell in ["bash", "zsh", "fish"] {
        let out = gdrprov().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}");
        let text = stdout_of(&out);
        for sub in ["apply", "rollback", "verify", "ansible-module"] {
            assert!(text.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    if have("bash") {
        let out = gdrprov().args(["completions", "bash"]).output().unwrap();
        let script = format!(
            "{}\nCOMP_WORDS=(gdrprov ap); COMP_CWORD=1; COMP_LINE='gdrprov ap'; COMP_POINT=10; _gdrprov gdrprov ap gdrprov; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            stdout_of(&out)
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            stdout_of(&out).lines().any(|l| l == "apply"),
            "{}{}",
            stdout_of(&out),
            stderr_of(&out)
        );
    }
    let out = gdrprov().arg("man").output().unwrap();
    assert!(out.status.success());
    let roff = stdout_of(&out);
    assert!(
        roff.starts_with(".ie") || roff.contains(".TH gdrprov"),
        "{roff}"
    );
    assert!(
        roff.contains(".SH NAME") && roff.contains(".SH SUBCOMMANDS"),
        "{roff}"
    );
}

#[test]
fn packer_templates_validate_and_the_chroot_one_builds() {
    if !have("packer") {
        return;
    }
    let dir = repo().join("examples/packer");
    for (template, extra) in [
        (
            "gdrprov.json",
            // validate only checks that the package to upload exists.
            vec![
                "-var".to_string(),
                "ssh_password=unused".to_string(),
                format!("-var=gdrprov_package={}", bin()),
            ],
        ),
        ("gdrprov-chroot.json", Vec::new()),
    ] {
        let out = std::process::Command::new("packer")
            .arg("validate")
            .args(&extra)
            .arg(format!("-var=gdrprov_binary={}", bin()))
            .arg(template)
            .current_dir(&dir)
            .env("CHECKPOINT_DISABLE", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "packer validate {template}: {}{}",
            stdout_of(&out),
            stderr_of(&out)
        );
    }
    // A real build of the chroot template into a copy of an example root
    // (--no-exec: the example has no GRUB to run).
    let (t, root) = example_root("ubuntu-22.04-h100");
    let out = std::process::Command::new("packer")
        .args(["build", "-color=false"])
        .arg(format!("-var=gdrprov_binary={}", bin()))
        .arg(format!("-var=image_root={}", root.display()))
        .arg("-var=gdrprov_args=--no-exec")
        .arg("gdrprov-chroot.json")
        .current_dir(&dir)
        .env("CHECKPOINT_DISABLE", "1")
        .env("PACKER_CACHE_DIR", t.path().join("packer_cache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "packer build: {}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(root.join("usr/local/bin/gdrprov").exists());
    let unit = std::fs::read_to_string(root.join(UNIT)).unwrap();
    assert!(
        unit.contains("verify --marker-dir /run/gdrprov --textfile /var/lib/node_exporter/textfile_collector/gdrprov.prom /etc/gdrprov/site.yaml"),
        "{unit}"
    );
    assert!(root.join("etc/gdrprov/site.yaml").exists());
    assert!(root.join(WANTS).exists());
}
