//! The pure editor for `/etc/default/grub` and `/etc/default/grub.d/*.cfg`.
//!
//! `grub-mkconfig` sources `/etc/default/grub` and then every
//! `/etc/default/grub.d/*.cfg` in glob order; the last assignment wins. This
//! module finds every assignment of a variable across those files, computes
//! the value a shell would, and plans the smallest byte edit that makes the
//! value right: it removes arguments where they are written, appends new ones
//! to the last assignment in its own quoting style, and re-checks the result.
//!
//! Anything it cannot understand for certain (command substitution, other
//! variables, conditionals, `eval`, sourcing, continuations, here-documents)
//! is refused with the file and line, never guessed. The variable is assumed
//! unset in the environment of `grub-mkconfig`.

use thiserror::Error;

use super::cmdline::{self, ArgError};
use super::shell::{self, LexError};

/// The variable whose arguments go to every kernel entry, recovery included.
pub const CMDLINE_LINUX: &str = "GRUB_CMDLINE_LINUX";
/// The variable whose arguments go to normal (non-recovery) entries only.
pub const CMDLINE_LINUX_DEFAULT: &str = "GRUB_CMDLINE_LINUX_DEFAULT";

/// Why gdrprov will not read or edit the GRUB defaults.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrubError {
    /// The caller passed no files.
    #[error("no GRUB defaults file given: expected /etc/default/grub first")]
    NoFiles,
    /// The same file name was given twice.
    #[error("{file} was given twice")]
    DuplicateFile {
        /// File name as given.
        file: String,
    },
    /// The variable name is not a shell name.
    #[error("{var:?} is not a shell variable name")]
    BadVariable {
        /// The name given.
        var: String,
    },
    /// The file is not shell gdrprov can lex.
    #[error("{file}:{line}: {what}; gdrprov will not edit this file: fix it by hand so that `sh -n {file}` passes")]
    Syntax {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// What is wrong.
        what: String,
    },
    /// A line that sets or uses the variable in a way gdrprov does not understand.
    #[error(
        "{file}:{line}: gdrprov will not edit {var} here: {reason}. Simplify that line by hand to a \
         plain {var}=\"...\" assignment and run gdrprov again"
    )]
    Unsupported {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The variable.
        var: String,
        /// What gdrprov does not understand.
        reason: String,
    },
    /// A command that could change any variable invisibly (`eval`, `.`,
    /// `source`) or skip the rest of the file (`return`, `exit`, `exec`).
    #[error(
        "{file}:{line}: `{command}` could set or skip {var} in a way gdrprov cannot see, so gdrprov \
         will not edit the GRUB defaults: replace that line by plain assignments by hand"
    )]
    Opaque {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The command word.
        command: String,
        /// The variable.
        var: String,
    },
    /// An argument to add is not safe to write.
    #[error("cannot add to the kernel command line: {0}")]
    BadArgument(#[from] ArgError),
    /// The same argument is both to be added and removed.
    #[error("kernel argument {arg:?} is both to be added and removed")]
    Contradiction {
        /// The argument.
        arg: String,
    },
    /// An argument to remove is not written in one place of one assignment.
    #[error(
        "{file}:{line}: kernel argument {arg:?} of {var} is assembled from several pieces; gdrprov \
         will not edit it: write it as one word by hand"
    )]
    NotOneWord {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// The variable.
        var: String,
        /// The argument.
        arg: String,
    },
    /// The planned edit failed its own re-check; nothing must be written.
    #[error(
        "internal check failed: after the edit {var} would be {got:?} instead of {want:?}; gdrprov \
         changed nothing (please report this with the GRUB defaults files)"
    )]
    VerifyFailed {
        /// The variable.
        var: String,
        /// What the edit was meant to produce.
        want: Vec<String>,
        /// What re-reading the edited files gives.
        got: Vec<String>,
    },
}

/// How an assignment's value is quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// `VAR=`
    Empty,
    /// `VAR=word`
    Unquoted,
    /// `VAR='...'`
    Single,
    /// `VAR="..."`
    Double,
}

/// One piece of a decoded value: a character with the raw bytes that wrote
/// it, or the self-reference `$VAR` / `${VAR}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Char { ch: char, start: usize, end: usize },
    SelfRef,
}

