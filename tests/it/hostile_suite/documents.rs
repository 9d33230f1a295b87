//! Strict types for every document gdrprov reads as data (issue 43),
//! generated: every reader of a document × every wrong shape.
//!
//! Readers (entry points): `fleet sweep report`'s results directory (one
//! node's every result file of the shape), `fleet sweep report
//! --verify-dir` (one node's verify report), and the same results as the only
//! ones (`fleet sweep report` and `fleet sweep plan --retest`, which then have
//! nothing else to read: a refusal). Shapes: a number as a string, negative,
//! huge and NaN numbers, a missing field, null, the wrong top-level type, an
//! empty file, not JSON, another major format (refused by name), and a newer
//! minor with fields it adds (read as usual).
//!
//! Asserted: a refusal (exit 1) names the file and the field; the sweep
//! report instead says the node (the file, the field) and does not judge it
//! (not drained, no verdict, exit 0), the rest of the report as without it;
//! the tree unchanged. The pure parts (each document type × each shape,
//! including inside an `--all-nics` rail) are `gdrprov::docs::tests`.

use super::harness::{assert_refused, assert_unchanged, run_in, tree};
use crate::common::{stderr_of, stdout_of};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// A document read by gdrprov: a good one, the pointer of a value it reads
/// (and that field's name in messages), and of a field it needs.
struct Doc {
    name: &'static str,
    value: (&'static str, &'static str),
    needed: (&'static str, &'static str),
}

const PAIR: Doc = Doc {
    name: "pair result",
    value: ("/results/0/average_gbps", "results[0].average_gbps"),
    needed: ("/results", "results"),
};
const VERIFY: Doc = Doc {
    name: "verify report",
    value: ("/ready", "ready"),
    needed: ("/checks", "checks"),
};

/// A wrong shape: its name, the bytes made from a good document, the
/// field a refusal names (None: the whole file), a word of the refusal;
/// `accepted`: read as usual.
struct Shape {
    name: &'static str,
    bytes: Vec<u8>,
    field: Option<&'static str>,
    word: &'static str,
    accepted: bool,
}

fn set(doc: &Value, pointer: &str, v: Option<Value>) -> Value {
    let mut d = doc.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let m = d.pointer_mut(parent).unwrap();
    match (m, v) {
        (Value::Object(m), Some(v)) => {
            m.insert(key.into(), v);
        }
        (Value::Object(m), None) => {
            m.remove(key);
        }
        (Value::Array(a), Some(v)) => a[key.parse::<usize>().unwrap()] = v,
        _ => panic!("{pointer}"),
    }
    d
}

fn shapes(doc: &Doc, good: &Value) -> Vec<Shape> {
    let (ptr, field) = doc.value;
    let as_value = |v: Value| set(good, ptr, Some(v)).to_string().into_bytes();
    let current = good.pointer(ptr).unwrap().clone();
    let shape = |name, bytes, field, word| Shape {
        name,
        bytes,
        field,
        word,
        accepted: false,
    };
    let nan = set(good, ptr, Some(json!("@NAN@")))
        .to_string()
        .replace("\"@NAN@\"", "NaN")
        .into_bytes();
    vec![
        shape(
            "number as string",
            as_value(json!(current.to_string())),
            Some(field),
            "invalid type: string",
        ),
        shape("negative", as_value(json!(-4)), Some(field), field),
        shape("huge", as_value(json!(1e300)), Some(field), field),
        shape("NaN", nan, None, "not JSON"),
        shape("null", as_value(Value::Null), Some(field), field),
        shape(
            "missing field",
            set(good, doc.needed.0, None).to_string().into_bytes(),
            Some(doc.needed.1),
            "missing",
        ),
        shape(
            "wrong top-level type",
            json!([good]).to_string().into_bytes(),
            None,
            "a JSON array",
        ),
        shape("empty file", Vec::new(), None, "empty"),
        shape("not JSON", b"<html>502</html>".to_vec(), None, "not JSON"),
        shape(
            "other major",
            set(good, "/format_version", Some(json!("2.0")))
                .to_string()
                .into_bytes(),
            Some("format_version"),
            "written by format 2.x",
        ),
        Shape {
            name: "newer minor with extra fields",
            bytes: set(
                &set(good, "/format_version", Some(json!("1.9"))),
                "/added_in_1_9",
                Some(json!({"rails": "not what you think", "average_gbps": "x"})),
            )
            .to_string()
            .into_bytes(),
            field: None,
            word: "",
            accepted: true,
        },
    ]
}

