//! `when:` conditions through the CLI, on an example root (driver 550, x86_64).

use crate::common::*;
use crate::util::*;

const PROFILE: &str = r#"
modules:
  when: { nvidia-driver: ">= 595" }
  options:
    nvidia: "NVreg_EnableStreamMemOPs=1"
files:
  - path: /etc/gdrprov-x86.conf
    content: "x86\n"
    when: { arch: x86_64 }
  - path: /etc/gdrprov-arm.conf
    content: "arm\n"
    when: { arch: aarch64 }
"#;

#[test]
fn plan_names_what_it_skipped_and_why() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let profile = t.path().join("cond.yaml");
    std::fs::write(&profile, PROFILE).unwrap();
    let (r, p) = (root.display().to_string(), profile.display().to_string());
    let out = run(&["plan", &p, "--format", "json", "--root", &r]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let skipped: Vec<&str> = v["skipped"]
        .as_array()
        .unwrap_or_else(|| panic!("{v:#}"))
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].starts_with("modules of "), "{skipped:?}");
    assert!(skipped[0].ends_with("skipped: driver 550.127.05 is not >= 595"));
    assert!(skipped[1].ends_with("skipped: arch is x86_64, not aarch64"));
    let paths: Vec<&str> = v["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["path"].as_str())
        .collect();
    assert!(paths.contains(&"/etc/gdrprov-x86.conf"), "{paths:?}");
    assert!(!paths.contains(&"/etc/gdrprov-arm.conf"));
    assert!(!paths.contains(&"/etc/modprobe.d/gdrprov-options.conf"));

    let text = gdrprov().args(["plan", &p, "--root", &r]).output().unwrap();
    assert!(stdout_of(&text).contains("when: modules of "));
}

#[test]
fn a_bad_condition_is_refused_before_anything() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let profile = t.path().join("bad.yaml");
    std::fs::write(
        &profile,
        "modules:\n  when: { virtualization: kvm }\n  present: [nvidia_peermem]\n",
    )
    .unwrap();
    let before = snapshot(&root);
    let out = run(&[
        "apply",
        profile.to_str().unwrap(),
        "-y",
        "--root",
        root.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let e = stderr_of(&out);
    assert!(e.contains("kvm") && e.contains("virtualization"), "{e}");
    assert_eq!(before, snapshot(&root));
}
