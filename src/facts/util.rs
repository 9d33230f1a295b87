//! Small helpers shared by the probes.

use crate::host::Host;

/// A sysfs-style one-value file, trimmed; `None` when absent or empty.
pub fn read_trim(host: &Host, path: &str) -> Option<String> {
    let s = host.read_fact(path)?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// A number written as `0x10de` or `4` or `-1`.
pub fn read_int(host: &Host, path: &str) -> Option<i64> {
    let s = read_trim(host, path)?;
    parse_int(&s)
}

pub fn parse_int(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        i64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// The first run of text that starts with a digit and goes on with digits,
/// dots and dashes: `Version: 6.22` gives `6.22`, `MLNX_OFED_LINUX-24.10-3.2.5.0:` gives `24.10-3.2.5.0`.
pub fn version_in(text: &str) -> Option<String> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| {
            !(c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '_' || c == '+')
        })
        .unwrap_or(rest.len());
    let v = rest[..end].trim_end_matches(['.', '-']);
    (!v.is_empty()).then(|| v.to_string())
}

/// Output of a probe command when it succeeded.
pub fn query_ok(host: &Host, argv: &[&str]) -> Option<String> {
    let out = host.query(argv)?;
    out.success().then_some(out.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_found_in_text() {
        assert_eq!(
            version_in("MLNX_OFED_LINUX-24.10-3.2.5.0:").as_deref(),
            Some("24.10-3.2.5.0")
        );
        assert_eq!(version_in(" Version: 6.22\n").as_deref(), Some("6.22"));
        assert_eq!(version_in("no digits"), None);
        assert_eq!(parse_int("0x10de"), Some(0x10de));
        assert_eq!(parse_int("-1"), Some(-1));
    }
}
