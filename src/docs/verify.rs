//! A node's `gdrprov verify --format json` report, as `fleet sweep report
//! --verify-dir` reads it (the fix command is built from its `profiles`), or
//! the error document of a verify that could not run. Only the fields read
//! are typed; the rest, and fields a newer minor format adds, are ignored.

use super::pair::Failure;
use super::{Bad, Document};
use crate::host::ReadLimit;
use serde::Deserialize;

/// The longest check detail kept (the rest is the node's own report to read).
pub const MAX_NAME: usize = 256;

/// A check's status, as verify writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Warn,
    Fail,
    Skip,
}

/// One check of the report.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Check {
    pub name: String,
    pub status: Status,
    /// Evidence and fix in one line; absent in reports older than it.
    #[serde(default)]
    pub detail: Option<String>,
}

/// A verify report (or a verify's error document).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VerifyReport {
    /// The verify could not run: no findings.
    #[serde(default)]
    pub error: Option<Failure>,
    #[serde(default)]
    pub profiles: Option<Vec<String>>,
    #[serde(default)]
    pub ready: Option<bool>,
    #[serde(default)]
    pub checks: Option<Vec<Check>>,
}

impl Document for VerifyReport {
    const WHAT: &'static str = "a verify report";
    const LIMIT: ReadLimit = ReadLimit::VerifyReport;
    const FIX: &'static str = "the runner must save the node's `verify --format json` output (of its profiles) there as DIR/NODE.json (remove the file, or run verify on that node again)";

    fn check(&self) -> Result<(), Bad> {
        if self.error.is_some() {
            return Ok(());
        }
        for field in ["profiles", "ready", "checks"] {
            let missing = match field {
                "profiles" => self.profiles.is_none(),
                "ready" => self.ready.is_none(),
                _ => self.checks.is_none(),
            };
            if missing {
                return Err(Bad::new(
                    field,
                    "missing (or null): every verify report has it, a verify that failed has `error`",
                ));
            }
        }
        // Each name goes into the fix command the report prints.
        for (i, p) in self.profiles.iter().flatten().enumerate() {
            if let Err(e) = crate::grammar::ProfileName::parse(p) {
                return Err(Bad::new(format!("profiles[{i}]"), e.to_string()));
            }
        }
        for (i, c) in self.checks.iter().flatten().enumerate() {
            if c.name.is_empty() || c.name.len() > MAX_NAME || c.name.chars().any(char::is_control)
            {
                return Err(Bad::new(
                    format!("checks[{i}].name"),
                    format!("not a check's name ({} bytes)", c.name.len()),
                ));
            }
        }
        Ok(())
    }
}
