//! One validator for text that reaches a generated file or a command line
//! (issue 37): a profile's name and description, NCCL values, the variables
//! of a built-in template. Such text is one line: no control character (a
//! newline, CR, ESC, NUL, ...), no Unicode line or paragraph separator, and
//! at most a stated length. A name like `x)\ninstall nvme /bin/false` would
//! otherwise become live lines in `gdrprov-blacklist.conf`.

/// A profile's name: in every generated file's header, in `state.json`, in
/// the verify unit's `ExecStart`.
pub const MAX_NAME: usize = 64;
/// A profile's description (`profile list`).
pub const MAX_DESCRIPTION: usize = 4096;
/// A value written on one line of a generated file (`/etc/nccl.conf`, a
/// built-in template's variable).
pub const MAX_VALUE: usize = 1024;

/// Why `s` may not be one line of a generated file (at most `max` bytes);
/// `None` when it may. The reason names the character and the fix.
pub fn line_problem(s: &str, max: usize) -> Option<String> {
    if let Some(c) = s
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        let what = match c {
            '\n' => "a newline".to_string(),
            '\r' => "a carriage return".to_string(),
            '\t' => "a tab".to_string(),
            c => format!("the control character U+{:04X}", c as u32),
        };
        return Some(format!(
            "it contains {what}; it is written into generated files and command lines, which take one line of printable text: remove it"
        ));
    }
    (s.len() > max).then(|| {
        format!(
            "it is {} bytes long, over the {max} allowed; shorten it",
            s.len()
        )
    })
}

/// [`line_problem`] as a check of the profile key `key`.
pub fn check_line(key: &str, s: &str, max: usize) -> Result<(), String> {
    match line_problem(s, max) {
        Some(why) => Err(format!("{key}: {:?}: {why}", shorten(s))),
        None => Ok(()),
    }
}

/// At most 80 characters of `s`, for a message.
fn shorten(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_printable_line_passes_and_anything_else_is_named() {
        assert_eq!(line_problem("rdma-dmabuf (site) ü", MAX_NAME), None);
        for (s, what) in [
            ("x)\ninstall nvme /bin/false", "a newline"),
            ("a\rb", "a carriage return"),
            ("a\tb", "a tab"),
            ("a\u{1b}[31mb", "U+001B"),
            ("a\0b", "U+0000"),
            ("a\u{85}b", "U+0085"),
            ("a\u{2028}b", "U+2028"),
        ] {
            let why = line_problem(s, MAX_NAME).unwrap_or_default();
            assert!(why.contains(what), "{s:?}: {why}");
        }
        assert!(line_problem(&"a".repeat(65), MAX_NAME).is_some_and(|w| w.contains("65 bytes")));
        assert_eq!(line_problem(&"a".repeat(64), MAX_NAME), None);
    }
}