/// One plain top-level assignment of the variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Index of the file in the slice given.
    pub file: usize,
    /// 1-based line of the assignment.
    pub line: usize,
    /// Written as `export VAR=...`.
    pub exported: bool,
    /// Byte span of the value (after `=`, quotes included) in the file.
    pub value_span: (usize, usize),
    /// Quoting of the value.
    pub quoting: Quoting,
    /// The value includes the variable's previous value (`"$VAR ..."`).
    pub self_reference: bool,
    pieces: Vec<Piece>,
}

/// A planned new content for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// File name as given.
    pub name: String,
    /// The whole new content.
    pub new_content: String,
}

/// Every plain assignment of `var` across `files` (name, content), in the
/// order a shell runs them. Pass `/etc/default/grub` first, then the
/// `grub.d/*.cfg` files sorted by name (bytewise, as the C locale globs).
pub fn assignments(files: &[(&str, &str)], var: &str) -> Result<Vec<Assignment>, GrubError> {
    check_var(var)?;
    for (i, (name, _)) in files.iter().enumerate() {
        if files.iter().skip(i + 1).any(|(other, _)| other == name) {
            return Err(GrubError::DuplicateFile {
                file: (*name).to_owned(),
            });
        }
    }
    let mut out = Vec::new();
    for (idx, (name, text)) in files.iter().enumerate() {
        parse_file(idx, name, text, var, &mut out)?;
    }
    Ok(out)
}

/// The arguments `var` holds after a shell sources `files` in order, split
/// the way the kernel splits its command line.
pub fn effective_value(files: &[(&str, &str)], var: &str) -> Result<Vec<String>, GrubError> {
    let assigns = assignments(files, var)?;
    Ok(tokens(&expand(&assigns))
        .into_iter()
        .map(|t| t.text)
        .collect())
}

/// The arguments GRUB puts on a normal boot entry: `GRUB_CMDLINE_LINUX`
/// followed by `GRUB_CMDLINE_LINUX_DEFAULT`.
pub fn effective_cmdline(files: &[(&str, &str)]) -> Result<Vec<String>, GrubError> {
    let mut args = effective_value(files, CMDLINE_LINUX)?;
    args.extend(effective_value(files, CMDLINE_LINUX_DEFAULT)?);
    Ok(args)
}

/// Plan the edit that makes `var` hold its current arguments minus every
/// occurrence of `remove`, plus those of `add` it does not hold yet (appended
/// in order). Returns only the files that change; nothing when already right.
pub fn plan_edit(
    files: &[(&str, &str)],
    var: &str,
    add: &[String],
    remove: &[String],
) -> Result<Vec<FileEdit>, GrubError> {
    cmdline::validate_args(add)?;
    if let Some(arg) = add.iter().find(|a| remove.contains(a)) {
        return Err(GrubError::Contradiction { arg: arg.clone() });
    }
    let first = files.first().ok_or(GrubError::NoFiles)?;
    let assigns = assignments(files, var)?;
    let exp = expand(&assigns);
    let toks = tokens(&exp);
    let current: Vec<String> = toks.iter().map(|t| t.text.clone()).collect();
    let mut intended: Vec<String> = current
        .iter()
        .filter(|t| !remove.contains(t))
        .cloned()
        .collect();
    let mut additions: Vec<String> = Vec::new();
    for a in add {
        if !intended.contains(a) && !additions.contains(a) {
            additions.push(a.clone());
        }
    }
    intended.extend(additions.iter().cloned());
    if intended == current {
        return Ok(Vec::new());
    }

    let mut contents: Vec<String> = files.iter().map(|(_, t)| (*t).to_owned()).collect();
    let splices = if assigns.is_empty() {
        vec![append_line(0, first.0, first.1, var, &additions)?]
    } else {
        value_splices(files, var, &assigns, &exp, &toks, remove, &additions)?
    };
    apply_splices(&mut contents, splices);

    let edited: Vec<(&str, &str)> = files
        .iter()
        .zip(&contents)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let got = effective_value(&edited, var)?;
    if got != intended {
        return Err(GrubError::VerifyFailed {
            var: var.to_owned(),
            want: intended,
            got,
        });
    }
    Ok(changed(files, &contents))
}

