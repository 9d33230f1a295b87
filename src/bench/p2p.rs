//! GPU to GPU (`gdrprov bench p2p`, and `verify`'s `gpu-p2p` check): copy-engine bandwidth of
//! every ordered pair, one pair at a time as nvbandwidth's `device_to_device_*_ce` tests:
//! read (the copy runs on the reading GPU, from the peer into it), write (on the writing GPU,
//! into the peer) and bidirectional (both at once, each read by its destination; the sum).
//!
//! Each pair says whether CUDA gave it peer access and over which path it went: `nvlink`
//! (NVML: P2P over NVLink ok and links up), `pcie` (peer access without NVLink), `host-memory`
//! (no peer access: CUDA stages the copy through host memory). Floors from the path: NVLink
//! links x the links' rate (NVML's, else the generation's) x [`NVLINK_EFFICIENCY`]; PCIe the
//! narrower of the two GPUs' links x the copy floor's fraction.

use crate::bench::units::one_decimal;
use serde::Serialize;

use super::copy::{read_link, sysfs_address, DEFAULT_FRACTION};
use super::error::BenchError;
use crate::facts::gpu_topo::GpuTopology;
use gdrprov_rdma::cuda::node::{median, Copy, Method, Node, Place};

/// The floor's share of the NVLink raw rate. Measured on the lent 4x H200 (18 NVLink 4 links at
/// 26.562 GB/s = 478.1 GB/s one way, through NVSwitch): read 394.0 = 0.824, write 396.4 = 0.829,
/// bidirectional 778.7 = 0.814 of 2 x 478.1 (nvbandwidth: 394.0 / 396.4 / 778.7 in the same run).
pub const NVLINK_EFFICIENCY: f64 = 0.75;

/// One NVLink link's one-way rate in GB/s by generation (what `nvidia-smi nvlink -s` shows).
pub fn nvlink_rate(generation: &str) -> Option<f64> {
    Some(match generation {
        "1.0" => 20.0,
        "2.0" | "2.2" => 25.0,
        "3.0" | "3.1" => 25.0,
        "4.0" => 26.5625,
        "5.0" => 50.0,
        _ => return None,
    })
}

/// The path of an ordered pair as the topology facts show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Path {
    /// `nvlink`, `pcie` or `host-memory`.
    pub kind: &'static str,
    pub peer_access: Option<bool>,
    /// NVLink links usable between the two (direct links to the peer, or the fewer of the two
    /// GPUs' links up to NVSwitches), their generation and one-way rate.
    pub nvlinks: u32,
    pub nvlink_generation: Option<String>,
    pub nvlink_rate_gbs: Option<f64>,
    pub via_switch: bool,
    /// NVML's P2P statuses and common ancestor, for the cause of a missing path.
    pub nvml_nvlink: Option<String>,
    pub nvml_read: Option<String>,
    pub common_ancestor: Option<String>,
}

/// The path from the GPU at PCI address `a` to the one at `b` (sysfs form; CUDA and NVML may
/// number GPUs differently, CUDA_VISIBLE_DEVICES included).
pub fn path(topo: &GpuTopology, a: &str, b: &str) -> Path {
    let access = topo.peer(a, b).map(|p| p.can_access);
    let mut p = Path {
        kind: if access == Some(false) {
            "host-memory"
        } else {
            "pcie"
        },
        peer_access: access,
        ..Path::default()
    };
    let Some(n) = topo.nvml() else { return p };
    let (Some(ga), Some(gb)) = (
        n.gpus.iter().find(|g| g.pci == a),
        n.gpus.iter().find(|g| g.pci == b),
    ) else {
        return p;
    };
    if let Some(pp) = n.pairs.iter().find(|x| x.a == ga.index && x.b == gb.index) {
        p.nvml_nvlink = pp.nvlink.clone();
        p.nvml_read = pp.read.clone();
        p.common_ancestor = pp.common_ancestor.clone();
    }
    let direct = ga
        .links
        .iter()
        .filter(|l| l.up && l.remote_pci.as_deref() == Some(gb.pci.as_str()))
        .count() as u32;
    let switched = |g: &gdrprov_rdma::nvlink::GpuNode| {
        g.links
            .iter()
            .filter(|l| l.up && l.remote_type.as_deref() == Some("switch"))
            .count() as u32
    };
    let (links, via_switch) = if direct > 0 {
        (direct, false)
    } else {
        (switched(ga).min(switched(gb)), true)
    };
    if links > 0 && access != Some(false) {
        let gen = ga
            .links
            .iter()
            .find(|l| l.up)
            .and_then(|l| l.generation.clone());
        p.kind = "nvlink";
        p.nvlinks = links;
        p.nvlink_rate_gbs = ga
            .link_speed_mbps
            .map(|m| m as f64 / 1000.0)
            .or_else(|| gen.as_deref().and_then(nvlink_rate));
        p.nvlink_generation = gen;
        p.via_switch = via_switch;
    }
    p
}

