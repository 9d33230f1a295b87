//! The splice editor: the smallest byte edits that give the wanted value.

use super::*;

/// A replacement of `file[start..end]`.
pub(super) struct Splice {
    pub(super) file: usize,
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) with: String,
}

pub(super) fn line_ending(text: &str) -> &'static str {
    if text.contains("\r\n") {
        "\r\n"
    } else {
        "\n"
    }
}

/// No assignment anywhere: append one to the first file.
pub(super) fn append_line(
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
pub(super) fn removal_range(
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
        let (file, line) = super::place_of(files, first.and_then(|o| assigns.get(o.0)));
        return Err(GrubError::NotOneWord {
            file,
            line,
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

/// What to do to a value: remove these arguments (of the kernel's part),
/// add these, at the end of the last assignment or at `at` (assignment,
/// byte: before a `--`).
pub(super) struct ValueEdit<'a> {
    pub(super) remove: &'a [String],
    pub(super) additions: &'a [String],
    pub(super) at: Option<(usize, usize)>,
}

/// `toks`: the tokens that may be removed (the kernel's part).
pub(super) fn value_splices(
    files: &[(&str, &str)],
    var: &str,
    assigns: &[Assignment],
    exp: &[ExpChar],
    toks: &[Token],
    edit: &ValueEdit,
) -> Result<Vec<Splice>, GrubError> {
    let mut ranges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); assigns.len()];
    for t in toks.iter().filter(|t| edit.remove.contains(&t.text)) {
        let (ai, r) = removal_range(files, var, assigns, exp, t)?;
        if let Some(v) = ranges.get_mut(ai) {
            v.push(r);
        }
    }
    let target = edit
        .at
        .map_or(assigns.len().saturating_sub(1), |(ai, _)| ai);
    let mut splices = Vec::new();
    for (ai, (a, rs)) in assigns.iter().zip(ranges).enumerate() {
        let adds = if ai == target { edit.additions } else { &[] };
        if rs.is_empty() && adds.is_empty() {
            continue;
        }
        let text = files.get(a.file).map(|f| f.1).unwrap_or_default();
        let with = match edit.at {
            Some((_, at)) if !adds.is_empty() => inserted_value(text, a, rs, adds, at),
            _ => new_value(text, a, rs, adds),
        };
        splices.push(Splice {
            file: a.file,
            start: a.value_span.0,
            end: a.value_span.1,
            with,
        });
    }
    Ok(splices)
}

/// `text[from..to]` without the `removed` ranges.
fn kept_between(text: &str, from: usize, to: usize, removed: &[(usize, usize)]) -> String {
    let mut kept = String::new();
    let mut pos = from;
    for &(s, e) in removed {
        let (s, e) = (s.clamp(from, to), e.clamp(from, to));
        if s > pos {
            kept.push_str(text.get(pos..s).unwrap_or_default());
        }
        pos = pos.max(e);
    }
    kept.push_str(text.get(pos.min(to)..to).unwrap_or_default());
    kept
}

/// The quoted assignment's new raw value with `adds` put before byte `at`
/// (the `--` that ends the kernel's arguments), `removed` taken out.
pub(super) fn inserted_value(
    text: &str,
    a: &Assignment,
    mut removed: Vec<(usize, usize)>,
    adds: &[String],
    at: usize,
) -> String {
    removed.sort_unstable();
    let (vs, ve) = a.value_span;
    let before = kept_between(text, vs, at, &removed);
    let after = kept_between(text, at, ve, &removed);
    let sep = if before.ends_with([' ', '\t', '"', '\'']) {
        ""
    } else {
        " "
    };
    format!("{before}{sep}{} {after}", adds.join(" "))
}

/// The assignment's new raw value: its bytes minus `removed`, plus `adds`
/// at the end in its quoting style (an unquoted value gains double quotes).
pub(super) fn new_value(
    text: &str,
    a: &Assignment,
    mut removed: Vec<(usize, usize)>,
    adds: &[String],
) -> String {
    removed.sort_unstable();
    let (vs, ve) = a.value_span;
    let kept = kept_between(text, vs, ve, &removed);
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

pub(super) fn apply_splices(contents: &mut [String], mut splices: Vec<Splice>) {
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

pub(super) fn merged(files: &[(&str, &str)], edits: &[FileEdit]) -> Vec<String> {
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

pub(super) fn changed(files: &[(&str, &str)], contents: &[String]) -> Vec<FileEdit> {
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
