//! `gdrprov inventory`: every fact, for people or as JSON; with `--snapshot`,
//! a copy of everything the probes read. The text is in src/output/inventory.rs.

use crate::error::Result;
use crate::facts::{Depth, Facts};
use crate::host::Host;
use crate::names;
use crate::ops::Target;
use crate::output::{Format, Output};
use std::path::Path;

pub fn run(out: &Output, target: &Target, snapshot: Option<&Path>) -> Result<i32> {
    let cpu = target.cpu_vendor;
    let mut host = target.open()?;
    if snapshot.is_some() {
        host = host.recording();
    }
    let facts = Facts::gather_with(&host, cpu, Depth::WithCuda);
    host.refuse_special_files()?;
    if let Some(dir) = snapshot {
        // doctor's requirements also read the target kernels' module indexes
        // (does each module a profile loads exist?): record them too, so a
        // replay (`doctor --root SNAPSHOT`) answers as the host did.
        let _ = crate::plan::inputs::target_kernel_modules(&host);
        return write_snapshot(out, target, &host, &facts, dir);
    }
    match out.format {
        Format::Json => out.document(
            names::INVENTORY,
            &target.root,
            serde_json::json!({ "facts": facts }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            out.raw(&crate::output::inventory::text(&host, &facts))
        }
    }
    Ok(crate::exit::OK)
}

/// `--snapshot DIR`: the copy, and proof that it answers the same.
fn write_snapshot(
    out: &Output,
    target: &Target,
    host: &Host,
    facts: &Facts,
    dir: &Path,
) -> Result<i32> {
    let cpu = target.cpu_vendor;
    let rec = host.recorded().unwrap_or_default();
    let s = crate::host::snapshot::write(host, &rec, dir)?;
    // Prove the copy answers the same.
    let again = Host::open(dir, true)
        .map(|h| Facts::gather_with(&h, cpu, Depth::WithCuda))
        .ok();
    let differs = again.map(|a| differing(facts, &a)).unwrap_or_default();
    match out.format {
        Format::Json => out.document(
            names::INVENTORY,
            &target.root,
            serde_json::json!({
                "snapshot": dir.display().to_string(),
                "files": s.files, "links": s.links, "dirs": s.dirs, "commands": s.commands,
                "skipped": s.skipped,
                "differs": differs,
                // The facts of this run, the one the snapshot recorded: what a
                // replay (`--root DIR`) must give again.
                "facts": facts,
            }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            let mut t = format!(
                "Snapshot of {} written to {}: {} files, {} symlinks, {} directories, {} command outputs.\n",
                host.display("/"),
                dir.display(),
                s.files,
                s.links,
                s.dirs,
                s.commands
            );
            for k in &s.skipped {
                t.push_str(&format!("  skipped (too large): {k}\n"));
            }
            if differs.is_empty() {
                t.push_str(&format!(
                    "Checked: `gdrprov inventory --root {}` gives the same facts.\n",
                    dir.display()
                ));
            } else {
                t.push_str(&format!(
                    "warning: read back from the snapshot, these facts differ: {}\n",
                    differs.join(", ")
                ));
            }
            out.raw(&t);
        }
    }
    Ok(crate::exit::OK)
}

/// Top-level facts whose JSON differs (ignoring where they were read from).
pub fn differing(a: &Facts, b: &Facts) -> Vec<String> {
    let (Ok(serde_json::Value::Object(x)), Ok(serde_json::Value::Object(y))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return vec!["(could not compare)".into()];
    };
    x.iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "live" | "snapshot" | "observed") && y.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
}
