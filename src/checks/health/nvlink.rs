//! NVLink health (`nvlink`) and Fabric Manager (`gpu-fabric`), from the GPU topology facts (NVML
//! through nvml-wrapper, recorded in snapshots): per GPU the links the device has (NVML answers
//! for them: never a constant, so a 12-link H100 PCIe is whole at 12) and which are up, their
//! generation, their error counters, with a rate when a second reading is given (verify reads
//! again after its GPU-to-GPU copies); each GPU's fabric state on NVSwitch boards.

use super::{Findings, HealthCheck};
use crate::facts::gpu::Gpu;
use crate::facts::gpu_topo::GpuTopology;
use crate::facts::Facts;
use gdrprov_rdma::nvlink::{GpuNode, LinkErrors, NodeLinks};

pub const NAME: &str = "nvlink";
pub const FABRIC: &str = "gpu-fabric";

/// CRC errors per second on one link above which the link is failing (DCGM's NVLink health
/// watch uses 100/s for CRC flit and data errors).
pub const CRC_PER_SECOND: f64 = 100.0;

/// A second reading of every link's counters, `seconds` after the facts' one.
#[derive(Debug, Clone)]
pub struct Again {
    pub errors: Vec<(u32, u32, LinkErrors)>,
    pub seconds: f64,
}

fn nvml_or_skip<'t>(
    gpus: &[Gpu],
    topo: &'t GpuTopology,
    name: &'static str,
) -> Result<&'t NodeLinks, HealthCheck> {
    if gpus.is_empty() {
        return Err(HealthCheck::skip(name, "no NVIDIA GPU on this host"));
    }
    match topo.live.as_ref().map(|l| &l.nvml) {
        None => Err(HealthCheck::skip(
            name,
            "NVML not asked (not the running system, or a snapshot taken without it)",
        )),
        Some(n) => match &n.error {
            Some(e) => Err(HealthCheck::skip(name, format!("cannot ask NVML: {e}"))),
            None => Ok(n),
        },
    }
}

fn delta(a: Option<u64>, b: Option<u64>) -> u64 {
    match (a, b) {
        (Some(x), Some(y)) => y.saturating_sub(x),
        _ => 0,
    }
}

/// The `nvlink` check on the facts' one reading.
pub fn check(facts: &Facts) -> HealthCheck {
    check_topology(&facts.gpus, &facts.gpu_topology, None)
}

/// One GPU's links judged by the rate of their error counters between the two readings: CRC
/// errors over the limit fail, replays warn. Returns the GPU's CRC errors in that time.
fn error_rates(g: &GpuNode, who: &str, a: &Again, found: &mut Findings) -> u64 {
    let mut crc_total = 0u64;
    for l in &g.links {
        let Some((_, _, now)) = a
            .errors
            .iter()
            .find(|(i, k, _)| *i == g.index && *k == l.link)
        else {
            continue;
        };
        let e = &l.errors;
        let crc = delta(e.crc_flit, now.crc_flit) + delta(e.crc_data, now.crc_data);
        let replay = delta(e.replay, now.replay) + delta(e.recovery, now.recovery);
        let rate = crc as f64 / a.seconds.max(1e-3);
        crc_total += crc;
        if rate > CRC_PER_SECOND {
            found.bad.push(format!(
                "{who} link {}: {crc} CRC errors in {:.1} s ({rate:.0}/s)",
                l.link, a.seconds
            ));
            found.fixes.push("CRC errors growing: reseat or service the link (the baseboard or NVSwitch tray); drain the node");
        } else if replay > 0 {
            found.warn.push(format!(
                "{who} link {}: {replay} replay/recovery error(s) in {:.1} s",
                l.link, a.seconds
            ));
        }
    }
    crc_total
}

