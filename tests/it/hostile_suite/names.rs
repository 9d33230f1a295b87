//! One grammar per kind of name, numbers in range, output that cannot break
//! what reads it (issue 43). Generated, not listed: every entry point that
//! takes a name (the options of clap's tree that take one, the lines of the
//! files they name, the file names of a results directory, the fields of a
//! profile) x every hostile name; every numeric option x every hostile
//! number; a full standard output for a few commands. Each case: exit 1, no
//! panic, a message naming the entry point, the value shown (never a raw CR
//! or ESC, never a forged line), one JSON document under `--format json`,
//! and the inputs (or the root) unchanged.
//!
//! The grammars are `src/grammar.rs`; `grammar::tests` covers them alone.

use super::harness::{assert_unchanged, tree, LIMIT};
use crate::common::{gdrprov, stderr_of, stdout_of};
use crate::util::Root;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::process::Output;

/// A hostile name, and a piece of it the refusal must show (None: nothing
/// to show, the empty name).
struct Bad {
    label: &'static str,
    value: String,
    mark: Option<&'static str>,
}

fn bad_names() -> Vec<Bad> {
    let b = |label, value: &str, mark| Bad {
        label,
        value: value.to_string(),
        mark,
    };
    vec![
        b("empty", "", None),
        b("dot-dot", "..", Some("..")),
        b("slash", "a/b", Some("a/b")),
        // The issue's forged plan line.
        b("newline", "gpu9\n7 evilA evilB mlx5_0", Some("evilA")),
        b("carriage-return", "ok\rforged", Some("forged")),
        b("escape", "x\u{1b}[31mred", Some("[31mred")),
        b("command-substitution", "$(id)", Some("$(id)")),
        b("semicolon", "a;b", Some("a;b")),
        b("space", "a b", Some("a b")),
        b("leading-dash", "-x", Some("-x")),
        b("overlong", &"a".repeat(300), Some("aaaaaaaaaa")),
    ]
}

/// Runs gdrprov with `args` in a scratch directory, with a deadline.
fn run(args: &[OsString]) -> Output {
    let scratch = tempfile::tempdir().unwrap();
    gdrprov()
        .current_dir(scratch.path())
        .args(args)
        .timeout(LIMIT)
        .output()
        .unwrap()
}

fn os(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// The refusal every case asserts, text and JSON: exit 1, no panic, the
/// entry point named, the value shown, no raw CR or ESC and no line of the
/// output that the value began.
#[track_caller]
fn assert_refusal(args: &[OsString], needle: &str, bad: &Bad) {
    let case = format!("{} <- {}", needle, bad.label);
    let out = run(args);
    let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{case}: exit {:?}\n{text}",
        out.status.code()
    );
    assert!(!text.contains("panicked"), "{case}: it panicked\n{text}");
    assert!(
        text.to_lowercase().contains(&needle.to_lowercase()),
        "{case}: the message does not name `{needle}`\n{text}"
    );
    if let Some(mark) = bad.mark {
        assert!(
            text.contains(mark),
            "{case}: the value is not shown\n{text}"
        );
    }
    assert!(
        !text.contains('\r') && !text.contains('\u{1b}'),
        "{case}: a raw CR or ESC reached the output\n{text:?}"
    );
    assert!(
        !text.lines().any(|l| l.starts_with("7 evilA")),
        "{case}: the value forged a line\n{text}"
    );
    // The same under --format json: one JSON document, an error in it.
    let mut json = os(&["--format", "json"]);
    json.extend(args.iter().cloned());
    let out = run(&json);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{case} (json)\n{}",
        stderr_of(&out)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{case} (json): not one JSON document ({e}): {}",
            stdout_of(&out)
        )
    });
    // An error document, or `profile validate`'s report of each file.
    let refused = doc["error"]["message"].is_string()
        || (doc["ok"] == false && doc["files"][0]["error"]["message"].is_string());
    assert!(refused, "{case} (json): {doc}");
}

