//! In-node NCCL (`gdrprov bench nccl`, and `verify`'s `nccl-allreduce` check with 2+ GPUs): an
//! all_reduce over every local GPU from this one process (gdrprov_rdma::cuda::nccl), busbw per
//! size, and the transports NCCL chose, read back from its own log: NCCL is asked for
//! `NCCL_DEBUG=INFO` (subsystems INIT, P2P, SHM, NET) into a file of ours, and its channel lines
//! (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read`) say P2P (NVLink or PCIe peer to peer), SHM
//! (through host memory), NET (through a NIC) or NVLS. Any channel through SHM or NET inside one
//! node is the finding "NCCL went through host memory".
//!
//! The floor comes from the GPU pairs' path: [`BUSBW_FRACTION`] of the narrowest pair's NVLink
//! (or PCIe) raw rate, judged at the largest size.

use crate::bench::units::one_decimal;
use serde::Serialize;

use super::error::BenchError;
use super::nccl_child::{Limits, Outcome, Timeout};
use crate::facts::gpu_topo::GpuTopology;

/// busbw floor as a share of the path's raw one-way rate. Measured on the lent 2x H200 (NVLink 4
/// x18 via NVSwitch, 478 GB/s raw, NVLS off): torch's NCCL all_reduce of 256 MiB reached 297 GB/s
/// busbw = 0.62; NCCL's own figure for 8x H100 without NVLS is about 370 = 0.77.
pub const BUSBW_FRACTION: f64 = 0.5;

pub const SIZES: &[usize] = &[1 << 20, 8 << 20, 64 << 20, 256 << 20];

pub use super::nccl_child::Size;

#[derive(Debug, Clone, Serialize)]
pub struct NcclReport {
    pub nccl_version: String,
    pub ranks: usize,
    pub sizes: Vec<Size>,
    pub data_ok: bool,
    /// Each transport NCCL named on its channels (`P2P/CUMEM/read`, `SHM/direct/direct`), once.
    pub transports: Vec<String>,
    /// `p2p`, `host-memory` (SHM), `network` (NET) or `unknown` (no channel line in the log).
    pub path: &'static str,
    pub floor_busbw_gbs: Option<f64>,
    pub floor_source: String,
    pub verdict: &'static str,
    pub finding: Option<String>,
    pub log: Option<String>,
    pub note: Option<String>,
    /// A stage of the all_reduce (ncclCommInitAll above all) that outlived its deadline: its
    /// child process was killed (see [`super::nccl_child`]).
    pub timeout: Option<super::nccl_child::Timeout>,
}

impl NcclReport {
    /// One line for verify: busbw at the largest size, path, transports.
    pub fn summary(&self) -> String {
        let last = self.sizes.last();
        format!(
            "NCCL {} all_reduce over {} GPUs: busbw {} GB/s at {} MiB, {} ({}), floor {} ({})",
            self.nccl_version,
            self.ranks,
            one_decimal(last.map(|s| s.busbw_gbs)),
            last.map(|s| s.bytes >> 20).unwrap_or(0),
            match self.path {
                "p2p" => "GPU to GPU",
                "host-memory" => "THROUGH HOST MEMORY",
                "network" => "THROUGH THE NETWORK",
                _ => "transport unknown",
            },
            if self.transports.is_empty() {
                "no channel line in NCCL's log".to_string()
            } else {
                self.transports.join(", ")
            },
            one_decimal(self.floor_busbw_gbs),
            self.floor_source
        )
    }
}

/// The longest transport name taken from a log (NCCL's are a few words:
/// `P2P/CUMEM/read`, `NET/IB/0/GDRDMA`).
const MAX_TRANSPORT: usize = 64;

/// A transport as NCCL names it: letters, digits and `/_.-`, at most
/// [`MAX_TRANSPORT`] bytes. Anything else after ` via ` is not NCCL's
/// structured part (a line of another program, a damaged log) and is not read.
fn is_transport(t: &str) -> bool {
    (1..=MAX_TRANSPORT).contains(&t.len())
        && t.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'.' | b'-'))
}

