//! `gdrprov doctor`: which profile fits this host and what stands in the way,
//! as findings with severity, evidence, cause and fix.

pub mod nccl_log;

use crate::error::{Error, Result};
use crate::facts::iommu::IommuState;
use crate::facts::nvidia::Flavor;
use crate::facts::ofed::OfedKindFact;
use crate::facts::pcie::Distance;
use crate::facts::{CpuVendor, Depth, Facts};
use crate::host::Host;
use crate::profile::model::{DriverFlavor, IommuMode, ProfileDoc, Severity};
use crate::render::Format;
use crate::requirements::{self, ReqResult, Status};
use crate::versions;
use serde::Serialize;
use std::path::Path;

/// `doctor` exits with this when a finding of severity error stands in the way.
pub const EXIT_BLOCKED: i32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sev {
    Error,
    Warn,
    Info,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub id: String,
    pub severity: Sev,
    pub title: String,
    pub evidence: String,
    pub cause: String,
    pub fix: String,
}

impl Finding {
    pub fn new(
        id: &str,
        severity: Sev,
        title: impl Into<String>,
        evidence: impl Into<String>,
        cause: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            id: id.into(),
            severity,
            title: title.into(),
            evidence: evidence.into(),
            cause: cause.into(),
            fix: fix.into(),
        }
    }
}

pub(crate) fn peermem_einval(evidence: String) -> Finding {
    Finding::new(
        "peermem-invalid-argument",
        Sev::Error,
        "nvidia_peermem does not load: `modprobe nvidia_peermem` gives \"Invalid argument\"",
        evidence,
        "the NVIDIA driver was built before MLNX_OFED/DOCA-OFED was installed, so nvidia_peermem lacks OFED's peer-memory symbols (ib_register_peer_memory_client)",
        "reinstall the NVIDIA driver (or rebuild its DKMS modules) after OFED, then `modprobe nvidia_peermem`; or use dma-buf instead (`gdrprov apply rdma-dmabuf`, open driver, kernel >= 5.12)",
    )
}

/// What a profile is after, read from its settings.
#[derive(Debug, Clone, Copy, Default)]
pub struct Intent {
    pub dmabuf: bool,
    pub peermem: bool,
    pub erdma: bool,
    pub rdma: bool,
    pub iommu: Option<IommuMode>,
}

impl Intent {
    pub fn of(doc: &ProfileDoc) -> Intent {
        let present = |m: &str| doc.modules.present.iter().any(|x| x == m);
        let dmabuf = doc.requires.nvidia_driver.as_ref().and_then(|d| d.flavor)
            == Some(DriverFlavor::Open)
            || doc
                .vars
                .get("nccl-dmabuf-enable")
                .is_some_and(|v| v == 1 || v == "1");
        let peermem = present("nvidia_peermem") || present("nv_peer_mem");
        let erdma = present("erdma") || doc.requires.erdma.is_some();
        Intent {
            dmabuf,
            peermem,
            erdma,
            rdma: dmabuf || peermem || erdma || doc.requires.ofed.is_some(),
            iommu: doc.boot.iommu,
        }
    }

    /// Without a profile: a GPUDirect RDMA host in general.
    pub fn general() -> Intent {
        Intent {
            rdma: true,
            ..Intent::default()
        }
    }
}