/// `fleet sweep report`'s inputs: results of two nodes in round 1.
fn results_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    crate::sweep::write_pair(d.path(), 1, "gpu1", "gpu2", "mlx5_0", 96.0);
    crate::sweep::write_pair(d.path(), 1, "gpu3", "gpu4", "mlx5_0", 96.0);
    d
}

fn path(p: &Path) -> OsString {
    p.as_os_str().to_os_string()
}

/// Node names: `--nodelist` (after expansion), `--hosts FILE` lines,
/// `--drained`/`--probation` lines, for `plan` and `report`.
#[test]
fn every_node_name_entry_refuses_every_bad_name() {
    let inputs = tempfile::tempdir().unwrap();
    let results = results_dir();
    let before = tree(results.path());
    for bad in bad_names() {
        let list = format!("gpu1,gpu2,{}", bad.value);
        let file = inputs.path().join(format!("hosts-{}", bad.label));
        std::fs::write(&file, format!("gpu1\ngpu2\n{}\n", bad.value)).unwrap();
        let drained = inputs.path().join(format!("drained-{}", bad.label));
        std::fs::write(&drained, format!("{}|gdrprov: x\n", bad.value)).unwrap();
        for opt in ["--drained", "--probation"] {
            let mut a = os(&["fleet", "sweep", "report"]);
            a.extend([path(results.path()), opt.into(), path(&drained)]);
            assert_refusal(&a, opt, &bad);
        }
        if bad.label == "empty" {
            // An empty name in a host list or file is no name (a blank
            // line): the list is the two others.
            continue;
        }
        for cmd in [
            &["fleet", "sweep", "plan"][..],
            &["fleet", "sweep", "report"],
        ] {
            let mut base = os(cmd);
            if cmd[2] == "report" {
                base.push(path(results.path()));
            }
            let mut a = base.clone();
            a.push(format!("--nodelist={list}").into());
            assert_refusal(&a, "--nodelist", &bad);
            let mut a = base.clone();
            a.extend([OsString::from("--hosts"), path(&file)]);
            assert_refusal(&a, "--hosts", &bad);
        }
    }
    // Not UTF-8: refused as such, on the command line and in a file.
    let mut a = os(&["fleet", "sweep", "plan", "--nodelist"]);
    a.push(OsString::from_vec(b"gpu1,g\xffx".to_vec()));
    let out = run(&a);
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    let file = inputs.path().join("hosts-binary");
    std::fs::write(&file, b"gpu1\ng\xffx\n").unwrap();
    let out = run(&[
        os(&["fleet", "sweep", "plan", "--hosts"]),
        vec![path(&file)],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
    assert_unchanged(&before, &tree(results.path()), "results");
}

/// Result file names (`A+B.json`, `A+B+RAIL.json`) and `--verify-dir`'s
/// `NODE.json`: every bad name the file system allows in a file's name.
#[test]
fn every_name_in_a_results_file_name_is_refused() {
    for bad in bad_names() {
        if bad.value.is_empty() || bad.value.contains('/') || bad.value.len() > 200 {
            continue; // not a file name the OS allows (overlong: > 255 bytes with the rest)
        }
        for (which, name) in [
            ("listener", format!("{}+gpu2.json", bad.value)),
            ("client", format!("gpu1+{}.json", bad.value)),
            ("rail", format!("gpu1+gpu2+{}.json", bad.value)),
        ] {
            let results = results_dir();
            std::fs::write(results.path().join("round-1").join(&name), "{}").unwrap();
            let before = tree(results.path());
            let a = [
                os(&["fleet", "sweep", "report"]),
                vec![path(results.path())],
            ]
            .concat();
            let b = Bad {
                label: which,
                value: bad.value.clone(),
                mark: bad.mark,
            };
            assert_refusal(&a, "LISTENER+CLIENT", &b);
            assert_unchanged(&before, &tree(results.path()), &name);
        }
        let results = results_dir();
        let verify = tempfile::tempdir().unwrap();
        std::fs::write(
            verify.path().join(format!("{}.json", bad.value)),
            r#"{"profiles": ["rdma-dmabuf"], "checks": []}"#,
        )
        .unwrap();
        let a = [
            os(&["fleet", "sweep", "report"]),
            vec![
                path(results.path()),
                "--verify-dir".into(),
                path(verify.path()),
            ],
        ]
        .concat();
        assert_refusal(&a, "--verify-dir", &bad);
    }
    // A round directory's number past the highest round or past u32 (it
    // wrapped to round 0 before): refused, naming it.
    for round in ["round-10001", "round-4294967297", "r99999999999999999999"] {
        let results = results_dir();
        let d = results.path().join(round);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::rename(
            results.path().join("round-1/gpu1+gpu2+mlx5_0.json"),
            d.join("gpu1+gpu2+mlx5_0.json"),
        )
        .unwrap();
        let b = Bad {
            label: "round",
            value: round.into(),
            mark: Some("past the highest"),
        };
        let a = [
            os(&["fleet", "sweep", "report"]),
            vec![path(results.path())],
        ]
        .concat();
        assert_refusal(&a, round, &b);
    }
    // A name that is not UTF-8.
    let results = results_dir();
    let name = OsStr::from_bytes(b"g\xff+gpu2.json");
    std::fs::write(results.path().join("round-1").join(name), "{}").unwrap();
    let out = run(&[
        os(&["fleet", "sweep", "report"]),
        vec![path(results.path())],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(1), "{}", stderr_of(&out));
}

/// A verify report's `profiles` become the fix command: a name that is not
/// a profile name is never pasted into a shell line. The report is a
/// document the node wrote: its node is said and not judged (src/docs),
/// the rest of the sweep goes on.
#[test]
fn a_verify_reports_profiles_are_profile_names() {
    for bad in bad_names() {
        if ["$(id)", "a;b", "a b"].contains(&bad.value.as_str()) {
            continue; // a profile name may hold these: the command quotes it
        }
        let results = results_dir();
        let verify = tempfile::tempdir().unwrap();
        let doc = serde_json::json!({"profiles": ["rdma-dmabuf", bad.value], "ready": false, "checks": []});
        std::fs::write(verify.path().join("gpu1.json"), doc.to_string()).unwrap();
        let a = [
            os(&["fleet", "sweep", "report"]),
            vec![
                path(results.path()),
                "--verify-dir".into(),
                path(verify.path()),
            ],
        ]
        .concat();
        let case = format!("profiles <- {}", bad.label);
        let out = run(&a);
        let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert_eq!(out.status.code(), Some(0), "{case}\n{text}");
        assert!(
            text.contains("profiles[1]") && text.contains("not judged"),
            "{case}\n{text}"
        );
        assert!(
            !text.contains("gdrprov apply"),
            "{case}: a fix command was made\n{text}"
        );
        assert!(
            !text.contains('\r') && !text.contains('\u{1b}'),
            "{case}: a raw CR or ESC reached the output\n{text:?}"
        );
    }
}

/// Rails: `--rails`, and the RDMA device options of bench and verify.
#[test]
fn every_rail_option_refuses_every_bad_name() {
    let mut entries: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["fleet", "sweep", "plan", "--nodelist", "gpu[1-4]"],
            "--rails",
        ),
        (vec!["bench", "loopback"], "--device"),
        (vec!["bench", "loopback"], "--to"),
        (vec!["bench", "probe"], "--device"),
        (vec!["bench", "pair", "--listen"], "--device"),
        (
            vec!["verify", "rdma-dmabuf", "--root", "/nonexistent"],
            "--device",
        ),
    ];
    entries.sort();
    for bad in bad_names() {
        for (cmd, opt) in &entries {
            let value = if *opt == "--rails" {
                format!("mlx5_0,{}", bad.value)
            } else {
                bad.value.clone()
            };
            let mut a = os(cmd);
            a.push(format!("{opt}={value}").into());
            assert_refusal(&a, opt, &bad);
        }
    }
}

/// A dual-port HCA's rails carry a port (`mlx4_0:1`, `mlx4_0:2`): `--rails`
/// takes them, and a result file named `A+B+mlx4_0:1.json` is read, its
/// rail as named.
#[test]
fn a_rail_with_a_port_is_a_rail() {
    let out = run(&os(&[
        "fleet",
        "sweep",
        "plan",
        "--nodelist",
        "gpu[1-4]",
        "--rails",
        "mlx4_0:1,mlx4_0:2",
    ]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("mlx4_0:1,mlx4_0:2"),
        "{}",
        stdout_of(&out)
    );
    let d = tempfile::tempdir().unwrap();
    for rail in ["mlx4_0:1", "mlx4_0:2"] {
        crate::sweep::write_pair(d.path(), 1, "gpu1", "gpu2", rail, 96.0);
        crate::sweep::write_pair(d.path(), 1, "gpu3", "gpu4", rail, 96.0);
    }
    let a = [
        os(&["fleet", "sweep", "report"]),
        vec![path(d.path()), "--format".into(), "json".into()],
    ]
    .concat();
    let out = run(&a);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["measurements"], 4, "{v:#}");
    for bad in ["mlx4_0:0", "mlx4_0:256", "mlx4_0:x", "all:1"] {
        let out = run(&os(&[
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "gpu[1-4]",
            "--rails",
            bad,
        ]));
        assert_eq!(out.status.code(), Some(1), "{bad}: {}", stdout_of(&out));
    }
}

/// Real names at the grammar's edges pass: an Ansible inventory's FQDNs
/// over 64 bytes in `--hosts` (up to 253, labels up to 63), and an IPv6
/// peer with a zone (`fe80::1%ib0`).
#[test]
fn long_host_names_and_zoned_peers_pass() {
    let d = tempfile::tempdir().unwrap();
    let fqdn = |i: u32| {
        format!(
            "gpu{i:03}.{}.{}.example.com",
            "rack".repeat(15),
            "pod".repeat(20)
        )
    };
    let hosts: Vec<String> = (1..=4).map(fqdn).collect();
    assert!(hosts[0].len() > 64 && hosts[0].len() <= 253);
    let file = d.path().join("hosts");
    std::fs::write(&file, hosts.join("\n") + "\n").unwrap();
    let a = [
        os(&["fleet", "sweep", "plan", "--hosts"]),
        vec![path(&file)],
    ]
    .concat();
    let out = run(&a);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(stdout_of(&out).contains(&hosts[3]), "{}", stdout_of(&out));
    std::fs::write(&file, format!("{}.example\n", "a".repeat(64))).unwrap();
    let out = run(&a);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a 64-byte label: {}",
        stdout_of(&out)
    );
    for peer in ["fe80::1%ib0", "[fe80::1%ib0]:18515"] {
        let mut a = os(&["verify", "rdma-dmabuf", "--root", "/nonexistent"]);
        a.push(format!("--peer={peer}").into());
        let out = run(&a);
        let err = stderr_of(&out);
        assert!(
            !err.contains("--peer") && !err.contains("not a peer"),
            "{peer}: {err}"
        );
    }
}

