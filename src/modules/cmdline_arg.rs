//! Which kernel arguments a profile may ask for. An argument ends up inside a
//! shell-quoted GRUB variable, so anything a shell or GRUB would interpret is
//! refused outright rather than escaped.

/// Checks one argument (`key=value` or `flag`); the error says what is wrong.
pub fn validate(arg: &str) -> Result<(), String> {
    if arg.is_empty() {
        return Err("an empty kernel argument".into());
    }
    if arg.len() > 1024 {
        return Err(format!("kernel argument `{}...` is longer than 1024 bytes", &arg.chars().take(32).collect::<String>()));
    }
    for c in arg.chars() {
        let bad = match c {
            '"' | '\'' => Some("a quote"),
            '$' => Some("`$`"),
            '`' => Some("a backtick"),
            ';' => Some("`;`"),
            '\\' => Some("a backslash"),
            '\n' | '\r' => Some("a newline"),
            c if c.is_control() => Some("a control character"),
            c if c.is_whitespace() => Some("whitespace"),
            _ => None,
        };
        if let Some(what) = bad {
            return Err(format!(
                "kernel argument {arg:?} contains {what}; gdrprov refuses it because the shell and GRUB would interpret it. Write plain `key=value` arguments"
            ));
        }
    }
    if arg.starts_with('=') {
        return Err(format!("kernel argument {arg:?} has no key before `=`"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn plain_arguments_pass_and_shell_syntax_is_refused() {
        for ok in ["iommu=pt", "intel_iommu=on", "quiet", "rd.lvm.lv=rhel/root", "console=ttyS0,115200"] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
        for bad in ["a\"b", "a'b", "x=$(id)", "x=`id`", "a;b", "a\\b", "a\nb", "a b", "a\tb", "", "=x", "a\u{7}"] {
            assert!(validate(bad).is_err(), "{bad:?} accepted");
        }
    }
}
