//! The failure modes the field reports, in one shape: where the symptom is
//! seen, the exact line users see, how a line is recognised, the cause, the
//! finding `doctor` gives and the fix, and the public report each came from.
//! The log readers (`nccl_log`, the kernel log rules) match lines with these
//! rows, and `docs/troubleshooting.md` is generated from them (`tables`:
//! `HOUSE_WRITE_TROUBLESHOOTING=1 cargo test --test house troubleshooting`),
//! so page and code cannot drift.
//!
//! To add a failure mode: a row in the table of its family (or a new table
//! listed in `tables::TABLES`), a fixture of the real line under
//! `tests/fixtures/field-lines/` with its finding in `expected.txt`, and the
//! page regenerated.

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
    /// A state of the host that doctor reads and verify checks too (no line to match).
    HostAndVerify,
    /// What only verify measures on the running host (no line to match).
    Verify,
    /// What the job's own process sees, `verify --in-job` (no line to match).
    Job,
}

impl Seen {
    pub fn words(self) -> &'static str {
        match self {
            Seen::NcclLog => "NCCL's log (`doctor --nccl-log`)",
            Seen::KernelLog => "the kernel log (`doctor`)",
            Seen::Host => "the host (`doctor`)",
            Seen::HostAndVerify => "the host (`doctor`, `verify`)",
            Seen::Verify => "the running host (`verify`)",
            Seen::Job => "the job (`verify --in-job`)",
        }
    }

    /// Whether a row of this kind matches a line (else it is found from facts).
    pub fn is_line(self) -> bool {
        matches!(self, Seen::NcclLog | Seen::KernelLog)
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
        self.seen.is_line()
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
