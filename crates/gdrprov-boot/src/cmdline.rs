//! The kernel command line: splitting it the way the kernel does, naming the
//! key of an argument, and refusing arguments gdrprov will not write.

use thiserror::Error;

/// Why gdrprov refuses to write a kernel argument.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ArgError {
    /// The argument is the empty string.
    #[error("empty kernel argument: remove the empty entry from the profile")]
    Empty,
    /// The argument contains a character that a shell or GRUB would interpret.
    #[error(
        "kernel argument {arg:?} contains {what} (byte {index}): gdrprov refuses it because the shell \
         that reads /etc/default/grub or GRUB itself would interpret it; write the argument without \
         it, or set such an argument by hand"
    )]
    ForbiddenChar {
        /// The argument as given.
        arg: String,
        /// The offending character, described for people.
        what: String,
        /// Byte offset of the character in `arg`.
        index: usize,
    },
    /// The argument is longer than any kernel command line can hold.
    #[error(
        "kernel argument starting {start:?} is {len} bytes long: gdrprov refuses arguments over \
         {MAX_ARG_LEN} bytes (the whole kernel command line holds 2048 bytes on x86 and arm64)"
    )]
    TooLong {
        /// The first bytes of the argument.
        start: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The argument starts with `=`.
    #[error("kernel argument {arg:?} has no name before '=': write it as name=value")]
    EmptyKey {
        /// The argument as given.
        arg: String,
    },
}

/// The longest argument gdrprov writes, in bytes.
pub const MAX_ARG_LEN: usize = 1024;

/// Whitespace as the kernel's `isspace` sees it.
pub fn is_kernel_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// Split a command line into arguments the way the kernel's `next_arg` does:
/// whitespace separates arguments except inside double quotes, so
/// `acpi_osi="Windows 2020"` is one argument. Arguments keep their quotes.
pub fn split(cmdline: &str) -> Vec<String> {
    split_spans(cmdline)
        .into_iter()
        .filter_map(|(s, e)| cmdline.get(s..e))
        .map(str::to_owned)
        .collect()
}

/// Like [`split`], but returns the byte span `(start, end)` of each argument.
pub fn split_spans(cmdline: &str) -> Vec<(usize, usize)> {
    split_positions(cmdline.char_indices(), cmdline.len())
}

/// The kernel's splitting over `(position, char)` pairs ending at `end`.
pub(crate) fn split_positions<I>(chars: I, end: usize) -> Vec<(usize, usize)>
where
    I: Iterator<Item = (usize, char)>,
{
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    let mut in_quote = false;
    for (i, c) in chars {
        match start {
            None if is_kernel_space(c) => {}
            None => {
                start = Some(i);
                in_quote = c == '"';
            }
            Some(s) if is_kernel_space(c) && !in_quote => {
                spans.push((s, i));
                start = None;
            }
            Some(_) => {
                if c == '"' {
                    in_quote = !in_quote;
                }
            }
        }
    }
    if let Some(s) = start {
        spans.push((s, end));
    }
    spans
}

/// The key of an argument: `iommu` for `iommu=pt`, `quiet` for `quiet`.
pub fn key(arg: &str) -> &str {
    match arg.split_once('=') {
        Some((k, _)) => k,
        None => arg,
    }
}

/// The value of an argument: `Some("pt")` for `iommu=pt`, `None` for `quiet`.
pub fn value(arg: &str) -> Option<&str> {
    arg.split_once('=').map(|(_, v)| v)
}

/// The key with `-` written as `_`: the kernel treats the two alike in
/// parameter names (`parameq`), so `intel-iommu` and `intel_iommu` are one key.
pub fn normalized_key(arg: &str) -> String {
    key(arg).replace('-', "_")
}

/// Whether two arguments have the same key (see [`normalized_key`]).
pub fn same_key(a: &str, b: &str) -> bool {
    normalized_key(a) == normalized_key(b)
}

/// Whether two arguments are the same setting: same key, same value.
pub fn same_arg(a: &str, b: &str) -> bool {
    same_key(a, b) && value(a) == value(b)
}

/// Refuse an argument gdrprov should not write into a shell file that GRUB
/// later turns into a GRUB script: quotes, `$`, backticks, `;`, `\`,
/// whitespace, control characters, other shell/GRUB operators and non-ASCII.
pub fn validate_arg(arg: &str) -> Result<(), ArgError> {
    if arg.is_empty() {
        return Err(ArgError::Empty);
    }
    if arg.len() > MAX_ARG_LEN {
        let cut = (0..=32)
            .rev()
            .find(|&i| arg.is_char_boundary(i))
            .unwrap_or(0);
        return Err(ArgError::TooLong {
            start: arg[..cut].to_owned(),
            len: arg.len(),
        });
    }
    if let Some((index, c)) = arg.char_indices().find(|&(_, c)| forbidden(c).is_some()) {
        return Err(ArgError::ForbiddenChar {
            arg: arg.to_owned(),
            what: forbidden(c).unwrap_or_default(),
            index,
        });
    }
    if arg.starts_with('=') {
        return Err(ArgError::EmptyKey {
            arg: arg.to_owned(),
        });
    }
    Ok(())
}

