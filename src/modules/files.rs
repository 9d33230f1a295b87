//! `files:` — whole files gdrprov owns, from inline content or a template.
//! A file dropped from the profiles is removed if gdrprov created it, or put
//! back as it was before gdrprov first wrote it.

use crate::error::{Error, Result};
use crate::plan::{Action, Change, Context};
use crate::profile::builtin;
use crate::profile::load::parse_mode;
use handlebars::Handlebars;

pub const MODULE: &str = "files";

pub fn plan(ctx: &Context) -> Result<Vec<Change>> {
    let mut changes = Vec::new();
    for spec in &ctx.desired.doc.files {
        let after = render(ctx, spec)?;
        let before = ctx.host.read_text(&spec.path)?;
        if before.as_deref() == Some(after.as_str()) {
            continue;
        }
        let new_mode = match &spec.mode {
            Some(m) => parse_mode(m).map_err(|why| Error::BadPath { path: spec.path.clone(), why })?,
            None => 0o644,
        };
        let what = if before.is_some() { "Update" } else { "Create" };
        changes.push(Change {
            module: MODULE.into(),
            description: format!("{what} {}", spec.path),
            action: Action::WriteFile {
                path: spec.path.clone(),
                before,
                after,
                new_mode,
                meta: None,
            },
            reboot: None,
        });
    }
    // Files gdrprov owns that no profile asks for any more.
    for (path, owned) in &ctx.state.files {
        if ctx.desired.doc.files.iter().any(|f| &f.path == path) {
            continue;
        }
        let current = ctx.host.read_text(path)?;
        match (&owned.original, current) {
            (None, Some(before)) => changes.push(Change {
                module: MODULE.into(),
                description: format!("Remove {path} (no profile manages it any more)"),
                action: Action::RemoveFile { path: path.clone(), before },
                reboot: None,
            }),
            (Some(orig), current) => {
                let original = ctx.state_store.read_backup(orig)?;
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

fn render(ctx: &Context, spec: &crate::profile::FileSpec) -> Result<String> {
    let Some(template) = &spec.template else {
        return Ok(spec.content.clone().unwrap_or_default());
    };
    let source = match builtin::template(template) {
        Some(t) => t.to_string(),
        None => std::fs::read_to_string(template)
            .map_err(|e| Error::io("read template", template.clone(), e))?,
    };
    let mut vars = serde_json::Map::new();
    for (k, v) in ctx.desired.doc.vars.iter().chain(spec.vars.iter()) {
        vars.insert(k.replace('-', "_"), v.clone());
    }
    vars.insert(
        "gdrprov_header".into(),
        serde_json::Value::String(format!(
            "# Managed by gdrprov (profile: {}). Edits here are replaced by `gdrprov apply`;\n# `gdrprov rollback` restores the previous file.",
            ctx.desired.names.join(", ")
        )),
    );
    vars.insert("profiles".into(), serde_json::json!(ctx.desired.names));
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    hb.render_template(&source, &serde_json::Value::Object(vars))
        .map_err(|e| Error::Template {
            template: template.clone(),
            path: spec.path.clone(),
            msg: e.to_string().lines().next().unwrap_or("render error").to_string(),
        })
}