fn req_finding(r: &ReqResult, facts: &Facts) -> Finding {
    let sev = if r.severity == Severity::Error {
        Sev::Error
    } else {
        Sev::Warn
    };
    let (cause, fix): (String, String) = match r.what.as_str() {
        "kernel" => (
            "the kernel is older than the profile needs".into(),
            format!("install and boot a kernel {} (Ubuntu 20.04: the HWE kernel; RHEL 8: move to RHEL 9); for dma-buf the alternative is the legacy-peermem profile", r.wanted),
        ),
        "nvidia-driver flavor" => (
            "the proprietary NVIDIA kernel module cannot export GPU memory as dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0); only the open kernel modules can".into(),
            format!(
                "install the open kernel modules of the same branch (Ubuntu: `apt install nvidia-driver-{0}-open` or `nvidia-dkms-{0}-open`; RHEL: `dnf module install nvidia-driver:{0}-open`) and reboot; or use legacy-peermem",
                facts.nvidia_driver.major().map(|m| m.to_string()).unwrap_or("<branch>".into())
            ),
        ),
        "nvidia-driver" => (
            "the driver branch is older than the profile needs".into(),
            "install a newer NVIDIA driver branch (the open kernel modules for dma-buf)".into(),
        ),
        "cuda" => (
            "the CUDA driver API this driver provides is too old: cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD needs CUDA 11.7 (driver 515)".into(),
            "upgrade the NVIDIA driver to a branch that provides the CUDA version required".into(),
        ),
        "gpu" => (
            "GPUs older than Turing cannot export memory as dma-buf".into(),
            "use legacy-peermem on this GPU".into(),
        ),
        "ofed kind" | "ofed" => (
            "nvidia_peermem is built against MLNX_OFED/DOCA-OFED's peer-memory API; the inbox rdma-core has none".into(),
            "install DOCA-OFED, then reinstall the NVIDIA driver so nvidia_peermem is built against it; or use rdma-dmabuf, which needs no OFED".into(),
        ),
        "nccl" => (
            "NCCL older than 2.23.4 detects peer memory only through /sys/kernel/mm/memory_peers/nv_mem/version, not /sys/module/nvidia_peermem, and silently disables GPUDirect RDMA".into(),
            "upgrade NCCL to 2.23.4 or newer (or use dma-buf: NCCL >= 2.13 with NCCL_DMABUF_ENABLE=1)".into(),
        ),
        "perftest" => (
            "perftest older than 6.26 (or built without CUDA) has no --use_cuda_dmabuf".into(),
            "install perftest >= 6.26 built with CUDA (DOCA-OFED's, or build from github.com/linux-rdma/perftest with CUDA_H_PATH)".into(),
        ),
        "erdma" => (
            "the eRDMA driver package is missing".into(),
            "install the eRDMA driver (Alibaba Cloud: the erdma-installer; check with `eadm ver`)".into(),
        ),
        _ => (String::new(), String::new()),
    };
    let cause = match &r.reason {
        Some(reason) if !cause.is_empty() => format!("{reason}; {cause}"),
        Some(reason) => reason.clone(),
        None => cause,
    };
    Finding::new(
        &format!("requirement-{}", r.what.replace(' ', "-")),
        sev,
        format!("requirement not met: {} {}", r.what, r.wanted),
        format!("{} is {}", r.what, r.actual.as_deref().unwrap_or("absent")),
        cause,
        fix,
    )
}

