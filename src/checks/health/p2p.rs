//! The `gpu-p2p` check: every ordered GPU pair has peer access over the path the board has
//! (NVLink, else PCIe), from the topology facts (CUDA's peer access and NVML's P2P status,
//! recorded in snapshots); in `verify` on the running system also the measured copy-engine
//! bandwidth of each pair against its path's floor (`bench p2p`).

use super::HealthCheck;
use crate::bench::p2p::{self, P2pReport};
use crate::facts::Facts;

pub const NAME: &str = "gpu-p2p";

/// From the facts alone: pairs without peer access, with the cause and the fix.
pub fn from_facts(facts: &Facts) -> HealthCheck {
    match facts.gpus.len() {
        0 => return HealthCheck::skip(NAME, "no NVIDIA GPU on this host"),
        1 => {
            return HealthCheck::skip(
                NAME,
                format!("one GPU ({}): no GPU pair", facts.gpus[0].pci),
            )
        }
        _ => {}
    }
    let t = &facts.gpu_topology;
    let Some(live) = t.live.as_ref() else {
        return HealthCheck::skip(
            NAME,
            "CUDA and NVML not asked (not the running system, or a snapshot taken without them)",
        );
    };
    if live.peers.is_empty() {
        return HealthCheck::skip(
            NAME,
            match &live.peers_error {
                Some(e) => format!("CUDA could not say: {e}"),
                None => "CUDA sees fewer than two GPUs (CUDA_VISIBLE_DEVICES?): no GPU pair".into(),
            },
        );
    }
    let mut bad = Vec::new();
    let mut fixes = Vec::new();
    let mut ok = Vec::new();
    for pa in &live.peers {
        let path = p2p::path(t, &pa.a_pci, &pa.b_pci);
        if pa.can_access {
            ok.push(format!(
                "{}->{} {}{}",
                pa.a,
                pa.b,
                path.kind,
                if path.nvlinks > 0 {
                    format!(" x{}", path.nvlinks)
                } else {
                    String::new()
                }
            ));
            continue;
        }
        let (cause, fix) = p2p::no_access_cause(&path);
        bad.push(format!(
            "GPU {} -> GPU {}: no peer access ({cause})",
            pa.a, pa.b
        ));
        if !fixes.contains(&fix) {
            fixes.push(fix);
        }
    }
    if !bad.is_empty() {
        return HealthCheck::fail(
            NAME,
            format!(
                "{}; copies between them go through host memory",
                bad.join("; ")
            ),
            fixes.join("; "),
        );
    }
    HealthCheck::pass(
        NAME,
        format!("peer access on every pair: {}", ok.join(", ")),
    )
}

/// From a measured `bench p2p` (verify, running system); a failed run is a failure that says
/// how to see the error.
pub fn measured(r: Result<&P2pReport, &crate::bench::BenchError>) -> HealthCheck {
    let r = match r {
        Ok(r) => r,
        Err(e) => {
            return HealthCheck::fail(
                NAME,
                format!("the GPU-to-GPU copies did not run: {e}"),
                format!(
                    "run {} to see the error; check `nvidia-smi topo -m`",
                    crate::suggest::Suggest::new(crate::names::BENCH_P2P)
                        .shown(&crate::suggest::Given::none())
                ),
            )
        }
    };
    if let Some(n) = &r.note {
        return HealthCheck::skip(NAME, n.clone());
    }
    let lines: Vec<String> = r.pairs.iter().map(|p| p.summary()).collect();
    if r.passed {
        return HealthCheck::pass(NAME, lines.join("; "));
    }
    let findings: Vec<String> = r.pairs.iter().filter_map(|p| p.finding.clone()).collect();
    HealthCheck::fail(
        NAME,
        findings.join("; "),
        "a pair below its NVLink floor: `nvidia-smi nvlink -s` and the nvlink check (links down, errors); without peer access: ACS redirect, the IOMMU or a driver setting (see the finding); over PCIe: the pcie-links check",
    )
}
