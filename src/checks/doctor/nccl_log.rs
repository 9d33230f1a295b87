//! Maps lines of an NCCL debug log (`NCCL_DEBUG=INFO`) to findings.

use super::{Finding, Sev};
use crate::facts::nvidia::Flavor;
use crate::facts::Facts;
use crate::versions;

/// What the whole log and the facts say, for judging each line.
struct Context {
    /// The open driver on kernel >= 5.12: dma-buf would do.
    dmabuf_ready: bool,
    /// NCCL older than 2.23.4 (it does not look for nvidia_peermem).
    old_nccl: bool,
    /// Every channel stays GPU to GPU inside the node.
    in_node: bool,
}

fn context(log: &str, facts: &Facts) -> Context {
    let kernel_ok = facts
        .kernel
        .effective()
        .is_some_and(|k| versions::satisfies(k, ">= 5.12").unwrap_or(false));
    let open = facts.nvidia_driver.flavor == Flavor::Open;
    let old_nccl = facts
        .nccl
        .version
        .as_deref()
        .is_some_and(|v| versions::satisfies(v, "< 2.23.4").unwrap_or(false));
    // A job whose channels all stay inside this node GPU to GPU (P2P) needs no NIC: there NCCL's
    // "NET/IB : No device found" is information, not an error.
    let transports = crate::bench::nccl::transports(log);
    let in_node = crate::bench::nccl::path_of(&transports) == "p2p"
        && !log.contains("Using network")
        && !log.contains("NET/Socket : Using");
    Context {
        dmabuf_ready: open && kernel_ok,
        old_nccl,
        in_node,
    }
}

/// The findings of a log, each kind once (at its first line).
pub fn findings(log: &str, file: &str, facts: &Facts) -> Vec<Finding> {
    let cx = context(log, facts);
    let mut out: Vec<Finding> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, line) in log.lines().enumerate() {
        let ev = format!("{file}:{}: {}", i + 1, line.trim());
        if let Some((id, f)) = line_finding(line, ev, &cx, facts) {
            if seen.insert(id) {
                out.push(f);
            }
        }
    }
    out
}

/// What one line of the log says, if anything: (the finding's id, the
/// finding). The table of [`super::nccl_rules`] recognises the line; a few
/// rows' findings depend on the host and the whole log.
fn line_finding(
    line: &str,
    ev: String,
    cx: &Context,
    facts: &Facts,
) -> Option<(&'static str, Finding)> {
    let rule = super::modes::first_match(super::nccl_rules::RULES, line)?;
    let f = match rule.id {
        "nccl-gdr-disabled" => gdr_disabled(ev, cx.dmabuf_ready, cx.old_nccl),
        "nccl-no-ib-device" => no_ib_device(ev, cx.in_node, facts),
        "peermem-invalid-argument" => super::peermem_einval(ev),
        // The socket transport never does GPUDirect RDMA: NCCL says so of
        // every socket interface (`NET/Socket : GPU Direct RDMA Disabled for
        // HCA 0 'eth0'`). That follows from having no usable RDMA device and
        // is no second cause: it is the socket fallback.
        "nccl-socket" => socket(ev, facts),
        "nccl-memlock" => memlock(rule.finding(ev), facts),
        _ => rule.finding(ev),
    };
    Some((rule.id, f))
}

/// The locked-memory limit gdrprov itself got here, beside the job's (which
/// may differ: that is the point of the fix), and what is configured.
fn memlock(mut f: Finding, facts: &Facts) -> Finding {
    if let Some(s) = facts.limits.memlock_soft.as_deref() {
        let unit = if s == "unlimited" { "" } else { " bytes" };
        f.cause = format!(
            "{}; gdrprov, started here, has a soft limit of {s}{unit}",
            f.cause
        );
    }
    if !facts.limits.configured.is_empty() {
        f.cause = format!(
            "{}; configured: {}",
            f.cause,
            facts.limits.configured.join("; ")
        );
    }
    f
}