/// Plan the kernel command line edit GRUB needs: remove `remove` from both
/// `GRUB_CMDLINE_LINUX_DEFAULT` and `GRUB_CMDLINE_LINUX` (either can hold a
/// conflicting argument), and add `add` to `GRUB_CMDLINE_LINUX` (so recovery
/// entries get it too) unless `GRUB_CMDLINE_LINUX_DEFAULT` already holds it.
pub fn plan_cmdline_edit(
    files: &[(&str, &str)],
    add: &[String],
    remove: &[String],
) -> Result<Vec<FileEdit>, GrubError> {
    let step1 = plan_edit(files, CMDLINE_LINUX_DEFAULT, &[], remove)?;
    let mid = merged(files, &step1);
    let mid_files: Vec<(&str, &str)> = files
        .iter()
        .zip(&mid)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let default_args = effective_value(&mid_files, CMDLINE_LINUX_DEFAULT)?;
    let add: Vec<String> = add
        .iter()
        .filter(|a| !default_args.contains(a))
        .cloned()
        .collect();
    let step2 = plan_edit(&mid_files, CMDLINE_LINUX, &add, remove)?;
    let end = merged(&mid_files, &step2);
    let end_files: Vec<(&str, &str)> = files
        .iter()
        .zip(&end)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let got = effective_value(&end_files, CMDLINE_LINUX_DEFAULT)?;
    if got != default_args {
        return Err(GrubError::VerifyFailed {
            var: CMDLINE_LINUX_DEFAULT.to_owned(),
            want: default_args,
            got,
        });
    }
    Ok(changed(files, &end))
}

/// The `linux` line `grub-mkconfig`'s `10_linux` writes into `grub.cfg` for a
/// normal entry with these arguments, wrapped in a menu entry: feed it to
/// `grub-script-check` to check that GRUB itself accepts the arguments.
pub fn grub_script_snippet(args: &[String]) -> String {
    format!(
        "menuentry 'gdrprov check' {{\n\tlinux\t/vmlinuz root=/dev/sda1 ro {}\n}}\n",
        args.join(" ")
    )
}

// ---------------------------------------------------------------- parsing

