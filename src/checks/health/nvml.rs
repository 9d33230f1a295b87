//! GPU health through NVML (libnvidia-ml.so.1, loaded at run time by the
//! gdrprov-rdma crate; absent = skipped with the reason): uncorrectable ECC
//! errors, pending or failed row remapping, retired pages, persistence mode,
//! NVLink links down.

use super::{Findings, HealthCheck};
pub use gdrprov_rdma::nvml::{read, GpuHealth, NvmlReport};

pub const NAME: &str = "gpu-health";

/// The check on what NVML reported (or why it could not be asked).
pub fn check(report: Result<&NvmlReport, &str>) -> HealthCheck {
    let r = match report {
        Ok(r) => r,
        Err(why) => return HealthCheck::skip(NAME, why.to_string()),
    };
    if r.gpus.is_empty() {
        return HealthCheck::skip(NAME, "NVML sees no GPU");
    }
    let mut found = Findings::default();
    for g in &r.gpus {
        let who = format!("GPU {} {} ({})", g.index, g.name, g.pci);
        let before = found.bad.len() + found.warn.len();
        if let Some(n) = g.ecc_uncorrected_volatile.filter(|n| *n > 0) {
            found.bad.push(format!(
                "{who}: {n} uncorrectable ECC error(s) since the driver loaded"
            ));
            found.fixes.push("uncorrectable ECC errors: drain the node, reset the GPU (`nvidia-smi -r`) or reboot; if they recur, replace the GPU");
        } else if let Some(n) = g.ecc_uncorrected_aggregate.filter(|n| *n > 0) {
            found.warn.push(format!(
                "{who}: {n} uncorrectable ECC error(s) over its life"
            ));
        }
        if g.remap_failed == Some(true) {
            found
                .bad
                .push(format!("{who}: row remapping failed (no spare rows left)"));
            found.fixes.push(
                "a failed row remap means the GPU's memory is out of spare rows: replace the GPU",
            );
        }
        if g.remap_pending == Some(true) {
            found.bad.push(format!("{who}: a row remap is pending"));
            found.fixes.push("a pending row remap takes effect at the next GPU reset: `nvidia-smi -r -i N` with no process on the GPU, or reboot");
        }
        if let Some(n) = g.retired_pages.filter(|n| *n > 0) {
            found.warn.push(format!("{who}: {n} retired page(s)"));
        }
        if g.persistence_mode == Some(false) {
            found.warn.push(format!("{who}: persistence mode off"));
        }
        if !g.nvlinks_down.is_empty() {
            found.bad.push(format!(
                "{who}: NVLink link(s) {:?} of {} down",
                g.nvlinks_down, g.nvlinks
            ));
            found.fixes.push("NVLink links down: reset the GPUs or reboot; check Fabric Manager (`systemctl status nvidia-fabricmanager`) on NVSwitch systems; if it persists, the baseboard needs service");
        }
        if found.bad.len() + found.warn.len() == before {
            found.ok.push(format!(
                "{who}: ECC uncorrectable {}, row remap {}, persistence {}, NVLink {}",
                g.ecc_uncorrected_volatile
                    .map(|n| n.to_string())
                    .unwrap_or("n/a".into()),
                match (g.remap_pending, g.remap_failed) {
                    (Some(_), Some(_)) => "ok",
                    _ => "n/a",
                },
                match g.persistence_mode {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "n/a",
                },
                if g.nvlinks == 0 {
                    "none".to_string()
                } else {
                    format!("{} up", g.nvlinks)
                }
            ));
        }
    }
    found.verdict(
        NAME,
        "persistence mode: `nvidia-smi -pm 1` or enable nvidia-persistenced; retired pages and lifetime ECC errors: watch the counts (DCGM), replace the GPU if they grow",
        false,
        "",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            check(Err("libnvidia-ml.so.1 cannot be loaded")).status,
            super::super::Outcome::Skip
        );
        let healthy = GpuHealth {
            name: "NVIDIA H100 80GB HBM3".into(),
            pci: "0000:3b:00.0".into(),
            ecc_uncorrected_volatile: Some(0),
            ecc_uncorrected_aggregate: Some(0),
            remap_pending: Some(false),
            remap_failed: Some(false),
            persistence_mode: Some(true),
            ..GpuHealth::default()
        };
        let r = NvmlReport {
            driver: None,
            gpus: vec![healthy.clone()],
        };
        assert_eq!(check(Ok(&r)).status, super::super::Outcome::Pass);
        let mut sick = healthy.clone();
        sick.remap_pending = Some(true);
        sick.nvlinks = 18;
        sick.nvlinks_down = vec![3];
        let r = NvmlReport {
            driver: None,
            gpus: vec![healthy, sick],
        };
        let c = check(Ok(&r));
        assert_eq!(c.status, super::super::Outcome::Fail);
        assert!(
            c.evidence.contains("row remap is pending"),
            "{}",
            c.evidence
        );
        assert!(c.evidence.contains("[3] of 18 down"), "{}", c.evidence);
    }
}
