//! Finding, parsing and validating profiles, and resolving `extends`.

use super::builtin;
use super::model::*;
use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// Where a profile's text lives.
#[derive(Debug, Clone)]
enum Origin {
    Builtin(&'static str),
    File(PathBuf),
}

impl Origin {
    fn label(&self) -> String {
        match self {
            Origin::Builtin(n) => format!("built-in {n}"),
            Origin::File(p) => p.display().to_string(),
        }
    }
    fn dir(&self) -> Option<&Path> {
        match self {
            Origin::Builtin(_) => None,
            Origin::File(p) => p.parent(),
        }
    }
}

/// Limits that stop alias bombs and absurd nesting before they cost memory.
fn parse_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: 64,
            max_aliases: 1000,
            max_nodes: 100_000,
            max_total_scalar_bytes: 4 * 1024 * 1024,
        },
    }
}

/// Parses one document; errors carry `file:line:col`.
pub fn parse(text: &str, label: &str) -> Result<ProfileDoc> {
    if text.len() > 1024 * 1024 {
        return Err(Error::ProfileInvalid {
            file: label.into(),
            msg: "larger than 1 MiB; a profile is a short YAML file".into(),
        });
    }
    if text
        .lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Err(Error::ProfileInvalid {
            file: label.into(),
            msg: "the profile is empty (nothing but blank lines or comments); refusing it, because an empty profile would undo every setting gdrprov made. Write at least one section (boot, modules, services, network, pcie, nccl, files, verify), or `extends: [rdma-dmabuf]`".into(),
        });
    }
    // The key path (`modules.present`) where deserialisation stopped.
    let mut path = String::new();
    let parsed =
        serde_saphyr::with_deserializer_from_str_with_options(text, parse_options(), |de| {
            serde_path_to_error::deserialize::<_, ProfileDoc>(de).map_err(|e| {
                path = e.path().to_string();
                e.into_inner()
            })
        });
    parsed.map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        Error::ProfileSyntax {
            file: label.into(),
            line,
            col,
            msg: explain(&short_message(&e), &path, text, line, col),
        }
    })
}

