//! `gdrprov verify`: after the apply and the reboot, is the host what the
//! profile says, and does GPUDirect RDMA actually move data? A loop over the
//! checks of [`TABLE`]: each passes, warns (passes, with something worth a
//! look), fails (with the cause) or is skipped (with the reason); the host is
//! ready when none fails.

mod cx;
mod efa;
mod fabric;
mod gds;
mod own;
pub(crate) mod pair;
mod table;

pub use crate::checks::{Check, Status};
pub use cx::Cx;
pub use table::{Entry, Run, TABLE};

use crate::bench::LoopbackReport;
use crate::checks::requirements::ReqResult;
use crate::error::Result;
use crate::host::Host;
use crate::journal::StateStore;
use crate::plan::Plan;
use crate::profile::Composed;
use serde::Serialize;
use std::cell::RefCell;

#[derive(Debug, Serialize)]
pub struct Report {
    pub profiles: Vec<String>,
    pub root: String,
    pub live: bool,
    pub ready: bool,
    pub checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback: Option<LoopbackReport>,
    /// The readiness checks of src/checks/health with evidence and fix, and their measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::checks::health::HealthReport>,
}

/// What the loopback part of verify may do.
#[derive(Debug, Clone, Default)]
pub struct LoopbackChoice {
    pub skip: bool,
    pub device: Option<String>,
    pub seconds: Option<f64>,
    pub min_gbps: Option<f64>,
    /// `--peer HOST`: the pair check against a listener there.
    pub peer: Option<String>,
    pub token_file: Option<std::path::PathBuf>,
}

/// The profiles verified: composed, and as the user named them (for the
/// commands the checks suggest).
pub struct Wanted<'a> {
    pub composed: &'a Composed,
    pub named: &'a [String],
}

/// Runs every check of [`TABLE`]. `plan` is the plan of the same profiles
/// against this host with nothing allowed to run (`--no-exec`).
pub fn run(
    host: &Host,
    facts: &crate::facts::Facts,
    seen: &crate::plan::inputs::PlanFacts,
    wanted: Wanted,
    plan: std::result::Result<&Plan, &str>,
    reqs: &[ReqResult],
    loopback: &LoopbackChoice,
) -> Result<Report> {
    let desired = wanted.composed;
    let state = StateStore::new(host).load_state()?;
    // PCIe links, copy bandwidth, kernel log, NVML, RDMA ports, affinity:
    // measured once, reported by their entries.
    let health = crate::checks::health::for_verify(host.is_live(), facts);
    // What the copies measured, for a recording host (`verify --snapshot`).
    if let Some(f) = crate::checks::health::node::figures_of_health(&health) {
        let _ = host.probe(crate::facts::gpu_copy::PROBE, || f);
    }
    let mut cx = Cx {
        host,
        facts,
        seen,
        desired,
        profiles: wanted.named,
        plan,
        reqs,
        state: &state,
        health: &health,
        loopback,
        device: (None, None),
        measured: RefCell::new(None),
    };
    // A bad --device is a usage error, where the loopback would run.
    let runs_loopback = host.is_live()
        && !cx.efa_only()
        && !loopback.skip
        && desired.doc.verify.loopback != Some(false);
    // The pair check (--peer) uses the same --device, loopback or not.
    let runs_pair = host.is_live() && loopback.peer.is_some();
    if let Some(d) = loopback
        .device
        .as_deref()
        .filter(|_| runs_loopback || runs_pair)
    {
        let (dev, port) = crate::bench::parse::parse_dev_port(d)
            .map_err(|e| crate::error::Error::Usage(format!("--device: {e}")))?;
        cx.device = (Some(dev), port);
    }
    // Each check timed; a health check keeps the time its measurement took.
    let mut checks: Vec<Check> = TABLE
        .iter()
        .filter_map(|e| {
            let start = std::time::Instant::now();
            let c = e.check(&cx)?;
            Some(match c.duration {
                Some(_) => c,
                None => c.timed(start.elapsed()),
            })
        })
        .collect();
    // A generation left unfinished: the host is in no known state.
    if let Some(n) = crate::apply::notice(host, &StateStore::new(host)) {
        checks.insert(0, Check::fail_with_cause("journal", n));
    }
    let measured = cx.measured.into_inner();
    Ok(Report {
        profiles: desired.names.clone(),
        root: host.root().display().to_string(),
        live: host.is_live(),
        ready: checks.iter().all(|c| c.status != Status::Fail),
        checks,
        loopback: measured,
        health: Some(health),
    })
}

pub(crate) fn loopback_summary(r: &LoopbackReport, notes: &[String]) -> String {
    let best = r.results.iter().max_by_key(|s| s.bytes);
    let mut s = match best {
        Some(b) => format!(
            "{:.2} Gb/s average at {} bytes over {} ({:?} memory)",
            b.average_gbps, b.bytes, r.from.device, r.memory
        ),
        None => "no result".into(),
    };
    if let (Some(line), Some(b)) = (r.line_rate_gbps, best) {
        if line > 0.0 {
            s.push_str(&format!(
                " = {:.0}% of the {line:.0} Gb/s line rate",
                100.0 * b.average_gbps / line
            ));
        }
    }
    s.push_str(&format!(
        "; data check {}",
        if r.data_check.passed {
            "passed"
        } else {
            "FAILED"
        }
    ));
    if let Some(note) = &r.memory_note {
        s.push_str(&format!("; {note}"));
    }
    if let Some(reason) = r
        .threshold
        .reason
        .as_ref()
        .filter(|_| !r.threshold.applicable)
    {
        s.push_str(&format!("; threshold not applicable: {reason}"));
    }
    for n in notes {
        s.push_str(&format!("; {n}"));
    }
    s
}