/// Every finding for the facts and a profile's intent (and requirements).
pub fn diagnose(facts: &Facts, intent: Intent, reqs: &[ReqResult]) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let sure = facts.observed;
    // Without any GPU, `no-gpu` says it all: driver, CUDA and GPU requirements add nothing.
    let no_gpu = sure && facts.gpus.is_empty();
    for r in reqs.iter().filter(|r| r.status == Status::Failed) {
        if no_gpu && (r.what.starts_with("nvidia-driver") || r.what == "gpu" || r.what == "cuda") {
            continue;
        }
        out.push(req_finding(r, facts));
    }
    let failed = |w: &str| {
        reqs.iter()
            .any(|r| r.status == Status::Failed && r.what == w)
    };

    // The GPU and its driver.
    if sure && facts.gpus.is_empty() && facts.nvidia_driver.present() {
        out.push(Finding::new(
            "no-gpu",
            Sev::Error,
            "no NVIDIA GPU on the PCI bus",
            "no PCI device of vendor 0x10de with a display/3D class in /sys/bus/pci/devices",
            "the GPU is not there, not passed through to this VM, or fell off the bus",
            "check `lspci -d 10de:` and the kernel log",
        ));
    } else if sure && facts.gpus.is_empty() {
        out.push(Finding::new(
            "no-gpu",
            Sev::Error,
            "no NVIDIA GPU",
            "no PCI device of vendor 0x10de in /sys/bus/pci/devices and no /proc/driver/nvidia",
            "this host has no NVIDIA GPU visible",
            "run gdrprov on the GPU node",
        ));
    }
    if sure && !facts.gpus.is_empty() && !facts.nvidia_driver.present() {
        out.push(Finding::new("no-driver", Sev::Error, "the NVIDIA driver is not loaded", "no /proc/driver/nvidia/version", "the driver is not installed or its module failed to load", "install the NVIDIA driver (the open kernel modules for dma-buf) and check `dmesg | grep -i nvidia`"));
    }
    if intent.dmabuf
        && facts.nvidia_driver.flavor == Flavor::Proprietary
        && !failed("nvidia-driver flavor")
    {
        out.push(Finding::new(
            "proprietary-driver-dmabuf",
            Sev::Error,
            "proprietary NVIDIA driver with a dma-buf profile",
            format!(
                "{} is the proprietary module",
                facts.nvidia_driver.version.as_deref().unwrap_or("?")
            ),
            "the proprietary kernel module cannot export GPU memory as dma-buf",
            "install the open kernel modules of the same branch, or use legacy-peermem",
        ));
    }
    if intent.dmabuf && !failed("kernel") {
        if let Some(k) = facts.kernel.effective() {
            if versions::satisfies(k, "< 5.12").unwrap_or(false) {
                out.push(Finding::new(
                    "kernel-too-old-dmabuf",
                    Sev::Error,
                    "kernel older than 5.12 with a dma-buf profile",
                    format!("kernel {k}"),
                    "dma-buf memory regions arrived in Linux 5.12",
                    "boot a kernel >= 5.12 or use legacy-peermem",
                ));
            }
        }
    }
    if let Some(rt) = &facts.cuda.runtime {
        for d in &rt.devices {
            match d.dmabuf_supported {
                Some(false) => out.push(Finding::new(
                    "cuda-dmabuf-unsupported",
                    if intent.dmabuf { Sev::Error } else { Sev::Warn },
                    format!("CUDA says GPU {} cannot export dma-buf", d.ordinal),
                    format!("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0 on CUDA device {} ({}, {})", d.ordinal, d.name.as_deref().unwrap_or("?"), d.pci_bus_id.as_deref().unwrap_or("?")),
                    "the proprietary kernel module, a kernel without dma-buf (< 5.12), or a GPU older than Turing",
                    "use the open kernel modules on a kernel >= 5.12, or use legacy-peermem",
                )),
                Some(true) => out.push(Finding::new(
                    "cuda-dmabuf-supported",
                    Sev::Info,
                    format!("CUDA can export GPU {} memory as dma-buf", d.ordinal),
                    format!("CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 1 on CUDA device {} ({}, CUDA {})", d.ordinal, d.name.as_deref().unwrap_or("?"), rt.driver_api.as_deref().unwrap_or("?")),
                    "",
                    "",
                )),
                None => {}
            }
        }
        if let (Some(e), true, false) = (&rt.error, rt.devices.is_empty(), no_gpu) {
            out.push(Finding::new(
                "cuda-unavailable",
                Sev::Warn,
                "the CUDA driver API could not be asked",
                e.clone(),
                "libcuda is missing or no GPU is usable",
                "install the NVIDIA user-space driver; check `nvidia-smi`",
            ));
        }
    }

    // Peer-memory modules.
    let m = &facts.modules;
    if m.is_loaded("nvidia_peermem") && m.is_loaded("nv_peer_mem") {
        out.push(Finding::new("peermem-both-loaded", Sev::Error, "nvidia_peermem and nv_peer_mem are both loaded", format!("both in {}", m.source), "the two peer-memory modules register the same client and conflict", "keep one: `rmmod nv_peer_mem` and disable its service (`systemctl disable --now nv_peer_mem`), or apply legacy-peermem which does that"));
    }
    if intent.dmabuf && (m.is_loaded("nvidia_peermem") || m.is_loaded("nv_peer_mem")) {
        out.push(Finding::new(
            "peermem-loaded-dmabuf",
            Sev::Warn,
            "a peer-memory module is loaded although the profile uses dma-buf",
            format!(
                "loaded: {}",
                ["nvidia_peermem", "nv_peer_mem"]
                    .iter()
                    .filter(|x| m.is_loaded(x))
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "NCCL may prefer the legacy path",
            "`gdrprov apply` unloads and blocks it",
        ));
    }
    let einval_log = facts.kernel_log.iter().find(|l| {
        l.contains("nvidia_peermem")
            && (l.contains("Unknown symbol")
                || l.contains("disagrees about version")
                || l.contains("Invalid argument"))
    });
    if let Some(l) = einval_log {
        out.push(peermem_einval(format!("kernel log: {l}")));
    } else if intent.peermem
        && sure
        && m.source != "absent"
        && !m.is_loaded("nvidia_peermem")
        && !m.is_loaded("nv_peer_mem")
    {
        out.push(Finding::new("peermem-not-loaded", Sev::Warn, "nvidia_peermem is not loaded", format!("not in {}", m.source), "it is not loaded yet (apply loads it)", "`gdrprov apply` loads it; if `modprobe nvidia_peermem` then says \"Invalid argument\", the driver was built before OFED: reinstall the driver after OFED"));
    }
    if intent.peermem && !failed("nccl") {
        if let Some(v) = facts
            .nccl
            .version
            .as_deref()
            .filter(|v| versions::satisfies(v, "< 2.23.4").unwrap_or(false))
        {
            if !m.peermem_paths.iter().any(|p| p.contains("memory_peers")) {
                out.push(Finding::new("nccl-old-peermem", Sev::Warn, "NCCL older than 2.23.4 with nvidia_peermem", format!("NCCL {v}"), "older NCCL looks only for /sys/kernel/mm/memory_peers/nv_mem/version and silently disables GPUDirect RDMA with nvidia_peermem", "upgrade NCCL to 2.23.4 or newer"));
            }
        }
    }

    // IOMMU.
    if let Some(want) = intent.iommu {
        let have = facts.iommu.state;
        let ev = format!("IOMMU {:?}: {}", have, facts.iommu.evidence);
        match (want, have) {
            // Grace: GDS wants the SMMU translating, passthrough off.
            (IommuMode::Off, IommuState::Translated) if facts.arch.arch == crate::facts::arch::Arch::Aarch64 => {}
            (IommuMode::Off, IommuState::Passthrough) if facts.arch.arch == crate::facts::arch::Arch::Aarch64 => out.push(Finding::new("iommu-mode", Sev::Error, "the IOMMU is in passthrough but GPUDirect Storage on Grace wants it translating", ev, "NVIDIA's GDS guide: on Grace, IOMMU enabled and passthrough disabled (`iommu.passthrough=0`)", "`gdrprov apply gds-iommu-off` and reboot")),
            (IommuMode::Off, IommuState::Passthrough | IommuState::Translated) => out.push(Finding::new("iommu-mode", Sev::Error, "the IOMMU is on but the profile wants it off (GPUDirect Storage)", ev, "GDS needs the IOMMU off (`iommu=off`)", "`gdrprov apply gds-iommu-off` and reboot (or a separate boot entry for GDS)")),
            (IommuMode::Passthrough, IommuState::Translated) => out.push(Finding::new("iommu-mode", Sev::Warn, "the IOMMU translates DMA but the profile wants passthrough", ev, "peer-to-peer DMA between NIC and GPU goes through IOMMU translation, which costs bandwidth or fails", if facts.arch.arch == crate::facts::arch::Arch::Aarch64 { "`gdrprov apply` adds iommu.passthrough=1 (arm64); reboot" } else { "`gdrprov apply` adds iommu=pt (and intel_iommu=on on Intel); reboot" })),
            (IommuMode::On, IommuState::Off) => out.push(Finding::new("iommu-mode", Sev::Warn, "the IOMMU is off but the profile wants it on", ev, "the boot command line lacks the IOMMU arguments", "`gdrprov apply` and reboot")),
            _ => {}
        }
    }
    // No boot loader on the host: `gdrprov apply` cannot fix the IOMMU mode.
    if let (Some(_), crate::facts::boot_shape::CmdlineHome::Elsewhere { starter, evidence }) =
        (intent.iommu, &facts.boot.cmdline_home)
    {
        for f in out.iter_mut().filter(|f| f.id == "iommu-mode") {
            f.fix = format!("set the profile's IOMMU arguments in {} and restart the host (`gdrprov plan` lists them); gdrprov cannot change this host's kernel command line", starter.where_to_set());
        }
        out.push(Finding::new("boot-elsewhere", Sev::Info, "the kernel command line is set outside this host", evidence.join("; "), "no boot loader on the host keeps the command line: whatever starts the kernel sets it", format!("set boot arguments in {}; `gdrprov apply --boot-elsewhere` applies the rest of a profile", starter.where_to_set())));
    }

    // RDMA devices.
    if intent.rdma && sure {
        if facts.rdma_devices.is_empty() {
            if m.is_loaded("mlx5_core") {
                out.push(Finding::new(
                    "mlx5-no-rdma-device",
                    Sev::Error,
                    "mlx5_core is loaded but there is no RDMA device",
                    "mlx5_core loaded; /sys/class/infiniband is empty",
                    "the RDMA half of the Mellanox driver (mlx5_ib) is not loaded",
                    "`modprobe mlx5_ib` (and ib_uverbs); make it load at boot",
                ));
            } else {
                let nic_drivers: Vec<&String> = m
                    .loaded
                    .iter()
                    .filter(|x| {
                        [
                            "mlx4", "erdma", "irdma", "bnxt_re", "efa", "rdma_rxe", "siw",
                        ]
                        .iter()
                        .any(|p| x.starts_with(p))
                    })
                    .collect();
                out.push(Finding::new(
                    "no-rdma-device",
                    Sev::Error,
                    "no RDMA device: GPUDirect RDMA has no NIC to work with",
                    format!("/sys/class/infiniband is empty; RDMA NIC drivers loaded: {}", if nic_drivers.is_empty() { "none".into() } else { nic_drivers.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ") }),
                    "this host has no RDMA-capable NIC (InfiniBand, RoCE, eRDMA), or its RDMA driver is not loaded",
                    "install an RDMA NIC or load its RDMA driver (mlx5_ib, erdma, irdma); for tests, soft-RoCE stands in: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <nic>`",
                ));
            }
        }
        let ports: Vec<_> = facts
            .rdma_devices
            .iter()
            .flat_map(|d| d.ports.iter().map(move |p| (d, p)))
            .collect();
        let any_active = ports.iter().any(|(_, p)| p.is_active());
        for (d, p) in &ports {
            if !p.is_active() {
                out.push(Finding::new(
                    "rdma-port-not-active",
                    if any_active { Sev::Warn } else { Sev::Error },
                    format!("RDMA port {}/{} is not ACTIVE", d.name, p.port),
                    format!("state {}, physical state {}", p.state.as_deref().unwrap_or("?"), p.phys_state.as_deref().unwrap_or("?")),
                    if p.phys_state.as_deref() == Some("LinkUp") { "the link is up but the port is not configured: no subnet manager (InfiniBand) or the netdev is down (RoCE)" } else { "no link: cable, switch port or the netdev is down" },
                    "InfiniBand: start a subnet manager (opensm) or check the fabric's; RoCE/eRDMA: `ip link set <netdev> up` and check the cable",
                ));
            }
        }
    }
    if intent.erdma
        && sure
        && !facts.erdma.present()
        && !facts.rdma_devices.iter().any(|d| d.is_erdma())
        && !failed("erdma")
    {
        out.push(Finding::new(
            "erdma-absent",
            Sev::Error,
            "no eRDMA driver or device",
            "no erdma module loaded, no eRDMA device in /sys/class/infiniband, `eadm ver` does not answer",
            "this is not an eRDMA instance, or the eRDMA driver is not installed",
            "on an Alibaba Cloud eRDMA instance install the eRDMA driver (erdma-installer); elsewhere use rdma-dmabuf or legacy-peermem",
        ));
    }
    for d in facts.rdma_devices.iter().filter(|d| d.is_erdma()) {
        for p in &d.ports {
            if let Some(mtu) = p.mtu.filter(|m| *m != 8500 && *m != 1400) {
                out.push(Finding::new(
                    "erdma-mtu",
                    Sev::Error,
                    format!("eRDMA netdev {} has MTU {mtu}", p.netdev.as_deref().unwrap_or("?")),
                    format!("{} port {}: netdev {} MTU {mtu}", d.name, p.port, p.netdev.as_deref().unwrap_or("?")),
                    "eRDMA needs MTU 8500 (jumbo frames) or 1400; with NCCL LL128 another MTU corrupts data",
                    format!("`ip link set {} mtu 8500` where jumbo frames are enabled, else 1400; `gdrprov apply erdma-cloud` does both and persists it (network.mtu: auto, a systemd .link file)", p.netdev.as_deref().unwrap_or("<netdev>")),
                ));
            }
        }
    }

    // PCIe: ACS and distance.
    if intent.rdma {
        for p in &facts.pcie {
            for b in p.acs_blocking() {
                out.push(Finding::new(
                    "acs-enabled",
                    Sev::Error,
                    format!("ACS redirects peer-to-peer traffic between GPU {} and {}", p.gpu, p.nic),
                    format!("bridge {}: ACSCtl {}", b.bridge, b.bits.as_deref().unwrap_or("?")),
                    "ACS request/completion redirect on a bridge between GPU and NIC sends their traffic up to the root complex: GPUDirect RDMA fails (completion error 4, IBV_WC_LOC_PROT_ERR) or crawls",
                    format!("disable ACS on the bridge: in the BIOS (PCIe ACS / IOMMU settings), or at boot with `setpci -s {} ECAP_ACS+0x6.w=0000` (not persistent)", b.bridge),
                ));
            }
        }
        for g in &facts.gpus {
            let best = facts
                .pcie
                .iter()
                .filter(|p| p.gpu == g.pci)
                .min_by_key(|p| p.distance);
            if let Some(p) = best {
                let numa_differs = matches!((p.gpu_numa, p.nic_numa), (Some(a), Some(b)) if a != b);
                if p.distance == Distance::SYS || numa_differs {
                    out.push(Finding::new(
                        "gpu-nic-far",
                        Sev::Warn,
                        format!("GPU {} has no RDMA NIC closer than {:?}", g.pci, p.distance),
                        format!("nearest NIC {} ({}): {:?}, NUMA {} vs {}", p.nic, p.nic_pci, p.distance, p.gpu_numa.map(|n| n.to_string()).unwrap_or("-".into()), p.nic_numa.map(|n| n.to_string()).unwrap_or("-".into())),
                        "traffic between them crosses the CPU interconnect; NCCL disables GPUDirect RDMA beyond NCCL_NET_GDR_LEVEL (PHB in gdrprov's nccl.conf)",
                        "use a NIC on the GPU's NUMA node / PCIe switch (NCCL_IB_HCA), or move the cards",
                    ));
                }
            }
        }
    }

    // perftest.
    if intent.dmabuf
        && facts.perftest.installed
        && facts.perftest.cuda_dmabuf == Some(false)
        && !failed("perftest")
    {
        out.push(Finding::new(
            "perftest-no-dmabuf",
            Sev::Warn,
            "ib_write_bw has no --use_cuda_dmabuf",
            format!(
                "perftest {}: `ib_write_bw --help` does not list --use_cuda_dmabuf",
                facts.perftest.version.as_deref().unwrap_or("?")
            ),
            "perftest older than 6.26, or built without CUDA",
            "manual GPU tests need perftest >= 6.26 built with CUDA; `gdrprov bench` needs none",
        ));
    }

    // Locked memory.
    if intent.rdma {
        if let Some(s) = facts.limits.memlock_soft.as_deref() {
            if s != "unlimited" && s.parse::<u64>().is_ok_and(|b| b < (64 << 20)) {
                out.push(Finding::new("memlock-low", Sev::Warn, "the locked-memory limit is low", format!("Max locked memory {s} bytes"), "RDMA memory registration pins host memory against RLIMIT_MEMLOCK", "set `* - memlock unlimited` in /etc/security/limits.d and DefaultLimitMEMLOCK=infinity for services"));
            }
        }
    }
    if facts.ofed.kind == OfedKindFact::Absent
        && intent.rdma
        && sure
        && !facts.rdma_devices.is_empty()
    {
        out.push(Finding::new(
            "no-rdma-userspace",
            Sev::Warn,
            "no RDMA user-space libraries",
            "neither ofed_info nor rdma-core/libibverbs found",
            "applications cannot open the RDMA devices without libibverbs",
            "install rdma-core (apt/dnf install rdma-core ibverbs-providers) or DOCA-OFED",
        ));
    }
    out.sort_by_key(|f| f.severity);
    out
}

#[derive(Debug, Serialize)]
pub struct ProfileFit {
    pub profile: String,
    pub blockers: usize,
    pub warnings: usize,
    pub fits: bool,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub gdrprov: &'static str,
    pub command: &'static str,
    pub root: String,
    pub profile: Option<String>,
    pub requirements: Vec<ReqResult>,
    pub findings: Vec<Finding>,
    /// Without a profile: how each built-in profile fits.
    pub fits: Vec<ProfileFit>,
    pub best_fit: Option<String>,
    pub blocked: bool,
}

pub fn run(
    root: &Path,
    format: Format,
    profiles: &[String],
    nccl_log: Option<&Path>,
    cpu: Option<CpuVendor>,
) -> Result<i32> {
    let log = match nccl_log {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .map_err(|e| Error::io("read", p.display().to_string(), e))?,
        ),
        None => None,
    };
    let loaded = profiles
        .iter()
        .map(|s| crate::profile::load(s))
        .collect::<Result<Vec<_>>>()?;
    let composed = if loaded.is_empty() {
        None
    } else {
        Some(crate::profile::compose(&loaded)?)
    };
    let host = Host::open(root, false)?;
    let facts = Facts::gather_with(&host, cpu, Depth::WithCuda);
    let log_findings = match (&log, nccl_log) {
        (Some(text), Some(p)) => nccl_log::findings(text, &p.display().to_string(), &facts),
        _ => Vec::new(),
    };
    let mut fits = Vec::new();
    let (requirements, mut findings) = match &composed {
        Some(c) => {
            let reqs = requirements::evaluate(&c.doc.requires, &facts);
            let f = diagnose(&facts, Intent::of(&c.doc), &reqs);
            (reqs, f)
        }
        None => {
            for name in crate::profile::builtin::names() {
                let p = crate::profile::load(name)?;
                let reqs = requirements::evaluate(&p.doc.requires, &facts);
                let f = diagnose(&facts, Intent::of(&p.doc), &reqs);
                let blockers = f.iter().filter(|x| x.severity == Sev::Error).count();
                fits.push(ProfileFit {
                    profile: name.to_string(),
                    blockers,
                    warnings: f.iter().filter(|x| x.severity == Sev::Warn).count(),
                    fits: blockers == 0,
                });
            }
            (Vec::new(), diagnose(&facts, Intent::general(), &[]))
        }
    };
    findings.extend(log_findings);
    findings.sort_by_key(|f| f.severity);
    let best_fit = fits
        .iter()
        .filter(|f| f.fits)
        .min_by_key(|f| f.warnings)
        .map(|f| f.profile.clone());
    let blocked = findings.iter().any(|f| f.severity == Sev::Error);
    let report = Report {
        gdrprov: env!("CARGO_PKG_VERSION"),
        command: "doctor",
        root: host.root().display().to_string(),
        profile: composed.as_ref().map(|c| c.names.join(" + ")),
        requirements,
        findings,
        fits,
        best_fit,
        blocked,
    };
    match format {
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).unwrap_or_default()
        ),
        Format::Text | Format::Prometheus => print!("{}", text(&facts, &report)),
    }
    Ok(if blocked { EXIT_BLOCKED } else { 0 })
}