/// The transports of an NCCL log's channel lines, each once, in order.
pub fn transports(log: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in log.lines() {
        if !line.contains("Channel") {
            continue;
        }
        let Some((_, via)) = line.split_once(" via ") else {
            continue;
        };
        let t = via.split_whitespace().next().unwrap_or("").to_string();
        if is_transport(&t) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// What the transports say of the path.
pub fn path_of(transports: &[String]) -> &'static str {
    if transports.is_empty() {
        "unknown"
    } else if transports.iter().any(|t| t.starts_with("SHM")) {
        "host-memory"
    } else if transports.iter().any(|t| t.starts_with("NET")) {
        "network"
    } else {
        "p2p"
    }
}

/// The busbw floor from the narrowest GPU pair path of the topology.
pub fn floor(topo: &GpuTopology, pcis: &[String]) -> (Option<f64>, String) {
    let mut narrow: Option<(f64, String)> = None;
    for a in pcis {
        for b in pcis {
            if a == b {
                continue;
            }
            let p = super::p2p::path(topo, a, b);
            let raw = match (p.kind, p.nvlink_rate_gbs) {
                ("nvlink", Some(r)) => Some((
                    f64::from(p.nvlinks) * r,
                    format!("NVLink x{} at {r:.2} GB/s", p.nvlinks),
                )),
                _ => None,
            };
            if let Some((g, s)) = raw {
                if narrow.as_ref().is_none_or(|(n, _)| g < *n) {
                    narrow = Some((g, s));
                }
            } else {
                return (
                    None,
                    format!("the path {a} -> {b} is {}: no NVLink floor", p.kind),
                );
            }
        }
    }
    match narrow {
        Some((g, s)) => (
            Some(BUSBW_FRACTION * g),
            format!("{BUSBW_FRACTION} of the narrowest pair's {s} = {g:.1} GB/s"),
        ),
        None => (None, "no GPU pair: no floor".into()),
    }
}

/// Judges a run: data, path, floor at the largest size.
pub fn judge(r: &mut NcclReport) {
    let last = r.sizes.last().map(|s| s.busbw_gbs).unwrap_or(0.0);
    (r.verdict, r.finding) = if !r.data_ok {
        ("fail", Some("the all_reduce's result is wrong".into()))
    } else if r.path == "host-memory" || r.path == "network" {
        (
            "fail",
            Some(format!(
                "NCCL went through {} inside this node ({}), not GPU to GPU: NCCL_P2P_DISABLE / NCCL_P2P_LEVEL set, or no peer access between the GPUs (see gpu-p2p)",
                if r.path == "host-memory" {
                    "host memory"
                } else {
                    "the network"
                },
                r.transports.join(", ")
            )),
        )
    } else if let Some(f) = r.floor_busbw_gbs.filter(|f| last < *f) {
        (
            "fail",
            Some(format!(
                "busbw {last:.1} GB/s at {} MiB, below {f:.1} ({})",
                r.sizes.last().map(|s| s.bytes >> 20).unwrap_or(0),
                r.floor_source
            )),
        )
    } else {
        ("pass", None)
    };
}

/// The sysfs PCI addresses of CUDA devices `indexes`.
pub fn pci_addresses(indexes: &[u32]) -> Vec<String> {
    let inv = gdrprov_rdma::cuda::inventory::inventory();
    indexes
        .iter()
        .map(|&i| {
            inv.devices
                .iter()
                .find(|d| d.ordinal == i as i32)
                .and_then(|d| d.pci_bus_id.as_deref())
                .map(crate::bench::copy::sysfs_address)
                .unwrap_or_default()
        })
        .collect()
}

/// The report for one GPU: nothing to reduce between GPUs.
pub fn one_gpu(pci: &str) -> NcclReport {
    NcclReport {
        nccl_version: String::new(),
        ranks: 1,
        sizes: Vec::new(),
        data_ok: true,
        transports: Vec::new(),
        path: "unknown",
        floor_busbw_gbs: None,
        floor_source: String::new(),
        verdict: "skip",
        finding: None,
        log: None,
        note: Some(format!(
            "one GPU ({pci}): no all_reduce between GPUs to run"
        )),
        timeout: None,
    }
}

/// gdrprov's own executable, the child of [`run`] on the running system: this very file, even
/// if it was replaced or removed since gdrprov started (a package upgrade), as the kernel keeps
/// it reachable.
pub fn this_executable() -> &'static std::path::Path {
    std::path::Path::new("/proc/self/exe")
}