/// NCCL's IB transport found no device: an error, unless the job needed none.
fn no_ib_device(ev: String, in_node: bool, facts: &Facts) -> Finding {
    Finding::new(
        "nccl-no-ib-device",
        if in_node { Sev::Info } else { Sev::Error },
        if in_node {
            "NCCL found no RDMA device; this job's channels all stay GPU to GPU inside the node, so none was needed"
        } else {
            "NCCL found no RDMA device and falls back to sockets"
        },
        ev,
        if facts.rdma_devices.is_empty() {
            "there is no RDMA device on this host (/sys/class/infiniband is empty)".to_string()
        } else {
            "RDMA devices exist, but NCCL's IB transport did not open one: libibverbs missing in the job's environment, NCCL_IB_HCA excluding them, or the container without /dev/infiniband".to_string()
        },
        "load the NIC's RDMA driver (mlx5_ib, erdma), make libibverbs and /dev/infiniband available to the job, and check NCCL_IB_HCA",
    )
}

/// NCCL turned GPUDirect RDMA off for an RDMA NIC.
fn gdr_disabled(ev: String, dmabuf_ready: bool, old_nccl: bool) -> Finding {
    let fix = if dmabuf_ready {
        format!("this host can use dma-buf: {} (sets NCCL_DMABUF_ENABLE=1) or export NCCL_DMABUF_ENABLE=1; check NCCL_NET_GDR_LEVEL against the GPU-NIC distance in {}", crate::suggest::Suggest::new(crate::names::APPLY).arg("rdma-dmabuf").shown(&crate::suggest::Given::none()), crate::suggest::Suggest::new(crate::names::INVENTORY).shown(&crate::suggest::Given::none()))
    } else if old_nccl {
        "upgrade NCCL to 2.23.4 or newer (older NCCL does not look for /sys/module/nvidia_peermem), or load nv_peer_mem".to_string()
    } else {
        format!("load nvidia_peermem ({}), or switch to the open driver and kernel >= 5.12 for dma-buf (`rdma-dmabuf`)", crate::suggest::Suggest::new(crate::names::APPLY).arg("legacy-peermem").shown(&crate::suggest::Given::none()))
    };
    Finding::new(
        "nccl-gdr-disabled",
        Sev::Error,
        "NCCL disabled GPUDirect RDMA",
        ev,
        "NCCL found no way to let the NIC reach GPU memory: no peer-memory module it recognises (nvidia_peermem / nv_peer_mem) and no usable dma-buf (NCCL_DMABUF_ENABLE, open driver, kernel >= 5.12), or the GPU and NIC are farther apart than NCCL_NET_GDR_LEVEL",
        fix,
    )
}

/// NCCL uses TCP sockets between nodes; on EFA that means the plugin is
/// missing.
fn socket(ev: String, facts: &Facts) -> Finding {
    let efa = facts
        .rdma_devices
        .iter()
        .any(|d| d.driver.as_deref() == Some("efa"));
    if efa {
        Finding::new(
            "nccl-socket",
            Sev::Error,
            "NCCL fell back to TCP sockets on an EFA host",
            ev,
            "NCCL did not load the aws-ofi-nccl plugin (`NET/OFI`), or libfabric found no efa provider: without it NCCL does not use EFA at all",
            format!("install the EFA installer's aws-ofi-nccl (/opt/amazon/ofi-nccl) and put its lib directory on LD_LIBRARY_PATH (or NCCL_NET_PLUGIN); check `fi_info -p efa` and FI_PROVIDER=efa ({})", crate::suggest::Suggest::new(crate::names::APPLY).arg("efa").shown(&crate::suggest::Given::none())),
        )
    } else {
        Finding::new(
            "nccl-socket",
            Sev::Warn,
            "NCCL uses TCP sockets between nodes",
            ev,
            "no RDMA transport was usable",
            format!(
                "see the NET/IB findings; {} without a log lists the RDMA devices",
                crate::suggest::Suggest::new(crate::names::DOCTOR)
                    .shown(&crate::suggest::Given::none())
            ),
        )
    }
}

#[cfg(test)]
mod efa_tests {
    use super::*;
    use crate::facts::rdma::RdmaDevice;
    use crate::facts::OsFamily;