pub fn text(facts: &Facts, r: &Report) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let gpu = facts
        .gpus
        .first()
        .map(|g| {
            format!(
                "{} x {} ({})",
                facts.gpus.len(),
                g.name.as_deref().unwrap_or("GPU"),
                g.arch.name()
            )
        })
        .unwrap_or("no GPU".into());
    let _ = writeln!(
        o,
        "Host: {}{}; kernel {}; NVIDIA {}{}; {gpu}; {} RDMA device(s)",
        facts.os.pretty_name.as_deref().unwrap_or("unknown OS"),
        match (&facts.arch.arch, &facts.arch.cpu) {
            (crate::facts::arch::Arch::Unknown, _) => String::new(),
            (a, Some(cpu)) => format!(
                " ({}, {cpu})",
                serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            ),
            (a, None) => format!(
                " ({})",
                serde_json::to_value(a)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default()
            ),
        },
        facts.kernel.effective().unwrap_or("unknown"),
        facts
            .nvidia_driver
            .version
            .as_deref()
            .unwrap_or("driver absent"),
        match facts.nvidia_driver.flavor {
            Flavor::Open => " (open)",
            Flavor::Proprietary => " (proprietary)",
            Flavor::Unknown => "",
        },
        facts.rdma_devices.len()
    );
    if let Some(p) = &r.profile {
        let _ = writeln!(o, "Profile: {p}");
        for q in &r.requirements {
            let mark = match q.status {
                Status::Ok => "ok  ",
                Status::Failed => "FAIL",
                Status::Unknown => "??  ",
            };
            let _ = writeln!(o, "  [{mark}] {}", q.message);
        }
    } else {
        let _ = writeln!(o, "Profiles:");
        for f in &r.fits {
            let _ = writeln!(
                o,
                "  {:<16} {}",
                f.profile,
                if f.fits {
                    format!("fits ({} warning(s))", f.warnings)
                } else {
                    format!(
                        "blocked by {} finding(s); `gdrprov doctor {}` says which",
                        f.blockers, f.profile
                    )
                }
            );
        }
        match &r.best_fit {
            Some(b) => {
                let _ = writeln!(o, "Best fit: {b}");
            }
            None => {
                let _ = writeln!(o, "Best fit: none; every profile is blocked");
            }
        }
    }
    if r.findings.is_empty() {
        let _ = writeln!(o, "\nNo findings: nothing stands in the way.");
    }
    for f in &r.findings {
        let sev = match f.severity {
            Sev::Error => "ERROR",
            Sev::Warn => "WARN",
            Sev::Info => "info",
        };
        let _ = writeln!(o, "\n{sev} [{}] {}", f.id, f.title);
        let _ = writeln!(o, "  evidence: {}", f.evidence);
        if !f.cause.is_empty() {
            let _ = writeln!(o, "  cause:    {}", f.cause);
        }
        if !f.fix.is_empty() {
            let _ = writeln!(o, "  fix:      {}", f.fix);
        }
    }
    let blockers: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.severity == Sev::Error)
        .collect();
    if !blockers.is_empty() {
        let _ = writeln!(
            o,
            "\nBlocked by: {}",
            blockers
                .iter()
                .map(|f| f.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    o
}
