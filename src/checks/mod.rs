//! Checks of a host against a profile: the profile's requirements (before
//! planning), `verify` (after apply and reboot), the health checks operators
//! run on one node, and `doctor`'s findings.
//!
//! Every check gives one [`Check`]: a name, a [`Status`] (pass, warn, fail,
//! skip), the evidence and, when it did not pass cleanly, the fix. What a
//! check measured (the loopback's bandwidth, the copy report, NVML readings,
//! the requirements' versions) travels beside it in the report that carries
//! it. `verify` is a loop over a table of such checks ([`verify::TABLE`]).

pub mod doctor;
pub mod health;
pub mod injob;
pub mod journal;
pub mod proof;
pub mod requirements;
pub mod roce;
pub mod verify;

use serde::{Serialize, Serializer};
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    /// Passed, with something worth a look (shown, never makes the host not
    /// ready).
    Warn,
    Fail,
    /// Does not apply here, or cannot be judged here; the evidence says why.
    Skip,
}

impl Status {
    /// `PASS`, `warn`, `FAIL`, `skip`: how the text reports tag a check.
    pub fn tag(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }
}

/// The result of one check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// A table entry's name (`pcie-links`), or a requirement's (`kernel module efa`).
    pub name: Cow<'static, str>,
    pub status: Status,
    /// What was seen: device, values, log lines; for a skip, the reason.
    pub evidence: String,
    /// What to do, when it did not pass cleanly.
    pub fix: Option<String>,
    /// How long the check took (its measurement included), when timed.
    pub duration: Option<std::time::Duration>,
}

impl Check {
    pub fn pass(name: &'static str, evidence: impl Into<String>) -> Self {
        Self::new(name, Status::Pass, evidence.into(), None)
    }
    pub fn skip(name: &'static str, reason: impl Into<String>) -> Self {
        Self::new(name, Status::Skip, reason.into(), None)
    }
    pub fn fail(name: &'static str, evidence: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Status::Fail, evidence.into(), Some(fix.into()))
    }
    /// A failure whose evidence already says what to do.
    pub fn fail_with_cause(name: &'static str, evidence: impl Into<String>) -> Self {
        Self::new(name, Status::Fail, evidence.into(), None)
    }
    pub fn warn(name: &'static str, evidence: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Status::Warn, evidence.into(), Some(fix.into()))
    }
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        status: Status,
        evidence: String,
        fix: Option<String>,
    ) -> Self {
        Check {
            name: name.into(),
            status,
            evidence,
            fix,
            duration: None,
        }
    }

    /// The check with the time it took.
    pub fn timed(mut self, took: std::time::Duration) -> Self {
        self.duration = Some(took);
        self
    }

    /// One line: the evidence, then the fix.
    pub fn detail(&self) -> String {
        match (&self.fix, self.status) {
            (Some(f), Status::Fail) => format!("{}; fix: {f}", self.evidence),
            (Some(f), Status::Warn) => format!("warning: {}; {f}", self.evidence),
            _ => self.evidence.clone(),
        }
    }
}

/// In JSON: `name`, `status`, `detail` (evidence and fix in one line, as
/// verify's checks have it), `evidence`, `fix` (when there is one) and
/// `outcome` (the same as `status`: the health checks' name for it) and
/// `duration_seconds` (when timed).
impl Serialize for Check {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Out<'a> {
            name: &'a str,
            status: Status,
            detail: String,
            evidence: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            fix: Option<&'a str>,
            outcome: Status,
            #[serde(skip_serializing_if = "Option::is_none")]
            duration_seconds: Option<f64>,
        }
        Out {
            name: &self.name,
            status: self.status,
            detail: self.detail(),
            evidence: &self.evidence,
            fix: self.fix.as_deref(),
            outcome: self.status,
            duration_seconds: self.duration.map(|d| d.as_secs_f64()),
        }
        .serialize(s)
    }
}
