//! The pair report as Prometheus text exposition (node-exporter's textfile collector), one series
//! per message size, labelled with this end's and the peer's device: one file per link and end.

use std::fmt::Write as _;

use crate::bench::pair::report::PairReport;
use crate::output::exposition::escape_label as esc;

/// The metrics of `r` as seen from `role` ("client" or "listener"), stamped `now` (Unix seconds).
pub fn prometheus(r: &PairReport, role: &str, now: u64) -> String {
    let (me, peer) = if role == "client" {
        (&r.client, &r.listener)
    } else {
        (&r.listener, &r.client)
    };
    let op = serde_json::to_value(r.op)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let link = format!(
        "role=\"{}\",device=\"{}\",memory=\"{}\",peer=\"{}\",peer_host=\"{}\",peer_device=\"{}\",peer_memory=\"{}\",op=\"{}\"",
        esc(role),
        esc(&me.port.device),
        esc(&me.memory),
        esc(&peer.address),
        esc(&peer.port.host),
        esc(&peer.port.device),
        esc(&peer.memory),
        esc(&op)
    );
    let mut s = String::new();
    let head = |s: &mut String, name: &str, help: &str| {
        let _ = writeln!(s, "# HELP {name} {help}");
        let _ = writeln!(s, "# TYPE {name} gauge");
    };
    head(&mut s, "gdrprov_pair_gbps", "Average RDMA bandwidth between the two hosts per message size, Gb/s (both directions summed for bidir).");
    for x in &r.results {
        let _ = writeln!(
            s,
            "gdrprov_pair_gbps{{{link},bytes=\"{}\"}} {}",
            x.size.bytes, x.size.average_gbps
        );
    }
    head(&mut s, "gdrprov_pair_line_rate_fraction", "Average bandwidth / the slower port's line rate per message size (absent on software devices).");
    for x in &r.results {
        if let Some(f) = x.size.line_rate_fraction {
            let _ = writeln!(
                s,
                "gdrprov_pair_line_rate_fraction{{{link},bytes=\"{}\"}} {f}",
                x.size.bytes
            );
        }
    }
    head(
        &mut s,
        "gdrprov_pair_data_ok",
        "1 when every checked transfer arrived byte for byte at the receiving end.",
    );
    let _ = writeln!(
        s,
        "gdrprov_pair_data_ok{{{link}}} {}",
        u8::from(r.data_check.passed)
    );
    head(
        &mut s,
        "gdrprov_pair_passed",
        "1 when the data check and the bandwidth threshold passed.",
    );
    let _ = writeln!(s, "gdrprov_pair_passed{{{link}}} {}", u8::from(r.passed));
    head(
        &mut s,
        "gdrprov_pair_timestamp_seconds",
        "When this pair run ended (Unix time).",
    );
    let _ = writeln!(s, "gdrprov_pair_timestamp_seconds{{{link}}} {now}");
    s
}
