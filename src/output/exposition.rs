//! The Prometheus text exposition format (0.0.4): the one label escaper
//! that every metric of gdrprov uses (verify's in output/metrics.rs, the
//! health checks' in checks/health/metrics.rs).

/// A label value in the exposition format: `\`, `"` and newlines escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
