//! Profile validation where the profile is read: a bad version constraint,
//! a YAML bomb, a `#` in an NCCL value and the one-or-many forms, each an
//! error from `profile validate` naming the place and the fix.

use crate::common::*;

/// `profile validate` on TEXT: (exit code, stderr).
fn validate(text: &str) -> (Option<i32>, String) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("p.yaml");
    std::fs::write(&p, text).unwrap();
    let out = gdrprov()
        .args(["profile", "validate"])
        .arg(&p)
        .output()
        .unwrap();
    (
        out.status.code(),
        stderr_of(&out).replace(&p.display().to_string(), "p.yaml"),
    )
}

#[test]
fn a_version_constraint_that_is_not_one_is_refused_at_load_with_its_line() {
    let fix = "is not a version constraint; write an operator (>=, >, <=, <, =, !=) and a version, like \">= 5.12\"";
    for (yaml, at) in [
        (
            "name: x\nrequires:\n  kernel: \">= banana\"\n",
            "p.yaml:3:11: requires.kernel: \">= banana\"",
        ),
        (
            "requires:\n  cuda: { version: \"twelve\", severity: warn }\n",
            "p.yaml:2:20: requires.cuda.version: \"twelve\"",
        ),
        (
            "requires:\n  nvidia-driver:\n    version: \"newest\"\n",
            "p.yaml:3:14: requires.nvidia-driver.version: \"newest\"",
        ),
        (
            "requires:\n  ofed: { version: \"<\" }\n",
            "p.yaml:2:20: requires.ofed.version: \"<\"",
        ),
    ] {
        let (code, err) = validate(yaml);
        assert_eq!(code, Some(1), "{yaml}: {err}");
        assert!(err.contains(&format!("{at} {fix}")), "{yaml}: {err}");
    }
    // Good ones still load.
    let (code, err) = validate("requires:\n  kernel: \">= 5.12, < 7\"\n  nccl: { version: \"!= 2.19.3\", severity: warn }\n");
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_yaml_bomb_is_named_in_a_sentence_not_in_rust_debug_text() {
    let mut bomb = String::from("vars:\n  a: &a [x,x,x,x,x,x,x,x,x,x]\n");
    for i in 1..8 {
        let prev = if i == 1 {
            "a".to_string()
        } else {
            format!("l{}", i - 1)
        };
        bomb.push_str(&format!(
            "  l{i}: &l{i} [{}]\n",
            vec![format!("*{prev}"); 10].join(",")
        ));
    }
    let (code, err) = validate(&bomb);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        !err.contains("Nodes {") && !err.contains("budget breached"),
        "{err}"
    );
    assert!(
        err.contains("the YAML expands to more than 100000 values, counting what its aliases repeat (a YAML bomb?)"),
        "{err}"
    );
    let deep = format!("vars:\n  a: {}{}\n", "[".repeat(100), "]".repeat(100));
    let (code, err) = validate(&deep);
    assert_eq!(code, Some(1), "{err}");
    assert!(!err.contains("Depth {"), "{err}");
}

#[test]
fn an_nccl_value_with_a_hash_is_refused() {
    let (code, err) = validate("nccl:\n  NCCL_IB_HCA: \"mlx5_0 # the first NIC\"\n");
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("nccl.NCCL_IB_HCA: the value `mlx5_0 # the first NIC` contains `#`")
            && err.contains("Write `mlx5_0` and put the note in a YAML comment on its own line"),
        "{err}"
    );
    let (code, err) = validate("nccl:\n  NCCL_IB_HCA: mlx5_0 # a YAML comment is fine\n");
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn one_or_many_takes_one_or_a_list_and_says_what_else_it_wants() {
    for ok in [
        "extends: rdma-dmabuf\n",
        "extends: [rdma-dmabuf]\n",
        "network:\n  mtu: { devices: { rdma: \"erdma_*\" }, value: auto }\n",
        "network:\n  mtu: { devices: [{ rdma: \"erdma_*\" }, { name: eth1 }], value: 1400 }\n",
    ] {
        let (code, err) = validate(ok);
        assert_eq!(code, Some(0), "{ok}: {err}");
    }
    for (bad, want) in [
        ("extends: { a: 1 }\n", "p.yaml:1:10: extends: expected a profile name or a list of profile names, got map"),
        (
            "network:\n  mtu: { devices: eth0, value: 9000 }\n",
            "p.yaml:2:10: network.mtu.devices: expected a match like `{ rdma: \"erdma_*\" }`, `{ driver: NAME }`, `{ name: IFNAME }`, or a list of them, got string \"eth0\"",
        ),
        ("network:\n  mtu: { devices: { nic: eth0 }, value: 9000 }\n", "unknown key `nic`"),
    ] {
        let (code, err) = validate(bad);
        assert_eq!(code, Some(1), "{bad}: {err}");
        assert!(err.contains(want), "{bad}: {err}");
    }
}
