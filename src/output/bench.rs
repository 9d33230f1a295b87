//! The bench reports for people: the loopback (as ib_write_bw prints it) and
//! the dma-buf export check.

use std::fmt::Write as _;

use crate::bench::report::{
    human_bytes, DataCheck, ExportReport, LoopbackReport, SizeResult, Threshold,
};
use gdrprov_rdma::verbs::PortInfo;

/// A bench's text, or its JSON document in gdrprov's envelope (benches run on
/// the running system: root `/`).
pub fn show<T: serde::Serialize>(
    out: &crate::output::Output,
    command: &str,
    text: impl FnOnce() -> String,
    v: &T,
) -> Result<(), gdrprov_rdma::error::Error> {
    if out.format == crate::output::Format::Json {
        let v = crate::output::envelope(command, std::path::Path::new("/"), v);
        let json = serde_json::to_string_pretty(&v)
            .map_err(|e| gdrprov_rdma::error::Error::InvalidArgument(format!("JSON: {e}")))?;
        out.raw(&format!("{json}\n"));
    } else {
        out.raw(&text());
    }
    Ok(())
}

fn port_line(p: &PortInfo) -> String {
    let addr = match (&p.gid, p.gid_index) {
        (Some(g), Some(i)) if p.link_layer == "Ethernet" => format!("RoCE, GID index {i} {g}"),
        _ => format!("InfiniBand, LID {:#06x}", p.lid),
    };
    format!("{}:{} ({addr}, MTU {})", p.device, p.port, p.active_mtu)
}

/// The text report.
pub fn render_text(r: &LoopbackReport) -> String {
    let mut s = String::new();
    header_lines(&mut s, r);
    result_table(&mut s, &r.results);
    data_check_line(&mut s, &r.data_check);
    threshold_line(&mut s, &r.threshold);
    let _ = writeln!(s, "result: {}", if r.passed { "PASS" } else { "FAIL" });
    s
}

/// The ports, the memory (its GPU, dma-buf), the QPs and the line rate.
fn header_lines(s: &mut String, r: &LoopbackReport) {
    let _ = writeln!(
        s,
        "RDMA WRITE loopback: {} -> {}",
        port_line(&r.from),
        port_line(&r.to)
    );
    let _ = write!(s, "memory: {}", r.memory.label());
    if let Some(g) = &r.gpu {
        let _ = write!(
            s,
            " on GPU {} {} ({}, CUDA driver {})",
            g.index, g.name, g.pci_bus_id, g.cuda_driver_version
        );
        if let Some(b) = g.dmabuf_bytes {
            let _ = write!(s, ", dma-buf {}", human_bytes(b));
        }
    }
    if let Some(n) = &r.memory_note {
        let _ = write!(s, " ({n})");
    }
    let _ = writeln!(s, "; {} QP(s), tx depth {}", r.qps, r.tx_depth);
    if let Some(p) = &r.dmabuf_probe {
        let _ = writeln!(s, "NIC dma-buf: {:?} ({})", p.support, p.detail);
    }
    match (r.line_rate_gbps, r.from.software) {
        (_, true) => {
            let _ = writeln!(
                s,
                "line rate: n/a ({} is a software RDMA device)",
                r.from.device
            );
        }
        (Some(l), false) => {
            let _ = writeln!(s, "line rate: {l} Gb/s");
        }
        (None, false) => {
            let _ = writeln!(s, "line rate: unknown");
        }
    }
}

/// One row per message size, in perftest's columns.
fn result_table(s: &mut String, results: &[SizeResult]) {
    let _ = writeln!(
        s,
        " {:<12} {:<13} {:<17} {:<20} {:<14} of line rate",
        "#bytes", "#iterations", "BW peak[Gb/sec]", "BW average[Gb/sec]", "MsgRate[Mpps]"
    );
    // perftest-like columns; small rates (software devices) keep four decimals.
    let g = |v: f64| {
        if v >= 10.0 {
            format!("{v:.2}")
        } else {
            format!("{v:.4}")
        }
    };
    for x in results {
        let frac = x
            .line_rate_fraction
            .map(|f| format!("{:.1}%", f * 100.0))
            .unwrap_or_else(|| "n/a".into());
        let _ = writeln!(
            s,
            " {:<12} {:<13} {:<17} {:<20} {:<14.6} {}",
            x.bytes,
            x.iterations,
            g(x.peak_gbps),
            g(x.average_gbps),
            x.msg_rate_mpps,
            frac
        );
    }
}

/// Whether what RDMA WRITE put there reads back the same.
fn data_check_line(s: &mut String, d: &DataCheck) {
    if d.passed {
        let _ = writeln!(
            s,
            "data check: passed ({} written by RDMA WRITE on each of {} QP(s), read back and compared)",
            human_bytes(d.bytes),
            d.qps
        );
    } else {
        let _ = writeln!(
            s,
            "data check: FAILED ({} of {} bytes differ, first at offset {})",
            d.mismatched_bytes,
            d.bytes,
            d.first_mismatch
                .map(|o| o.to_string())
                .unwrap_or_else(|| "?".into())
        );
    }
}

