//! Every document type × every wrong shape: refused naming the file and the
//! field; a newer minor with extra fields read; another major refused by name.

use super::pair::PairResult;
use super::verify::VerifyReport;
use super::*;
use serde_json::{json, Value};

fn pair() -> Value {
    json!({"gdrprov": "0.1.0", "command": "bench pair",
        "client": {"port": {"device": "mlx5_0", "mtu": 4096}},
        "listener": {"port": {"device": "mlx5_0", "mtu": 4096}},
        "results": [{"bytes": 8388608, "average_gbps": 390.1, "line_rate_fraction": 0.98,
                     "data_check": {"passed": true}}],
        "data_check": {"passed": true}, "passed": true})
}

fn verify() -> Value {
    json!({"gdrprov": "0.1.0", "command": "verify", "profiles": ["rdma-dmabuf"], "ready": false,
        "checks": [{"name": "modules", "status": "fail", "detail": "loaded: nvidia_peermem"}]})
}

/// `doc` with the value at POINTER replaced (None: removed).
fn with(doc: &Value, pointer: &str, v: Option<Value>) -> Value {
    let mut d = doc.clone();
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let p = d.pointer_mut(parent).unwrap();
    match (p, v) {
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

fn refused<T: Document + std::fmt::Debug>(doc: &[u8], field: Option<&str>, words: &[&str]) {
    let e = parse::<T>("DIR/f.json", doc).unwrap_err();
    let text = e.to_string();
    assert!(text.starts_with("DIR/f.json: "), "{text}");
    assert_eq!(e.field.as_deref(), field, "{text}");
    if let Some(f) = field {
        assert!(text.contains(&format!("field `{f}`")), "{text}");
    }
    for w in words {
        assert!(text.contains(w), "{text} lacks {w}");
    }
}

/// (pointer, the wrong value or None for removed, the field named).
fn wrong_pair_fields() -> Vec<(&'static str, Option<Value>, &'static str)> {
    vec![
        (
            "/results/0/average_gbps",
            Some(json!("390.1")),
            "results[0].average_gbps",
        ),
        (
            "/results/0/average_gbps",
            Some(json!(-4)),
            "results[0].average_gbps",
        ),
        (
            "/results/0/average_gbps",
            Some(json!(1e300)),
            "results[0].average_gbps",
        ),
        (
            "/results/0/average_gbps",
            Some(Value::Null),
            "results[0].average_gbps",
        ),
        ("/results/0/average_gbps", None, "results[0]"),
        (
            "/results/0/line_rate_fraction",
            Some(json!(1e9)),
            "results[0].line_rate_fraction",
        ),
        (
            "/results/0/line_rate_fraction",
            Some(json!("0.9")),
            "results[0].line_rate_fraction",
        ),
        ("/results/0/bytes", Some(json!(-1)), "results[0].bytes"),
        ("/results/0/bytes", Some(json!(0)), "results[0].bytes"),
        ("/results", None, "results"),
        ("/results", Some(Value::Null), "results"),
        ("/results", Some(json!({})), "results"),
        ("/results", Some(json!([])), "results"),
        (
            "/data_check/passed",
            Some(json!("yes")),
            "data_check.passed",
        ),
        ("/client/port/mtu", Some(json!(-1)), "client.port.mtu"),
        (
            "/client/port/mtu",
            Some(json!(1u64 << 40)),
            "client.port.mtu",
        ),
        ("/client/port/device", Some(json!(7)), "client.port.device"),
        (
            "/client/port/device",
            Some(json!("x".repeat(100))),
            "client.port.device",
        ),
        ("/client", Some(json!("n2")), "client"),
        ("/error", Some(json!(42)), "error"),
        ("/rails", Some(json!("mlx5_0")), "rails"),
    ]
}

#[test]
fn a_pair_result_of_a_wrong_shape_is_refused_naming_its_field() {
    let base = pair();
    parse::<PairResult>("f", base.to_string().as_bytes()).unwrap();
    for (ptr, v, field) in wrong_pair_fields() {
        let doc = with(&base, ptr, v);
        refused::<PairResult>(
            doc.to_string().as_bytes(),
            Some(field),
            &["bench pair --format json"],
        );
        // The same inside an --all-nics document's second rail.
        let all = json!({"gdrprov": "0.1.0", "rails": [base.clone(), doc]});
        if field != "rails" {
            refused::<PairResult>(
                all.to_string().as_bytes(),
                Some(&format!("rails[1].{field}")),
                &[],
            );
        }
    }
}

#[test]
fn a_pair_result_without_any_data_check_is_refused() {
    let d = with(
        &with(&pair(), "/data_check", None),
        "/results/0/data_check",
        None,
    );
    refused::<PairResult>(d.to_string().as_bytes(), Some("data_check"), &["intact"]);
    // Either one is enough.
    let d = with(&pair(), "/data_check", None);
    parse::<PairResult>("f", d.to_string().as_bytes()).unwrap();
}

#[test]
fn a_verify_report_of_a_wrong_shape_is_refused_naming_its_field() {
    let base = verify();
    parse::<VerifyReport>("f", base.to_string().as_bytes()).unwrap();
    for (ptr, v, field) in [
        ("/profiles", Some(json!("rdma-dmabuf")), "profiles"),
        ("/profiles", None, "profiles"),
        ("/profiles/0", Some(json!(3)), "profiles[0]"),
        ("/profiles/0", Some(json!("a\nb")), "profiles[0]"),
        ("/ready", Some(json!("false")), "ready"),
        ("/ready", Some(Value::Null), "ready"),
        ("/checks", None, "checks"),
        (
            "/checks/0/status",
            Some(json!("FAILED")),
            "checks[0].status",
        ),
        ("/checks/0/name", None, "checks[0]"),
        ("/checks/0/detail", Some(json!(1)), "checks[0].detail"),
    ] {
        let doc = with(&base, ptr, v);
        refused::<VerifyReport>(
            doc.to_string().as_bytes(),
            Some(field),
            &["verify --format json"],
        );
    }
}

/// Shapes that are wrong for every document alike.
fn whole_document_shapes() -> Vec<(&'static [u8], Option<&'static str>, &'static str)> {
    vec![
        (b"", None, "empty"),
        (b"  \n", None, "empty"),
        (b"not json", None, "not JSON"),
        (b"{\"results\": [", None, "not JSON"),
        (b"{\"x\": NaN}", None, "not JSON"),
        (b"{\"x\": 1e400}", None, "not JSON"),
        (b"[]", None, "a JSON array"),
        (b"null", None, "a JSON null"),
        (b"\"text\"", None, "a JSON string"),
        (b"390.1", None, "a JSON number"),
        (b"\xff\xfe{}", None, "not JSON"),
        (
            b"{\"format_version\": 1}",
            Some("format_version"),
            "not a format version",
        ),
        (
            b"{\"format_version\": \"one\"}",
            Some("format_version"),
            "not a format version",
        ),
        (
            b"{\"format_version\": \"2.0\"}",
            Some("format_version"),
            "written by format 2.x",
        ),
        (
            b"{\"format_version\": \"0.9\"}",
            Some("format_version"),
            "written by format 0.x",
        ),
    ]
}

#[test]
fn whole_document_shapes_are_refused_for_every_document() {
    for (bytes, field, word) in whole_document_shapes() {
        refused::<PairResult>(bytes, field, &[word]);
        refused::<VerifyReport>(bytes, field, &[word]);
    }
}

#[test]
fn another_major_is_refused_by_name_a_newer_minor_is_read() {
    let newer = |base: Value| {
        let d = with(&base, "/format_version", Some(json!("1.7")));
        with(&d, "/a_field_of_1_7", Some(json!({"any": ["thing"]}))).to_string()
    };
    parse::<PairResult>("f", newer(pair()).as_bytes()).unwrap();
    parse::<VerifyReport>("f", newer(verify()).as_bytes()).unwrap();
    for base in [pair(), verify()] {
        let other = with(&base, "/format_version", Some(json!("2.1")));
        let e = parse::<PairResult>("f", other.to_string().as_bytes()).unwrap_err();
        assert!(
            e.to_string()
                .contains("written by format 2.x (2.1); this gdrprov"),
            "{e}"
        );
        assert!(e.to_string().contains("reads 1.x"), "{e}");
        assert!(e.to_string().contains("upgrade gdrprov"), "{e}");
    }
    // Written before versions existed: 1.0.
    assert_eq!(version_of(&pair()), Ok((1, 0)));
    assert_eq!(
        version_of(&json!({"format_version": FORMAT_VERSION})),
        Ok((1, 0))
    );
}

#[test]
fn failed_runs_are_read_as_failures() {
    let e = json!({"gdrprov": "0.1.0", "command": "bench pair",
        "error": {"kind": "pair", "message": "peer unreachable"}});
    let r = parse::<PairResult>("f", e.to_string().as_bytes()).unwrap();
    assert!(r.error.is_some() && r.rails.is_empty());
    let rail_failed = json!({"rails": [pair(), {"rail": "mlx5_1", "error": "port down"}]});
    let r = parse::<PairResult>("f", rail_failed.to_string().as_bytes()).unwrap();
    assert_eq!(r.rails.len(), 2);
    assert!(r.rails[1].error.is_some());
}
