//! The shape of a `gdrprov bench pair` result as the sweep reads it, in one
//! place so that it follows the pair command's JSON. The document is typed,
//! versioned and checked in `crate::docs::pair` (read by `docs::read`); this
//! turns it into the sweep's records.
//!
//! A runner writes each pair's JSON (the client's `--format json` output) to
//! `DIR/round-R/A+B.json`, or `A+B+RAIL.json` when it runs one rail per
//! file: A listened, B connected; R is the round. Fields read:
//!
//! - `error` (present: the run failed: a low measurement on its rail(s));
//! - per rail, either the document itself or each entry of `rails[]`:
//!   - the rail's name: `rail`, else `client.port.device`, else the file name's RAIL;
//!   - `results[]`: the entry with the largest `bytes` gives `average_gbps`
//!     and `line_rate_fraction` (null when the port reports no line rate);
//!   - `data_check.passed` (of the rail; else of the judged size);
//!   - `client.port.mtu`, `listener.port.mtu` (the RoCE/IB MTU of each end), when present.

use crate::docs::pair::{PairResult, Rail};

/// One rail of one pair run.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub round: u32,
    /// The listener.
    pub a: String,
    /// The client.
    pub b: String,
    /// None: every rail of the sweep (a run that failed before naming one).
    pub rail: Option<String>,
    pub gbps: f64,
    pub fraction: Option<f64>,
    pub data_ok: bool,
    pub mtu_a: Option<u64>,
    pub mtu_b: Option<u64>,
}

/// The nodes (and rail) a result file's name gives: `A+B` or `A+B+RAIL`.
pub fn names_from_stem(stem: &str) -> Option<(String, String, Option<String>)> {
    let parts: Vec<&str> = stem.split('+').collect();
    match parts.as_slice() {
        [a, b] if !a.is_empty() && !b.is_empty() => Some((a.to_string(), b.to_string(), None)),
        [a, b, r] if !a.is_empty() && !b.is_empty() && !r.is_empty() => {
            Some((a.to_string(), b.to_string(), Some(r.to_string())))
        }
        _ => None,
    }
}

/// The round a directory's name gives (`round-3`, `round3`, `r3`); 0 if none.
pub fn round_from_dir(name: &str) -> u32 {
    let digits = name
        .trim_start_matches("round")
        .trim_start_matches('r')
        .trim_start_matches(['-', '_']);
    digits.parse().unwrap_or(0)
}

/// The records of one pair document (typed and checked by
/// `docs::read`: every rail that did not fail has its sizes and its data
/// check, its numbers in range).
pub fn read(
    doc: &PairResult,
    a: &str,
    b: &str,
    file_rail: Option<&str>,
    round: u32,
) -> Vec<Record> {
    let failed = |rail: Option<String>| Record {
        round,
        a: a.to_string(),
        b: b.to_string(),
        rail,
        gbps: 0.0,
        fraction: None,
        data_ok: false,
        mtu_a: None,
        mtu_b: None,
    };
    if doc.error.is_some() {
        return vec![failed(file_rail.map(str::to_string))];
    }
    doc.rails
        .iter()
        .map(|r: &Rail| {
            let name = r.name().or(file_rail).map(str::to_string);
            let best = r.judged().filter(|_| r.error.is_none());
            let Some(best) = best else {
                return failed(name);
            };
            Record {
                round,
                a: a.to_string(),
                b: b.to_string(),
                rail: name,
                gbps: best.average_gbps,
                fraction: best.line_rate_fraction,
                data_ok: r.data_ok().unwrap_or(false),
                mtu_a: Rail::mtu(r.listener.as_ref()),
                mtu_b: Rail::mtu(r.client.as_ref()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn read(doc: &Value, a: &str, b: &str, rail: Option<&str>, round: u32) -> Vec<Record> {
        let doc = crate::docs::parse::<PairResult>("t.json", doc.to_string().as_bytes()).unwrap();
        super::read(&doc, a, b, rail, round)
    }

    fn pair_doc(device: &str, gbps: f64, frac: Option<f64>, ok: bool) -> Value {
        json!({
            "gdrprov": "0.1.0", "command": "bench pair", "role": "client", "op": "write",
            "client": {"address": "10.0.0.2", "port": {"device": device, "port": 1, "mtu": 4096}, "memory": "host"},
            "listener": {"address": "10.0.0.1", "port": {"device": device, "port": 1, "mtu": 1024}, "memory": "host"},
            "line_rate_gbps": 400.0,
            "results": [
                {"bytes": 65536, "average_gbps": 1.0, "line_rate_fraction": 0.1, "data_check": {"passed": true}},
                {"bytes": 8388608, "average_gbps": gbps, "line_rate_fraction": frac, "data_check": {"passed": ok}}
            ],
            "data_check": {"passed": ok},
            "passed": ok
        })
    }

    #[test]
    fn one_rail_document_reads_the_largest_size() {
        let r = read(
            &pair_doc("mlx5_2", 380.0, Some(0.95), true),
            "n1",
            "n2",
            None,
            3,
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].rail.as_deref(), Some("mlx5_2"));
        assert_eq!(r[0].gbps, 380.0);
        assert_eq!(r[0].fraction, Some(0.95));
        assert!(r[0].data_ok);
        assert_eq!((r[0].mtu_a, r[0].mtu_b), (Some(1024), Some(4096)));
        assert_eq!(r[0].round, 3);
    }

    #[test]
    fn rails_array_and_errors() {
        let doc = json!({"rails": [pair_doc("mlx5_0", 10.0, None, true), pair_doc("mlx5_1", 9.0, None, false)]});
        let r = read(&doc, "a", "b", None, 1);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1].rail.as_deref(), Some("mlx5_1"));
        assert!(!r[1].data_ok);
        let e = read(
            &json!({"error": {"kind": "pair", "message": "peer unreachable"}}),
            "a",
            "b",
            Some("mlx5_3"),
            2,
        );
        assert_eq!(e[0].gbps, 0.0);
        assert!(!e[0].data_ok);
        assert_eq!(e[0].rail.as_deref(), Some("mlx5_3"));
    }

    #[test]
    fn names_and_rounds_from_paths() {
        assert_eq!(
            names_from_stem("gpu01+gpu02"),
            Some(("gpu01".into(), "gpu02".into(), None))
        );
        assert_eq!(
            names_from_stem("a+b+mlx5_0"),
            Some(("a".into(), "b".into(), Some("mlx5_0".into())))
        );
        assert_eq!(names_from_stem("ab"), None);
        assert_eq!(round_from_dir("round-4"), 4);
        assert_eq!(round_from_dir("r2"), 2);
        assert_eq!(round_from_dir("misc"), 0);
    }
}