/// The one-way floor of a path and where it came from.
pub fn floor(p: &Path, pcie_gbs: Option<f64>) -> (Option<f64>, String) {
    match p.kind {
        "nvlink" => match p.nvlink_rate_gbs {
            Some(r) => (
                Some(f64::from(p.nvlinks) * r * NVLINK_EFFICIENCY),
                format!(
                    "{} NVLink {} link(s){} x {r:.2} GB/s x {NVLINK_EFFICIENCY}",
                    p.nvlinks,
                    p.nvlink_generation.as_deref().unwrap_or("?"),
                    if p.via_switch { " via NVSwitch" } else { "" }
                ),
            ),
            None => (None, "NVLink rate unknown: no floor".into()),
        },
        "pcie" => match pcie_gbs {
            Some(g) => (
                Some(DEFAULT_FRACTION * g),
                format!("{DEFAULT_FRACTION} of the narrower GPU link's {g:.1} GB/s"),
            ),
            None => (None, "no PCIe link attributes: no floor".into()),
        },
        _ => (None, "no peer access: copies go through host memory".into()),
    }
}

/// Why a pair has no peer access, and what fixes it, from NVML's status and the path.
pub fn no_access_cause(p: &Path) -> (String, &'static str) {
    let status = p.nvml_read.as_deref().or(p.nvml_nvlink.as_deref());
    match status {
        Some("disabled-by-regkey") => (
            "the driver disables P2P (a registry key in NVreg_RegistryDwords)".into(),
            "remove the P2P-disabling NVreg_RegistryDwords option from /etc/modprobe.d and reload the nvidia module (the profile's driver options)",
        ),
        Some("chipset-not-supported") | Some("topology-not-supported") => (
            format!(
                "NVML says {} (common ancestor: {}): ACS redirect on a bridge between them or the IOMMU translating peer traffic",
                status.unwrap_or("?"),
                p.common_ancestor.as_deref().unwrap_or("?")
            ),
            "let the profile disable ACS redirect on the PCIe switches (`acs`) and set iommu=pt, apply and reboot",
        ),
        Some("ok") => (
            "NVML says P2P is possible, yet CUDA gives no peer access (CUDA_VISIBLE_DEVICES, a container without the peer, or a driver fault)".into(),
            "check `nvidia-smi topo -p2p r` and the CUDA environment; reload the driver",
        ),
        _ => (
            "CUDA gives no peer access between them".into(),
            "check `nvidia-smi topo -p2p r`; ACS redirect and the IOMMU are the usual causes",
        ),
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PairResult {
    pub a: u32,
    pub b: u32,
    pub path: Path,
    pub read_gbs: f64,
    pub write_gbs: f64,
    pub bidir_gbs: f64,
    pub data_ok: bool,
    /// One way; bidirectional is judged against twice this.
    pub floor_gbs: Option<f64>,
    pub floor_source: String,
    /// Measured read over the path's raw rate (NVLink only).
    pub efficiency: Option<f64>,
    pub verdict: &'static str,
    pub finding: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct P2pReport {
    pub bytes: usize,
    pub method: &'static str,
    pub gpus: Vec<String>,
    pub pairs: Vec<PairResult>,
    pub verdict: &'static str,
    pub passed: bool,
    pub note: Option<String>,
}

impl PairResult {
    /// One pair, the same words in `bench p2p` and `verify`.
    pub fn summary(&self) -> String {
        let path = match self.path.kind {
            "nvlink" => format!(
                "NVLink {} x{}{}",
                self.path.nvlink_generation.as_deref().unwrap_or("?"),
                self.path.nvlinks,
                if self.path.via_switch {
                    " via NVSwitch"
                } else {
                    ""
                }
            ),
            k => k.to_string(),
        };
        format!(
            "GPU {} -> GPU {} over {path}, peer access {}: read {:.1}, write {:.1}, bidirectional {:.1} GB/s, floor {} one way ({}){}",
            self.a,
            self.b,
            match self.path.peer_access {
                Some(true) => "on",
                Some(false) => "OFF",
                None => "?",
            },
            self.read_gbs,
            self.write_gbs,
            self.bidir_gbs,
            one_decimal(self.floor_gbs),
            self.floor_source,
            self.efficiency
                .map(|e| format!("; efficiency {e:.3} of the raw rate"))
                .unwrap_or_default()
        )
    }
}

pub const METHOD: &str = "cuMemcpyAsync device to device, one ordered pair at a time, read on the reader's stream, write on the writer's, bidirectional both at once (sum); 4 warm-ups, 16 copies a sample, median of 3 (nvbandwidth's device_to_device_*_ce)";

/// Judges a measured pair.
pub fn judge(r: &mut PairResult, pcie_gbs: Option<f64>) {
    let (f, source) = floor(&r.path, pcie_gbs);
    r.floor_gbs = f;
    r.floor_source = source;
    r.efficiency = match (r.path.kind, r.path.nvlink_rate_gbs) {
        ("nvlink", Some(rate)) if r.path.nvlinks > 0 => {
            Some(r.read_gbs / (f64::from(r.path.nvlinks) * rate))
        }
        _ => None,
    };
    let who = format!("GPU {} -> GPU {}", r.a, r.b);
    (r.verdict, r.finding) = if !r.data_ok {
        (
            "fail",
            Some(format!("{who}: the data copied did not arrive intact")),
        )
    } else if r.path.peer_access == Some(false) {
        let (cause, fix) = no_access_cause(&r.path);
        (
            "fail",
            Some(format!(
                "{who}: no peer access ({cause}); read {:.1} GB/s through host memory. Fix: {fix}",
                r.read_gbs
            )),
        )
    } else if let Some(fl) =
        f.filter(|fl| r.read_gbs < *fl || r.write_gbs < *fl || r.bidir_gbs < 2.0 * fl)
    {
        (
            "fail",
            Some(format!(
                "{who} over {}: read {:.1}, write {:.1}, bidirectional {:.1} GB/s, below {fl:.1} one way ({})",
                r.path.kind, r.read_gbs, r.write_gbs, r.bidir_gbs, r.floor_source
            )),
        )
    } else {
        ("pass", None)
    };
}

/// Measures every ordered pair of `indexes` with `method`.
pub fn run(
    indexes: &[u32],
    size: usize,
    method: &Method,
    topo: &GpuTopology,
) -> Result<P2pReport, BenchError> {
    let node = Node::open(indexes, size, false)?;
    let gpus: Vec<String> = node
        .gpus()
        .iter()
        .map(|g| sysfs_address(&g.pci_bus_id))
        .collect();
    let n = gpus.len();
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in 0..n {
            if a == b {
                continue;
            }
            pairs.push(measure(&node, a, b, method, topo, &gpus)?);
        }
    }
    let note = (n < 2).then(|| {
        format!(
            "one GPU ({}): no GPU pair to measure",
            gpus.first().map(String::as_str).unwrap_or("?")
        )
    });
    let verdict = if pairs.iter().any(|p| p.verdict == "fail") {
        "fail"
    } else {
        "pass"
    };
    Ok(P2pReport {
        bytes: node.size(),
        method: METHOD,
        gpus,
        pairs,
        verdict,
        passed: verdict == "pass",
        note,
    })
}

fn measure(
    node: &Node,
    a: usize,
    b: usize,
    method: &Method,
    topo: &GpuTopology,
    pci: &[String],
) -> Result<PairResult, BenchError> {
    let (ia, ib) = (node.gpus()[a].index, node.gpus()[b].index);
    let mut path = path(topo, &pci[a], &pci[b]);
    let access = node.enable_peer(a, b)? & node.enable_peer(b, a)?;
    path.peer_access = Some(access);
    if !access {
        path.kind = "host-memory";
    }
    let read = node.run(
        &[Copy {
            src: Place::Device(b, 0),
            dst: Place::Device(a, 1),
            on: a,
        }],
        method,
    )?;
    let write = node.run(
        &[Copy {
            src: Place::Device(a, 0),
            dst: Place::Device(b, 1),
            on: a,
        }],
        method,
    )?;
    let bidir = node.run(
        &[
            Copy {
                src: Place::Device(b, 0),
                dst: Place::Device(a, 1),
                on: a,
            },
            Copy {
                src: Place::Device(a, 0),
                dst: Place::Device(b, 1),
                on: b,
            },
        ],
        method,
    )?;
    let pcie = |p: &str| read_link(p).max_gbytes();
    let narrow = match (pcie(&pci[a]), pcie(&pci[b])) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    };
    let mut r = PairResult {
        a: ia,
        b: ib,
        path,
        read_gbs: median(&read[0].samples),
        write_gbs: median(&write[0].samples),
        bidir_gbs: median(&bidir[0].samples) + median(&bidir[1].samples),
        data_ok: read[0].data_ok && write[0].data_ok && bidir.iter().all(|m| m.data_ok),
        floor_gbs: None,
        floor_source: String::new(),
        efficiency: None,
        verdict: "pass",
        finding: None,
    };
    judge(&mut r, narrow);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nvlink_path(links: u32) -> Path {
        Path {
            kind: "nvlink",
            peer_access: Some(true),
            nvlinks: links,
            nvlink_generation: Some("4.0".into()),
            nvlink_rate_gbs: nvlink_rate("4.0"),
            via_switch: true,
            ..Path::default()
        }
    }

    fn result(path: Path, read: f64, write: f64, bidir: f64) -> PairResult {
        PairResult {
            a: 0,
            b: 1,
            path,
            read_gbs: read,
            write_gbs: write,
            bidir_gbs: bidir,
            data_ok: true,
            floor_gbs: None,
            floor_source: String::new(),
            efficiency: None,
            verdict: "pass",
            finding: None,
        }
    }

    #[test]
    fn nvlink_floor_and_efficiency() {
        // The lent 2x H200, same run as nvbandwidth (393.7 / 396.2 / 778.6).
        let mut r = result(nvlink_path(18), 393.7, 396.2, 778.6);
        judge(&mut r, Some(63.0));
        assert_eq!(r.verdict, "pass", "{:?}", r.finding);
        let f = r.floor_gbs.unwrap();
        assert!((f - 18.0 * 26.5625 * 0.75).abs() < 0.01, "{f}");
        assert!(
            (r.efficiency.unwrap() - 0.823).abs() < 0.002,
            "{:?}",
            r.efficiency
        );
        assert!(r
            .floor_source
            .contains("18 NVLink 4.0 link(s) via NVSwitch"));
        // Nine links down: the floor halves, 300 GB/s still passes; 150 does not.
        let mut r = result(nvlink_path(9), 150.0, 396.2, 778.6);
        judge(&mut r, Some(63.0));
        assert_eq!(r.verdict, "fail");
        assert!(r.finding.unwrap().contains("below 179.3 one way"));
        // Bidirectional is judged against twice the one-way floor.
        let mut r = result(nvlink_path(18), 393.7, 396.2, 600.0);
        judge(&mut r, None);
        assert_eq!(r.verdict, "fail");
    }

    #[test]
    fn pcie_and_host_memory_paths() {
        let pcie = Path {
            kind: "pcie",
            peer_access: Some(true),
            ..Path::default()
        };
        let mut r = result(pcie.clone(), 50.0, 50.0, 100.0);
        judge(&mut r, Some(63.0));
        assert_eq!(r.verdict, "pass");
        assert!((r.floor_gbs.unwrap() - 47.25).abs() < 0.01);
        let mut r = result(pcie, 30.0, 50.0, 100.0);
        judge(&mut r, Some(63.0));
        assert_eq!(r.verdict, "fail");
        let none = Path {
            kind: "host-memory",
            peer_access: Some(false),
            nvml_read: Some("chipset-not-supported".into()),
            common_ancestor: Some("hostbridge".into()),
            ..Path::default()
        };
        let mut r = result(none, 20.0, 20.0, 40.0);
        judge(&mut r, Some(63.0));
        assert_eq!(r.verdict, "fail");
        let f = r.finding.unwrap();
        assert!(
            f.contains("no peer access") && f.contains("ACS redirect"),
            "{f}"
        );
        assert!(f.contains("iommu=pt"), "{f}");
    }

    #[test]
    fn a_data_error_fails_whatever_the_speed() {
        let mut r = result(nvlink_path(18), 393.7, 396.2, 778.6);
        r.data_ok = false;
        judge(&mut r, None);
        assert_eq!(r.verdict, "fail");
    }
}