/// Eight nodes' results (n5 slow on mlx5_1: drained), and verify reports
/// saying n5's modules are wrong (so it is fixed rather than drained).
fn fleet(dir: &Path) -> (PathBuf, PathBuf) {
    let res = dir.join("res");
    crate::sweep::results(&res);
    let ver = dir.join("verify");
    std::fs::create_dir_all(&ver).unwrap();
    std::fs::write(ver.join("n5.json"), verify_doc().to_string()).unwrap();
    (res, ver)
}

fn verify_doc() -> Value {
    json!({"gdrprov": "0.1.0", "command": "verify", "root": "/", "profiles": ["rdma-dmabuf"],
        "ready": false, "checks": [{"name": "modules", "status": "fail",
        "detail": "loaded but must be absent: nvidia_peermem"}]})
}

/// n5's result files.
fn files_of(res: &Path, node: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for round in std::fs::read_dir(res).unwrap() {
        for f in std::fs::read_dir(round.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            if stem.split('+').take(2).any(|n| n == node) {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn report(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let out = run_in(
        Some(dir),
        &[
            &["fleet", "sweep", "report", "res", "--format", "json"],
            args,
        ]
        .concat(),
    );
    let stdout = stdout_of(&out);
    let text = format!("{stdout}{}", stderr_of(&out));
    assert!(!text.contains("panicked"), "{text}");
    let v = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (out.status.code(), v, text)
}

/// What the report does with n5: its verdicts' actions and whether Slurm drains it.
fn n5(v: &Value) -> (Vec<String>, bool) {
    let actions = v["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["node"] == "n5")
        .map(|x| x["action"].as_str().unwrap().to_string())
        .collect();
    let drained = v["slurm"]["drain"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a["node"] == "n5");
    (actions, drained)
}

/// The report says the file and the field, and judges nothing of n5.
#[track_caller]
fn said_not_judged(v: &Value, file: &str, s: &Shape, case: &str) {
    let unread = v["unread"].as_array().unwrap();
    let u = unread
        .iter()
        .find(|u| u["file"].as_str().unwrap().ends_with(file))
        .unwrap_or_else(|| panic!("{case}: {file} not said: {v:#}"));
    assert!(
        u["nodes"].as_array().unwrap().iter().any(|n| n == "n5"),
        "{case}: {u}"
    );
    assert_eq!(u["field"].as_str(), s.field, "{case}: {u}");
    let problem = u["problem"].as_str().unwrap();
    assert!(problem.contains(s.word), "{case}: {problem}");
    if let Some(f) = s.field {
        assert!(
            problem.contains(&format!("field `{f}`")),
            "{case}: {problem}"
        );
    }
    assert_eq!(n5(v), (Vec::new(), false), "{case}: n5 judged: {v:#}");
}

#[test]
fn every_document_reader_refuses_every_wrong_shape_by_file_and_field() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let (res, ver) = fleet(d);
    // As is: n5 is drained for mlx5_1, or fixed with its verify report.
    let (code, v, text) = report(d, &[]);
    assert_eq!(code, Some(0), "{text}");
    assert_eq!(n5(&v), (vec!["drain".to_string()], true), "{v:#}");
    let (_, v, _) = report(d, &["--verify-dir", "verify"]);
    assert_eq!(n5(&v).0, vec!["fix".to_string()], "{v:#}");

    let n5_files = files_of(&res, "n5");
    assert!(n5_files.len() >= 2);
    let good_pair: Value = serde_json::from_slice(&std::fs::read(&n5_files[0]).unwrap()).unwrap();
    let originals: Vec<Vec<u8>> = n5_files.iter().map(|f| std::fs::read(f).unwrap()).collect();

    // Reader 1: the results directory, every file of n5 of the shape.
    for s in shapes(&PAIR, &good_pair) {
        let case = format!("{} x {}", PAIR.name, s.name);
        for f in &n5_files {
            std::fs::write(f, &s.bytes).unwrap();
        }
        let before = tree(d);
        let (code, v, text) = report(d, &[]);
        assert_eq!(code, Some(0), "{case}: {text}");
        if s.accepted {
            assert!(v["unread"].as_array().unwrap().is_empty(), "{case}: {v:#}");
        } else {
            let name = n5_files[0].file_name().unwrap().to_str().unwrap();
            said_not_judged(&v, name, &s, &case);
            // The rest is judged: n5's partners are not blamed.
            assert!(
                v["verdicts"].as_array().unwrap().is_empty(),
                "{case}: {v:#}"
            );
        }
        assert_unchanged(&before, &tree(d), &case);
    }
    for (f, o) in n5_files.iter().zip(&originals) {
        std::fs::write(f, o).unwrap();
    }

    // Reader 2: --verify-dir, n5's report of the shape.
    for s in shapes(&VERIFY, &verify_doc()) {
        let case = format!("{} x {}", VERIFY.name, s.name);
        std::fs::write(ver.join("n5.json"), &s.bytes).unwrap();
        let before = tree(d);
        let (code, v, text) = report(d, &["--verify-dir", "verify"]);
        assert_eq!(code, Some(0), "{case}: {text}");
        if s.accepted {
            assert_eq!(n5(&v).0, vec!["fix".to_string()], "{case}: {v:#}");
        } else {
            said_not_judged(&v, "n5.json", &s, &case);
        }
        assert_unchanged(&before, &tree(d), &case);
    }
}

/// With nothing else to read, the results are refused: exit 1, the file and
/// the field named, for the report and for `plan --retest` alike.
#[test]
fn results_that_are_all_unreadable_are_refused_by_file_and_field() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let res = d.join("res/round-1");
    std::fs::create_dir_all(&res).unwrap();
    let good = json!({"gdrprov": "0.1.0", "command": "bench pair",
        "client": {"port": {"device": "mlx5_0", "mtu": 4096}},
        "results": [{"bytes": 8388608, "average_gbps": 96.0, "data_check": {"passed": true}}],
        "data_check": {"passed": true}});
    let readers: [&[&str]; 2] = [
        &["fleet", "sweep", "report", "res"],
        &[
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "a,b",
            "--retest",
            "res",
        ],
    ];
    for s in shapes(&PAIR, &good) {
        std::fs::write(res.join("a+b+mlx5_0.json"), &s.bytes).unwrap();
        for args in readers {
            let case = format!("{} x {} ({})", PAIR.name, s.name, args.join(" "));
            let before = tree(d);
            let out = run_in(Some(d), args);
            if s.accepted {
                assert_eq!(out.status.code(), Some(0), "{case}: {}", stderr_of(&out));
            } else {
                let text = assert_refused(&out, "a+b+mlx5_0.json", &case);
                assert!(text.contains(s.word), "{case}: {text}");
                if let Some(f) = s.field {
                    assert!(text.contains(&format!("field `{f}`")), "{case}: {text}");
                }
            }
            assert_unchanged(&before, &tree(d), &case);
        }
    }
}

/// A snapshot root's recorded command outputs (`.gdrprov-snapshot/
/// commands.json`, read by every command given `--root SNAP`) of a wrong
/// shape: refused naming the file and the field, never replayed as "no
/// command recorded" (exit 1, the snapshot unchanged).
#[test]
fn a_snapshot_s_recorded_commands_of_a_wrong_shape_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let snap = t.path().join("snap");
    crate::common::copy_tree(
        &crate::common::repo().join("tests/fixtures/snapshots/vm-softroce"),
        &snap,
    );
    let file = snap.join(".gdrprov-snapshot/commands.json");
    let good: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let first = |p: &str, v: Option<Value>| set(&good, p, v).to_string().into_bytes();
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "number as string",
            first("/0/code", Some(json!("1"))),
            "[0].code",
            "invalid type: string",
        ),
        (
            "huge",
            first("/0/code", Some(json!(1e300))),
            "[0].code",
            "invalid type",
        ),
        (
            "negative as a flag",
            first("/0/ran", Some(json!(-1))),
            "[0].ran",
            "invalid type",
        ),
        (
            "null",
            first("/0/argv", Some(Value::Null)),
            "[0].argv",
            "invalid type: null",
        ),
        (
            "missing field",
            first("/0/argv", None),
            "[0]",
            "missing field `argv`",
        ),
        (
            "wrong top-level type",
            b"{}".to_vec(),
            ".",
            "expected a sequence",
        ),
        ("empty file", Vec::new(), ".", "EOF while parsing"),
        ("not JSON", b"<html>".to_vec(), ".", "expected value"),
        (
            "NaN",
            b"[{\"argv\": [\"x\"], \"code\": NaN}]".to_vec(),
            "",
            "expected value",
        ),
    ];
    let root = snap.to_str().unwrap().to_string();
    for (name, bytes, field, word) in cases {
        let case = format!("snapshot commands.json x {name}");
        std::fs::write(&file, &bytes).unwrap();
        let before = tree(&snap);
        let out = run_in(None, &["inventory", "--root", &root]);
        let text = assert_refused(&out, "commands.json", &case);
        assert!(text.contains(word), "{case}: {text}");
        assert!(text.contains(&format!("field `{field}")), "{case}: {text}");
        assert_unchanged(&before, &tree(&snap), &case);
    }
}

