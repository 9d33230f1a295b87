//! Whole files gdrprov owns: the profile's `files:` (inline content or a
//! template) and the files other modules generate (modprobe.d, modules-load.d).
//! A file no profile wants any more is removed if gdrprov created it, or put
//! back as it was before gdrprov first wrote it.

use crate::error::{Error, Result};
use crate::plan::change::{Action, Change};
use crate::plan::modules::Context;
use crate::profile::builtin;
use crate::profile::load::parse_mode;
use handlebars::Handlebars;

pub const MODULE: &str = "files";

pub use crate::plan::change::ManagedFile;

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

#[cfg(test)]
mod tests {
    use crate::facts::OsFamily;
    use crate::journal::OwnedFile;
    use crate::plan::change::Action;
    use crate::plan::modules::testkit::{desired, written, World};

    const FILE: &str = "files:\n  - { path: /etc/x.conf, content: \"a=1\\n\", mode: \"0600\" }\n";

    #[test]
    fn a_profile_file_is_created_then_left_alone() {
        let mut w = World::image(OsFamily::Debian);
        let p = w.plan(&desired(FILE)).0.unwrap();
        assert_eq!(p.changes[0].description, "Create /etc/x.conf");
        assert!(matches!(
            p.changes[0].action,
            Action::WriteFile {
                new_mode: 0o600,
                ..
            }
        ));
        assert!(p.state_after.files["/etc/x.conf"].original.is_none());
        w.file("/etc/x.conf", "a=1\n");
        assert!(w.plan(&desired(FILE)).0.unwrap().changes.is_empty());
        w.file("/etc/x.conf", "a=2\n");
        let p = w.plan(&desired(FILE)).0.unwrap();
        assert_eq!(p.changes[0].description, "Update /etc/x.conf");
        // An update keeps what was there for rollback.
        assert!(p.state_after.files["/etc/x.conf"].original.is_some());
    }

    #[test]
    fn an_owned_file_no_longer_wanted_is_removed_or_restored() {
        let mut w = World::image(OsFamily::Debian);
        w.state
            .files
            .insert("/etc/made.conf".into(), OwnedFile { original: None });
        w.state.files.insert(
            "/etc/edited.conf".into(),
            OwnedFile {
                original: Some("backups/1/edited.conf".into()),
            },
        );
        w.file("/etc/made.conf", "x\n")
            .file("/etc/edited.conf", "new\n");
        // The backup is asked for, not read here.
        let (_, missed) = w.plan(&desired("modules: {}"));
        assert!(missed.backups.contains("backups/1/edited.conf"));
        w.seen
            .backups
            .insert("backups/1/edited.conf".into(), Ok("old\n".into()));
        let p = w.plan(&desired("modules: {}")).0.unwrap();
        let what: Vec<&str> = p.changes.iter().map(|c| c.description.as_str()).collect();
        assert_eq!(
            what,
            [
                "Restore /etc/edited.conf as it was before gdrprov managed it",
                "Remove /etc/made.conf (no profile asks for it any more)"
            ]
        );
        assert_eq!(written(&p, "/etc/edited.conf"), Some("old\n"));
        assert!(p.state_after.files.is_empty());
    }

    #[test]
    fn templates_come_from_the_facts_and_a_clash_with_a_module_is_refused() {
        let mut w = World::image(OsFamily::Debian);
        let d = desired("vars: { who: gpu }\nfiles:\n  - { path: /etc/t.conf, template: t.hbs }\n");
        w.seen
            .templates
            .insert("t.hbs".into(), Ok("hello {{who}}\n".into()));
        assert_eq!(
            written(&w.plan(&d).0.unwrap(), "/etc/t.conf"),
            Some("hello gpu\n")
        );
        w.seen
            .templates
            .insert("t.hbs".into(), Err("read template t.hbs: gone".into()));
        assert_eq!(
            w.plan(&d).0.unwrap_err().to_string(),
            "read template t.hbs: gone"
        );
        let clash = desired("modules: { absent: [x] }\nfiles:\n  - { path: /etc/modprobe.d/gdrprov-blacklist.conf, content: \"\" }\n");
        let e = w.plan(&clash).0.unwrap_err().to_string();
        assert!(e.contains("written by gdrprov's modules module"), "{e}");
    }
}
