//! Every GPU at once (`gdrprov bench copy --concurrent`, and `verify`'s copy check with 2+ GPUs):
//! host -> device on all GPUs together, then device -> host, per GPU and in sum, with each GPU
//! alone first by the same method (nvbandwidth's: 512 MiB, 4 warm-ups, 16 copies a sample, the
//! median of 3; see gdrprov_rdma::cuda::node).
//!
//! Floors come from the topology: each GPU's own floor ([`super::copy::floor`]: its link), and
//! for GPUs behind one port that sysfs gives a rate for (a PCIe switch's uplink) that rate shared
//! among them. A GPU that reaches its own floor alone and misses it together is named with the
//! port it shares; where the only shared port is the host bridge (its rate is the CPU's and
//! memory's, which sysfs does not give), that is a warning with the sum measured, not a failure.

use crate::bench::units::one_decimal;
use serde::Serialize;

use super::copy::{
    floor, read_link, sysfs_address, CopyOptions, CopyReport, LinkReading, DEFAULT_FRACTION,
};
use super::error::BenchError;
use crate::facts::gpu_copy::{CopyFigures, GpuFigures};
use crate::facts::gpu_topo::GpuTopology;
use crate::facts::links::PcieLink;
use crate::facts::numa::Placement;
use gdrprov_rdma::cuda::node::{median, Copy, Measured, Method, Node, Place};

pub const DEFAULT_SIZE: usize = 512 << 20;
pub const METHOD: &str = "cuMemcpyAsync on a stream per GPU from one thread, pinned portable host memory (each GPU's allocated from its NUMA node's CPUs), 4 warm-up copies, 16 timed copies a sample (events; streams start together on one event), median of 3 samples; each GPU alone first, then all together (nvbandwidth's host_to_device / host_to_all method)";

