//! `gdrprov profile list | show | validate | schema`.

use crate::commands::cli::ProfileCommand;
use crate::error::{Error, Result};
use crate::exit;
use crate::names;
use crate::output::{Format, Output};
use crate::profile;
use std::path::Path;

pub fn run(out: &Output, root: &Path, p: &ProfileCommand) -> Result<i32> {
    match p {
        ProfileCommand::List => {
            let mut rows = Vec::new();
            for name in profile::builtin::names() {
                let loaded = profile::load(name)?;
                rows.push((name, loaded.doc.description.unwrap_or_default()));
            }
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
        }
        ProfileCommand::Show { name } => {
            let loaded = profile::load(name)?;
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
                    let yaml = serde_saphyr::to_string(&loaded.doc)
                        .map_err(|e| Error::Usage(e.to_string()))?;
                    out.raw(&format!(
                        "# {} ({}), extends resolved\n{yaml}",
                        loaded.name, loaded.source
                    ));
                }
            }
        }
        ProfileCommand::Validate { files } => {
            let mut failed = 0;
            let mut results = Vec::new();
            for f in files {
                match profile::load(f) {
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
                return Ok(exit::ERROR);
            }
        }
        ProfileCommand::Schema => out.raw(&format!("{}\n", profile::schema_json())),
    }
    Ok(exit::OK)
}