/// Runs it on the running system, in a child process, `program` ([`this_executable`]; a test's
/// mock), watched with `limits` (see [`super::nccl_child`]).
pub fn run(
    program: &std::path::Path,
    indexes: &[u32],
    pcis: &[String],
    sizes: &[usize],
    iters: u32,
    topo: &GpuTopology,
    limits: &Limits,
) -> Result<NcclReport, BenchError> {
    // One directory per run (verify and a test may run two in one process).
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("gdrprov-nccl-{}-{n}", std::process::id()));
    let dir = dir.display().to_string();
    let log_path = format!("{dir}/nccl.log");
    let host = crate::host::Host::open(std::path::Path::new("/"), true)
        .map_err(|e| BenchError::InvalidArgument(e.to_string()))?;
    host.create_dir_all(&dir, 0o700)
        .map_err(|e| BenchError::InvalidArgument(format!("{dir}: {e}")))?;
    let ran = super::nccl_child::run(program, indexes, sizes, iters, &log_path, limits);
    let log = host.read_fact(&log_path).unwrap_or_default();
    let _ = host.remove_dir_all(&dir);
    let ran = match ran? {
        Outcome::Done(r) => r,
        Outcome::TimedOut(t) => return Ok(timed_out(t, indexes.len(), &log)),
    };
    let t = transports(&log);
    let (floor_busbw_gbs, floor_source) = floor(topo, pcis);
    let v = ran.version;
    let mut r = NcclReport {
        nccl_version: format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100),
        ranks: ran.ranks,
        sizes: ran.sizes,
        data_ok: ran.data_ok,
        path: path_of(&t),
        transports: t,
        floor_busbw_gbs,
        floor_source,
        verdict: "pass",
        finding: None,
        log: None,
        note: None,
        timeout: None,
    };
    judge(&mut r);
    Ok(r)
}

