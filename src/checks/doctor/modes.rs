//! The failure modes the field reports, in one shape: where the symptom is
//! seen, the exact line users see, how a line is recognised, the cause, the
//! finding `doctor` gives and the fix, and the public report each came from.
//! The log readers (`nccl_log`, the kernel log rules) match lines with these
//! rows, and `docs/troubleshooting.md` is generated from them
//! (`HOUSE_WRITE_TROUBLESHOOTING=1 cargo test --test house troubleshooting`),
//! so page and code cannot drift.
//!
//! To add a failure mode: a row in the table of its family (or a new table
//! in [`TABLES`]), a fixture of the real line under
//! `tests/fixtures/field-lines/`, a test that the line gives the finding, and
//! the page regenerated.

use super::{Finding, Sev};

/// Where the symptom shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// A line of an `NCCL_DEBUG=INFO` log (`doctor --nccl-log`).
    NcclLog,
    /// A line of the kernel log (`dmesg`, `/var/log/kern.log`), or of a
    /// service's output that syslog keeps beside it.
    KernelLog,
    /// A state of the host gdrprov reads itself (no line to match).
    Host,
}

impl Seen {
    pub fn words(self) -> &'static str {
        match self {
            Seen::NcclLog => "NCCL's log (`doctor --nccl-log`)",
            Seen::KernelLog => "the kernel log (`doctor`)",
            Seen::Host => "the host (`doctor`, `verify`)",
        }
    }
}

/// One failure mode.
#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// The finding's id (`findings[].id` in `doctor --format json`).
    pub id: &'static str,
    pub seen: Seen,
    pub severity: Sev,
    /// A line matches when it holds every one of `all`, at least one word
    /// of each group of `any` and none of `not`. A [`Seen::Host`] row has
    /// neither `all` nor `any`: it is found from facts.
    pub all: &'static [&'static str],
    pub any: &'static [&'static [&'static str]],
    pub not: &'static [&'static str],
    /// A real line users see, from `report` (host names and addresses
    /// shortened); the page shows it and a test matches it against the row.
    pub symptom: &'static str,
    /// What `doctor` says (the finding's title).
    pub title: &'static str,
    pub cause: &'static str,
    pub fix: &'static str,
    /// The public report the line and the cause came from (a URL).
    pub report: &'static str,
}

impl Mode {
    /// Whether LINE shows this failure mode.
    pub fn matches(&self, line: &str) -> bool {
        self.seen != Seen::Host
            && !(self.all.is_empty() && self.any.is_empty())
            && self.all.iter().all(|w| line.contains(w))
            && self
                .any
                .iter()
                .all(|group| group.iter().any(|w| line.contains(w)))
            && !self.not.iter().any(|w| line.contains(w))
    }

    /// The finding, with EVIDENCE (where the line was, and the line).
    pub fn finding(&self, evidence: String) -> Finding {
        Finding::new(
            self.id,
            self.severity,
            self.title,
            evidence,
            self.cause,
            self.fix,
        )
    }
}

/// The first row of TABLE that LINE matches.
pub fn first_match<'a>(table: &'a [Mode], line: &str) -> Option<&'a Mode> {
    table.iter().find(|m| m.matches(line))
}

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
pub const BEGIN: &str = "<!-- begin generated from src/checks/doctor/modes.rs -->";
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
mod tests {
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
                    !m.symptom.contains('`'),
                    "{}: a backtick in the symptom",
                    m.id
                );
                if m.seen == Seen::Host {
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
    #[allow(clippy::disallowed_methods, reason = "test fixtures")]
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
