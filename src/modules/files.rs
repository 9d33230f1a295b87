//! Whole files gdrprov owns: the profile's `files:` (inline content or a
//! template) and the files other modules generate (modprobe.d, modules-load.d).
//! A file no profile wants any more is removed if gdrprov created it, or put
//! back as it was before gdrprov first wrote it.

use crate::change::{Action, Change};
use crate::error::{Error, Result};
use crate::modules::Context;
use crate::profile::builtin;
use crate::profile::load::parse_mode;
use handlebars::Handlebars;

pub const MODULE: &str = "files";

pub use crate::change::ManagedFile;

/// Every whole file the desired state asks for: the profile's, then the
/// generated ones. Two wanting one path with different content is an error.
pub fn desired(ctx: &Context, generated: Vec<ManagedFile>) -> Result<Vec<ManagedFile>> {
    let mut out = Vec::new();
    for spec in &ctx.desired.doc.files {
        let mode = match &spec.mode {
            Some(m) => parse_mode(m).map_err(|why| Error::BadPath {
                path: spec.path.clone(),
                why,
            })?,
            None => 0o644,
        };
        out.push(ManagedFile {
            path: spec.path.clone(),
            content: render(ctx, spec)?,
            mode,
            module: MODULE,
            reboot: None,
        });
    }
    for g in generated {
        if let Some(other) = out.iter().find(|f| f.path == g.path) {
            return Err(Error::Refused(format!(
                "{} is written by gdrprov's {} module; the profile's `files:` entry for it ({}) would fight it: remove that entry",
                g.path, g.module, other.module
            )));
        }
        out.push(g);
    }
    Ok(out)
}

pub fn plan(ctx: &Context, wanted: &[ManagedFile]) -> Result<Vec<Change>> {
    let mut changes = Vec::new();
    for f in wanted {
        let before = ctx.seen.file(&f.path)?.map(String::from);
        if before.as_deref() == Some(f.content.as_str()) {
            continue;
        }
        let what = if before.is_some() { "Update" } else { "Create" };
        changes.push(Change {
            module: f.module.into(),
            description: format!("{what} {}", f.path),
            action: Action::WriteFile {
                path: f.path.clone(),
                before,
                after: f.content.clone(),
                new_mode: f.mode,
                meta: None,
            },
            reboot: f.reboot.clone(),
        });
    }
    // Files gdrprov owns that nothing asks for any more.
    for (path, owned) in &ctx.state.files {
        if wanted.iter().any(|f| &f.path == path) {
            continue;
        }
        let current = ctx.seen.file(path)?.map(String::from);
        match (&owned.original, current) {
            (None, Some(before)) => changes.push(Change {
                module: MODULE.into(),
                description: format!("Remove {path} (no profile asks for it any more)"),
                action: Action::RemoveFile {
                    path: path.clone(),
                    before,
                },
                reboot: None,
            }),
            (Some(orig), current) => {
                let original = ctx.seen.backup(orig)?;
                if current.as_deref() != Some(original.as_str()) {
                    changes.push(Change {
                        module: MODULE.into(),
                        description: format!("Restore {path} as it was before gdrprov managed it"),
                        action: Action::WriteFile {
                            path: path.clone(),
                            before: current,
                            after: original,
                            new_mode: 0o644,
                            meta: None,
                        },
                        reboot: None,
                    });
                }
            }
            (None, None) => {}
        }
    }
    Ok(changes)
}

/// The comment gdrprov puts at the top of the files it generates.
pub fn header(ctx: &Context) -> String {
    format!(
        "# Managed by gdrprov (profile: {}). Edits here are replaced by `gdrprov apply`;\n# `gdrprov rollback` restores the previous file.",
        ctx.desired.names.join(", ")
    )
}

fn render(ctx: &Context, spec: &crate::profile::FileSpec) -> Result<String> {
    let Some(template) = &spec.template else {
        return Ok(spec.content.clone().unwrap_or_default());
    };
    let source = match builtin::template(template) {
        Some(t) => t.to_string(),
        None => match ctx.seen.templates.get(template) {
            Some(Ok(t)) => t.clone(),
            Some(Err(e)) => return Err(Error::Refused(e.clone())),
            None => {
                return Err(Error::Refused(format!(
                    "template `{template}` was not read before planning"
                )))
            }
        },
    };
    let mut vars = serde_json::Map::new();
    for (k, v) in ctx.desired.doc.vars.iter().chain(spec.vars.iter()) {
        vars.insert(k.replace('-', "_"), v.clone());
    }
    vars.insert(
        "gdrprov_header".into(),
        serde_json::Value::String(header(ctx)),
    );
    vars.insert("profiles".into(), serde_json::json!(ctx.desired.names));
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    hb.render_template(&source, &serde_json::Value::Object(vars))
        .map_err(|e| Error::Template {
            template: template.clone(),
            path: spec.path.clone(),
            msg: e
                .to_string()
                .lines()
                .next()
                .unwrap_or("render error")
                .to_string(),
        })
}