/// The `nvlink` check; with `again`, error counters judged by their rate.
pub fn check_topology(gpus: &[Gpu], topo: &GpuTopology, again: Option<&Again>) -> HealthCheck {
    let n = match nvml_or_skip(gpus, topo, NAME) {
        Ok(n) => n,
        Err(c) => return c,
    };
    if n.gpus.iter().all(|g| g.links.is_empty()) {
        return HealthCheck::skip(NAME, "these GPUs have no NVLink (NVML lists no link)");
    }
    let mut found = Findings::default();
    let mut crc_total = 0u64;
    for g in &n.gpus {
        let who = format!("GPU {} ({})", g.index, g.pci);
        let down: Vec<u32> = g.links.iter().filter(|l| !l.up).map(|l| l.link).collect();
        if !down.is_empty() {
            found.bad.push(format!(
                "{who}: NVLink link(s) {down:?} down of the {} it has",
                g.links.len()
            ));
            found.fixes.push("a link down: check Fabric Manager on NVSwitch boards, reset the GPUs (or reboot); if it stays down the baseboard needs service");
        }
        let mut gens: Vec<&str> = g
            .links
            .iter()
            .filter(|l| l.up)
            .filter_map(|l| l.generation.as_deref())
            .collect();
        gens.sort();
        gens.dedup();
        if gens.len() > 1 {
            found
                .warn
                .push(format!("{who}: links of several NVLink versions {gens:?}"));
        }
        if let Some(a) = again {
            crc_total += error_rates(g, &who, a, &mut found);
        }
        let up = g.links.len() - down.len();
        found.ok.push(format!(
            "{who}: {up} of {} up{}{}",
            g.links.len(),
            gens.first()
                .map(|v| format!(", NVLink {v}"))
                .unwrap_or_default(),
            g.link_speed_mbps
                .map(|m| format!(" at {:.2} GB/s", m as f64 / 1000.0))
                .unwrap_or_default()
        ));
    }
    for m in &n.missing {
        found.warn.push(format!("this driver's NVML lacks {m}"));
    }
    let counted = match again {
        Some(a) => format!(
            "; error counters read twice, {:.1} s apart: {crc_total} CRC error(s) over all links, every link under {CRC_PER_SECOND}/s",
            a.seconds
        ),
        None => "; error counters read once (no rate)".into(),
    };
    found.verdict(
        NAME,
        "watch the counters (`nvidia-smi nvlink -e`); a growing count points at the link's hardware; a function NVML lacks needs a newer driver",
        true,
        &counted,
    )
}

/// The `gpu-fabric` check: on a board whose NVLinks end at NVSwitches every GPU's fabric
/// registration must have completed, else CUDA fails with "system not yet initialized".
pub fn fabric(facts: &Facts) -> HealthCheck {
    let fm = facts.gpu_topology.fabric_manager.as_ref();
    let driver = facts.nvidia_driver.version.as_deref();
    // Fabric Manager must be the driver's own version, or it refuses to start.
    if let (Some((pkg, v)), Some(d)) = (fm, driver) {
        if !crate::facts::gpu_topo::fabric_manager_matches(v, d) {
            return HealthCheck::fail(
                FABRIC,
                format!("Fabric Manager {pkg} {v} is not the driver's version {d}: it refuses to start, and the GPUs' fabric never completes"),
                format!("install the Fabric Manager of the driver's version ({pkg} {d}), then `systemctl enable --now nvidia-fabricmanager`"),
            );
        }
    }
    let n = match nvml_or_skip(&facts.gpus, &facts.gpu_topology, FABRIC) {
        Ok(n) => n,
        Err(c) => return c,
    };
    let switched = n.gpus.iter().any(|g| {
        g.links
            .iter()
            .any(|l| l.remote_type.as_deref() == Some("switch"))
    });
    if !switched {
        return HealthCheck::skip(
            FABRIC,
            "no NVSwitch: no NVLink ends at a switch, so no Fabric Manager is needed",
        );
    }
    let mut bad = Vec::new();
    let mut ok = Vec::new();
    for g in &n.gpus {
        let who = format!("GPU {} ({})", g.index, g.pci);
        match &g.fabric {
            Some(f) if f.state == "completed" && f.status.unwrap_or(0) == 0 => {
                ok.push(format!("{who}: completed"))
            }
            Some(f) if f.state == "completed" => bad.push(format!(
                "{who}: fabric registration completed with NVML error {}",
                f.status.unwrap_or(0)
            )),
            Some(f) => bad.push(format!("{who}: fabric {}", f.state)),
            None => bad.push(format!("{who}: fabric state unknown (NVML did not say)")),
        }
    }
    let fm_words = match fm {
        Some((pkg, v)) => format!("Fabric Manager {pkg} {v}, the driver's version"),
        None => "no Fabric Manager package in this root (on a virtual machine it runs on the host)"
            .into(),
    };
    if bad.is_empty() {
        return HealthCheck::pass(
            FABRIC,
            format!("NVSwitch board: {}; {fm_words}", ok.join("; ")),
        );
    }
    HealthCheck::fail(
        FABRIC,
        format!(
            "NVSwitch board: {}; until every GPU's fabric is completed CUDA answers \"system not yet initialized\" (error 802); {fm_words}",
            bad.join("; ")
        ),
        "enable and start nvidia-fabricmanager (and nvidia-persistenced), of the same version as the driver: `systemctl enable --now nvidia-fabricmanager`; `nv-fabricmanager --version` must match `nvidia-smi`'s driver",
    )
}
