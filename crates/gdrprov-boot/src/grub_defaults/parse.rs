//! Finding the plain top-level assignments of a variable in a defaults file,
//! and refusing every construct a shell could read differently.

use super::*;

pub(super) fn check_var(var: &str) -> Result<(), GrubError> {
    let mut chars = var.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(GrubError::BadVariable {
            var: var.to_owned(),
        })
    }
}

pub(super) fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether `text` contains `var` as a whole identifier.
pub(super) fn mentions(text: &str, var: &str) -> bool {
    let b = text.as_bytes();
    text.match_indices(var).any(|(i, _)| {
        let before = i.checked_sub(1).and_then(|j| b.get(j)).copied();
        let after = b.get(i + var.len()).copied();
        !before.is_some_and(is_name_byte) && !after.is_some_and(is_name_byte)
    })
}

/// A word with its quote and backslash characters dropped: the name a shell
/// would see in `GRUB_CMDLINE_""LINUX`.
pub(super) fn dequoted(word: &str) -> String {
    word.chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\'))
        .collect()
}

/// Builtins that set or unset variables named by their arguments.
pub(super) fn sets_named_variable(cmd: &str, args: &[(&str, shell::Word)]) -> bool {
    match cmd {
        "export" | "readonly" | "declare" | "typeset" | "local" | "read" | "getopts"
        | "mapfile" | "readarray" | "let" | "unset" => true,
        "printf" => args.iter().any(|(t, _)| t.starts_with("-v")),
        _ => false,
    }
}

/// Whether the name part (before `=`) of an argument is computed at run time.
pub(super) fn computed_name(word: &str) -> bool {
    let name = word.split_once('=').map_or(word, |(n, _)| n);
    name.contains(['$', '`'])
}

/// `NAME=` at the start of a word: the name and the offset of the value.
pub(super) fn assignment_name(word: &str) -> Option<(&str, usize)> {
    let eq = word.find('=')?;
    let name = word.get(..eq)?;
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, eq + 1))
}

/// The words of a command, each with its text.
fn words_of<'t>(
    text: &'t str,
    cmd: &shell::Command,
    name: &str,
    line: usize,
) -> Result<Vec<(&'t str, shell::Word)>, GrubError> {
    cmd.words
        .iter()
        .map(|w| text.get(w.start..w.end).map(|t| (t, *w)))
        .collect::<Option<Vec<(&str, shell::Word)>>>()
        .ok_or_else(|| GrubError::Syntax {
            file: name.to_owned(),
            line,
            what: "a word does not end on a character boundary".into(),
        })
}

/// `eval`, sourcing, `return`/`exit`/`exec`, and builtins that set a variable named at run time
/// make the file opaque: what it sets cannot be known.
fn refuse_opaque(
    words: &[(&str, shell::Word)],
    opaque: &dyn Fn(&str) -> GrubError,
) -> Result<(), GrubError> {
    let cmd_at = words.iter().position(|(t, _)| assignment_name(t).is_none());
    if let Some(at) = cmd_at {
        let cmd_word = words.get(at).map(|(t, _)| dequoted(t)).unwrap_or_default();
        let args = words.get(at + 1..).unwrap_or_default();
        // `eval` and sourcing can set anything; `return`/`exit`/`exec`
        // can skip the assignments after them.
        if matches!(
            cmd_word.as_str(),
            "eval" | "." | "source" | "return" | "exit" | "exec"
        ) {
            return Err(opaque(&cmd_word));
        }
        // `export "$N=x"` and the like set a variable named at run time.
        if sets_named_variable(&cmd_word, args) && args.iter().any(|(t, _)| computed_name(t)) {
            return Err(opaque(&cmd_word));
        }
    }
    Ok(())
}

/// An assignment of the variable is understood only at the top level, alone, on one line.
fn refuse_placement(
    cmd: &shell::Command,
    nesting_ok: bool,
    unsupported: &dyn Fn(&str) -> GrubError,
) -> Result<(), GrubError> {
    if cmd.depth > 0 || !nesting_ok {
        return Err(unsupported(
            "it is inside an if/for/case/function or braces, so whether it runs is not known",
        ));
    }
    if !cmd.standalone {
        return Err(unsupported(
            "it is part of a pipeline, an && / || list, runs in the background or has a redirection",
        ));
    }
    if cmd.continued {
        return Err(unsupported(
            "it continues over several lines with a backslash",
        ));
    }
    Ok(())
}

/// The plain top-level assignments of `var` in one defaults file (`idx` in the set), added to
/// `out`; any construct a shell could read differently is refused.
pub(super) fn parse_file(
    idx: usize,
    name: &str,
    text: &str,
    var: &str,
    out: &mut Vec<Assignment>,
) -> Result<(), GrubError> {
    let lexed = shell::lex(text).map_err(|e| lex_error(name, text, e))?;
    for cmd in &lexed.commands {
        let line = cmd
            .words
            .first()
            .map_or(1, |w| shell::line_of(text, w.start));
        let words = words_of(text, cmd, name, line)?;
        let unsupported = |reason: &str| GrubError::Unsupported {
            file: name.to_owned(),
            line,
            var: var.to_owned(),
            reason: reason.to_owned(),
        };
        let opaque = |command: &str| GrubError::Opaque {
            file: name.to_owned(),
            line,
            command: command.to_owned(),
            var: var.to_owned(),
        };
        refuse_opaque(&words, &opaque)?;
        // `export GRUB_CMDLINE_""LINUX=x` names the variable too.
        if !words
            .iter()
            .any(|(t, _)| mentions(t, var) || mentions(&dequoted(t), var))
        {
            continue;
        }
        refuse_placement(cmd, lexed.nesting_ok, &unsupported)?;
        let (exported, operands) = match words.split_first() {
            Some((("export", _), rest)) => (true, rest),
            _ => (false, words.as_slice()),
        };
        if exported && operands.len() != 1 {
            return Err(unsupported("`export` names more than one variable"));
        }
        for (t, w) in operands {
            if exported && *t == var {
                continue; // `export VAR` does not change the value
            }
            let Some((wname, voff)) = assignment_name(t) else {
                if t.contains(&format!("{var}+=")) {
                    return Err(unsupported("it appends with +="));
                }
                return Err(unsupported(
                    "a command uses it; only plain assignments are understood",
                ));
            };
            if wname != var {
                if mentions(t, var) {
                    return Err(unsupported("another variable's value refers to it"));
                }
                continue;
            }
            let start = w.start + voff;
            let (quoting, pieces) =
                decode_value(text, start, w.end, var).map_err(|r| unsupported(&r))?;
            out.push(Assignment {
                file: idx,
                line,
                exported,
                value_span: (start, w.end),
                quoting,
                self_reference: pieces.contains(&Piece::SelfRef),
                pieces,
            });
        }
    }
    Ok(())
}