/// serde-saphyr's message in the profile's words: the key path first, what
/// was expected and what was found, and how to write it.
fn explain(msg: &str, path: &str, text: &str, line: u64, col: u64) -> String {
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
fn key_position(text: &str, key: &str) -> (u64, u64) {
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
fn short_message(e: &serde_saphyr::Error) -> String {
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

/// Loads a profile by built-in name or file path, with everything it extends.
pub fn load(spec: &str) -> Result<LoadedProfile> {
    let origin = locate(spec, None)?;
    let mut chain = Vec::new();
    let doc = load_origin(&origin, &mut chain)?;
    let name = doc.name.clone().unwrap_or_else(|| default_name(&origin));
    Ok(LoadedProfile {
        name,
        source: origin.label(),
        doc,
    })
}

fn default_name(origin: &Origin) -> String {
    match origin {
        Origin::Builtin(n) => n.to_string(),
        Origin::File(p) => p
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| p.display().to_string()),
    }
}

/// A spec that names an existing file is that file; otherwise a built-in name.
/// `extends` entries are looked up next to the profile that names them first.
fn locate(spec: &str, relative_to: Option<&Path>) -> Result<Origin> {
    let candidates: Vec<PathBuf> = match relative_to {
        Some(dir) => vec![dir.join(spec), dir.join(format!("{spec}.yaml"))],
        None => vec![PathBuf::from(spec)],
    };
    let looks_like_path = spec.contains('/') || spec.ends_with(".yaml") || spec.ends_with(".yml");
    for c in &candidates {
        if c.is_file() {
            return Ok(Origin::File(c.clone()));
        }
    }
    if relative_to.is_none() && Path::new(spec).is_dir() {
        return Err(Error::ProfileInvalid {
            file: spec.to_string(),
            msg: format!(
                "is a directory, not a profile file; give a YAML file (e.g. {}/NAME.yaml) or a built-in profile name",
                spec.trim_end_matches('/')
            ),
        });
    }
    if !looks_like_path {
        if let Some(name) = builtin::PROFILES
            .iter()
            .map(|(n, _)| *n)
            .find(|n| *n == spec)
        {
            return Ok(Origin::Builtin(name));
        }
    }
    Err(Error::UnknownProfile {
        name: spec.to_string(),
        known: builtin::names().join(", "),
    })
}

fn read_origin(origin: &Origin) -> Result<String> {
    match origin {
        Origin::Builtin(n) => {
            builtin::profile(n)
                .map(str::to_string)
                .ok_or_else(|| Error::UnknownProfile {
                    name: n.to_string(),
                    known: builtin::names().join(", "),
                })
        }
        Origin::File(p) => std::fs::read_to_string(p)
            .map_err(|e| Error::io("read profile", p.display().to_string(), e)),
    }
}

fn load_origin(origin: &Origin, chain: &mut Vec<String>) -> Result<ProfileDoc> {
    let label = origin.label();
    if chain.contains(&label) {
        chain.push(label);
        return Err(Error::ExtendsCycle {
            chain: chain.join(" -> "),
        });
    }
    chain.push(label.clone());
    let text = read_origin(origin)?;
    let mut doc = parse(&text, &label)?;
    validate(&mut doc, origin)?;
    let doc = super::when::split(doc, &label)?;
    let mut merged = ProfileDoc::default();
    for parent in doc.extends.clone() {
        let found = match origin.dir() {
            Some(dir) => locate(&parent, Some(dir)).or_else(|_| locate(&parent, None)),
            None => locate(&parent, None),
        };
        let parent_origin = found.map_err(|e| {
            let (line, col) = key_position(&text, "extends");
            let why = match e {
                Error::UnknownProfile { known, .. } => format!(
                    "`{parent}` is neither a built-in profile ({known}) nor a file next to this profile"
                ),
                other => other.to_string(),
            };
            Error::ProfileSyntax {
                file: label.clone(),
                line,
                col,
                msg: format!("extends: {why}"),
            }
        })?;
        let parent_doc = load_origin(&parent_origin, chain)?;
        merged = super::merge::extend(merged, parent_doc);
    }
    chain.pop();
    let own_name = doc.name.clone();
    let mut result = super::merge::extend(merged, doc);
    result.name = own_name;
    result.extends.clear();
    Ok(result)
}

/// Checks what the YAML types cannot: names, paths, arguments, templates.
fn validate(doc: &mut ProfileDoc, origin: &Origin) -> Result<()> {
    let file = origin.label();
    let invalid = |msg: String| Error::ProfileInvalid {
        file: file.clone(),
        msg,
    };
    for (key, list) in [
        ("modules.present", &doc.modules.present),
        ("modules.absent", &doc.modules.absent),
    ] {
        for m in list {
            check_module_name(m).map_err(|why| invalid(format!("{key}: {why}")))?;
        }
    }
    for (m, opts) in &doc.modules.options {
        check_module_name(m).map_err(|why| invalid(format!("modules.options: {why}")))?;
        if opts.chars().any(|c| c.is_control() || c == '#') {
            return Err(invalid(format!(
                "modules.options.{m}: the value contains a newline, control character or `#`; write `key=value` pairs separated by spaces"
            )));
        }
    }
    for s in &doc.services.disabled {
        if s.is_empty()
            || !s
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c))
        {
            return Err(invalid(format!(
                "services.disabled: `{s}` is not a systemd unit name (letters, digits, `-_.@`)"
            )));
        }
    }
    for (key, list) in [
        ("boot.cmdline.present", &doc.boot.cmdline.present),
        ("boot.cmdline.absent", &doc.boot.cmdline.absent),
    ] {
        for a in list {
            gdrprov_boot::cmdline::validate_arg(a)
                .map_err(|why| invalid(format!("{key}: {why}")))?;
        }
    }
    if let Some(entry) = &doc.boot.entry {
        if entry.is_empty()
            || entry.len() > 64
            || !entry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(invalid(format!(
                "boot.entry: `{entry}` must be 1-64 letters, digits, `-` or `_`"
            )));
        }
    }
    for (i, f) in doc.files.iter_mut().enumerate() {
        crate::host::check_profile_path(&f.path)
            .map_err(|e| invalid(format!("files[{i}].path: {e}")))?;
        match (&f.content, &f.template) {
            (Some(_), Some(_)) => {
                return Err(invalid(format!(
                    "files[{i}] ({}): give either `content` or `template`, not both",
                    f.path
                )))
            }
            (None, None) => {
                return Err(invalid(format!(
                    "files[{i}] ({}): give `content` or `template`",
                    f.path
                )))
            }
            _ => {}
        }
        if let Some(mode) = &f.mode {
            parse_mode(mode).map_err(|why| invalid(format!("files[{i}].mode: {why}")))?;
        }
        if let Some(t) = f.template.clone() {
            f.template = Some(resolve_template(&t, origin).map_err(invalid)?);
        }
    }
    for (k, v) in &doc.nccl {
        // NCCL sets every line of nccl.conf in its environment before it
        // loads its net plugin: libfabric's FI_ settings work there too.
        if !(k.starts_with("NCCL_") || k.starts_with("FI_"))
            || !k
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(invalid(format!(
                "nccl: `{k}` is not an NCCL setting (NCCL_ or libfabric's FI_ followed by capitals, digits or `_`)"
            )));
        }
        let ok = match v {
            serde_json::Value::String(s) => !s.chars().any(|c| c.is_control()),
            serde_json::Value::Number(_) | serde_json::Value::Bool(_) => true,
            _ => false,
        };
        if !ok {
            return Err(invalid(format!(
                "nccl.{k}: give a single-line string or a number"
            )));
        }
        // nccl.conf has no trailing comments: NCCL skips a line that starts
        // with `#` and takes everything after `=` literally, so a note
        // written after the value becomes part of it.
        if let Some(s) = v.as_str().filter(|s| s.contains('#')) {
            let before = s.split('#').next().unwrap_or("").trim_end();
            return Err(invalid(format!(
                "nccl.{k}: the value `{s}` contains `#`; /etc/nccl.conf has no comments after a value, so NCCL would take all of it, `#` included, as the value. Write `{before}` and put the note in a YAML comment on its own line"
            )));
        }
    }
    if let Some(m) = &doc.network.mtu {
        if m.devices.is_empty() {
            return Err(invalid(
                "network.mtu.devices: name at least one match, e.g. `{ rdma: \"erdma_*\" }`".into(),
            ));
        }
        for (i, d) in m.devices.iter().enumerate() {
            let set: Vec<&String> = [&d.rdma, &d.driver, &d.name]
                .into_iter()
                .flatten()
                .collect();
            if set.len() != 1 {
                return Err(invalid(format!(
                    "network.mtu.devices[{i}]: give exactly one of `rdma`, `driver` or `name` ({} given)",
                    set.len()
                )));
            }
            let v = set[0];
            if v.is_empty()
                || v.len() > 64
                || !v
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.:*?@".contains(c))
            {
                return Err(invalid(format!(
                    "network.mtu.devices[{i}]: `{v}` is not a device name or pattern (letters, digits, `-_.:@`, wildcards `*` `?`)"
                )));
            }
            if let Err(e) = gdrprov_boot::wildcard::Wildcard::new(v) {
                return Err(invalid(format!(
                    "network.mtu.devices[{i}]: `{v}` is not a valid pattern ({}); use `*` and `?` as wildcards",
                    e.kind()
                )));
            }
        }
    }
    if let Some(fr) = doc.verify.min_line_rate_fraction {
        if !(0.0..=1.0).contains(&fr) {
            return Err(invalid(format!(
                "verify.min-line-rate-fraction: {fr} is not between 0 and 1"
            )));
        }
    }
    Ok(())
}

