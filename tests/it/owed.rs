//! Commands owed by `apply --no-exec` (docs/commands.md, "Commands owed by
//! `apply --no-exec`"), settled the way the doc and verify say: verify's own
//! fix, `gdrprov apply PROFILE --root DIR` run as printed where the commands
//! can run (here a chroot with a real /bin/sh), runs them and clears them
//! from `state.json`; verify then passes. A command run by hand is not
//! recognised, and the doc says so.

use crate::common::{gdrprov, stdout_of};
use crate::reliability::{chroot_root, is_root};

#[test]
fn verifys_fix_for_owed_commands_runs_them_and_verify_then_passes() {
    if !is_root() {
        eprintln!("SKIPPED: a chroot root with a real /bin/sh needs root (CI runs as root)");
        return;
    }
    let (_t, root) = chroot_root(false);
    let r = root.display().to_string();
    let out = gdrprov()
        .args(["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", &r])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root", &r])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(3), "{text}");
    assert!(text.contains("still owed: `update-grub`"), "{text}");
    // The fix verify prints, run as printed (--yes: no terminal to ask on).
    let fix = text
        .split('`')
        .find(|s| s.starts_with("gdrprov apply "))
        .unwrap_or_else(|| panic!("no `gdrprov apply ...` in:\n{text}"));
    assert_eq!(fix, format!("gdrprov apply rdma-dmabuf --root {r}"));
    let words = shlex::split(fix).unwrap();
    let out = gdrprov().args(&words[1..]).arg("--yes").output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = gdrprov()
        .args(["verify", "rdma-dmabuf", "--root", &r])
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("PASS  configuration"), "{text}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("var/lib/gdrprov/state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["pending_commands"],
        serde_json::json!([]),
        "{state:#}"
    );
}
