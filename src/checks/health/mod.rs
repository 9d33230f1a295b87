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
pub mod node;
pub mod nvlink;
pub mod nvml;
pub mod p2p;
pub mod ports;

use serde::Serialize;

/// A health check's result: the one result type of every check.
pub type HealthCheck = crate::checks::Check;
/// Passed / warned / failed / skipped: the one status of every check.
pub type Outcome = crate::checks::Status;

/// The checks that read only facts (any root, snapshot or running host).
pub fn from_facts(facts: &crate::facts::Facts) -> Vec<HealthCheck> {
    let mut v = vec![
        links::check(facts, &[]),
        kernel_log::check(facts),
        ports::check(facts),
        affinity::check(facts),
        nvlink::check(facts),
        nvlink::fabric(facts),
        p2p::from_facts(facts),
    ];
    // Copy figures a snapshot recorded are facts too: judged like a run.
    v.extend(node::replayed(facts).map(|(c, _)| c));
    v
}

/// What a check found over every GPU: failures (with their fixes), warnings, and what is fine.
#[derive(Debug, Default)]
pub struct Findings {
    pub bad: Vec<String>,
    pub warn: Vec<String>,
    pub fixes: Vec<&'static str>,
    pub ok: Vec<String>,
}

impl Findings {
    /// The check `name`: failed with every failure then every warning, and the failures' fixes;
    /// else warned with the warnings (`with_ok`: and what is fine) and `warn_fix`; else passed
    /// with what is fine. `tail` ends the evidence of a warning and of a pass.
    pub fn verdict(
        mut self,
        name: &'static str,
        warn_fix: &str,
        with_ok: bool,
        tail: &str,
    ) -> HealthCheck {
        self.fixes.dedup();
        if !self.bad.is_empty() {
            self.bad.extend(self.warn);
            return HealthCheck::fail(name, self.bad.join("; "), self.fixes.join("; "));
        }
        let ok = self.ok.join("; ");
        if !self.warn.is_empty() {
            let warned = self.warn.join("; ");
            let evidence = if with_ok {
                format!("{warned}; {ok}{tail}")
            } else {
                format!("{warned}{tail}")
            };
            return HealthCheck::warn(name, evidence, warn_fix);
        }
        HealthCheck::pass(name, format!("{ok}{tail}"))
    }
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
    /// Every GPU at once, and every GPU pair (2+ GPUs, running system).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub concurrent: Option<crate::bench::concurrent::ConcurrentReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p2p: Option<crate::bench::p2p::P2pReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl: Option<crate::bench::nccl::NcclReport>,
    /// Seconds the multi-GPU part took (concurrent copy, every pair, NVLink counters).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_seconds: Option<f64>,
    pub links: Vec<crate::facts::links::PcieLink>,
}

/// Every check for `verify`: on the running host the copy bandwidth and NVML
/// are measured too (and the GPU links judged under load); elsewhere those
/// two are skipped with the reason.
pub fn for_verify(live: bool, facts: &crate::facts::Facts) -> HealthReport {
    let mut multi = node::NodeRun::default();
    let timer = std::time::Instant::now;
    let (copy_check, loads, copy, nvml_check, nvml) = if live {
        let start = timer();
        let (c, loads, r) = copy::run(facts);
        let alone = start.elapsed();
        multi = node::run(facts, r.as_ref());
        // The copy check's time: every GPU alone, then all together.
        let c = node::fold_copy(c, multi.concurrent.as_ref()).timed(alone + multi.concurrent_took);
        let start = timer();
        let n = nvml::read();
        let nc = nvml::check(n.as_ref().map_err(String::as_str)).timed(start.elapsed());
        (c, loads, r, nc, n.ok())
    } else {
        let why = "not the running system";
        let copy_check = match node::replayed(facts) {
            Some((c, r)) => {
                multi.concurrent = Some(r);
                c
            }
            None => HealthCheck::skip(copy::NAME, why),
        };
        (
            copy_check,
            Vec::new(),
            None,
            HealthCheck::skip(nvml::NAME, why),
            None,
        )
    };
    let timed = |f: &dyn Fn() -> HealthCheck| {
        let start = timer();
        f().timed(start.elapsed())
    };
    HealthReport {
        checks: vec![
            timed(&|| links::check(facts, &loads)),
            copy_check,
            timed(&|| kernel_log::check(facts)),
            nvml_check,
            timed(&|| ports::check(facts)),
            timed(&|| affinity::check(facts)),
            multi
                .nvlink
                .take()
                .unwrap_or_else(|| timed(&|| nvlink::check(facts))),
            timed(&|| nvlink::fabric(facts)),
            multi
                .p2p_check
                .take()
                .unwrap_or_else(|| timed(&|| p2p::from_facts(facts))),
            multi.nccl_check.take().unwrap_or_else(|| {
                HealthCheck::skip(
                    node::NCCL,
                    if live {
                        "fewer than two GPUs: no all_reduce between GPUs"
                    } else {
                        "not the running system"
                    },
                )
            }),
        ],
        copy,
        nvml,
        concurrent: multi.concurrent,
        p2p: multi.p2p,
        nccl: multi.nccl,
        node_seconds: (multi.seconds > 0.0).then_some(multi.seconds),
        links: facts.links.clone(),
    }
}
