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
    serde_saphyr::from_str_with_options::<ProfileDoc>(text, parse_options()).map_err(|e| {
        let (line, col) = e
            .location()
            .map(|l| (l.line(), l.column()))
            .unwrap_or((0, 0));
        Error::ProfileSyntax {
            file: label.into(),
            line,
            col,
            msg: short_message(&e),
        }
    })
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
    let mut merged = ProfileDoc::default();
    for parent in doc.extends.clone() {
        let parent_origin = match origin.dir() {
            Some(dir) => locate(&parent, Some(dir)).or_else(|_| locate(&parent, None))?,
            None => locate(&parent, None)?,
        };
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
            crate::boot::cmdline::validate_arg(a)
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
        if !k.starts_with("NCCL_")
            || !k
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(invalid(format!(
                "nccl: `{k}` is not an NCCL setting (NCCL_ followed by capitals, digits or `_`)"
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