    const LOG: &str = "ip-10-1-2-3:4242:4300 [0] NCCL INFO NET/OFI Failed to initialize sendrecv protocol\nip-10-1-2-3:4242:4300 [0] NCCL INFO NET/Socket : Using [0]enp71s0:10.1.2.3<0>\nip-10-1-2-3:4242:4300 [0] NCCL INFO Using network Socket\n";

    #[test]
    fn socket_fallback_on_an_efa_host_names_the_plugin() {
        let mut facts = Facts::blank(OsFamily::Debian);
        let general = findings(LOG, "nccl.log", &facts);
        let f = general.iter().find(|f| f.id == "nccl-socket").unwrap();
        assert_eq!(f.severity, Sev::Warn);
        assert!(!f.fix.contains("aws-ofi-nccl"));
        facts.rdma_devices.push(RdmaDevice {
            name: "rdmap79s0".into(),
            driver: Some("efa".into()),
            pci: None,
            sysfs_path: None,
            numa_node: None,
            ports: Vec::new(),
        });
        let efa = findings(LOG, "nccl.log", &facts);
        let f = efa.iter().find(|f| f.id == "nccl-socket").unwrap();
        assert_eq!(f.severity, Sev::Error);
        assert!(f.title.contains("EFA") && f.fix.contains("aws-ofi-nccl"));
        assert!(f.evidence.starts_with("nccl.log:2: "), "{}", f.evidence);
        assert_eq!(efa.iter().filter(|f| f.id == "nccl-socket").count(), 1);
    }

    /// NCCL 2.28.9 under torch on one H100 without an RDMA device.
    const SOCKET_LOG: &str = "h100:1234:1234 [0] NCCL INFO NCCL version 2.28.9+cuda12.9\nh100:1234:1300 [0] NCCL INFO NET/IB : No device found.\nh100:1234:1300 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\nh100:1234:1300 [0] NCCL INFO Using network Socket\nh100:1234:1300 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'\n";

    #[test]
    fn the_socket_transports_gdr_line_is_no_second_cause() {
        let facts = Facts::blank(OsFamily::Debian);
        let f = findings(SOCKET_LOG, "nccl.log", &facts);
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert!(!ids.contains(&"nccl-gdr-disabled"), "{ids:?}");
        assert!(ids.contains(&"nccl-no-ib-device"), "{ids:?}");
        assert_eq!(ids.iter().filter(|i| **i == "nccl-socket").count(), 1);
        // The socket line alone reads as the socket fallback.
        let only = "x:1:1 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'\n";
        let f = findings(only, "nccl.log", &facts);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "nccl-socket");
        assert!(!f[0].fix.contains("dma-buf"));
        // An InfiniBand HCA's line still is a cause.
        let ib = "x:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)\n";
        let f = findings(ib, "nccl.log", &facts);
        assert_eq!(f[0].id, "nccl-gdr-disabled");
    }

    #[test]
    fn no_ib_device_is_information_in_a_job_that_stays_in_the_node() {
        let facts = Facts::blank(OsFamily::Debian);
        let in_node = "h200:1:1 [0] NCCL INFO NET/IB : No device found.\nh200:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\nh200:1:1 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/CUMEM/read\n";
        let f = findings(in_node, "nccl.log", &facts);
        let ib = f.iter().find(|f| f.id == "nccl-no-ib-device").unwrap();
        assert_eq!(ib.severity, Sev::Info, "{}", ib.title);
        // Through host memory (SHM), or with the socket network in use, it stays an error.
        let shm = in_node.replace("P2P/CUMEM/read", "SHM/direct/direct");
        let f = findings(&shm, "nccl.log", &facts);
        assert_eq!(
            f.iter()
                .find(|f| f.id == "nccl-no-ib-device")
                .unwrap()
                .severity,
            Sev::Error
        );
        let f = findings(SOCKET_LOG, "nccl.log", &facts);
        assert_eq!(
            f.iter()
                .find(|f| f.id == "nccl-no-ib-device")
                .unwrap()
                .severity,
            Sev::Error
        );
    }
}