fn check_var(var: &str) -> Result<(), GrubError> {
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

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Whether `text` contains `var` as a whole identifier.
fn mentions(text: &str, var: &str) -> bool {
    let b = text.as_bytes();
    text.match_indices(var).any(|(i, _)| {
        let before = i.checked_sub(1).and_then(|j| b.get(j)).copied();
        let after = b.get(i + var.len()).copied();
        !before.is_some_and(is_name_byte) && !after.is_some_and(is_name_byte)
    })
}

/// A word with its quote and backslash characters dropped: the name a shell
/// would see in `GRUB_CMDLINE_""LINUX`.
fn dequoted(word: &str) -> String {
    word.chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\'))
        .collect()
}

/// Builtins that set or unset variables named by their arguments.
fn sets_named_variable(cmd: &str, args: &[(&str, shell::Word)]) -> bool {
    match cmd {
        "export" | "readonly" | "declare" | "typeset" | "local" | "read" | "getopts"
        | "mapfile" | "readarray" | "let" | "unset" => true,
        "printf" => args.iter().any(|(t, _)| t.starts_with("-v")),
        _ => false,
    }
}

/// Whether the name part (before `=`) of an argument is computed at run time.
fn computed_name(word: &str) -> bool {
    let name = word.split_once('=').map_or(word, |(n, _)| n);
    name.contains(['$', '`'])
}

/// `NAME=` at the start of a word: the name and the offset of the value.
fn assignment_name(word: &str) -> Option<(&str, usize)> {
    let eq = word.find('=')?;
    let name = word.get(..eq)?;
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some((name, eq + 1))
}

fn lex_error(name: &str, text: &str, e: LexError) -> GrubError {
    let (what, offset) = match e {
        LexError::Unterminated { what, offset } => (format!("unterminated {what}"), offset),
        LexError::HereDoc { offset } => ("a here-document".to_owned(), offset),
        LexError::Bashism { what, offset } => (what.to_owned(), offset),
    };
    GrubError::Syntax {
        file: name.to_owned(),
        line: shell::line_of(text, offset),
        what,
    }
}

fn parse_file(
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
        let words = cmd
            .words
            .iter()
            .map(|w| text.get(w.start..w.end).map(|t| (t, *w)))
            .collect::<Option<Vec<(&str, shell::Word)>>>()
            .ok_or_else(|| GrubError::Syntax {
                file: name.to_owned(),
                line,
                what: "a word does not end on a character boundary".into(),
            })?;
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
        // `export GRUB_CMDLINE_""LINUX=x` names the variable too.
        if !words
            .iter()
            .any(|(t, _)| mentions(t, var) || mentions(&dequoted(t), var))
        {
            continue;
        }
        if cmd.depth > 0 || !lexed.nesting_ok {
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

/// Decode the value at `text[start..end]` into pieces, or say why not.
fn decode_value(
    text: &str,
    start: usize,
    end: usize,
    var: &str,
) -> Result<(Quoting, Vec<Piece>), String> {
    let raw = text.get(start..end).ok_or("the value is not valid text")?;
    let (quoting, pieces) = match raw.as_bytes().first() {
        None => (Quoting::Empty, Vec::new()),
        Some(b'"') => (Quoting::Double, decode_double(text, start, end, var)?),
        Some(b'\'') => (Quoting::Single, decode_single(raw, start)?),
        Some(_) => (Quoting::Unquoted, decode_unquoted(raw, start, var)?),
    };
    check_self_refs(&pieces)?;
    Ok((quoting, pieces))
}

const MIXED: &str = "its value mixes quoted and unquoted parts";

fn decode_double(text: &str, start: usize, end: usize, var: &str) -> Result<Vec<Piece>, String> {
    let close = shell::scan_double(text.as_bytes(), start + 1).map_err(|_| MIXED.to_owned())?;
    if close != end {
        return Err(MIXED.to_owned());
    }
    let inner_end = end.saturating_sub(1);
    let mut pieces = Vec::new();
    let mut i = start + 1;
    while i < inner_end {
        let rest = text
            .get(i..inner_end)
            .ok_or("the value is not valid text")?;
        let mut chars = rest.chars();
        let Some(c) = chars.next() else { break };
        let next = chars.next();
        match c {
            '\\' => match next {
                Some(n @ ('"' | '\\' | '$' | '`')) => {
                    pieces.push(Piece::Char {
                        ch: n,
                        start: i,
                        end: i + 2,
                    });
                    i += 2;
                    continue;
                }
                Some('\n') => {
                    return Err("a backslash-newline continues the value on the next line".into())
                }
                _ => {}
            },
            '$' => {
                i += self_ref_len(rest, var)?;
                pieces.push(Piece::SelfRef);
                continue;
            }
            '`' => return Err("it uses command substitution with backticks".into()),
            '\n' => return Err("its value spans several lines".into()),
            _ => {}
        }
        pieces.push(Piece::Char {
            ch: c,
            start: i,
            end: i + c.len_utf8(),
        });
        i += c.len_utf8();
    }
    Ok(pieces)
}

fn decode_single(raw: &str, start: usize) -> Result<Vec<Piece>, String> {
    let inner = raw
        .strip_prefix('\'')
        .and_then(|r| r.strip_suffix('\''))
        .filter(|r| !r.contains('\''))
        .ok_or(MIXED)?;
    if inner.contains('\n') {
        return Err("its value spans several lines".into());
    }
    Ok(inner
        .char_indices()
        .map(|(o, ch)| Piece::Char {
            ch,
            start: start + 1 + o,
            end: start + 1 + o + ch.len_utf8(),
        })
        .collect())
}

fn decode_unquoted(raw: &str, start: usize, var: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut o = 0;
    while let Some(c) = raw.get(o..).and_then(|r| r.chars().next()) {
        match c {
            '$' => {
                o += self_ref_len(raw.get(o..).unwrap_or_default(), var)?;
                pieces.push(Piece::SelfRef);
                continue;
            }
            '"' | '\'' => return Err(MIXED.into()),
            '\\' => return Err("its unquoted value uses a backslash escape".into()),
            '`' => return Err("it uses command substitution with backticks".into()),
            '~' => return Err("its unquoted value is subject to tilde expansion".into()),
            _ => {}
        }
        pieces.push(Piece::Char {
            ch: c,
            start: start + o,
            end: start + o + c.len_utf8(),
        });
        o += c.len_utf8();
    }
    Ok(pieces)
}

/// At a `$`: the byte length of `$VAR` or `${VAR}`; anything else is refused.
fn self_ref_len(rest: &str, var: &str) -> Result<usize, String> {
    let after = rest.get(1..).unwrap_or_default();
    let (name, len) = if let Some(braced) = after.strip_prefix('{') {
        let close = braced.find('}').ok_or("it has an unterminated ${...}")?;
        let name = braced.get(..close).unwrap_or_default();
        (name, close + 3)
    } else {
        let n = after.bytes().take_while(|&c| is_name_byte(c)).count();
        (after.get(..n).unwrap_or_default(), n + 1)
    };
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("it uses the positional parameter ${name}"));
    }
    if name == var {
        return Ok(len);
    }
    if after.starts_with('(') {
        return Err("it uses command substitution $(...)".into());
    }
    if name.is_empty() || !name.bytes().all(is_name_byte) {
        return Err("it uses a $ expansion other than a plain reference to itself".into());
    }
    Err(format!("it refers to another variable, ${name}"))
}

/// At most one self-reference, with whitespace or the value's edge on both
/// sides, so every argument comes from exactly one assignment.
fn check_self_refs(pieces: &[Piece]) -> Result<(), String> {
    let is_space = |p: Option<&Piece>| match p {
        None => true,
        Some(Piece::Char { ch, .. }) => cmdline::is_kernel_space(*ch),
        Some(Piece::SelfRef) => false,
    };
    let refs: Vec<usize> = pieces
        .iter()
        .enumerate()
        .filter(|(_, p)| **p == Piece::SelfRef)
        .map(|(i, _)| i)
        .collect();
    if refs.len() > 1 {
        return Err("it refers to itself more than once".into());
    }
    for &i in &refs {
        let before = i.checked_sub(1).and_then(|j| pieces.get(j));
        if !is_space(before) || !is_space(pieces.get(i + 1)) {
            return Err("its self-reference is glued to other text without a space".into());
        }
    }
    Ok(())
}

// --------------------------------------------------------------- expansion

/// A character of the expanded value and, when it was written literally, the
/// assignment (index) and raw bytes that wrote it.
#[derive(Debug, Clone, Copy)]
struct ExpChar {
    ch: char,
    origin: (usize, usize, usize),
}

/// The value of the last assignment, as a shell computes it.
fn expand(assigns: &[Assignment]) -> Vec<ExpChar> {
    let mut prev: Vec<ExpChar> = Vec::new();
    for (ai, a) in assigns.iter().enumerate() {
        let mut cur = Vec::new();
        for p in &a.pieces {
            match *p {
                Piece::Char { ch, start, end } => cur.push(ExpChar {
                    ch,
                    origin: (ai, start, end),
                }),
                Piece::SelfRef => cur.extend(prev.iter().copied()),
            }
        }
        prev = cur;
    }
    prev
}

/// An argument of the expanded value and its char range in the expansion.
struct Token {
    text: String,
    range: (usize, usize),
}

fn tokens(exp: &[ExpChar]) -> Vec<Token> {
    cmdline::split_positions(exp.iter().map(|e| e.ch).enumerate(), exp.len())
        .into_iter()
        .map(|(s, e)| Token {
            text: exp
                .get(s..e)
                .unwrap_or_default()
                .iter()
                .map(|c| c.ch)
                .collect(),
            range: (s, e),
        })
        .collect()
}

// ----------------------------------------------------------------- editing

/// A replacement of `file[start..end]`.
struct Splice {
    file: usize,
    start: usize,
    end: usize,
    with: String,
}

fn line_ending(text: &str) -> &'static str {
    if text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// No assignment anywhere: append one to the first file.
fn append_line(
    file: usize,
    name: &str,
    text: &str,
    var: &str,
    additions: &[String],
) -> Result<Splice, GrubError> {
    if text.ends_with('\\') {
        return Err(GrubError::Unsupported {
            file: name.to_owned(),
            line: shell::line_of(text, text.len()),
            var: var.to_owned(),
            reason: "the file ends with a backslash, which would swallow a new line".into(),
        });
    }
    let nl = line_ending(text);
    let mut with = String::new();
    if !text.is_empty() && !text.ends_with('\n') {
        with.push_str(nl);
    }
    with.push_str(&format!("{var}=\"{}\"{nl}", additions.join(" ")));
    Ok(Splice {
        file,
        start: text.len(),
        end: text.len(),
        with,
    })
}

/// The raw byte range that removing token `t` takes away: the argument and
/// the whitespace run before it, or after it when none is before it.
fn removal_range(
    files: &[(&str, &str)],
    var: &str,
    assigns: &[Assignment],
    exp: &[ExpChar],
    t: &Token,
) -> Result<(usize, (usize, usize)), GrubError> {
    let chars = exp.get(t.range.0..t.range.1).unwrap_or_default();
    let first = chars.first().map(|c| c.origin);
    let contiguous = chars.windows(2).all(|w| match w {
        [a, b] => a.origin.0 == b.origin.0 && a.origin.2 == b.origin.1,
        _ => true,
    });
    let (Some((ai, mut start, _)), Some(last), true) = (first, chars.last(), contiguous) else {
        let a = first.and_then(|o| assigns.get(o.0));
        return Err(GrubError::NotOneWord {
            file: a
                .and_then(|a| files.get(a.file))
                .map(|f| f.0)
                .unwrap_or_default()
                .to_owned(),
            line: a.map_or(0, |a| a.line),
            var: var.to_owned(),
            arg: t.text.clone(),
        });
    };
    let mut end = last.origin.2;
    let space_of = |j: usize| {
        exp.get(j)
            .filter(|c| cmdline::is_kernel_space(c.ch) && c.origin.0 == ai)
            .map(|c| (c.origin.1, c.origin.2))
    };
    let mut j = t.range.0;
    while let Some((s, e)) = j.checked_sub(1).and_then(space_of) {
        if e != start {
            break;
        }
        start = s;
        j -= 1;
    }
    if j == t.range.0 {
        let mut k = t.range.1;
        while let Some((s, e)) = space_of(k) {
            if s != end {
                break;
            }
            end = e;
            k += 1;
        }
    }
    Ok((ai, (start, end)))
}

fn value_splices(
    files: &[(&str, &str)],
    var: &str,
    assigns: &[Assignment],
    exp: &[ExpChar],
    toks: &[Token],
    remove: &[String],
    additions: &[String],
) -> Result<Vec<Splice>, GrubError> {
    let mut ranges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); assigns.len()];
    for t in toks.iter().filter(|t| remove.contains(&t.text)) {
        let (ai, r) = removal_range(files, var, assigns, exp, t)?;
        if let Some(v) = ranges.get_mut(ai) {
            v.push(r);
        }
    }
    let last = assigns.len().saturating_sub(1);
    let mut splices = Vec::new();
    for (ai, (a, rs)) in assigns.iter().zip(ranges).enumerate() {
        let adds = if ai == last { additions } else { &[] };
        if rs.is_empty() && adds.is_empty() {
            continue;
        }
        let text = files.get(a.file).map(|f| f.1).unwrap_or_default();
        splices.push(Splice {
            file: a.file,
            start: a.value_span.0,
            end: a.value_span.1,
            with: new_value(text, a, rs, adds),
        });
    }
    Ok(splices)
}

