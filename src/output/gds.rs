//! `bench gds`'s text report and its node-exporter textfile.

use std::fmt::Write as _;

use crate::bench::gds::GdsReport;
use crate::bench::report::human_bytes;
use crate::output::exposition::escape_label as esc;

/// The text report: where, through what, the figures per size, the mode and why.
pub fn text(r: &GdsReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "GDS bench in {} ({} on {}, {}), GPU {} ({}), libcufile {}",
        r.dir,
        r.fs.as_deref().unwrap_or("?"),
        r.device.as_deref().unwrap_or("?"),
        r.transport.as_deref().unwrap_or("not a block device"),
        r.gpu,
        r.gpu_pci,
        r.libcufile.as_deref().unwrap_or("?")
    );
    if let Some(f) = &r.file {
        let _ = writeln!(s, "reads: {f} (the user's file, left as it was)");
    }
    let _ = writeln!(
        s,
        "cuFile: {} thread(s), {} per request, {}; driver supports: {}; nvidia-fs {}",
        r.threads,
        human_bytes(r.chunk as u64),
        if r.o_direct {
            "O_DIRECT"
        } else {
            "buffered (O_DIRECT refused)"
        },
        if r.driver.supported.is_empty() {
            "none".to_string()
        } else {
            r.driver.supported.join(", ")
        },
        r.driver.nvfs_version.as_deref().unwrap_or("not seen")
    );
    let _ = writeln!(
        s,
        "{:>10}  {:>14}  {:>14}  {:>11}  data",
        "size", "read cold GB/s", "read warm GB/s", "write GB/s"
    );
    for x in &r.results {
        let _ = writeln!(
            s,
            "{:>10}  {:>14.2}  {:>14.2}  {:>11.2}  {}",
            human_bytes(x.bytes),
            x.read_cold_gbs,
            x.read_warm_gbs,
            x.write_gbs,
            if x.data_ok { "ok" } else { "WRONG" }
        );
    }
    let _ = writeln!(
        s,
        "P2PDMA as cuFile asks the CUDA driver: {}",
        crate::bench::gds_log::words(&r.cufile_p2pdma)
    );
    let _ = writeln!(s, "mode: {}", r.mode.name());
    for c in &r.compat_causes {
        let _ = writeln!(s, "  compat because {}; fix: {}", c.what, c.fix);
    }
    let _ = writeln!(
        s,
        "{}",
        if r.passed {
            "PASS: every byte checked"
        } else {
            "FAIL: data check"
        }
    );
    s
}

/// The report as Prometheus text exposition, one series per size and direction.
pub fn prometheus(r: &GdsReport, now: u64) -> String {
    let labels = format!(
        "dir=\"{}\",gpu=\"{}\",mode=\"{}\"",
        esc(&r.dir),
        esc(&r.gpu_pci),
        r.mode.name()
    );
    let mut s = String::new();
    let _ = writeln!(s, "# HELP gdrprov_gds_gbs cuFile throughput into and out of GPU memory per size, GB/s (median of the rounds).");
    let _ = writeln!(s, "# TYPE gdrprov_gds_gbs gauge");
    for x in &r.results {
        for (op, v) in [
            ("read_cold", x.read_cold_gbs),
            ("read_warm", x.read_warm_gbs),
            ("write", x.write_gbs),
        ] {
            let _ = writeln!(
                s,
                "gdrprov_gds_gbs{{{labels},op=\"{op}\",bytes=\"{}\"}} {v}",
                x.bytes
            );
        }
    }
    let _ = writeln!(s, "# HELP gdrprov_gds_direct 1 when cuFile ran in a direct mode (p2pdma or nvfs), 0 in compat mode.");
    let _ = writeln!(s, "# TYPE gdrprov_gds_direct gauge");
    let direct = u8::from(r.mode != crate::facts::gds::GdsMode::Compat);
    let _ = writeln!(s, "gdrprov_gds_direct{{{labels}}} {direct}");
    let _ = writeln!(
        s,
        "# HELP gdrprov_gds_data_ok 1 when every byte read and written back was right."
    );
    let _ = writeln!(s, "# TYPE gdrprov_gds_data_ok gauge");
    let _ = writeln!(s, "gdrprov_gds_data_ok{{{labels}}} {}", u8::from(r.passed));
    let _ = writeln!(
        s,
        "# HELP gdrprov_gds_timestamp_seconds When the bench ran (Unix seconds)."
    );
    let _ = writeln!(s, "# TYPE gdrprov_gds_timestamp_seconds gauge");
    let _ = writeln!(s, "gdrprov_gds_timestamp_seconds{{{labels}}} {now}");
    s
}
