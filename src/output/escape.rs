//! The one escaper for text gdrprov did not write itself (issue 37): what a
//! peer said, a line of a log, a file's content or name, a profile's text.
//! Every sink of the output layer (`Output::text`, `raw`, `note`, `error`,
//! the prompt) passes what it prints through [`escape`], and the renderers
//! that colour their text (the plan's diff) escape each piece before they
//! paint it, so an escape sequence, a carriage return or a bidirectional
//! override read from outside never reaches the terminal as itself: it is
//! shown as `\x1b`, `\r`, `\u{202e}`.
//!
//! Kept as they are: newlines (the sinks print lines; a one-line piece, a
//! log line or a peer's message, has none by the time it gets here) and
//! tabs. Escaped: every other C0 control character and DEL (`\xNN`), the
//! C1 controls (U+0080 to U+009F, which some terminals read as ESC [), and
//! the Unicode characters that reorder or break a line (U+061C, U+200E,
//! U+200F, U+2028, U+2029, U+202A to U+202E, U+2066 to U+2069), as
//! `\u{...}`. Backslashes are kept: the escaped text is for reading, not
//! for parsing back.

use std::borrow::Cow;

/// Whether `c` is shown escaped.
fn hostile(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true, // C0, DEL, C1
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{2028}' | '\u{2029}' => true,
        '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// `text` with every character that could drive the terminal shown as an
/// escape (`\x1b`, `\r`, `\u{9b}`, `\u{202e}`); text without one is
/// returned as it is, without a copy.
pub fn escape(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(hostile) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        match c {
            '\r' => out.push_str("\\r"),
            c if hostile(c) && (c as u32) < 0x80 => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if hostile(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` as one line: [`escape`], and a newline shown as `\n` too. For a
/// piece of outside text that goes into a line of its own (a document's
/// problem as its parser quotes it, a file's name): a newline in it would
/// begin a line the reader takes for gdrprov's.
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.contains('\n') {
        return escape(text);
    }
    Cow::Owned(escape(&text.replace('\n', "\\n")).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_shows_a_newline_escaped() {
        assert_eq!(one_line("a\n  b\r\u{1b}[31m"), "a\\n  b\\r\\x1b[31m");
        assert!(matches!(one_line("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn terminal_controls_are_shown_escaped_and_plain_text_is_kept() {
        assert!(matches!(escape("plain text: ü, 5 µs"), Cow::Borrowed(_)));
        assert_eq!(escape("a\tb\nc"), "a\tb\nc");
        assert_eq!(escape("\u{1b}[2J\u{1b}]0;x\u{7}"), "\\x1b[2J\\x1b]0;x\\x07");
        assert_eq!(escape("ok\rforged"), "ok\\rforged");
        assert_eq!(escape("a\u{9b}31m\u{7f}"), "a\\u{9b}31m\\x7f");
        assert_eq!(escape("x\u{202e}gpj.exe"), "x\\u{202e}gpj.exe");
        assert_eq!(escape("\0"), "\\x00");
    }
}