/// Peers: `bench pair PEER` and `verify --peer HOST[:PORT]`.
#[test]
fn every_peer_entry_refuses_every_bad_name() {
    for bad in bad_names() {
        let a = [os(&["bench", "pair", "--"]), vec![bad.value.clone().into()]].concat();
        assert_refusal(&a, "PEER", &bad);
        let mut a = os(&["verify", "rdma-dmabuf", "--root", "/nonexistent"]);
        a.push(format!("--peer={}", bad.value).into());
        assert_refusal(&a, "--peer", &bad);
    }
}

/// Writes a profile whose `key` line is `key: VALUE` (VALUE as a YAML
/// double-quoted string), extending the built-in.
fn profile(dir: &Path, file: &str, body: &str) -> OsString {
    let p = dir.join(file);
    std::fs::write(&p, body).unwrap();
    path(&p)
}

/// Profile names (`name:`, a file's stem), `extends:` entries, profile
/// arguments, and module names in every list of `modules:`; through
/// `profile validate` and `plan` on a root that stays as it was.
#[test]
fn every_profile_and_module_name_entry_refuses_every_bad_name() {
    let root = Root::example("ubuntu-22.04-h100");
    let before = tree(&root);
    let dir = tempfile::tempdir().unwrap();
    for bad in bad_names() {
        let q = serde_json::to_string(&bad.value).unwrap(); // a YAML double-quoted string
        let mut cases: Vec<(OsString, &str)> = vec![
            (
                profile(dir.path(), "ext.yaml", &format!("extends: [{q}]\n")),
                "extends",
            ),
            (
                profile(
                    dir.path(),
                    "mp.yaml",
                    &format!("modules: {{ present: [{q}] }}\n"),
                ),
                "modules.present",
            ),
            (
                profile(
                    dir.path(),
                    "ma.yaml",
                    &format!("modules: {{ absent: [{q}] }}\n"),
                ),
                "modules.absent",
            ),
            (
                profile(
                    dir.path(),
                    "mb.yaml",
                    &format!("modules: {{ absent: [nouveau], allow-blocking: [{q}] }}\n"),
                ),
                "modules.allow-blocking",
            ),
            (
                profile(
                    dir.path(),
                    "mo.yaml",
                    &format!("modules: {{ options: {{ {q}: \"a=1\" }} }}\n"),
                ),
                "modules.options",
            ),
        ];
        // A profile's name may hold a space, `;` or `$(…)`: it is quoted where it is used.
        if !["$(id)", "a;b", "a b"].contains(&bad.value.as_str()) {
            cases.push((
                profile(
                    dir.path(),
                    "nm.yaml",
                    &format!("name: {q}\nextends: rdma-dmabuf\n"),
                ),
                "profile name",
            ));
        }
        for (file, needle) in cases {
            let mark = if needle == "extends" { None } else { bad.mark };
            let b = Bad {
                label: bad.label,
                value: bad.value.clone(),
                mark,
            };
            assert_refusal(
                &[os(&["profile", "validate"]), vec![file.clone()]].concat(),
                needle,
                &b,
            );
            let a = [os(&["plan", "--root", root.arg(), "--"]), vec![file]].concat();
            assert_refusal(&a, needle, &b);
        }
        // The profile argument itself: a built-in name or a file, nothing else.
        let a = [
            os(&["plan", "--root", root.arg(), "--"]),
            vec![bad.value.clone().into()],
        ]
        .concat();
        let b = Bad {
            label: bad.label,
            value: bad.value.clone(),
            mark: None,
        };
        assert_refusal(&a, "profile", &b);
    }
    assert_unchanged(&before, &tree(&root), "plan with bad names");
}