/// The assignment's new raw value: its bytes minus `removed`, plus `adds`
/// at the end in its quoting style (an unquoted value gains double quotes).
fn new_value(
    text: &str,
    a: &Assignment,
    mut removed: Vec<(usize, usize)>,
    adds: &[String],
) -> String {
    removed.sort_unstable();
    let (vs, ve) = a.value_span;
    let mut kept = String::new();
    let mut pos = vs;
    for (s, e) in removed {
        if s > pos {
            kept.push_str(text.get(pos..s).unwrap_or_default());
        }
        pos = pos.max(e);
    }
    kept.push_str(text.get(pos.min(ve)..ve).unwrap_or_default());
    if adds.is_empty() {
        return kept;
    }
    let joined = adds.join(" ");
    let (open, inner, close) = match a.quoting {
        Quoting::Double | Quoting::Single => {
            let q = if a.quoting == Quoting::Double {
                "\""
            } else {
                "'"
            };
            let inner = kept
                .get(1..kept.len().saturating_sub(1))
                .unwrap_or_default();
            (q, inner.to_owned(), q)
        }
        Quoting::Unquoted | Quoting::Empty => ("\"", kept, "\""),
    };
    let sep = if inner.is_empty() || inner.ends_with([' ', '\t']) {
        ""
    } else {
        " "
    };
    format!("{open}{inner}{sep}{joined}{close}")
}

