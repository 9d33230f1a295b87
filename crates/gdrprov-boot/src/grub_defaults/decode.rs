//! Decoding an assignment's value into characters (with the bytes that
//! wrote them) and expanding the chain of assignments as a shell would.

use super::*;

/// Decode the value at `text[start..end]` into pieces, or say why not.
pub(super) fn decode_value(
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

pub(super) const MIXED: &str = "its value mixes quoted and unquoted parts";

pub(super) fn decode_double(
    text: &str,
    start: usize,
    end: usize,
    var: &str,
) -> Result<Vec<Piece>, String> {
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

pub(super) fn decode_single(raw: &str, start: usize) -> Result<Vec<Piece>, String> {
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

pub(super) fn decode_unquoted(raw: &str, start: usize, var: &str) -> Result<Vec<Piece>, String> {
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
pub(super) fn self_ref_len(rest: &str, var: &str) -> Result<usize, String> {
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
pub(super) fn check_self_refs(pieces: &[Piece]) -> Result<(), String> {
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
pub(super) struct ExpChar {
    pub(super) ch: char,
    pub(super) origin: (usize, usize, usize),
}

/// The value of the last assignment, as a shell computes it.
pub(super) fn expand(assigns: &[Assignment]) -> Vec<ExpChar> {
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
pub(super) struct Token {
    pub(super) text: String,
    pub(super) range: (usize, usize),
}

pub(super) fn tokens(exp: &[ExpChar]) -> Vec<Token> {
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
