//! The Prometheus text exposition format (0.0.4): the one label escaper
//! that every metric of gdrprov uses (verify's in output/metrics.rs, the
//! health checks' in checks/health/metrics.rs).

/// A label value in the exposition format: `\`, `"` and newlines escaped.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exposition format escapes exactly `\`, `"` and a newline; every
    /// other character, CR and ESC included, is a valid raw UTF-8 label
    /// character. Issue 43: the terminal escaper's `\r` and `\x1b`, added
    /// on top, were invalid escapes and the collector rejected the file
    /// (Output::exposition prints it as made).
    #[test]
    fn label_values_are_escaped_as_the_format_defines() {
        assert_eq!(
            escape_label("a\\b\"c\nd\re\u{1b}f ü"),
            "a\\\\b\\\"c\\nd\re\u{1b}f ü"
        );
        // Every backslash in the result begins one of the three escapes.
        let out = escape_label("x\\\\\"\n\r\u{1b}\\n");
        let mut chars = out.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                assert!(matches!(chars.next(), Some('\\' | '"' | 'n')), "{out:?}");
            }
        }
    }
}