/// Two spellings of one module, two profiles of one name: refused.
#[test]
fn one_module_or_one_profile_name_twice_is_refused() {
    let root = Root::example("ubuntu-22.04-h100");
    let before = tree(&root);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases: Vec<(Vec<OsString>, &str)> = vec![
        (
            vec![profile(
                d,
                "both.yaml",
                "modules: { present: [nvidia-peermem], absent: [nvidia_peermem] }\n",
            )],
            "both modules.present and modules.absent",
        ),
        (
            vec![
                "rdma-dmabuf".into(),
                profile(
                    d,
                    "site.yaml",
                    "name: rdma-dmabuf\nnccl: { NCCL_DEBUG: WARN }\n",
                ),
            ],
            "two profiles are named `rdma-dmabuf`",
        ),
        (
            vec![
                profile(d, "one.yaml", "name: same\nnccl: { NCCL_DEBUG: WARN }\n"),
                profile(d, "two.yaml", "name: same\nnccl: { NCCL_DEBUG: INFO }\n"),
            ],
            "two profiles are named `same`",
        ),
        (
            vec![profile(d, "ext2.yaml", "extends: [one, two]\n")],
            "two profiles are named `same`",
        ),
    ];
    let none = Bad {
        label: "twice",
        value: String::new(),
        mark: None,
    };
    for (profiles, needle) in cases {
        assert_refusal(
            &[os(&["plan", "--root", root.arg()]), profiles].concat(),
            needle,
            &none,
        );
    }
    assert_unchanged(&before, &tree(&root), "plan with names twice");
}

