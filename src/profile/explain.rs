//! Parse errors in the profile's words: serde-saphyr's message turned into
//! what was expected, what was found and how to write it.

/// serde-saphyr's message in the profile's words: the key path first, what
/// was expected and what was found, and how to write it.
pub(super) fn explain(msg: &str, path: &str, text: &str, line: u64, col: u64) -> String {
    if let Some(breach) = msg.strip_prefix("budget breached: ") {
        return over_budget(breach);
    }
    let path = match path {
        "" | "." | "?" => None,
        p => Some(p.to_string()),
    };
    let at = |p: &Option<String>| p.as_ref().map(|p| format!("{p}: ")).unwrap_or_default();
    let found = Found::at(text, line, col);
    if msg.starts_with("expected sequence start") {
        let (noun, one) = list_noun(path.as_deref());
        let got = match &found {
            Found::Scalar(v) => format!("{one} (write [{v}])"),
            other => other.describe(),
        };
        return format!("{}expected a list of {noun}, got {got}", at(&path));
    }
    if msg.starts_with("expected mapping start") {
        return match &path {
            None => format!(
                "a profile is a mapping of sections (`modules:`, `boot:`, ...), got {}",
                found.describe()
            ),
            Some(p) => format!(
                "{p}: expected a mapping (`key: value` lines under it), got {}",
                found.describe()
            ),
        };
    }
    if let Some(rest) = msg.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest).trim();
        let first = first_line_of_key(text, key, line, col)
            .map(|n| format!("first at line {n}, again at line {line}"))
            .unwrap_or_else(|| format!("again at line {line}"));
        return format!(
            "{}duplicate key `{key}` ({first}); write it once and put everything under it there",
            at(&path.filter(|p| p.rsplit('.').next() != Some(key)))
        );
    }
    if let Some(rest) = msg.strip_prefix("unknown field ") {
        let parent = path
            .as_deref()
            .and_then(|p| p.rsplit_once('.').map(|(a, _)| a.to_string()));
        let rest = rest.replace(", expected one of ", "; the keys allowed here are ");
        let rest = rest.replace(", expected ", "; allowed here: ");
        return match parent {
            Some(p) => format!("{p}: unknown key {rest}"),
            None => format!("unknown key {rest}"),
        };
    }
    let wanted = match msg {
        m if m.starts_with("invalid boolean") => Some("true or false"),
        m if m.starts_with("invalid integer") || m.starts_with("invalid floating") => {
            Some("a number")
        }
        m if m.starts_with("expected string scalar") || m.starts_with("expected scalar") => {
            Some("a single value (text)")
        }
        _ => None,
    };
    if let Some(w) = wanted {
        return format!("{}expected {w}, got {}", at(&path), found.describe());
    }
    if let Some(rest) = msg.strip_prefix("invalid type: ") {
        if let Some((got, want)) = rest.split_once(", expected ") {
            return format!("{}expected {want}, got {got}", at(&path));
        }
    }
    format!("{}{msg}", at(&path))
}

/// A parse stopped by a limit of `parse_options` (its message is Rust's
/// debug text, `Nodes { nodes: 100001 }`), as a sentence.
fn over_budget(breach: &str) -> String {
    let what = match breach.split([' ', '{']).next().unwrap_or("") {
        "Nodes" => "more than 100000 values",
        "Aliases" => "more than 1000 aliases (`*name`)",
        "Anchors" => "too many anchors (`&name`)",
        "Depth" => "values nested more than 64 levels deep",
        "ScalarBytes" => "more than 4 MiB of text in its values",
        "Events" => "too many YAML events",
        "Documents" => "too many YAML documents",
        _ => "more than a profile may hold",
    };
    format!(
        "the YAML expands to {what}, counting what its aliases repeat (a YAML bomb?); a profile is a short file: write the values out once and drop the aliases that repeat them"
    )
}

/// What the YAML holds at a position, for messages.
enum Found {
    Scalar(String),
    List,
    Mapping,
    Nothing,
}

impl Found {
    fn at(text: &str, line: u64, col: u64) -> Found {
        let lines: Vec<&str> = text.lines().collect();
        let Some(l) = lines.get((line as usize).saturating_sub(1)) else {
            return Found::Nothing;
        };
        let rest: String = l.chars().skip((col as usize).saturating_sub(1)).collect();
        let rest = rest.split(" #").next().unwrap_or("").trim();
        if rest.is_empty() {
            // The value is on the lines below.
            return match lines
                .iter()
                .skip(line as usize)
                .map(|l| l.trim())
                .find(|l| !l.is_empty() && !l.starts_with('#'))
            {
                Some(n) if n.starts_with("- ") || n == "-" => Found::List,
                Some(_) => Found::Mapping,
                None => Found::Nothing,
            };
        }
        if rest.starts_with('{') || (rest.contains(": ") && !rest.starts_with(['"', '\''])) {
            Found::Mapping
        } else if rest.starts_with('[') || rest.starts_with("- ") {
            Found::List
        } else {
            Found::Scalar(rest.trim_matches(['"', '\'']).to_string())
        }
    }

    fn describe(&self) -> String {
        match self {
            Found::Scalar(v) => format!("the value `{v}`"),
            Found::List => "a list".into(),
            Found::Mapping => "a mapping".into(),
            Found::Nothing => "nothing".into(),
        }
    }
}

/// What a list at PATH holds, in the profile's words: (plural, "one X").
fn list_noun(path: Option<&str>) -> (&'static str, &'static str) {
    match path.unwrap_or("") {
        "modules.present" | "modules.absent" => ("module names", "one name"),
        "boot.cmdline.present" | "boot.cmdline.absent" => ("kernel arguments", "one argument"),
        "services.disabled" => ("systemd unit names", "one name"),
        "extends" => ("profile names", "one name"),
        "files" => (
            "files (each with path and content or template)",
            "one value",
        ),
        _ => ("values", "one value"),
    }
}

/// The line where KEY first appears at the indentation of the duplicate (at
/// LINE:COL), for "first at line N".
fn first_line_of_key(text: &str, key: &str, line: u64, col: u64) -> Option<u64> {
    let indent = (col as usize).saturating_sub(1);
    text.lines()
        .take((line as usize).saturating_sub(1))
        .position(|l| {
            let lead = l.len() - l.trim_start().len();
            let t = l.trim_start();
            lead == indent
                && t.strip_prefix(key)
                    .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map(|i| i as u64 + 1)
}

/// The line and column of a top-level KEY (`extends:`), for messages about its value.
pub(super) fn key_position(text: &str, key: &str) -> (u64, u64) {
    text.lines()
        .position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })
        .map(|i| (i as u64 + 1, 1))
        .unwrap_or((0, 0))
}

/// serde-saphyr renders a snippet with the message; keep only the message
/// line so the error stays one line, `file:line:col: message`.
pub(super) fn short_message(e: &serde_saphyr::Error) -> String {
    let full = e.to_string();
    let first = full
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("invalid YAML");
    let msg = first.trim_start_matches("error: ");
    // Drop a leading "line N column M: ": the location is already in front.
    match msg.split_once(": ") {
        Some((head, rest)) if head.starts_with("line ") && head.contains(" column ") => {
            rest.to_string()
        }
        _ => msg.to_string(),
    }
}
