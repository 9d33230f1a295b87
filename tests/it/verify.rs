//! `gdrprov verify`: checks pass, fail with their cause, or are skipped with
//! the reason; exit 0 ready, 3 not ready.

use crate::common::*;
use crate::util::*;

#[test]
fn an_image_root_is_verified_for_configuration_only() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let p = t.path().join("files-only.yaml");
    std::fs::write(
        &p,
        "files:\n  - path: /etc/nccl.conf\n    content: \"NCCL_DMABUF_ENABLE=1\\n\"\n",
    )
    .unwrap();
    let p = p.to_str().unwrap();
    let out = run(&["verify", p, "--root", &r]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout_of(&out));
    assert!(
        stdout_of(&out).contains(
            "FAIL  configuration  1 difference(s) from the profile: Create /etc/nccl.conf"
        ),
        "{}",
        stdout_of(&out)
    );
    ok(&["apply", p, "-y", "--root", &r]);
    let out = run(&["verify", p, "--root", &r, "--format", "json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ready"], true);
    let statuses: Vec<(&str, &str)> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("requirements", "skip"),
            ("configuration", "pass"),
            ("mtu", "skip"),
            ("acs", "skip"),
            // The readiness checks (src/checks/health): what the root's sysfs shows; no
            // links or kernel log in this example, no measurement off the running system.
            ("pcie-links", "skip"),
            ("copy-bandwidth", "skip"),
            ("kernel-log", "skip"),
            ("gpu-health", "skip"),
            ("nvlink", "skip"),
            ("gpu-fabric", "skip"),
            ("gpu-p2p", "skip"),
            ("nccl-allreduce", "skip"),
            ("rdma-ports", "pass"),
            ("gpu-nic-affinity", "pass"),
            ("reboot", "skip"),
            ("modules", "skip"),
            ("loopback", "skip")
        ]
    );
}

#[test]
fn commands_still_owed_mean_not_ready() {
    let root = Root::example("ubuntu-22.04-h100");
    let r = root.display().to_string();
    ok(&["apply", "rdma-dmabuf", "-y", "--no-exec", "--root", &r]);
    let out = run(&["verify", "rdma-dmabuf", "--root", &r]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stdout_of(&out).contains("still owed: `update-grub`"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn on_the_running_system_each_missing_piece_is_named() {
    // This machine is the running system: a module that is not loaded, and
    // no RDMA device (or no libibverbs) for the loopback.
    let (t, _root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("mods.yaml");
    std::fs::write(&p, "modules:\n  absent: [gdrprov_test_never_loaded]\n").unwrap();
    let out = run(&["verify", p.to_str().unwrap(), "--format", "json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = |n: &str| check_named(&v, n);
    assert_eq!(check("modules")["status"], "pass", "{v}");
    let lb = check("loopback");
    if lb["status"] == "fail" {
        let d = lb["detail"].as_str().unwrap();
        assert!(
            d.contains("RDMA") || d.contains("libibverbs"),
            "loopback failure must name its cause: {d}"
        );
        assert_eq!(out.status.code(), Some(3));
    }
    let out = run(&["verify", p.to_str().unwrap(), "--no-loopback"]);
    assert!(
        stdout_of(&out).contains("skip  loopback"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn bad_loopback_options_are_one_clear_error() {
    for args in [
        &["--duration=-1"][..],
        &["--duration", "NaN"][..],
        &["--min-gbps", "0"][..],
        &["--device", "rxe0:x"][..],
    ] {
        let out = gdrprov()
            .args([
                "verify",
                "rdma-dmabuf",
                "--root",
                "/nonexistent-root-is-checked-later",
            ])
            .args(args)
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
    }
}
