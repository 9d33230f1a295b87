//! The multi-GPU part of `verify` on the running system, timed as a whole: every GPU at once
//! (folded into the copy-bandwidth check), every GPU pair (`gpu-p2p`), and the NVLink error
//! counters read before and after those copies (the `nvlink` check's rate).

use super::copy::NAME as COPY;
use super::{nvlink, p2p, HealthCheck, Outcome};
use crate::bench::concurrent::{self, Alone, ConcurrentReport};
use crate::bench::copy::{CopyOptions, CopyReport};
use crate::bench::p2p::P2pReport;
use crate::facts::gpu_copy::CopyFigures;
use crate::facts::gpu_topo::GpuTopology;
use crate::facts::Facts;
use gdrprov_rdma::cuda::node::Method;
use gdrprov_rdma::nvlink::LinkErrors;
use std::time::Instant;

/// What the multi-GPU part measured, and how long it took.
#[derive(Debug, Default)]
pub struct NodeRun {
    pub concurrent: Option<ConcurrentReport>,
    pub p2p: Option<P2pReport>,
    pub nvlink: Option<HealthCheck>,
    pub p2p_check: Option<HealthCheck>,
    pub nccl: Option<crate::bench::nccl::NcclReport>,
    pub nccl_check: Option<HealthCheck>,
    /// How long every GPU at once took (the copy check's second part).
    pub concurrent_took: std::time::Duration,
    pub seconds: f64,
}

/// `bench copy`'s figures per GPU, to compare the concurrent run with.
fn alone_figures(r: &CopyReport) -> Vec<Alone> {
    r.gpus
        .iter()
        .map(|g| Alone {
            pci: g.pci.clone(),
            h2d: g.h2d_gbs,
            d2h: g.d2h_gbs,
        })
        .collect()
}

