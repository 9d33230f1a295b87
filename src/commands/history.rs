//! `gdrprov history`: the journal's generations: when, who, what, result.

use crate::error::exit;
use crate::error::Result;
use crate::names;
use crate::ops::{self, HistoryEntry, Target};
use crate::output::{Format, Output};
use std::fmt::Write as _;

pub fn run(out: &Output, target: &Target) -> Result<i32> {
    let history = ops::history(target)?;
    let (host, gens) = (&history.host, &history.generations);
    if let Some(n) = &history.unfinished {
        out.note(&format!("warning: {n}"));
    }
    match out.format {
        Format::Json => out.document(
            names::HISTORY,
            &target.root,
            serde_json::json!({ "generations": gens }),
        ),
        Format::Text | Format::Prometheus | Format::Html => {
            let mut t = String::new();
            if gens.is_empty() {
                let _ = writeln!(
                    t,
                    "No generations: gdrprov has not changed {}.",
                    host.display("/")
                );
            }
            for g in gens {
                let _ = writeln!(t, "{}", line(g));
            }
            out.raw(&t);
        }
    }
    Ok(exit::OK)
}

/// One generation as text: number, when, who, what, how it ended.
fn line(g: &HistoryEntry) -> String {
    let what = &g.what;
    let result = match g.rolled_back_by {
        Some(by) => format!("rolled back by {by}"),
        None => g.result.replace('-', " "),
    };
    let until = g
        .finished
        .as_deref()
        .map(|f| format!(" to {f}"))
        .unwrap_or_default();
    format!(
        "{:>4}  {}{until}  by {}  {what}: {} step(s), {result}",
        g.generation,
        g.started,
        g.user.as_deref().unwrap_or("(unknown)"),
        g.steps
    )
}