/// The report of a run whose child was killed at a deadline: failed, the finding says which
/// stage, how long and what to look at; NCCL's log so far is kept (its last 40 lines).
fn timed_out(t: Timeout, ranks: usize, log: &str) -> NcclReport {
    let lines: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
    NcclReport {
        nccl_version: String::new(),
        ranks,
        sizes: Vec::new(),
        data_ok: false,
        transports: transports(log),
        path: "unknown",
        floor_busbw_gbs: None,
        floor_source: String::new(),
        verdict: "fail",
        finding: Some(t.finding(ranks, lines.last().copied())),
        log: (!tail.is_empty()).then_some(tail),
        note: None,
        timeout: Some(t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P2P_LOG: &str = "h200:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\nh200:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read\nh200:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n";
    const SHM_LOG: &str = "h200:1:1 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\nh200:1:1 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via SHM/direct/direct\n";

    fn report(path: &'static str, t: Vec<String>, busbw: f64) -> NcclReport {
        NcclReport {
            nccl_version: "2.28.3".into(),
            ranks: 2,
            sizes: vec![Size {
                bytes: 256 << 20,
                time_us: 900.0,
                algbw_gbs: busbw,
                busbw_gbs: busbw,
            }],
            data_ok: true,
            transports: t,
            path,
            floor_busbw_gbs: Some(239.1),
            floor_source: "0.5 of the narrowest pair's NVLink x18".into(),
            verdict: "pass",
            finding: None,
            log: None,
            note: None,
            timeout: None,
        }
    }

    #[test]
    fn transports_from_the_log() {
        let t = transports(P2P_LOG);
        assert_eq!(t, vec!["P2P/CUMEM/read"]);
        assert_eq!(path_of(&t), "p2p");
        let s = transports(SHM_LOG);
        assert_eq!(path_of(&s), "host-memory");
        assert_eq!(path_of(&[]), "unknown");
        assert_eq!(path_of(&["NET/IB/0".to_string()]), "network");
    }

    #[test]
    fn only_transport_names_are_read_from_channel_lines() {
        let long = "P".repeat(65);
        let log = format!(
            "NCCL INFO Channel 00 : 0[0] -> 1[1] via \x1b[31mSHM\n\
             NCCL INFO Channel 01 : 0[0] -> 1[1] via {long}\n\
             NCCL INFO Channel 02 : 0[0] -> 1[1] via $(reboot)\n\
             NCCL INFO Channel 03 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
        );
        assert_eq!(transports(&log), vec!["P2P/CUMEM/read"]);
    }

    #[test]
    fn verdicts() {
        let mut r = report("p2p", transports(P2P_LOG), 297.0);
        judge(&mut r);
        assert_eq!(r.verdict, "pass");
        let mut r = report("host-memory", transports(SHM_LOG), 20.0);
        judge(&mut r);
        assert_eq!(r.verdict, "fail");
        let f = r.finding.unwrap();
        assert!(
            f.contains("through host memory") && f.contains("SHM/direct/direct"),
            "{f}"
        );
        let mut r = report("p2p", transports(P2P_LOG), 120.0);
        judge(&mut r);
        assert_eq!(r.verdict, "fail");
        assert!(r.finding.unwrap().contains("below 239.1"));
    }
}

#[cfg(test)]
mod child_tests {
    use super::*;
    use crate::bench::nccl_child::Limits;
    use crate::facts::gpu_topo::GpuTopology;
    use std::path::Path;
    use std::time::Duration;

    /// A MOCK of gdrprov's NCCL child (no GPU, no libnccl here): a shell script that speaks the
    /// child's protocol, writes NCCL-like log lines where the parent said, and records its
    /// arguments there too.
    fn mock(dir: &Path, name: &str, after_init: &str) -> std::path::PathBuf {
        crate::host::child::testkit::mock(
            dir,
            name,
            &format!(
                "echo \"args: $*\" >> \"$NCCL_DEBUG_FILE\"\n\
                 echo 'h200:7:7 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>' >> \"$NCCL_DEBUG_FILE\"\n\
                 echo '{{\"stage\":\"init\"}}'\n{after_init}"
            ),
        )
    }

    /// The parent's side over the MOCK `child`: GPUs 0 and 1, one size of 8 MiB, 3 iterations.
    fn run_mock(child: &Path, limits: &Limits) -> Result<NcclReport, BenchError> {
        let pcis = ["0000:00:06.0".to_string(), "0000:00:07.0".to_string()];
        run(
            child,
            &[0, 1],
            &pcis,
            &[8 << 20],
            3,
            &GpuTopology::default(),
            limits,
        )
    }

    #[test]
    fn a_hung_init_becomes_a_finding_and_gdrprov_returns() {
        let d = tempfile::tempdir().unwrap();
        let p = mock(d.path(), "mock-nccl-child-hangs-in-init", "exec sleep 600");
        let limits = Limits {
            init: Duration::from_secs(1),
            ..Limits::default()
        };
        let t = std::time::Instant::now();
        let r = run_mock(&p, &limits).unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(r.verdict, "fail");
        let f = r.finding.clone().unwrap();
        assert!(
            f.starts_with("ncclCommInitAll did not return within 1 s over 2 GPUs (waited 1."),
            "{f}"
        );
        assert!(f.contains("was killed"), "{f}");
        assert!(
            f.contains("NCCL's last log line: h200:7:7 [0] NCCL INFO Bootstrap"),
            "{f}"
        );
        let to = r.timeout.as_ref().unwrap();
        assert!(to.waited_s >= 1.0 && to.waited_s < 5.0, "{to:?}");
        assert!(to.reaped);
        assert!(to
            .look_at
            .iter()
            .any(|l| l.contains("nvidia-fabricmanager")));
        // The child was asked for exactly this run; its log is kept in the report.
        let log = r.log.clone().unwrap();
        assert!(
            log.contains("args: bench nccl --child --gpu 0,1 --size 8388608 --iters 3"),
            "{log}"
        );
        assert!(r.timeout.is_some());
    }

    #[test]
    fn a_child_that_finishes_is_read_back_and_judged() {
        let d = tempfile::tempdir().unwrap();
        let result = r#"{"result":{"version":22803,"ranks":2,"sizes":[{"bytes":8388608,"time_us":60.0,"algbw_gbs":139.8,"busbw_gbs":139.8}],"data_ok":true}}"#;
        let p = mock(
            d.path(),
            "mock-nccl-child-finishes",
            &format!(
                "echo 'h200:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read' >> \"$NCCL_DEBUG_FILE\"\n\
                 echo '{{\"stage\":\"run\"}}'\necho '{result}'"
            ),
        );
        let r = run_mock(&p, &Limits::default()).unwrap();
        assert_eq!(r.nccl_version, "2.28.3");
        assert_eq!(r.transports, vec!["P2P/CUMEM/read"]);
        assert_eq!(r.path, "p2p");
        assert_eq!(r.verdict, "pass", "{:?}", r.finding);
        assert!(r.timeout.is_none());
        // An error the child reports is the error.
        let p = mock(
            d.path(),
            "mock-nccl-child-fails",
            "echo '{\"error\":\"ncclCommInitAll failed: ncclInvalidUsage (invalid usage)\"}'\nexit 1",
        );
        let e = run_mock(&p, &Limits::default()).unwrap_err();
        assert!(e.to_string().contains("ncclInvalidUsage"), "{e}");
    }
}
