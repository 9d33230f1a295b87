//! `gdrprov inventory`: every fact, for people or as JSON; with `--snapshot`,
//! a copy of everything the probes read (src/ops/inventory.rs). The text is
//! in src/output/inventory.rs.

use crate::error::{exit, Result};
use crate::names;
use crate::ops::{self, Inventory, Snapshotted, Target};
use crate::output::{Format, Output};
use std::path::Path;

pub fn run(out: &Output, target: &Target, snapshot: Option<&Path>) -> Result<i32> {
    let inv = ops::inventory(target, snapshot)?;
    if let (Some(s), Some(dir)) = (&inv.snapshot, snapshot) {
        show_snapshot(out, target, &inv, s, dir);
        return Ok(exit::OK);
    }
    match out.format {
        Format::Json => out.document(
            names::INVENTORY,
            &target.root,
            serde_json::json!({ "facts": inv.facts }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            out.raw(&crate::output::inventory::text(&inv.host, &inv.facts))
        }
    }
    Ok(exit::OK)
}

/// `--snapshot DIR`: what the copy holds, and whether it answers the same.
fn show_snapshot(out: &Output, target: &Target, inv: &Inventory, s: &Snapshotted, dir: &Path) {
    let (sum, differs) = (&s.summary, &s.differs);
    match out.format {
        Format::Json => out.document(
            names::INVENTORY,
            &target.root,
            serde_json::json!({
                "snapshot": dir.display().to_string(),
                "files": sum.files, "links": sum.links, "dirs": sum.dirs, "commands": sum.commands,
                "skipped": sum.skipped,
                "differs": differs,
                // The facts of this run, the one the snapshot recorded: what a
                // replay (`--root DIR`) must give again.
                "facts": inv.facts,
            }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            let mut t = format!(
                "Snapshot of {} written to {}: {} files, {} symlinks, {} directories, {} command outputs.\n",
                inv.host.display("/"),
                dir.display(),
                sum.files,
                sum.links,
                sum.dirs,
                sum.commands
            );
            for k in &sum.skipped {
                t.push_str(&format!("  skipped (too large): {k}\n"));
            }
            if differs.is_empty() {
                t.push_str(&format!(
                    "Checked: {} gives the same facts.\n",
                    crate::output::suggestion(
                        names::INVENTORY,
                        &["--root", &dir.display().to_string()]
                    )
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
}