/// A node drained by a sweep whose results cannot be read keeps its state:
/// not drained again, not resumed. One on probation (drained by an earlier
/// sweep, resumed for this one) is not returned to production without a
/// verdict: it is drained again, its earlier reason plus "results unreadable".
#[test]
fn a_node_not_judged_keeps_its_slurm_state() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let (res, _) = fleet(d);
    for f in files_of(&res, "n5") {
        let v: Value = serde_json::from_slice(&std::fs::read(&f).unwrap()).unwrap();
        let v = set(&v, "/results/0/average_gbps", Some(json!("96.0")));
        std::fs::write(&f, v.to_string()).unwrap();
    }
    let list = "n5|gdrprov: sweep: rail mlx5_1 low with 3 partners\n";
    std::fs::write(d.join("list.txt"), list).unwrap();
    for opt in ["--probation", "--drained"] {
        let before = tree(d);
        let (code, v, text) = report(d, &[opt, "list.txt"]);
        assert_eq!(code, Some(0), "{opt}: {text}");
        let acted = |k: &str| {
            v["slurm"][k]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["node"] == "n5")
        };
        if opt == "--drained" {
            assert!(!acted("drain") && !acted("resume"), "{opt}: {v:#}");
        } else {
            // On probation: never returned to production without a verdict;
            // drained again, its earlier reason kept, the cause said.
            assert!(!acted("resume"), "{opt}: {v:#}");
            let drain = v["slurm"]["drain"].as_array().unwrap();
            let n5 = drain.iter().find(|a| a["node"] == "n5");
            let reason = n5.map(|a| a["reason"].as_str().unwrap_or_default());
            let reason = reason.unwrap_or_else(|| panic!("{opt}: n5 not drained: {v:#}"));
            assert!(
                reason.contains("rail mlx5_1 low with 3 partners")
                    && reason.contains("results unreadable"),
                "{opt}: {reason}"
            );
        }
        assert_unchanged(&before, &tree(d), opt);
    }
}

/// A document's text never begins a line of the report: serde quotes the
/// raw value (`unknown variant `fail<newline>  gpu042: drained``), which
/// the report shows as one line, in text and on standard error alike.
#[test]
fn a_document_s_newline_never_forges_a_report_line() {
    let t = tempfile::tempdir().unwrap();
    let d = t.path();
    let (_, ver) = fleet(d);
    let doc = set(
        &verify_doc(),
        "/checks/0/status",
        Some(json!("fail\n  gpu042: drained\r\u{1b}[2K")),
    );
    std::fs::write(ver.join("n5.json"), doc.to_string()).unwrap();
    for format in ["text", "json"] {
        let args = [
            "fleet",
            "sweep",
            "report",
            "res",
            "--verify-dir",
            "verify",
            "--format",
            format,
        ];
        let out = run_in(Some(d), &args);
        let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
        assert_eq!(out.status.code(), Some(0), "{format}: {text}");
        assert!(text.contains("gpu042: drained"), "{format}: {text}");
        assert!(
            !text.lines().any(|l| l.starts_with("  gpu042: drained")),
            "{format}: a forged line\n{text}"
        );
        assert!(
            !text.contains('\r') && !text.contains('\u{1b}'),
            "{format}: {text:?}"
        );
    }
}