/// NCCL's all-reduce over every GPU, when libnccl can be loaded.
fn run_nccl(
    all: &[u32],
    topo: &GpuTopology,
) -> Result<Result<crate::bench::nccl::NcclReport, crate::bench::BenchError>, String> {
    match gdrprov_rdma::cuda::nccl::ensure_libnccl() {
        Ok(()) => {
            let pcis = crate::bench::nccl::pci_addresses(all);
            Ok(crate::bench::nccl::run(
                crate::bench::nccl::this_executable(),
                all,
                &pcis,
                &[8 << 20, 256 << 20],
                20,
                topo,
                &crate::bench::nccl_child::Limits::default(),
            ))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The nvlink check with its error rate: the counters read just before the copies (`before`,
/// replacing the facts' reading) against those read after (`after`).
fn nvlink_rate(
    facts: &Facts,
    before: &[(u32, u32, LinkErrors)],
    after: Vec<(u32, u32, LinkErrors)>,
    tb: Instant,
) -> HealthCheck {
    // The facts' reading is replaced by the one taken just before the copies.
    let mut f = facts.gpu_topology.clone();
    if let Some(l) = f.live.as_mut() {
        for g in &mut l.nvml.gpus {
            for link in &mut g.links {
                if let Some((_, _, e)) = before
                    .iter()
                    .find(|(i, k, _)| *i == g.index && *k == link.link)
                {
                    link.errors = e.clone();
                }
            }
        }
    }
    let again = nvlink::Again {
        errors: after,
        seconds: tb.elapsed().as_secs_f64(),
    };
    nvlink::check_topology(&facts.gpus, &f, Some(&again)).timed(tb.elapsed())
}

/// Runs it when the host has 2+ GPUs (nothing otherwise); `alone` is `bench copy`'s result.
pub fn run(facts: &Facts, alone: Option<&CopyReport>) -> NodeRun {
    // CUDA's count (CUDA_VISIBLE_DEVICES may show fewer GPUs than sysfs has).
    let n = gdrprov_rdma::cuda::gpu_count()
        .ok()
        .and_then(|c| usize::try_from(c).ok())
        .unwrap_or(0);
    if facts.gpus.len() < 2 || n < 2 {
        return NodeRun::default();
    }
    let t0 = Instant::now();
    let before = gdrprov_rdma::nvlink::read_errors().ok();
    let tb = Instant::now();
    let all: Vec<u32> = (0..n as u32).collect();
    let measured_alone = alone.map(alone_figures);
    let m = Method::default();
    let topo = &facts.gpu_topology;
    let tc = Instant::now();
    let concurrent = concurrent::run(
        &all,
        concurrent::DEFAULT_SIZE,
        &m,
        measured_alone.as_deref(),
        &CopyOptions::default(),
        topo,
    );
    let concurrent_took = tc.elapsed();
    let tp = Instant::now();
    let pairs = crate::bench::p2p::run(&all, concurrent::DEFAULT_SIZE, &m, topo);
    let p2p_took = tp.elapsed();
    let tn = Instant::now();
    let nccl = run_nccl(&all, topo);
    let nccl_took = tn.elapsed();
    let after = gdrprov_rdma::nvlink::read_errors().ok();
    let nvlink = match (before, after) {
        (Some(b), Some(a)) => Some(nvlink_rate(facts, &b, a, tb)),
        _ => None,
    };
    let nccl_check = Some(nccl_verdict(&nccl).timed(nccl_took));
    NodeRun {
        nccl_check,
        concurrent_took,
        nccl: nccl.ok().and_then(Result::ok),
        p2p_check: Some(p2p::measured(pairs.as_ref()).timed(p2p_took)),
        p2p: pairs.ok(),
        concurrent: concurrent.ok(),
        nvlink,
        seconds: t0.elapsed().as_secs_f64(),
    }
}

/// The copy check with the concurrent run folded in: a failure together fails it, a warning
/// (slow together behind a host bridge of unknown rate) warns.
pub fn fold_copy(alone: HealthCheck, together: Option<&ConcurrentReport>) -> HealthCheck {
    let Some(r) = together else { return alone };
    let lines: Vec<String> = r.gpus.iter().map(|g| g.summary()).collect();
    let findings: Vec<String> = r.gpus.iter().filter_map(|g| g.finding.clone()).collect();
    let evidence = format!(
        "{}; together: {}; {}",
        alone.evidence,
        lines.join("; "),
        r.sums()
    );
    let fix = "GPUs slow only together share a port: a PCIe switch uplink (spread the jobs, or accept the shared rate), or host memory (populate every channel; NUMA placement); a GPU slow alone: see its link (pcie-links)";
    match (alone.status, r.verdict) {
        (Outcome::Fail, _) => alone,
        (_, "fail") => HealthCheck::fail(COPY, format!("{}; {evidence}", findings.join("; ")), fix),
        (_, "warn") => HealthCheck::warn(COPY, format!("{}; {evidence}", findings.join("; ")), fix),
        (Outcome::Warn, _) => alone,
        _ => HealthCheck::pass(COPY, evidence),
    }
}

/// The copy check judged from figures a snapshot recorded (`None` without any): the same
/// floors and shared ports as a run on the machine.
pub fn replayed(facts: &Facts) -> Option<(HealthCheck, ConcurrentReport)> {
    let f = facts.gpu_copy.as_ref()?;
    let r = concurrent::replay(f, &facts.links, &facts.gpu_topology);
    let alone = HealthCheck::pass(
        COPY,
        "figures recorded in the snapshot (gpu-copy), not measured now",
    );
    Some((fold_copy(alone, Some(&r)), r))
}

/// The figures of verify's copy measurements: every GPU at once where it ran (2+ GPUs), else
/// `bench copy`'s each alone (together is then alone).
pub fn figures_of_health(h: &super::HealthReport) -> Option<CopyFigures> {
    match (&h.concurrent, &h.copy) {
        (Some(c), _) => Some(concurrent::figures_of(c)),
        (None, Some(r)) => Some(concurrent::figures_alone(r)),
        (None, None) => None,
    }
}

pub const NCCL: &str = "nccl-allreduce";

/// The `nccl-allreduce` check: skipped without libnccl, failed when NCCL went through host
/// memory, below its floor or wrong.
pub fn nccl_verdict(
    r: &Result<Result<crate::bench::nccl::NcclReport, crate::bench::BenchError>, String>,
) -> HealthCheck {
    match r {
        Err(why) => HealthCheck::skip(NCCL, format!("cannot run NCCL: {why}")),
        Ok(Err(e)) => HealthCheck::fail(
            NCCL,
            format!("the all_reduce did not run: {e}"),
            format!(
                "run {} to see the error (NCCL_DEBUG=INFO)",
                crate::suggest::Suggest::new(crate::names::BENCH_NCCL)
                    .shown(&crate::suggest::Given::none())
            ),
        ),
        Ok(Ok(r)) => {
            let line = r.summary();
            if let (Some(t), Some(f)) = (&r.timeout, &r.finding) {
                return HealthCheck::fail(
                    NCCL,
                    f.clone(),
                    format!("look at: {}", t.look_at.join("; ")),
                );
            }
            match &r.finding {
                None => HealthCheck::pass(NCCL, line),
                Some(f) => HealthCheck::fail(
                    NCCL,
                    format!("{f}; {line}"),
                    "unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL=LOC in the job's environment; give the GPUs peer access (see gpu-p2p); below the floor: see nvlink and gpu-p2p",
                ),
            }
        }
    }
}
