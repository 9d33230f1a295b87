//! What `gdrprov journal check` prints: each generation and how it stands,
//! then every problem with its fix.

use super::Output;
use crate::checks::journal::Report;
use crate::names;
use std::fmt::Write as _;
use std::path::Path;

pub fn print(out: &Output, root: &Path, r: &Report) {
    if out.json() {
        out.document(names::JOURNAL_CHECK, root, r);
        return;
    }
    out.text(root, &text(r));
}

fn text(r: &Report) -> String {
    let mut t = String::new();
    if r.generations.is_empty() {
        let _ = writeln!(t, "No generations in the journal.");
    }
    for g in &r.generations {
        let kind = match (&g.command, g.kind) {
            (Some(c), _) => c.clone(),
            (None, Some(k)) => serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            (None, None) => "?".into(),
        };
        let unchecked = if g.backups_unchecked > 0 {
            format!(
                ", {} without a checksum (older version)",
                g.backups_unchecked
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            t,
            "{:>4}  {kind:<8}  {:<11}  {} step(s), {} backup(s) checked{unchecked}",
            g.generation, g.result, g.steps, g.backups_checked
        );
    }
    if r.ok {
        let _ = writeln!(
            t,
            "\nJournal OK: every generation finished, every backup as recorded, every file in effect as gdrprov wrote it."
        );
        return t;
    }
    let _ = writeln!(t, "\n{} problem(s):", r.problems.len());
    for p in &r.problems {
        let _ = writeln!(t, "- [{}] {}\n  fix: {}", p.kind, p.message, p.fix);
    }
    t
}