/// One direction of one GPU.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Direction {
    pub alone_gbs: Option<f64>,
    pub together_gbs: f64,
    pub together_samples: Vec<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuTogether {
    pub index: u32,
    pub name: String,
    pub pci: String,
    pub link: LinkReading,
    pub h2d: Direction,
    pub d2h: Direction,
    pub data_ok: bool,
    /// The floor alone (its own link) and together (the shared port's share, where lower).
    pub floor_alone_gbs: Option<f64>,
    pub floor_together_gbs: Option<f64>,
    pub floor_source: String,
    /// The port this GPU shares with others, if any.
    pub shared_port: Option<String>,
    /// `pass`, `warn` or `fail`.
    pub verdict: &'static str,
    pub finding: Option<String>,
    /// The NUMA node and CPUs its host buffer was allocated from (and its alone runs driven
    /// from).
    pub numa: Placement,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConcurrentReport {
    pub bytes: usize,
    pub method: &'static str,
    pub gpus: Vec<GpuTogether>,
    pub h2d_sum_gbs: f64,
    pub d2h_sum_gbs: f64,
    /// `pass`, `warn` or `fail` over every GPU.
    pub verdict: &'static str,
    pub passed: bool,
    /// Set when fewer than two GPUs: what was (not) run.
    pub note: Option<String>,
}

impl GpuTogether {
    /// One GPU of the concurrent copy, the same words in `bench copy --concurrent` and `verify`.
    pub fn summary(&self) -> String {
        format!(
            "GPU {} {} ({}): H2D {} alone / {:.1} together, D2H {} alone / {:.1} together GB/s, floor {} alone / {} together ({}){}, {}",
            self.index,
            self.name,
            self.pci,
            one_decimal(self.h2d.alone_gbs),
            self.h2d.together_gbs,
            one_decimal(self.d2h.alone_gbs),
            self.d2h.together_gbs,
            one_decimal(self.floor_alone_gbs),
            one_decimal(self.floor_together_gbs),
            self.floor_source,
            self.shared_port
                .as_deref()
                .map(|p| format!("; shares {p}"))
                .unwrap_or_default(),
            self.numa.label()
        )
    }
}

impl ConcurrentReport {
    /// The sums line.
    pub fn sums(&self) -> String {
        format!(
            "all {} GPUs together: H2D {:.1} GB/s, D2H {:.1} GB/s in sum",
            self.gpus.len(),
            self.h2d_sum_gbs,
            self.d2h_sum_gbs
        )
    }
}

/// What one GPU measured alone (from this module or from `bench copy`).
#[derive(Debug, Clone, PartialEq)]
pub struct Alone {
    pub pci: String,
    pub h2d: f64,
    pub d2h: f64,
}

/// The floor together of a GPU: its own, or the share of a shared port with a known rate.
fn together_floor(
    own: Option<f64>,
    own_source: &str,
    pci: &str,
    topo: &GpuTopology,
) -> (Option<f64>, String, Option<String>) {
    let Some(port) = topo.shared_port(pci) else {
        return (own, own_source.to_string(), None);
    };
    let n = port.gpus.len() as f64;
    let label = format!(
        "{} {} (shared by {} GPUs{})",
        if port.kind == "bridge" {
            "PCIe port"
        } else {
            "host bridge"
        },
        port.port,
        port.gpus.len(),
        if port.nics.is_empty() {
            String::new()
        } else {
            format!(" and {} NIC(s)", port.nics.len())
        }
    );
    match port.link_gbs {
        Some(g) if own.is_none_or(|o| DEFAULT_FRACTION * g / n < o) => (
            Some(DEFAULT_FRACTION * g / n),
            format!(
                "{DEFAULT_FRACTION} of the {} uplink of {label}: {g:.1} GB/s / {}",
                port.link.as_deref().unwrap_or("?"),
                port.gpus.len()
            ),
            Some(label),
        ),
        _ => (own, own_source.to_string(), Some(label)),
    }
}

/// Judges one GPU: fail below the floor where the floor is the link's or a known port's share,
/// or below it alone; warn when only together and only behind a host bridge of unknown rate.
pub fn judge(g: &mut GpuTogether, topo: &GpuTopology) {
    let (floor_together, source, shared) =
        together_floor(g.floor_alone_gbs, &g.floor_source, &g.pci, topo);
    g.floor_together_gbs = floor_together;
    g.floor_source = source;
    g.shared_port = shared.clone();
    let alone_low = g.floor_alone_gbs.is_some_and(|f| {
        g.h2d.alone_gbs.is_some_and(|x| x < f) || g.d2h.alone_gbs.is_some_and(|x| x < f)
    });
    let together_low =
        floor_together.is_some_and(|f| g.h2d.together_gbs < f || g.d2h.together_gbs < f);
    let who = format!("GPU {} ({})", g.index, g.pci);
    let figures = format!(
        "H2D {} alone / {:.1} together, D2H {} alone / {:.1} together GB/s",
        one_decimal(g.h2d.alone_gbs),
        g.h2d.together_gbs,
        one_decimal(g.d2h.alone_gbs),
        g.d2h.together_gbs
    );
    (g.verdict, g.finding) = if !g.data_ok {
        (
            "fail",
            Some(format!("{who}: the data copied did not arrive intact")),
        )
    } else if alone_low {
        ("fail", Some(format!("{who} is slow even alone: {figures}")))
    } else if together_low {
        let port = shared.unwrap_or_else(|| {
            "no PCIe port sysfs shows (host memory bandwidth or NUMA placement)".into()
        });
        let known = topo
            .shared_port(&g.pci)
            .is_some_and(|p| p.link_gbs.is_some());
        let v = if known || topo.shared_port(&g.pci).is_none() {
            "fail"
        } else {
            "warn"
        };
        (
            v,
            Some(format!(
                "{who} is fine alone and slow together ({figures}); it shares {port}"
            )),
        )
    } else {
        ("pass", None)
    };
}

/// The report's verdict over its GPUs.
pub fn finish(gpus: Vec<GpuTogether>, bytes: usize, note: Option<String>) -> ConcurrentReport {
    let verdict = if gpus.iter().any(|g| g.verdict == "fail") {
        "fail"
    } else if gpus.iter().any(|g| g.verdict == "warn") {
        "warn"
    } else {
        "pass"
    };
    ConcurrentReport {
        bytes,
        method: METHOD,
        h2d_sum_gbs: gpus.iter().map(|g| g.h2d.together_gbs).sum(),
        d2h_sum_gbs: gpus.iter().map(|g| g.d2h.together_gbs).sum(),
        gpus,
        verdict,
        passed: verdict != "fail",
        note,
    }
}

fn copies(n: usize, h2d: bool) -> Vec<Copy> {
    (0..n)
        .map(|g| {
            let (src, dst) = if h2d {
                (Place::Host(g), Place::Device(g, 0))
            } else {
                (Place::Device(g, 0), Place::Host(g))
            };
            Copy { src, dst, on: g }
        })
        .collect()
}

/// Both directions of `copies` (of `n` GPUs, taken by `pick`), host -> device first.
fn both_ways(
    node: &Node,
    method: &Method,
    pick: impl Fn(Vec<Copy>) -> Vec<Copy>,
) -> Result<[Vec<Measured>; 2], BenchError> {
    let n = node.gpus().len();
    Ok([
        node.run(&pick(copies(n, true)), method)?,
        node.run(&pick(copies(n, false)), method)?,
    ])
}

/// Runs every GPU of `indexes` alone (unless `alone` is given, measured elsewhere) and all
/// together, each direction in turn; judged against `topo`. One worker thread drives them: it
/// is bound to each GPU's NUMA node while that GPU's host buffer is allocated and while the
/// GPU runs alone, and to the union of those nodes' CPUs while all run together (one thread
/// queues every GPU's copies, as nvbandwidth does; the copy engines move the bytes).
pub fn run(
    indexes: &[u32],
    size: usize,
    method: &Method,
    alone: Option<&[Alone]>,
    opts: &CopyOptions,
    topo: &GpuTopology,
) -> Result<ConcurrentReport, BenchError> {
    super::numa::in_worker(|| {
        let free = super::numa::allowed_cpus();
        let mut places: Vec<Placement> = Vec::new();
        let node = Node::open_placed(indexes, size, true, &mut |_, g| {
            let mut p = super::numa::placement(&sysfs_address(&g.pci_bus_id), opts.numa_pin, &free);
            super::numa::apply(&mut p, &free);
            places.push(p);
        })?;
        let mut gpus = each_alone(&node, &places, &free, method, alone, opts)?;
        let note = (gpus.len() < 2).then(|| {
            format!(
                "one GPU ({}): nothing runs together; measured alone",
                gpus.first().map(|g| g.pci.as_str()).unwrap_or("?")
            )
        });
        all_together(&node, &mut gpus, &places, &free, method)?;
        for g in &mut gpus {
            judge(g, topo);
        }
        Ok(finish(gpus, node.size(), note))
    })
    .map_err(BenchError::InvalidArgument)?
}

/// Every GPU of `node`, alone: as `alone` measured it, else measured now, from its NUMA node.
fn each_alone(
    node: &Node,
    places: &[Placement],
    free: &[usize],
    method: &Method,
    alone: Option<&[Alone]>,
    opts: &CopyOptions,
) -> Result<Vec<GpuTogether>, BenchError> {
    let mut gpus = Vec::new();
    for (i, g) in node.gpus().iter().enumerate() {
        let numa = places.get(i).cloned().unwrap_or_default();
        let pci = sysfs_address(&g.pci_bus_id);
        let link = read_link(&pci);
        let (f, source) = floor(&g.name, &link, opts);
        let measured = alone.and_then(|a| a.iter().find(|x| x.pci == pci));
        let [ah, ad] = match measured {
            Some(m) => [m.h2d, m.d2h],
            None => {
                let mut at = numa.clone();
                super::numa::apply(&mut at, free);
                both_ways(node, method, |c| c[i..=i].to_vec())?.map(|r| median(&r[0].samples))
            }
        };
        let dir = |gbs: f64| Direction {
            alone_gbs: Some(gbs),
            ..Direction::default()
        };
        gpus.push(GpuTogether {
            index: g.index,
            name: g.name.clone(),
            pci,
            link,
            h2d: dir(ah),
            d2h: dir(ad),
            data_ok: true,
            floor_alone_gbs: f,
            floor_together_gbs: None,
            floor_source: source,
            shared_port: None,
            verdict: "pass",
            finding: None,
            numa,
        });
    }
    Ok(gpus)
}

/// Every GPU of `node` at once, from the union of their NUMA nodes' CPUs; with one GPU,
/// together is alone.
fn all_together(
    node: &Node,
    gpus: &mut [GpuTogether],
    places: &[Placement],
    free: &[usize],
    method: &Method,
) -> Result<(), BenchError> {
    if gpus.len() < 2 {
        for g in gpus {
            for d in [&mut g.h2d, &mut g.d2h] {
                d.together_gbs = d.alone_gbs.unwrap_or(0.0);
            }
        }
        return Ok(());
    }
    let mut union: Vec<usize> = places.iter().flat_map(Placement::cpu_set).collect();
    union.sort_unstable();
    union.dedup();
    // Every GPU unpinned: back to the worker's own CPUs.
    let _ = super::numa::bind_this_thread(if union.is_empty() { free } else { &union });
    let [h, d] = both_ways(node, method, |c| c)?;
    for (i, g) in gpus.iter_mut().enumerate() {
        for (dir, m) in [(&mut g.h2d, &h[i]), (&mut g.d2h, &d[i])] {
            dir.together_samples = m.samples.clone();
            dir.together_gbs = median(&m.samples);
        }
        g.data_ok = h[i].data_ok && d[i].data_ok;
    }
    Ok(())
}

/// One GPU's figures as a snapshot records them: H2D and D2H alone, then together.
fn gpu_figures(
    index: u32,
    name: &str,
    pci: &str,
    alone: (f64, f64),
    together: (f64, f64),
    numa: &Placement,
) -> GpuFigures {
    GpuFigures {
        index,
        name: name.to_string(),
        pci: pci.to_string(),
        h2d_alone_gbs: alone.0,
        d2h_alone_gbs: alone.1,
        h2d_together_gbs: together.0,
        d2h_together_gbs: together.1,
        numa: Some(numa.clone()),
    }
}

/// The figures of a finished run, as a snapshot records them ([`crate::facts::gpu_copy`]).
pub fn figures_of(r: &ConcurrentReport) -> CopyFigures {
    let gpus = r.gpus.iter().map(|g| {
        let together = (g.h2d.together_gbs, g.d2h.together_gbs);
        let alone = (
            g.h2d.alone_gbs.unwrap_or(together.0),
            g.d2h.alone_gbs.unwrap_or(together.1),
        );
        gpu_figures(g.index, &g.name, &g.pci, alone, together, &g.numa)
    });
    CopyFigures {
        gpus: gpus.collect(),
    }
}

/// The figures of `bench copy`'s run, each GPU alone, as a snapshot records them: together is
/// then alone.
pub fn figures_alone(r: &CopyReport) -> CopyFigures {
    let gpus = r.gpus.iter().map(|g| {
        let alone = (g.h2d_gbs, g.d2h_gbs);
        gpu_figures(g.index, &g.name, &g.pci, alone, alone, &g.numa)
    });
    CopyFigures {
        gpus: gpus.collect(),
    }
}

/// A snapshot's recorded figures judged as a run would be: each GPU's own floor from its PCIe
/// link as the snapshot's `links` give it, the shared ports from its `topo`.
pub fn replay(f: &CopyFigures, links: &[PcieLink], topo: &GpuTopology) -> ConcurrentReport {
    let gpus = f
        .gpus
        .iter()
        .map(|x| {
            let link = links
                .iter()
                .find(|l| l.address == x.pci)
                .map(|l| LinkReading {
                    current_speed: l.current_speed.clone(),
                    speed_under_load: None,
                    current_width: l.current_width,
                    max_speed: l.max_speed.clone(),
                    max_width: l.max_width,
                })
                .unwrap_or_default();
            let (floor_alone_gbs, floor_source) = floor(&x.name, &link, &CopyOptions::default());
            let dir = |alone: f64, together: f64| Direction {
                alone_gbs: Some(alone),
                together_gbs: together,
                together_samples: vec![together],
            };
            let mut g = GpuTogether {
                index: x.index,
                name: x.name.clone(),
                pci: x.pci.clone(),
                link,
                h2d: dir(x.h2d_alone_gbs, x.h2d_together_gbs),
                d2h: dir(x.d2h_alone_gbs, x.d2h_together_gbs),
                data_ok: true,
                floor_alone_gbs,
                floor_together_gbs: None,
                floor_source,
                shared_port: None,
                verdict: "pass",
                finding: None,
                numa: x.numa.clone().unwrap_or_else(|| {
                    Placement::unpinned(None, "placement not recorded in the snapshot")
                }),
            };
            judge(&mut g, topo);
            g
        })
        .collect();
    let mut r = finish(
        gpus,
        0,
        Some("figures recorded in the snapshot, judged now".into()),
    );
    r.method = "recorded in the snapshot (gpu-copy)";
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::gpu_topo::SharedPort;

    fn gpu(pci: &str, alone: f64, together: f64) -> GpuTogether {
        GpuTogether {
            index: 0,
            name: "NVIDIA H200".into(),
            pci: pci.into(),
            link: LinkReading::default(),
            h2d: Direction {
                alone_gbs: Some(alone),
                together_gbs: together,
                together_samples: vec![together],
            },
            d2h: Direction {
                alone_gbs: Some(alone),
                together_gbs: together,
                together_samples: vec![together],
            },
            data_ok: true,
            floor_alone_gbs: Some(48.0),
            floor_together_gbs: None,
            floor_source: "Azure's floor for H100/H200 at Gen5 x16".into(),
            shared_port: None,
            verdict: "pass",
            finding: None,
            numa: Placement::default(),
        }
    }

    fn topo(port: &str, kind: &'static str, gbs: Option<f64>) -> GpuTopology {
        GpuTopology {
            live: None,
            fabric_manager: None,
            nvswitches: Vec::new(),
            pci_listed: true,
            shared: vec![SharedPort {
                port: port.into(),
                kind,
                gpus: vec!["0000:00:06.0".into(), "0000:00:07.0".into()],
                nics: vec!["0000:00:10.0".into()],
                link: gbs.map(|_| "Gen5 x16".to_string()),
                link_gbs: gbs,
            }],
        }
    }

    #[test]
    fn the_lent_machine_passes() {
        // 2x H200 behind the VM's host bridge: 55.5 alone, 55.0 together (nvbandwidth 55.3).
        let t = topo("pci0000:00", "host-bridge", None);
        let mut g = gpu("0000:00:06.0", 55.5, 55.0);
        judge(&mut g, &t);
        assert_eq!(g.verdict, "pass");
        assert_eq!(g.floor_together_gbs, Some(48.0));
        assert!(g.shared_port.unwrap().contains("host bridge pci0000:00"));
    }

    #[test]
    fn slow_only_together_names_the_shared_port() {
        // Behind a host bridge whose rate sysfs does not give: a warning with the port.
        let t = topo("pci0000:00", "host-bridge", None);
        let mut g = gpu("0000:00:06.0", 55.5, 33.2);
        judge(&mut g, &t);
        assert_eq!(g.verdict, "warn");
        let f = g.finding.unwrap();
        assert!(f.contains("fine alone and slow together"), "{f}");
        assert!(
            f.contains("host bridge pci0000:00 (shared by 2 GPUs and 1 NIC(s))"),
            "{f}"
        );
        // Behind a switch uplink of known rate: its share is the floor (0.75 x 63 / 2).
        let t = topo("0000:01:00.0", "bridge", Some(63.0));
        let mut g = gpu("0000:00:06.0", 55.5, 25.0);
        judge(&mut g, &t);
        assert_eq!(g.verdict, "pass", "{:?}", g.finding);
        assert!((g.floor_together_gbs.unwrap() - 23.625).abs() < 0.01);
        assert!(g.floor_source.contains("uplink of PCIe port 0000:01:00.0"));
        let mut g = gpu("0000:00:06.0", 55.5, 20.0);
        judge(&mut g, &t);
        assert_eq!(g.verdict, "fail");
        assert!(g.finding.unwrap().contains("PCIe port 0000:01:00.0"));
    }

    #[test]
    fn slow_alone_fails_and_data_errors_fail() {
        let t = GpuTopology::default();
        let mut g = gpu("0000:00:06.0", 30.0, 30.0);
        judge(&mut g, &t);
        assert_eq!(g.verdict, "fail");
        assert!(g.finding.unwrap().contains("slow even alone"));
        let mut g = gpu("0000:00:06.0", 55.0, 55.0);
        g.data_ok = false;
        judge(&mut g, &t);
        assert_eq!(g.verdict, "fail");
        let r = finish(
            vec![gpu("a", 55.0, 55.0), gpu("b", 55.0, 54.0)],
            1 << 29,
            None,
        );
        assert!((r.h2d_sum_gbs - 109.0).abs() < 1e-9);
        assert_eq!(r.verdict, "pass");
    }
}
