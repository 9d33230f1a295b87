//! Every failure-mode table (`modes::Mode` rows) in one list, and the page
//! generated from them: the part of `docs/troubleshooting.md` between
//! [`BEGIN`] and [`END`] (`tests/house/troubleshooting.rs` keeps the page and
//! the tables in step). A table of a new family is one line in [`TABLES`].

use super::modes::Mode;
use super::Sev;

/// Every table, in the page's order: (its heading, its rows).
pub const TABLES: &[(&str, &[Mode])] = &[
    ("NCCL's log", super::nccl_rules::RULES),
    ("The kernel log", super::kernlog_rules::RULES),
    (
        "Module signing, before the module is loaded",
        super::signing::RULES,
    ),
    (
        "The RoCE fabric, the job's own context and the GPUs",
        super::fabric_rules::RULES,
    ),
];

/// Where the generated part of the page starts and ends.
pub const BEGIN: &str = "<!-- begin generated from src/checks/doctor/tables.rs -->";
pub const END: &str = "<!-- end generated -->";

/// A cell of a Markdown table: `|` escaped, one line.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn severity(s: Sev) -> &'static str {
    match s {
        Sev::Error => "error",
        Sev::Warn => "warning",
        Sev::Info => "information",
    }
}

/// The generated part of `docs/troubleshooting.md`: per table, one row per
/// failure mode (symptom, cause, what gdrprov says, fix, report).
pub fn page() -> String {
    let mut out = String::new();
    for (heading, rows) in TABLES {
        out.push_str(&format!("\n### {heading}\n\n"));
        out.push_str("| Symptom (the line you see) | Cause | What gdrprov says | Fix | Report |\n");
        out.push_str("|---|---|---|---|---|\n");
        for m in rows.iter() {
            let symptom = if m.symptom.is_empty() {
                "(no line: gdrprov reads the host)".to_string()
            } else if m.symptom.contains('`') {
                // A code span holding a backtick is fenced by two.
                format!("`` {} ``", cell(m.symptom))
            } else {
                format!("`{}`", cell(m.symptom))
            };
            out.push_str(&format!(
                "| {symptom} | {} | `{}` ({}, {}): {} | {} | {} |\n",
                cell(m.cause),
                m.id,
                severity(m.severity),
                m.seen.words(),
                cell(m.title),
                cell(m.fix),
                m.report
            ));
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::super::modes::first_match;
    use super::*;

    #[test]
    fn every_symptom_is_recognised_as_its_own_row() {
        for (heading, rows) in TABLES {
            for m in rows.iter() {
                assert!(
                    m.report.starts_with("https://"),
                    "{heading}: {} names no public report",
                    m.id
                );
                assert!(
                    !m.symptom.contains("``"),
                    "{}: two backticks in the symptom",
                    m.id
                );
                if !m.seen.is_line() {
                    continue;
                }
                let first = first_match(rows, m.symptom).map(|f| f.id);
                assert_eq!(first, Some(m.id), "{heading}: {}'s own line", m.id);
            }
        }
    }

    #[test]
    fn ids_are_unique_within_a_table() {
        for (heading, rows) in TABLES {
            let mut ids: Vec<&str> = rows.iter().map(|m| m.id).collect();
            ids.sort();
            let n = ids.len();
            ids.dedup();
            assert_eq!(n, ids.len(), "{heading}: an id twice");
        }
    }

    /// Every fixture of real lines gives the findings `expected.txt` names
    /// (NCCL logs through `nccl_log`, kernel logs through the kernel log's
    /// reading and `diagnose`).
    #[test]
    fn the_fields_lines_give_their_findings() {
        use crate::facts::{kernlog, Facts, OsFamily};
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/field-lines");
        let expected = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
        let mut checked = 0;
        for l in expected.lines().filter(|l| !l.trim().is_empty()) {
            let mut w = l.split_whitespace();
            let file = w.next().unwrap();
            let want: Vec<&str> = w.collect();
            let text = std::fs::read_to_string(dir.join(file)).unwrap();
            let mut facts = Facts::blank(OsFamily::Debian);
            let got: Vec<String> = if file.starts_with("nccl/") {
                super::super::nccl_log::findings(&text, file, &facts)
            } else {
                facts.kernel_log = kernlog::parse("/var/log/kern.log", &text).module_lines;
                super::super::diagnose(&facts, super::super::Intent::general(), &[], &[])
            }
            .into_iter()
            .map(|f| f.id)
            .collect();
            for id in &want {
                assert!(got.iter().any(|g| g == id), "{file}: no {id} in {got:?}");
            }
            checked += 1;
        }
        assert!(checked >= 16, "{checked}");
    }
}