/// A file that `extends:` names is quoted in no error unless it is a
/// profile: `extends: /etc/shadow` must not print the hash.
#[test]
fn extends_never_quotes_a_file_that_is_not_a_profile() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("shadow");
    std::fs::write(&secret, "root:$6$SECRETHASH:19000:0:99999:7:::\n").unwrap();
    let p = profile(
        dir.path(),
        "p.yaml",
        &format!("extends: [{}]\n", secret.display()),
    );
    for format in ["text", "json"] {
        let out = run(&[
            os(&["--format", format, "profile", "validate"]),
            vec![p.clone()],
        ]
        .concat());
        let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert_eq!(out.status.code(), Some(1), "{text}");
        assert!(
            !text.contains("SECRETHASH"),
            "{format}: the file is quoted\n{text}"
        );
        assert!(text.contains("not a profile"), "{text}");
    }
}

/// Every numeric option of clap's tree (that an operator gives) x inf,
/// NaN, -5, its own out-of-range value, 2^32+1.
#[test]
fn every_numeric_option_is_finite_and_in_range() {
    const PAST_U32: &str = "4294967297";
    let plan = ["fleet", "sweep", "plan", "--nodelist", "gpu[1-4]"];
    let report = ["fleet", "sweep", "report", "/nonexistent"];
    let sim = ["fleet", "sweep", "simulate"];
    let table: Vec<(&[&str], &str, &str, bool)> = vec![
        // (command, option, an out-of-range value, 2^32+1 refused too)
        (&plan, "--partners", "0", true),
        (&plan, "--max-rounds", "10001", true),
        (&plan, "--relative", "1.5", true),
        (&plan, "--floor", "1.5", true),
        (&plan, "--min-partners", "0", true),
        (&plan, "--min-gbps", "0", true),
        (&report, "--drain-percent", "101", true),
        (&report, "--max-drain", "65537", true),
        (&sim, "--nodes", "1", true),
        (&sim, "--rails", "0", true),
        (&sim, "--bad-nodes", "100000", true),
        (&sim, "--bad-rails", "100000000", true),
        (&sim, "--bad-paths", "100000000", true),
        (&sim, "--noise", "1", true),
        (&sim, "--slow", "1.5", true),
        (&sim, "--max-rounds", "65", true),
        (&sim, "--pair-seconds", "0", true),
        (&["bench", "loopback"], "--gpu", "1024", true),
        (&["bench", "loopback"], "--duration", "0", true),
        (&["bench", "loopback"], "--iters", "0", false),
        (&["bench", "loopback"], "--qps", "65", true),
        (&["bench", "loopback"], "--tx-depth", "8193", true),
        (&["bench", "loopback"], "--gid-index", "256", true),
        (&["bench", "loopback"], "--min-fraction", "1.5", true),
        (&["bench", "loopback"], "--min-gbps", "0", true),
        (&["bench", "pair", "--listen"], "--port", "65536", true),
        (&["bench", "pair", "--listen"], "--timeout", "86401", true),
        (&["bench", "pair", "--listen"], "--check-iters", "0", true),
        (&["bench", "copy"], "--gpu", "1024", true),
        (&["bench", "copy"], "--runs", "0", true),
        (&["bench", "copy"], "--min-fraction", "0", true),
        (&["bench", "copy"], "--min-gbs", "0", true),
        (&["bench", "copy", "--concurrent"], "--samples", "0", true),
        (&["bench", "p2p"], "--gpu", "1024", true),
        (&["bench", "p2p"], "--samples", "0", true),
        (&["bench", "nccl"], "--gpu", "1024", true),
        (&["bench", "nccl"], "--iters", "0", true),
        (&["bench", "nccl"], "--init-timeout", "0", true),
        (
            &["rollback", "--root", "/nonexistent"],
            "--generation",
            "0",
            false,
        ),
        (
            &["verify", "rdma-dmabuf", "--root", "/nonexistent"],
            "--duration",
            "86400",
            true,
        ),
        (
            &["verify", "rdma-dmabuf", "--root", "/nonexistent"],
            "--min-gbps",
            "0",
            true,
        ),
    ];
    for (cmd, opt, out_of_range, past_u32) in table {
        let mut values = vec!["inf", "NaN", "-5", out_of_range];
        if past_u32 {
            values.push(PAST_U32);
        }
        for v in values {
            let b = Bad {
                label: "number",
                value: v.to_string(),
                mark: None,
            };
            let mut a = os(cmd);
            a.push(format!("{opt}={v}").into());
            assert_refusal(&a, opt, &b);
        }
    }
}

