//! `gdrprov profile list | show | validate | schema` (src/ops/profile.rs).

use crate::commands::cli::ProfileCommand;
use crate::error::{exit, Error, Result};
use crate::names;
use crate::ops;
use crate::output::{Format, Output};
use std::path::Path;

pub fn run(out: &Output, root: &Path, p: &ProfileCommand) -> Result<i32> {
    match p {
        ProfileCommand::List => list(out, root)?,
        ProfileCommand::Show { name } => show(out, root, name)?,
        ProfileCommand::Validate { files } => return Ok(validate(out, root, files)),
        ProfileCommand::Schema => out.raw(&format!("{}\n", ops::profile_schema())),
    }
    Ok(exit::OK)
}

fn list(out: &Output, root: &Path) -> Result<()> {
    let rows = ops::profile_list()?;
    match out.format {
        Format::Json => {
            let v: Vec<_> = rows
                .iter()
                .map(|(n, d)| serde_json::json!({"name": n, "description": d}))
                .collect();
            out.document(
                names::PROFILE_LIST,
                root,
                serde_json::json!({"profiles": v}),
            );
        }
        Format::Text | Format::Prometheus | Format::Html => {
            let lines: String = rows
                .iter()
                .map(|(n, d)| {
                    format!(
                        "{n:<16} {}\n",
                        d.split_whitespace().collect::<Vec<_>>().join(" ")
                    )
                })
                .collect();
            out.raw(&lines);
        }
    }
    Ok(())
}

fn show(out: &Output, root: &Path, name: &str) -> Result<()> {
    let loaded = ops::profile_load(name)?;
    match out.format {
        Format::Json => out.document(
            names::PROFILE_SHOW,
            root,
            serde_json::json!({
                "name": loaded.name,
                "source": loaded.source.to_string(),
                "profile": loaded.doc,
            }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            let yaml =
                serde_saphyr::to_string(&loaded.doc).map_err(|e| Error::Usage(e.to_string()))?;
            out.raw(&format!(
                "# {} ({}), extends resolved\n{yaml}",
                loaded.name, loaded.source
            ));
        }
    }
    Ok(())
}

/// Each file loaded and checked; exit 1 when one fails.
fn validate(out: &Output, root: &Path, files: &[String]) -> i32 {
    let mut failed = 0;
    let mut results = Vec::new();
    for f in files {
        match ops::profile_validate(f) {
            Ok(p) => {
                if out.format != Format::Json {
                    out.raw(&format!("{f}: ok ({})\n", p.name));
                }
                results.push(serde_json::json!({"file": f, "ok": true, "name": p.name}));
            }
            Err(e) => {
                crate::output::error_line(&e.to_string());
                results.push(serde_json::json!({"file": f, "ok": false,
                    "error": {"kind": e.kind(), "message": e.to_string()}}));
                failed += 1;
            }
        }
    }
    if out.format == Format::Json {
        out.document(
            names::PROFILE_VALIDATE,
            root,
            serde_json::json!({"ok": failed == 0, "files": results}),
        );
    }
    if failed > 0 {
        exit::ERROR
    } else {
        exit::OK
    }
}