fn apply_splices(contents: &mut [String], mut splices: Vec<Splice>) {
    // From the end backwards, so earlier offsets stay valid.
    splices.sort_by_key(|s| std::cmp::Reverse((s.file, s.start)));
    for s in splices {
        if let Some(c) = contents.get_mut(s.file) {
            if s.start <= s.end
                && s.end <= c.len()
                && c.is_char_boundary(s.start)
                && c.is_char_boundary(s.end)
            {
                c.replace_range(s.start..s.end, &s.with);
            }
        }
    }
}

fn merged(files: &[(&str, &str)], edits: &[FileEdit]) -> Vec<String> {
    files
        .iter()
        .map(|(n, t)| {
            edits
                .iter()
                .find(|e| e.name == *n)
                .map_or_else(|| (*t).to_owned(), |e| e.new_content.clone())
        })
        .collect()
}

fn changed(files: &[(&str, &str)], contents: &[String]) -> Vec<FileEdit> {
    files
        .iter()
        .zip(contents)
        .filter(|((_, old), new)| *old != new.as_str())
        .map(|((n, _), new)| FileEdit {
            name: (*n).to_owned(),
            new_content: new.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn one(text: &str) -> Vec<(&'static str, &str)> {
        vec![("/etc/default/grub", text)]
    }

    fn edit(text: &str, add: &[&str], remove: &[&str]) -> String {
        match plan_edit(&one(text), CMDLINE_LINUX, &s(add), &s(remove)) {
            Ok(e) => e
                .first()
                .map_or_else(|| text.to_owned(), |e| e.new_content.clone()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn assignment_model() {
        let text = "A=1\nexport GRUB_CMDLINE_LINUX='quiet'\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX x\"\n";
        let a = assignments(&one(text), CMDLINE_LINUX).unwrap_or_default();
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].line, a[0].exported, a[0].quoting),
            (2, true, Quoting::Single)
        );
        assert_eq!(&text[a[0].value_span.0..a[0].value_span.1], "'quiet'");
        assert!(!a[0].self_reference);
        assert_eq!(
            (a[1].line, a[1].quoting, a[1].self_reference),
            (3, Quoting::Double, true)
        );
        assert_eq!(
            effective_value(&one(text), CMDLINE_LINUX),
            Ok(s(&["quiet", "x"]))
        );
    }

    #[test]
    fn minimal_edits() {
        assert_eq!(edit("X=\"a b\"\n", &[], &[]), "X=\"a b\"\n");
        let t = "GRUB_CMDLINE_LINUX=\"a iommu=off b\"\n";
        assert_eq!(
            edit(t, &["iommu=pt"], &["iommu=off"]),
            "GRUB_CMDLINE_LINUX=\"a b iommu=pt\"\n"
        );
        let t = "GRUB_CMDLINE_LINUX=\"iommu=off b\"\n";
        assert_eq!(edit(t, &[], &["iommu=off"]), "GRUB_CMDLINE_LINUX=\"b\"\n");
        let t = "GRUB_CMDLINE_LINUX=\"b \"\n";
        assert_eq!(edit(t, &["c"], &[]), "GRUB_CMDLINE_LINUX=\"b c\"\n");
        let t = "GRUB_CMDLINE_LINUX=b\n";
        assert_eq!(edit(t, &["c"], &[]), "GRUB_CMDLINE_LINUX=\"b c\"\n");
        let t = "GRUB_CMDLINE_LINUX=$GRUB_CMDLINE_LINUX\n";
        assert_eq!(
            edit(t, &["c"], &[]),
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX c\"\n"
        );
        let t = "GRUB_TIMEOUT=5";
        assert_eq!(
            edit(t, &["c"], &[]),
            "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"c\"\n"
        );
        // Already there: nothing to do; duplicates in `add` are added once.
        let t = "GRUB_CMDLINE_LINUX=\"c\"\n";
        assert_eq!(
            edit(t, &["c", "d", "d"], &["e"]),
            "GRUB_CMDLINE_LINUX=\"c d\"\n"
        );
    }

    #[test]
    fn bad_requests() {
        let t = "GRUB_CMDLINE_LINUX=\"\"\n";
        assert_eq!(
            plan_edit(&one(t), CMDLINE_LINUX, &s(&["a"]), &s(&["a"])),
            Err(GrubError::Contradiction { arg: "a".into() })
        );
        assert_eq!(
            plan_edit(&[], CMDLINE_LINUX, &s(&["a"]), &[]),
            Err(GrubError::NoFiles)
        );
        assert!(matches!(
            effective_value(&one(t), "1X"),
            Err(GrubError::BadVariable { .. })
        ));
        let two = vec![("g", t), ("g", t)];
        assert!(matches!(
            effective_value(&two, CMDLINE_LINUX),
            Err(GrubError::DuplicateFile { .. })
        ));
        assert!(matches!(
            plan_edit(&one("X=1\\"), CMDLINE_LINUX, &s(&["a"]), &[]),
            Err(GrubError::Unsupported { .. })
        ));
    }

    #[test]
    fn mentions_whole_identifiers_only() {
        assert!(mentions("A=$GRUB_CMDLINE_LINUX", CMDLINE_LINUX));
        assert!(mentions("${GRUB_CMDLINE_LINUX}", CMDLINE_LINUX));
        assert!(!mentions("GRUB_CMDLINE_LINUX_DEFAULT=x", CMDLINE_LINUX));
        assert!(!mentions("MY_GRUB_CMDLINE_LINUX=x", CMDLINE_LINUX));
    }

    /// A poor man's fuzzer until the cargo-fuzz targets exist: random text
    /// from a shell-heavy alphabet must never panic, and whatever edit is
    /// planned must be idempotent.
    #[test]
    fn random_text_never_panics_and_edits_are_idempotent() {
        const ALPHABET: &[&str] = &[
            "GRUB_CMDLINE_LINUX=",
            "GRUB_CMDLINE_LINUX_DEFAULT=",
            "$GRUB_CMDLINE_LINUX",
            "${GRUB_CMDLINE_LINUX}",
            "\"",
            "'",
            "\\",
            "$",
            "{",
            "}",
            "(",
            ")",
            "`",
            " ",
            "\t",
            "\n",
            "\r\n",
            "#",
            ";",
            "&",
            "|",
            "<",
            ">",
            "iommu=off",
            "quiet",
            "a=\"b c\"",
            "é",
            "if ",
            "fi",
            "export ",
            "=",
            "\u{0}",
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let n = next() % 12;
            let text: String = (0..n)
                .map(|_| {
                    ALPHABET
                        .get((next() % ALPHABET.len() as u64) as usize)
                        .copied()
                        .unwrap_or("")
                })
                .collect();
            let files = one(&text);
            let add = s(&["iommu=pt"]);
            let remove = s(&["iommu=off", "quiet", "a=\"b c\""]);
            if let Ok(edits) = plan_cmdline_edit(&files, &add, &remove) {
                let new = edits
                    .first()
                    .map_or(text.as_str(), |e| e.new_content.as_str());
                assert_eq!(
                    plan_cmdline_edit(&one(new), &add, &remove),
                    Ok(Vec::new()),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn hostile_input_does_not_panic() {
        let inputs = [
            "",
            "\"",
            "'",
            "\\",
            "$",
            "${",
            "$(",
            "`",
            "GRUB_CMDLINE_LINUX=\"\\",
            "GRUB_CMDLINE_LINUX=$",
            "GRUB_CMDLINE_LINUX=${",
            "GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX\"",
            "GRUB_CMDLINE_LINUX=é\\é",
            "GRUB_CMDLINE_LINUX=\"é\\",
            "(((",
            ")))",
            "}}}",
            "fi fi",
            "GRUB_CMDLINE_LINUX=\"a\"\r",
            "\r",
            "GRUB_CMDLINE_LINUX=\"\u{0}\"",
            "GRUB_CMDLINE_LINUX=\"acpi=\\\"x\"",
        ];
        for t in inputs {
            let _ = plan_cmdline_edit(
                &one(t),
                &s(&["iommu=pt"]),
                &s(&["a", "\"", "x\"", "acpi=\"x"]),
            );
            let _ = effective_cmdline(&one(t));
        }
    }
}