/// Validate every argument of a list, stopping at the first bad one.
pub fn validate_args<S: AsRef<str>>(args: &[S]) -> Result<(), ArgError> {
    args.iter().try_for_each(|a| validate_arg(a.as_ref()))
}

/// A description of `c` if gdrprov refuses it in an argument.
fn forbidden(c: char) -> Option<String> {
    let what = match c {
        '"' => "a double quote '\"'",
        '\'' => "a single quote \"'\"",
        '$' => "a dollar sign '$'",
        '`' => "a backtick '`'",
        ';' => "a semicolon ';'",
        '\\' => "a backslash '\\'",
        '|' => "a pipe '|'",
        '&' => "an ampersand '&'",
        '<' | '>' => "a redirection '<' or '>'",
        '#' => "a comment sign '#'",
        ' ' => "a space",
        '\t' => "a tab",
        '\n' => "a newline",
        '\r' => "a carriage return",
        c if c.is_control() => return Some(format!("a control character U+{:04X}", c as u32)),
        c if !c.is_ascii() => return Some(format!("a non-ASCII character U+{:04X}", c as u32)),
        _ => return None,
    };
    Some(what.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_plain_and_quoted() {
        assert_eq!(
            split("  quiet splash\tiommu=pt\n"),
            ["quiet", "splash", "iommu=pt"]
        );
        assert_eq!(
            split(r#"ro acpi_osi="Windows 2020" quiet"#),
            ["ro", r#"acpi_osi="Windows 2020""#, "quiet"]
        );
        assert_eq!(split(r#""a b" c"#), [r#""a b""#, "c"]);
        // An unterminated quote runs to the end, as in the kernel.
        assert_eq!(split(r#"x="a b c"#), [r#"x="a b c"#]);
        assert!(split("").is_empty());
        assert!(split(" \t\r\n").is_empty());
    }

    #[test]
    fn split_proc_cmdline() {
        let running =
            "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic root=UUID=0b6a-11 ro quiet splash vt.handoff=7\n";
        assert_eq!(
            split(running),
            [
                "BOOT_IMAGE=/vmlinuz-6.8.0-45-generic",
                "root=UUID=0b6a-11",
                "ro",
                "quiet",
                "splash",
                "vt.handoff=7"
            ]
        );
    }

    #[test]
    fn keys_and_values() {
        assert_eq!(key("iommu=pt"), "iommu");
        assert_eq!(key("quiet"), "quiet");
        assert_eq!(key("root=UUID=abc"), "root");
        assert_eq!(value("root=UUID=abc"), Some("UUID=abc"));
        assert_eq!(value("quiet"), None);
        assert_eq!(value("foo="), Some(""));
        assert!(same_key("intel-iommu=on", "intel_iommu=off"));
        assert!(same_arg("intel-iommu=on", "intel_iommu=on"));
        assert!(!same_arg("iommu=pt", "iommu=off"));
        assert!(!same_arg("quiet", "quiet="));
    }

    #[test]
    fn validate_accepts_real_arguments() {
        for a in [
            "iommu=pt",
            "intel_iommu=on",
            "quiet",
            "console=ttyS0,115200n8",
            "rd.lvm.lv=rhel/root",
            "crashkernel=1G-4G:192M,4G-64G:256M",
            "vfio-pci.ids=10de:2330",
            "isolcpus=1-3,5",
        ] {
            assert_eq!(validate_arg(a), Ok(()), "{a}");
        }
    }

    #[test]
    fn validate_refuses_each_forbidden_character() {
        for bad in [
            "a\"b", "a'b", "a$b", "a`b", "a;b", "a\\b", "a b", "a\tb", "a\nb", "a\rb", "a\x01b",
            "a\x7fb", "a|b", "a&b", "a<b", "a>b", "a#b", "aéb",
        ] {
            match validate_arg(bad) {
                Err(ArgError::ForbiddenChar { arg, index, .. }) => {
                    assert_eq!(arg, bad);
                    assert_eq!(index, 1, "{bad:?}");
                }
                other => panic!("{bad:?} gave {other:?}"),
            }
        }
        assert_eq!(validate_arg(""), Err(ArgError::Empty));
        assert!(matches!(validate_arg("=x"), Err(ArgError::EmptyKey { .. })));
    }

    #[test]
    fn error_message_names_argument_character_and_fix() {
        let msg = validate_arg("memmap=100M$0x1000")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("memmap=100M$0x1000"), "{msg}");
        assert!(msg.contains("dollar sign"), "{msg}");
        assert!(msg.contains("by hand"), "{msg}");
        let msg = validate_arg("a\nb")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(msg.contains("\"a\\nb\""), "{msg}");
        assert!(msg.contains("newline"), "{msg}");
    }
}
