//! The copy-bandwidth check of `verify`: `bench copy` on every GPU, against
//! Azure's floors or a fraction of the link's rate. Without libcuda (or a
//! symbol of it) the check is skipped with the reason, never a panic.

use super::links::UnderLoad;
use super::HealthCheck;
use crate::bench::copy::{self, CopyOptions, CopyReport};
use crate::bench::BenchError;
use crate::facts::Facts;

pub const NAME: &str = "copy-bandwidth";

/// The check from a finished (or failed) run.
pub fn verdict(result: Result<&CopyReport, &BenchError>) -> HealthCheck {
    let r = match result {
        Ok(r) => r,
        Err(e @ (BenchError::LibcudaMissing { .. } | BenchError::CudaSymbolMissing { .. })) => {
            return HealthCheck::skip(NAME, format!("cannot measure: {e}"))
        }
        Err(e) => {
            return HealthCheck::fail(
                NAME,
                format!("the copy did not run: {e}"),
                format!(
                    "run {} to see the error; check `nvidia-smi`",
                    crate::suggest::Suggest::new(crate::names::BENCH_COPY)
                        .shown(&crate::suggest::Given::none())
                ),
            )
        }
    };
    let lines: Vec<String> = r.gpus.iter().map(|g| g.summary()).collect();
    if r.passed {
        HealthCheck::pass(NAME, lines.join("; "))
    } else {
        HealthCheck::fail(
            NAME,
            format!("below the floor: {}", lines.join("; ")),
            "a slow copy with a full-speed link points at host memory (populate every memory channel, NUMA: run on the GPU's socket), the IOMMU (iommu=pt), or PCIe settings (BIOS: max payload, relaxed ordering); with a degraded link fix the link first (see pcie-links)",
        )
    }
}

/// Runs the copy on the running host; also the GPU link speeds read under load.
pub fn run(facts: &Facts) -> (HealthCheck, Vec<UnderLoad>, Option<CopyReport>) {
    if facts.gpus.is_empty() {
        return (
            HealthCheck::skip(NAME, "no NVIDIA GPU on this host"),
            Vec::new(),
            None,
        );
    }
    let opts = CopyOptions {
        runs: 5,
        ..CopyOptions::default()
    };
    match copy::run(&opts) {
        Ok(r) => {
            let loads = r
                .gpus
                .iter()
                .map(|g| UnderLoad {
                    address: g.pci.clone(),
                    current_speed: g.link.speed_under_load.clone(),
                })
                .collect();
            (verdict(Ok(&r)), loads, Some(r))
        }
        Err(e) => (verdict(Err(&e)), Vec::new(), None),
    }
}