/// A built-in template name stays a name; anything else must be a file next
/// to the profile and becomes its absolute path.
fn resolve_template(t: &str, origin: &Origin) -> std::result::Result<String, String> {
    if builtin::template(t).is_some() {
        return Ok(t.to_string());
    }
    // A template is rendered into the root: it must not pull in a file from
    // elsewhere on the machine gdrprov runs on (`../../etc/shadow`).
    if t.starts_with('/') || t.split('/').any(|c| c == "..") {
        return Err(format!(
            "template `{t}`: a template file must lie next to the profile or below it; absolute paths and `..` are not allowed"
        ));
    }
    if let Some(dir) = origin.dir() {
        let p = dir.join(t);
        if p.is_file() {
            return Ok(std::fs::canonicalize(&p).unwrap_or(p).display().to_string());
        }
    }
    let builtin_names: Vec<&str> = builtin::TEMPLATES.iter().map(|(n, _)| *n).collect();
    Err(format!(
        "template `{t}` not found: it is not built in ({}) and no such file is next to the profile",
        builtin_names.join(", ")
    ))
}

pub fn parse_mode(mode: &str) -> std::result::Result<u32, String> {
    let digits = mode.strip_prefix("0o").unwrap_or(mode);
    match u32::from_str_radix(digits, 8) {
        Ok(m) if m <= 0o7777 && !digits.is_empty() => Ok(m),
        _ => Err(format!("`{mode}` is not an octal file mode like \"0644\"")),
    }
}

fn check_module_name(m: &str) -> std::result::Result<(), String> {
    if m.is_empty()
        || m.len() > 56
        || !m
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "`{m}` is not a kernel module name (letters, digits, `_` or `-`, at most 56)"
        ));
    }
    Ok(())
}