/// Every clap error is prefixed and escaped as gdrprov's own: a value's
/// newline (an unknown subcommand, a value not among the possible ones, an
/// unknown option) never begins a line, so no forged `gdrprov: error:`.
#[test]
fn a_clap_error_never_lets_a_value_begin_a_line() {
    let forged = "\ngdrprov: error: x\r\u{1b}[2K";
    let cases: Vec<Vec<String>> = vec![
        vec![format!("plan{forged}")],
        vec!["--format".into(), format!("a{forged}"), "plan".into()],
        vec![
            "--color".into(),
            format!("a{forged}"),
            "profile".into(),
            "list".into(),
        ],
        vec!["profile".into(), format!("--x{forged}")],
        vec!["completions".into(), format!("bash{forged}")],
    ];
    for args in cases {
        let out = run(&args.iter().map(OsString::from).collect::<Vec<_>>());
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        let errors = err
            .lines()
            .filter(|l| l.starts_with("gdrprov: error:"))
            .count();
        assert_eq!(errors, 1, "{args:?}: a forged line\n{err}");
        assert!(
            err.lines().all(|l| l.starts_with("gdrprov: ")),
            "{args:?}: a line not gdrprov's\n{err}"
        );
        assert!(
            !err.contains('\r') && !err.contains('\u{1b}'),
            "{args:?}: {err:?}"
        );
    }
}

