//! Finding, parsing and validating profiles, and resolving `extends`.

use super::builtin;
use super::explain::{explain, key_position, short_message};
use super::model::*;
use super::sections::{check_modules, check_nccl, check_network, check_text, Check};
use crate::error::{Error, Result};
use crate::grammar::ProfileName;
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

/// Loads a profile by built-in name or file path, with everything it extends.
pub fn load(spec: &str) -> Result<LoadedProfile> {
    let origin = locate(spec, None)?;
    load_located(origin, None)
}

/// A profile named exactly, as `state.json` records it (`recheck`).
#[derive(Debug, Clone)]
pub enum Exact<'a> {
    /// The built-in of that name, never a file of that name.
    Builtin(&'a str),
    /// That file, with everything it extends inside `within` (the root,
    /// canonical): a parent outside it is refused, never read.
    FileWithin(PathBuf, &'a Path),
}

/// Loads a profile named exactly ([`Exact`]).
pub fn load_exact(spec: Exact<'_>) -> Result<LoadedProfile> {
    match spec {
        Exact::Builtin(name) => {
            let origin = builtin_origin(name).ok_or_else(|| Error::UnknownProfile {
                name: name.to_string(),
                known: builtin::names().join(", "),
            })?;
            load_located(origin, None)
        }
        Exact::FileWithin(path, root) => load_located(Origin::File(path), Some(root)),
    }
}

fn builtin_origin(name: &str) -> Option<Origin> {
    builtin::PROFILES
        .iter()
        .map(|(n, _)| *n)
        .find(|n| *n == name)
        .map(Origin::Builtin)
}

/// A parent found for a profile loaded within a root: a built-in, or a file
/// whose real path is inside the root.
fn confined(origin: Origin, root: &Path, parent: &str) -> Result<Origin> {
    match &origin {
        Origin::Builtin(_) => Ok(origin),
        Origin::File(p) => match crate::host::canonical_local(p) {
            Some(real) if real.starts_with(root) => Ok(Origin::File(real)),
            real => Err(Error::Refused(format!(
                "`{parent}` leads to {}, outside the root {}; a profile of the root may extend only built-in profiles and files inside the root",
                real.as_deref().unwrap_or(p).display(),
                root.display()
            ))),
        },
    }
}

/// A profile loaded within a root renders only templates inside it (a
/// template beside the profile may be a symlink out of the root).
fn templates_within(doc: &ProfileDoc, root: &Path, label: &str) -> Result<()> {
    for t in doc.files.iter().filter_map(|f| f.template.as_deref()) {
        if builtin::template(t).is_none() && !Path::new(t).starts_with(root) {
            return Err(Error::ProfileInvalid {
                file: label.to_string(),
                msg: format!(
                    "template {t} is outside the root {}; a profile of the root may use only built-in templates and files inside the root",
                    root.display()
                ),
            });
        }
    }
    Ok(())
}

/// Whether two paths name the same file (symlinks followed).
fn same_file(a: &Path, b: &Path) -> bool {
    matches!(
        (crate::host::local_id(a), crate::host::local_id(b)),
        (Ok(x), Ok(y)) if x == y
    )
}

fn load_located(origin: Origin, within: Option<&Path>) -> Result<LoadedProfile> {
    let mut chain = Vec::new();
    let doc = load_origin(&origin, &mut chain, &mut Loaded::default(), within)?;
    let name = doc.name.clone().unwrap_or_else(|| default_name(&origin));
    let name = ProfileName::parse(&name).map_err(|e| Error::ProfileInvalid {
        file: origin.label(),
        msg: format!("name: {e} (a profile without `name:` is named after its file)"),
    })?;
    Ok(LoadedProfile {
        name: name.into_string(),
        source: origin.label(),
        builtin: matches!(origin, Origin::Builtin(_)),
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

/// Whether a profile spec on the command line names a file: it has a `/`
/// or ends in `.yaml`/`.yml`. Anything else is a built-in profile's name,
/// whatever the working directory holds (issue 43: a file named
/// `rdma-dmabuf` in the directory root ran gdrprov from replaced the built-in).
pub fn spec_names_a_file(spec: &str) -> bool {
    spec.contains('/') || spec.ends_with(".yaml") || spec.ends_with(".yml")
}

/// A spec that names a file ([`spec_names_a_file`]) is that file; otherwise
/// a built-in name. `extends` entries are looked up next to the profile that
/// names them first.
fn locate(spec: &str, relative_to: Option<&Path>) -> Result<Origin> {
    let candidates: Vec<PathBuf> = match relative_to {
        Some(dir) => vec![dir.join(spec), dir.join(format!("{spec}.yaml"))],
        None if spec_names_a_file(spec) => vec![PathBuf::from(spec)],
        None => Vec::new(),
    };
    // A FIFO or device node by that name is a file too: reading it is
    // refused then, naming what it is (never a hang, never "unknown profile").
    for c in &candidates {
        if crate::host::is_local_file(c) || crate::host::is_local_special(c) {
            return Ok(Origin::File(c.clone()));
        }
    }
    if relative_to.is_none()
        && spec_names_a_file(spec)
        && crate::host::is_local_dir(Path::new(spec))
    {
        return Err(Error::ProfileInvalid {
            file: spec.to_string(),
            msg: format!(
                "is a directory, not a profile file; give a YAML file (e.g. {}/NAME.yaml) or a built-in profile name",
                spec.trim_end_matches('/')
            ),
        });
    }
    if !spec_names_a_file(spec) {
        if let Some(name) = builtin::PROFILES
            .iter()
            .map(|(n, _)| *n)
            .find(|n| *n == spec)
        {
            return Ok(Origin::Builtin(name));
        }
    }
    if relative_to.is_none()
        && !spec_names_a_file(spec)
        && crate::host::local_exists(Path::new(spec))
    {
        return Err(Error::ProfileInvalid {
            file: spec.to_string(),
            msg: format!(
                "is not a built-in profile ({}); a bare name never reads a file of the working directory: to use that file, write ./{spec}",
                builtin::names().join(", ")
            ),
        });
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
        Origin::File(p) => crate::host::read_local_text(p, crate::host::ReadLimit::Profile),
    }
}

/// How deep `extends` may go (a profile, its parent, the parent's parent...).
pub const MAX_EXTENDS_DEPTH: usize = 32;
/// How many profile files one load may read, each once.
pub const MAX_EXTENDS_FILES: usize = 256;

/// Every profile file a load has resolved, by label: each is read, parsed
/// and resolved once, however often `extends` names it (issue 37: a file
/// extending the same parent twice at each of 20 levels took 54 s).
type Loaded = std::collections::HashMap<String, ProfileDoc>;

/// A profile's text parsed; a file reached through `extends:` that is not a profile is said so
/// without quoting it (`unnamed`: the user did not name it).
fn parse_reached(text: &str, label: &str, unnamed: bool) -> Result<ProfileDoc> {
    parse(text, label).map_err(|e| match e {
        Error::ProfileSyntax { file, line, col, .. } if unnamed => Error::ProfileSyntax {
            msg: format!(
                "not a profile (reached through `extends:`; its content is not shown): extend a profile file, or run {} to see what is wrong with it",
                crate::suggest::Suggest::new(crate::names::PROFILE_VALIDATE)
                    .arg(file.as_str())
                    .shown(&crate::suggest::Given::none())
            ),
            file,
            line,
            col,
        },
        e => e,
    })
}

/// Where the parent a profile extends is: next to the profile or built in (within a root, never
/// a file of the machine running gdrprov); an error points at the profile's `extends`.
fn parent_origin(
    parent: &str,
    origin: &Origin,
    within: Option<&Path>,
    text: &str,
    label: &str,
) -> Result<Origin> {
    // A file never extends itself: `rdma-dmabuf.yaml` extending
    // `rdma-dmabuf` (a site copy of a built-in, kept where `recheck`
    // looks for it) extends the built-in.
    let next_to = |dir: &Path| {
        locate(parent, Some(dir)).map(|o| match (&o, origin, builtin_origin(parent)) {
            (Origin::File(p), Origin::File(me), Some(b)) if same_file(p, me) => b,
            _ => o,
        })
    };
    let found = match (origin.dir(), within) {
        // Within a root: next to the profile or built in, never a file
        // of the machine running gdrprov.
        (Some(dir), Some(root)) => next_to(dir)
            .or_else(|e| builtin_origin(parent).ok_or(e))
            .and_then(|o| confined(o, root, parent)),
        (None, Some(_)) => builtin_origin(parent).ok_or_else(|| Error::UnknownProfile {
            name: parent.to_string(),
            known: builtin::names().join(", "),
        }),
        (Some(dir), None) => next_to(dir).or_else(|_| locate(parent, None)),
        (None, None) => locate(parent, None),
    };
    found.map_err(|e| {
        let (line, col) = key_position(text, "extends");
        let why = match e {
            Error::UnknownProfile { known, .. } => format!(
                "`{parent}` is neither a built-in profile ({known}) nor a file next to this profile"
            ),
            other => other.to_string(),
        };
        Error::ProfileSyntax {
            file: label.to_string(),
            line,
            col,
            msg: format!("extends: {why}"),
        }
    })
}

fn load_origin(
    origin: &Origin,
    chain: &mut Vec<String>,
    loaded: &mut Loaded,
    within: Option<&Path>,
) -> Result<ProfileDoc> {
    let label = origin.label();
    if chain.contains(&label) {
        chain.push(label);
        return Err(Error::ExtendsCycle {
            chain: chain.join(" -> "),
        });
    }
    if let Some(doc) = loaded.get(&label) {
        return Ok(doc.clone());
    }
    if chain.len() >= MAX_EXTENDS_DEPTH || loaded.len() >= MAX_EXTENDS_FILES {
        return Err(Error::ProfileInvalid {
            file: label,
            msg: format!(
                "extends: more than {MAX_EXTENDS_DEPTH} levels deep or {MAX_EXTENDS_FILES} files in all ({}); flatten the chain",
                chain.join(" -> ")
            ),
        });
    }
    // A file reached through `extends:` was not named by the user: when it
    // is not a profile, its content is never quoted (`extends: /etc/shadow`).
    let unnamed = !chain.is_empty() && matches!(origin, Origin::File(_));
    chain.push(label.clone());
    let text = read_origin(origin)?;
    let mut doc = parse_reached(&text, &label, unnamed)?;
    validate(&mut doc, origin)?;
    if let Some(root) = within {
        templates_within(&doc, root, &label)?;
    }
    let doc = super::when::split(doc, &label)?;
    let mut merged = ProfileDoc::default();
    // Each parent's name and where it came from: two of one name refused.
    let mut parents: Vec<(String, String)> = Vec::new();
    for parent in doc.extends.clone() {
        let parent_origin = parent_origin(&parent, origin, within, &text, &label)?;
        let parent_doc = load_origin(&parent_origin, chain, loaded, within)?;
        let pname = parent_doc
            .name
            .clone()
            .unwrap_or_else(|| default_name(&parent_origin));
        let plabel = parent_origin.label();
        if let Some((_, other)) = parents.iter().find(|(n, l)| *n == pname && *l != plabel) {
            return Err(Error::ProfileInvalid {
                file: label.clone(),
                msg: format!(
                    "extends: two profiles are named `{pname}`: {other} and {plabel}; extend one of them, or give the file its own `name:`"
                ),
            });
        }
        parents.push((pname, plabel));
        merged = super::extend::extend(merged, parent_doc);
    }
    chain.pop();
    let own_name = doc.name.clone();
    let mut result = super::extend::extend(merged, doc);
    result.name = own_name;
    result.extends.clear();
    loaded.insert(label, result.clone());
    Ok(result)
}

/// Checks what the YAML types cannot: names, paths, arguments, templates.
fn validate(doc: &mut ProfileDoc, origin: &Origin) -> Result<()> {
    let invalid = |msg: String| Error::ProfileInvalid {
        file: origin.label(),
        msg,
    };
    check_text(doc).map_err(invalid)?;
    check_modules(doc).map_err(invalid)?;
    check_boot(doc).map_err(invalid)?;
    check_files(doc, origin).map_err(invalid)?;
    check_nccl(doc).map_err(invalid)?;
    check_network(doc).map_err(invalid)?;
    if let Some(m) = doc.pcie.max_read_request {
        if crate::facts::pcicfg::size_encoding(m).is_none() {
            return Err(invalid(format!(
                "pcie.max-read-request: {m} is not a MaxReadReq size; give 128, 256, 512, 1024, 2048 or 4096 (bytes)"
            )));
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

/// `boot:`: kernel arguments and the entry name.
fn check_boot(doc: &ProfileDoc) -> Check {
    for (key, list) in [
        ("boot.cmdline.present", &doc.boot.cmdline.present),
        ("boot.cmdline.absent", &doc.boot.cmdline.absent),
    ] {
        for a in list {
            gdrprov_boot::cmdline::validate_arg(a).map_err(|why| format!("{key}: {why}"))?;
        }
    }
    super::guard::boot_args(&doc.boot.cmdline.absent, &doc.boot.cmdline.allow_removing)?;
    super::guard::boot_replacing(&doc.boot.cmdline.present, &doc.boot.cmdline.allow_removing)?;
    super::guard::boot_present(&doc.boot.cmdline.present)?;
    if let Some(entry) = &doc.boot.entry {
        if entry.is_empty()
            || entry.len() > 64
            || !entry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
        {
            return Err(format!(
                "boot.entry: `{entry}` must be 1-64 letters, digits, `-` or `_`"
            ));
        }
    }
    Ok(())
}

/// `files:`: paths, content or template, modes; templates resolved.
fn check_files(doc: &mut ProfileDoc, origin: &Origin) -> Check {
    for (i, f) in doc.files.iter_mut().enumerate() {
        crate::host::check_profile_path(&f.path).map_err(|e| format!("files[{i}].path: {e}"))?;
        super::guard::files_target(&f.path).map_err(|e| format!("files[{i}].path: {e}"))?;
        match (&f.content, &f.template) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "files[{i}] ({}): give either `content` or `template`, not both",
                    f.path
                ))
            }
            (None, None) => {
                return Err(format!(
                    "files[{i}] ({}): give `content` or `template`",
                    f.path
                ))
            }
            _ => {}
        }
        if let Some(mode) = &f.mode {
            parse_mode(mode).map_err(|why| format!("files[{i}].mode: {why}"))?;
        }
        if let Some(t) = f.template.clone() {
            f.template = Some(resolve_template(&t, origin)?);
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
        if crate::host::is_local_file(&p) {
            return Ok(crate::host::canonical_local(&p)
                .unwrap_or(p)
                .display()
                .to_string());
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
