//! `bench pair`'s report for people: both ends, each size, the verdict; with
//! `--all-nics`, rail by rail.

use std::fmt::Write as _;

use crate::bench::pair::allnics::{describe, RailsOutcome};
use crate::bench::pair::report::*;
use crate::bench::report::human_bytes;

fn end_line(e: &End) -> String {
    let p = &e.port;
    let addr = match (&p.gid, p.gid_index) {
        (Some(g), Some(i)) if p.link_layer == "Ethernet" => format!(
            "{}, GID index {i} {g}",
            p.gid_type.as_deref().unwrap_or("RoCE")
        ),
        _ => format!("InfiniBand, LID {:#06x}", p.lid),
    };
    format!(
        "{} {}:{} ({addr}, MTU {}), {} memory{}",
        e.address,
        p.device,
        p.port,
        p.mtu,
        e.memory,
        e.gpu
            .as_ref()
            .map(|g| format!(" on {g}"))
            .unwrap_or_default()
    )
}

fn gbps_text(v: f64) -> String {
    if v >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

/// One size's row of the table, then each direction's rate when both ends sent.
fn size_row(s: &mut String, x: &PairSize) {
    let frac = x
        .size
        .line_rate_fraction
        .map(|f| format!("{:.1}%", f * 100.0))
        .unwrap_or_else(|| "n/a".into());
    let check = if x.data_check.passed {
        format!(
            "passed ({} x {})",
            x.data_check.iterations,
            human_bytes(x.size.bytes)
        )
    } else {
        format!(
            "FAILED ({} bytes differ, offsets {:?})",
            x.data_check.mismatched_bytes, x.data_check.mismatch_offsets
        )
    };
    let _ = writeln!(
        s,
        " {:<12} {:<13} {:<17} {:<20} {:<14.6} {:<13} {check}",
        x.size.bytes,
        x.size.iterations,
        gbps_text(x.size.peak_gbps),
        gbps_text(x.size.average_gbps),
        x.size.msg_rate_mpps,
        frac
    );
    if x.directions.len() > 1 {
        for d in &x.directions {
            let _ = writeln!(s, "   {}: {} Gb/s", d.flow, gbps_text(d.average_gbps));
        }
    }
}

/// The text report; `me` says which end prints it.
pub fn render_text(r: &PairReport, me: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} between two hosts (this host is the {me})",
        r.op.label()
    );
    let _ = writeln!(s, "client:   {}", end_line(&r.client));
    let _ = writeln!(s, "listener: {}", end_line(&r.listener));
    let line = match r.line_rate_gbps {
        Some(l) => format!("{l} Gb/s (the slower port)"),
        None if r.client.port.software || r.listener.port.software => {
            "n/a (software RDMA device)".to_string()
        }
        None => "unknown".to_string(),
    };
    let _ = writeln!(
        s,
        "{} QP(s), tx depth {}; line rate {line}",
        r.qps, r.tx_depth
    );
    let _ = writeln!(
        s,
        " {:<12} {:<13} {:<17} {:<20} {:<14} {:<13} data check",
        "#bytes",
        "#iterations",
        "BW peak[Gb/sec]",
        "BW average[Gb/sec]",
        "MsgRate[Mpps]",
        "of line rate"
    );
    for x in &r.results {
        size_row(&mut s, x);
    }
    let d = &r.data_check;
    if d.passed {
        let _ = writeln!(
            s,
            "data check: passed ({} transfers, each with its own pattern, {} compared byte for byte at the receiving end)",
            d.iterations,
            human_bytes(d.bytes_compared)
        );
    } else {
        let _ = writeln!(
            s,
            "data check: FAILED ({} of {} bytes differ; first offsets {:?})",
            d.mismatched_bytes, d.bytes_compared, d.mismatch_offsets
        );
    }
    if !r.timing.is_empty() {
        let _ = writeln!(s, "timing: {}", r.timing);
    }
    crate::output::bench::threshold_line(&mut s, &r.threshold);
    let _ = writeln!(s, "result: {}", if r.passed { "PASS" } else { "FAIL" });
    s
}

/// The text report: each rail's line, then its session's report or error.
pub fn render_rails(r: &RailsOutcome) -> String {
    let mut s = String::new();
    for x in &r.rails {
        let _ = writeln!(s, "{}", describe(&x.rail, r.rails.len()));
        match (&x.report, &x.error) {
            (Some(p), _) => s.push_str(&render_text(p, r.role)),
            (None, Some(e)) => {
                let _ = writeln!(s, "  FAIL: {e}");
            }
            (None, None) => {}
        }
    }
    let _ = writeln!(s, "all rails: {}", if r.passed { "PASS" } else { "FAIL" });
    s
}