/// A standard output that cannot be written (`> /dev/full`) is exit 1 with
/// a message, said once (`man` said it twice), never a panic (exit 101),
/// in text and JSON.
#[test]
fn a_full_standard_output_is_an_error() {
    let full = Path::new("/dev/full");
    if std::fs::OpenOptions::new().write(true).open(full).is_err() {
        eprintln!("SKIPPED: no /dev/full here");
        return;
    }
    let root = Root::example("ubuntu-22.04-h100");
    let before = tree(&root);
    for args in [
        &["profile", "list"][..],
        &["man"],
        &["completions", "bash"],
        &["profile", "schema"],
        &["plan", "rdma-dmabuf", "--root", root.arg()],
        &["fleet", "sweep", "plan", "--nodelist", "gpu[1-8]"],
        &[
            "fleet",
            "sweep",
            "simulate",
            "--nodes",
            "16",
            "--rails",
            "2",
            "--bad-nodes",
            "1",
            "--bad-rails",
            "1",
        ],
    ] {
        // man, completions and profile schema write one fixed output: no --format.
        let fixed = matches!(args, ["man"] | ["completions", _] | ["profile", "schema"]);
        for format in ["text", "json"] {
            let given: &[&str] = if fixed { &[] } else { &["--format", format] };
            // assert_cmd gives a child no other stdout: std's Command, for quick commands.
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_gdrprov"))
                .args(given)
                .args(args)
                .stdout(std::fs::OpenOptions::new().write(true).open(full).unwrap())
                .output()
                .unwrap();
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?} {format}: {err}");
            assert!(!err.contains("panicked"), "{args:?} {format}: {err}");
            let said = err
                .lines()
                .filter(|l| l.contains("could not write to standard output"))
                .count();
            assert_eq!(said, 1, "{args:?} {format}: {err}");
        }
    }
    assert_unchanged(&before, &tree(&root), "plan > /dev/full");
}
