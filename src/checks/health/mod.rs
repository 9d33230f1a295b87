//! The single-host readiness checks that fleet operators run before they trust
//! a GPU node for RDMA (Azure's azurehpc-health-checks, DCGM diagnostics):
//! PCIe links, GPU copy bandwidth, the kernel log (Xid, AER, link flaps), GPU
//! health through NVML, RDMA ports and GPU<->NIC affinity.
//!
//! Each check reads facts gathered once ([`crate::facts::Facts`]) or, in
//! `verify`, a measurement taken on the running host, and gives one
//! [`HealthCheck`]: passed / warned / failed / skipped, with the evidence and a
//! fix. `doctor` turns them into findings, `verify` into checks.

pub mod affinity;
pub mod copy;
pub mod kernel_log;
pub mod links;
pub mod metrics;
pub mod nvml;
pub mod ports;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Pass,
    /// Passed, with something worth a look (shown, never fails the host).
    Warn,
    Fail,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthCheck {
    pub name: &'static str,
    pub outcome: Outcome,
    /// What was seen: device, values, log lines; for a skip, the reason.
    pub evidence: String,
    /// What to do, when it did not pass cleanly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl HealthCheck {
    pub fn pass(name: &'static str, evidence: impl Into<String>) -> Self {
        Self::new(name, Outcome::Pass, evidence.into(), None)
    }
    pub fn skip(name: &'static str, reason: impl Into<String>) -> Self {
        Self::new(name, Outcome::Skip, reason.into(), None)
    }
    pub fn fail(name: &'static str, evidence: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Outcome::Fail, evidence.into(), Some(fix.into()))
    }
    pub fn warn(name: &'static str, evidence: impl Into<String>, fix: impl Into<String>) -> Self {
        Self::new(name, Outcome::Warn, evidence.into(), Some(fix.into()))
    }
    fn new(name: &'static str, outcome: Outcome, evidence: String, fix: Option<String>) -> Self {
        HealthCheck {
            name,
            outcome,
            evidence,
            fix,
        }
    }

    /// One line: the evidence, then the fix.
    pub fn detail(&self) -> String {
        match (&self.fix, self.outcome) {
            (Some(f), Outcome::Fail) => format!("{}; fix: {f}", self.evidence),
            (Some(f), Outcome::Warn) => format!("warning: {}; {f}", self.evidence),
            _ => self.evidence.clone(),
        }
    }
}

/// The checks that read only facts (any root, snapshot or running host).
pub fn from_facts(facts: &crate::facts::Facts) -> Vec<HealthCheck> {
    vec![
        links::check(facts, &[]),
        kernel_log::check(facts),
        ports::check(facts),
        affinity::check(facts),
    ]
}

/// What `verify` adds to its report: the checks with evidence and fix, and
/// the measurements behind them.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    pub checks: Vec<HealthCheck>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copy: Option<crate::bench::copy::CopyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nvml: Option<nvml::NvmlReport>,
    pub links: Vec<crate::facts::links::PcieLink>,
}

/// Every check for `verify`: on the running host the copy bandwidth and NVML
/// are measured too (and the GPU links judged under load); elsewhere those
/// two are skipped with the reason.
pub fn for_verify(live: bool, facts: &crate::facts::Facts) -> HealthReport {
    let (copy_check, loads, copy, nvml_check, nvml) = if live {
        let (c, loads, r) = copy::run(facts);
        let n = nvml::read();
        let nc = nvml::check(n.as_ref().map_err(String::as_str));
        (c, loads, r, nc, n.ok())
    } else {
        let why = "not the running system";
        (
            HealthCheck::skip(copy::NAME, why),
            Vec::new(),
            None,
            HealthCheck::skip(nvml::NAME, why),
            None,
        )
    };
    HealthReport {
        checks: vec![
            links::check(facts, &loads),
            copy_check,
            kernel_log::check(facts),
            nvml_check,
            ports::check(facts),
            affinity::check(facts),
        ],
        copy,
        nvml,
        links: facts.links.clone(),
    }
}