/// The threshold line of a bench report (the loopback's and the pair's).
pub fn threshold_line(s: &mut String, t: &Threshold) {
    if !t.applicable {
        let _ = writeln!(
            s,
            "threshold: not applicable ({})",
            t.reason.as_deref().unwrap_or("no line rate")
        );
    } else {
        let what = match (t.min_gbps, t.min_line_rate_fraction) {
            (Some(g), _) => format!("average >= {g} Gb/s"),
            (None, Some(f)) => format!("average >= {:.0}% of line rate", f * 100.0),
            (None, None) => "none".to_string(),
        };
        let at = t
            .at_bytes
            .map(|b| format!(" at {}", human_bytes(b)))
            .unwrap_or_default();
        let verdict = if t.passed == Some(true) {
            "passed"
        } else {
            "FAILED"
        };
        let _ = writeln!(s, "threshold: {what}{at}: {verdict}");
    }
}

/// The text of an --export-only run.
pub fn render_export_text(r: &ExportReport) -> String {
    let g = &r.gpu;
    format!(
        "GPU {} {} ({}, CUDA driver {}): DMA_BUF_SUPPORTED={}, allocated {}, exported dma-buf of {} bytes{}\nresult: {}\n",
        g.index,
        g.name,
        g.pci_bus_id,
        g.cuda_driver_version,
        u8::from(g.dmabuf_supported),
        human_bytes(r.allocated_bytes),
        g.dmabuf_bytes.map(|b| b.to_string()).unwrap_or_else(|| "?".into()),
        g.dmabuf_exporter.as_ref().map(|e| format!(" (exporter {e})")).unwrap_or_default(),
        if r.passed { "PASS" } else { "FAIL" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::*;
    use gdrprov_rdma::MemoryKind;

    fn port(software: bool) -> PortInfo {
        PortInfo {
            device: "rxe0".into(),
            port: 1,
            state: "ACTIVE".into(),
            link_layer: "Ethernet",
            lid: 0,
            active_mtu_raw: 3,
            active_mtu: 1024,
            line_rate_gbps: Some(10.0),
            software,
            gid_index: Some(1),
            gid: Some("::ffff:10.0.2.15".into()),
            gid_raw: None,
        }
    }

    fn report() -> LoopbackReport {
        LoopbackReport {
            from: port(true),
            to: port(true),
            memory: MemoryKind::Host,
            memory_note: None,
            gpu: None,
            dmabuf_probe: None,
            qps: 1,
            tx_depth: 128,
            line_rate_gbps: Some(10.0),
            results: vec![SizeResult {
                bytes: 65536,
                iterations: 1000,
                peak_gbps: 0.52,
                average_gbps: 0.41,
                msg_rate_mpps: 0.000782,
                line_rate_fraction: None,
                seconds: 1.28,
                writes_in_flight: 128,
                writes_per_completion: 1,
            }],
            data_check: DataCheck {
                passed: true,
                bytes: 8 << 20,
                qps: 1,
                mismatched_bytes: 0,
                first_mismatch: None,
            },
            threshold: Threshold {
                applicable: false,
                reason: Some("software RDMA device rxe0 has no meaningful line rate".into()),
                min_line_rate_fraction: Some(0.95),
                min_gbps: None,
                at_bytes: Some(65536),
                passed: None,
            },
            passed: true,
        }
    }

    #[test]
    fn text_report_reads_like_ib_write_bw() {
        let t = render_text(&report());
        assert!(
            t.contains("rxe0:1 (RoCE, GID index 1 ::ffff:10.0.2.15, MTU 1024)"),
            "{t}"
        );
        assert!(
            t.contains("line rate: n/a (rxe0 is a software RDMA device)"),
            "{t}"
        );
        assert!(
            t.contains(" 65536        1000          0.5200            0.4100"),
            "{t}"
        );
        assert!(t.contains("data check: passed (8 MiB written"), "{t}");
        assert!(
            t.contains("threshold: not applicable (software RDMA device"),
            "{t}"
        );
        assert!(t.ends_with("result: PASS\n"), "{t}");
    }

    #[test]
    fn failed_check_and_threshold_are_shown() {
        let mut r = report();
        r.from.software = false;
        r.data_check = DataCheck {
            passed: false,
            bytes: 4096,
            qps: 1,
            mismatched_bytes: 7,
            first_mismatch: Some(12),
        };
        r.threshold = Threshold {
            applicable: true,
            reason: None,
            min_line_rate_fraction: Some(0.9),
            min_gbps: None,
            at_bytes: Some(8 << 20),
            passed: Some(false),
        };
        r.passed = false;
        let t = render_text(&r);
        assert!(t.contains("line rate: 10 Gb/s"), "{t}");
        assert!(
            t.contains("data check: FAILED (7 of 4096 bytes differ, first at offset 12)"),
            "{t}"
        );
        assert!(
            t.contains("threshold: average >= 90% of line rate at 8 MiB: FAILED"),
            "{t}"
        );
        assert!(t.ends_with("result: FAIL\n"), "{t}");
    }

    #[test]
    fn json_report_has_the_fields() {
        let v: serde_json::Value = serde_json::to_value(report()).unwrap();
        assert_eq!(v["memory"], "host");
        assert_eq!(v["results"][0]["bytes"], 65536);
        assert_eq!(v["from"]["gid"], "::ffff:10.0.2.15");
        assert!(v["from"].get("gid_raw").is_none());
        assert_eq!(v["threshold"]["applicable"], false);
        assert_eq!(v["passed"], true);
    }

    #[test]
    fn bytes_are_human() {
        assert_eq!(human_bytes(8 << 20), "8 MiB");
        assert_eq!(human_bytes(65536), "64 KiB");
        assert_eq!(human_bytes(1000), "1000 B");
    }
}
