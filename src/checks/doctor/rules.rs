//! The rules of `doctor`, one function per area; each adds its findings.

use super::*;

/// What every rule looks at.
pub(super) struct Cx<'a> {
    pub facts: &'a Facts,
    pub intent: &'a Intent,
    pub reqs: &'a [ReqResult],
    /// The root shows a system's state: "not found" means absent.
    pub sure: bool,
    /// No GPU at all: `no-gpu` says it all.
    pub no_gpu: bool,
    /// The profiles the fixes name, as the user named them (the best fit
    /// when doctor rates every built-in; none: `PROFILE`).
    pub profiles: &'a [String],
}

impl Cx<'_> {
    /// `gdrprov COMMAND PROFILE...` (and ARGS) for the profiles diagnosed,
    /// between backticks.
    fn suggest(&self, command: &str, args: &[&str]) -> String {
        args.iter()
            .fold(Suggest::new(command).profiles(self.profiles), |s, a| {
                s.arg(*a)
            })
            .shown(&Given::none())
    }

    /// Whether the requirement `what` failed (its finding says it already).
    pub fn failed(&self, what: &str) -> bool {
        self.reqs
            .iter()
            .any(|r| r.status == Status::Failed && r.what == what)
    }
}

/// The GPU, its driver and the kernel.
pub(super) fn driver_and_kernel(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.sure && cx.facts.gpus.is_empty() && cx.facts.nvidia_driver.present() {
        out.push(Finding::new(
            "no-gpu",
            Sev::Error,
            "no NVIDIA GPU on the PCI bus",
            "no PCI device of vendor 0x10de with a display/3D class in /sys/bus/pci/devices",
            "the GPU is not there, not passed through to this VM, or fell off the bus",
            "check `lspci -d 10de:` and the kernel log",
        ));
    } else if cx.sure && cx.facts.gpus.is_empty() {
        out.push(Finding::new(
            "no-gpu",
            Sev::Error,
            "no NVIDIA GPU",
            "no PCI device of vendor 0x10de in /sys/bus/pci/devices and no /proc/driver/nvidia",
            "this host has no NVIDIA GPU visible",
            "run gdrprov on the GPU node",
        ));
    }
    if cx.sure && !cx.facts.gpus.is_empty() && !cx.facts.nvidia_driver.present() {
        out.push(Finding::new("no-driver", Sev::Error, "the NVIDIA driver is not loaded", "no /proc/driver/nvidia/version", "the driver is not installed or its module failed to load", "install the NVIDIA driver (the open kernel modules for dma-buf) and check `dmesg | grep -i nvidia`"));
    }
    if cx.intent.dmabuf
        && cx.facts.nvidia_driver.flavor == Flavor::Proprietary
        && !cx.failed("nvidia-driver flavor")
    {
        out.push(Finding::new(
            "proprietary-driver-dmabuf",
            Sev::Error,
            "proprietary NVIDIA driver with a dma-buf profile",
            format!(
                "{} is the proprietary module",
                cx.facts.nvidia_driver.version.as_deref().unwrap_or("?")
            ),
            "the proprietary kernel module cannot export GPU memory as dma-buf",
            "install the open kernel modules of the same branch, or use legacy-peermem",
        ));
    }
    if cx.intent.dmabuf && !cx.failed("kernel") {
        if let Some(k) = cx.facts.kernel.effective() {
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
}

/// What the CUDA driver API says about dma-buf.
pub(super) fn cuda(cx: &Cx, out: &mut Vec<Finding>) {
    if let Some(rt) = &cx.facts.cuda.runtime {
        for d in &rt.devices {
            match d.dmabuf_supported {
                Some(false) => out.push(Finding::new(
                    "cuda-dmabuf-unsupported",
                    if cx.intent.dmabuf { Sev::Error } else { Sev::Warn },
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
            if d.gpudirect_rdma == Some(false) {
                out.extend(gpudirect_rdma_unsupported(cx, d));
            }
        }
        if let (Some(e), true, false) = (&rt.error, rt.devices.is_empty(), cx.no_gpu) {
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
}

/// A GPU that CUDA says cannot do GPUDirect RDMA at all (a consumer part, some inference
/// parts): named before a NIC ever tries, whatever the module or dma-buf.
fn gpudirect_rdma_unsupported(cx: &Cx, d: &crate::facts::cuda::CudaDevice) -> Option<Finding> {
    let row = super::fabric_rules::rule("gpu-no-gpudirect-rdma")?;
    Some(Finding::new(
        "gpu-no-gpudirect-rdma",
        if cx.intent.rdma {
            Sev::Error
        } else {
            Sev::Warn
        },
        format!("CUDA says GPU {} cannot do GPUDirect RDMA", d.ordinal),
        format!(
            "CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 0 on CUDA device {} ({}, {})",
            d.ordinal,
            d.name.as_deref().unwrap_or("?"),
            d.pci_bus_id.as_deref().unwrap_or("?")
        ),
        row.cause,
        row.fix,
    ))
}

/// The peer-memory modules and NCCL's detection of them.
pub(super) fn peer_memory(cx: &Cx, out: &mut Vec<Finding>) {
    let m = &cx.facts.modules;
    if m.is_loaded("nvidia_peermem") && m.is_loaded("nv_peer_mem") {
        out.push(Finding::new("peermem-both-loaded", Sev::Error, "nvidia_peermem and nv_peer_mem are both loaded", format!("both in {}", m.source), "the two peer-memory modules register the same client and conflict", "keep one: `rmmod nv_peer_mem` and disable its service (`systemctl disable --now nv_peer_mem`), or apply legacy-peermem which does that"));
    }
    if cx.intent.dmabuf && (m.is_loaded("nvidia_peermem") || m.is_loaded("nv_peer_mem")) {
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
            format!("{} unloads and blocks it", cx.suggest(names::APPLY, &[])),
        ));
    }
    let einval_log = cx.facts.kernel_log.iter().find(|l| {
        l.contains("nvidia_peermem")
            && (l.contains("Unknown symbol")
                || l.contains("disagrees about version")
                || l.contains("Invalid argument"))
    });
    if let Some(f) = peermem_symbol_mismatch(&cx.facts.kernel_log) {
        out.push(f);
    } else if let Some(l) = einval_log {
        out.push(peermem_einval(format!("kernel log: {l}")));
    } else if cx.intent.peermem
        && cx.sure
        && m.source != "absent"
        && !m.is_loaded("nvidia_peermem")
        && !m.is_loaded("nv_peer_mem")
    {
        out.push(Finding::new("peermem-not-loaded", Sev::Warn, "nvidia_peermem is not loaded", format!("not in {}", m.source), "it is not loaded yet (apply loads it)", format!("{} loads it; if `modprobe nvidia_peermem` then says \"Invalid argument\", the driver was built before OFED: reinstall the driver after OFED", cx.suggest(names::APPLY, &[]))));
    }
    if cx.intent.peermem && !cx.failed("nccl") {
        if let Some(v) = cx
            .facts
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
}

/// `gdrprov apply gds-iommu-off`, between backticks.
fn gds() -> String {
    Suggest::new(names::APPLY)
        .arg("gds-iommu-off")
        .shown(&Given::none())
}

/// The IOMMU mode against the profile's.
pub(super) fn iommu(cx: &Cx, out: &mut Vec<Finding>) {
    if let Some(want) = cx.intent.iommu {
        let have = cx.facts.iommu.state;
        let ev = format!("IOMMU {}: {}", have.words(), cx.facts.iommu.evidence);
        let arm = cx.facts.arch.arch == crate::facts::arch::Arch::Aarch64;
        match (want, have) {
            // Grace: GDS wants the SMMU translating, passthrough off.
            (IommuMode::Off, IommuState::Translated) if arm => {}
            (IommuMode::Off, IommuState::Passthrough) if arm => out.push(Finding::new("iommu-mode", Sev::Error, "the IOMMU is in passthrough but GPUDirect Storage on Grace wants it translating", ev, "NVIDIA's GDS guide: on Grace, IOMMU enabled and passthrough disabled (`iommu.passthrough=0`)", format!("{} and reboot", gds()))),
            (IommuMode::Off, IommuState::Passthrough | IommuState::Translated) => out.push(Finding::new("iommu-mode", Sev::Error, "the IOMMU is on but the profile wants it off (GPUDirect Storage)", ev, "GDS needs the IOMMU off (`iommu=off`)", format!("{} and reboot (or a separate boot entry for GDS)", gds()))),
            (IommuMode::Passthrough, IommuState::Translated) => out.push(Finding::new("iommu-mode", Sev::Warn, "the IOMMU translates DMA but the profile wants passthrough", ev, "peer-to-peer DMA between NIC and GPU goes through IOMMU translation, which costs bandwidth or fails", if arm { format!("{} adds iommu.passthrough=1 (arm64); reboot", cx.suggest(names::APPLY, &[])) } else { format!("{} adds iommu=pt (and intel_iommu=on on Intel); reboot", cx.suggest(names::APPLY, &[])) })),
            (IommuMode::On, IommuState::Off) => out.push(Finding::new("iommu-mode", Sev::Warn, "the IOMMU is off but the profile wants it on", ev, "the boot command line lacks the IOMMU arguments", format!("{} and reboot", cx.suggest(names::APPLY, &[])))),
            _ => {}
        }
    }
    // No boot loader on the host: `gdrprov apply` cannot fix the IOMMU mode.
    if let (
        Some(_),
        crate::facts::boot_shape::CmdlineHome::Elsewhere {
            starter, evidence, ..
        },
    ) = (cx.intent.iommu, &cx.facts.boot.cmdline_home)
    {
        for f in out.iter_mut().filter(|f| f.id == "iommu-mode") {
            f.fix = format!("set the profile's IOMMU arguments in {} and restart the host ({} lists them); gdrprov cannot change this host's kernel command line", starter.where_to_set(), cx.suggest(names::PLAN, &[]));
        }
        out.push(Finding::new("boot-elsewhere", Sev::Info, "the kernel command line is set outside this host", evidence.join("; "), "no boot loader on the host starts the kernel: whatever starts it sets the command line", format!("set boot arguments in {}; {} applies the rest of the profile", starter.where_to_set(), cx.suggest(names::APPLY, &["--boot-elsewhere"]))));
    }
}

/// RDMA devices and their ports.
pub(super) fn rdma_devices(cx: &Cx, out: &mut Vec<Finding>) {
    let m = &cx.facts.modules;
    if cx.intent.rdma && cx.sure {
        if cx.facts.rdma_devices.is_empty() {
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
                        crate::facts::rdma::RDMA_DRIVERS
                            .iter()
                            .any(|(_, rdma)| x == rdma)
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
        let ports: Vec<_> = cx
            .facts
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
}

/// The eRDMA driver, devices and MTU.
pub(super) fn erdma(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.intent.erdma
        && cx.sure
        && !cx.facts.erdma.present()
        && !cx.facts.rdma_devices.iter().any(|d| d.is_erdma())
        && !cx.failed("erdma")
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
    for d in cx.facts.rdma_devices.iter().filter(|d| d.is_erdma()) {
        for p in &d.ports {
            if let Some(mtu) = p.mtu.filter(|m| *m != 8500 && *m != 1400) {
                out.push(Finding::new(
                    "erdma-mtu",
                    Sev::Error,
                    format!("eRDMA netdev {} has MTU {mtu}", p.netdev.as_deref().unwrap_or("?")),
                    format!("{} port {}: netdev {} MTU {mtu}", d.name, p.port, p.netdev.as_deref().unwrap_or("?")),
                    "eRDMA needs MTU 8500 (jumbo frames) or 1400; with NCCL LL128 another MTU corrupts data",
                    format!("`ip link set {} mtu 8500` where jumbo frames are enabled, else 1400; {} does both and persists it (network.mtu: auto, a systemd .link file)", p.netdev.as_deref().unwrap_or("<netdev>"), Suggest::new(names::APPLY).arg("erdma-cloud").shown(&Given::none())),
                ));
            }
        }
    }
}

/// PCIe: ACS between GPU and NIC.
pub(super) fn pcie(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.intent.rdma {
        for p in &cx.facts.pcie {
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
        // BAR1, MaxReadReq, MaxPayload, relaxed ordering and ATS: the same findings as
        // verify's `pcie-path` (src/checks/pcie_path.rs).
        out.extend(super::pcie_path::findings(cx.facts, &cx.intent.pcie));
        // The GPU's distance to its nearest NIC is the health check
        // `gpu-nic-affinity` (one fact, one finding: src/checks/health/affinity.rs).
    }
}

/// ACS between two GPUs behind one PCIe switch (not only between GPU and NIC).
pub(super) fn gpu_pair_acs(cx: &Cx, out: &mut Vec<Finding>) {
    let Some(row) = super::fabric_rules::rule("acs-gpu-pair") else {
        return;
    };
    for p in &cx.facts.gpu_pair_acs {
        for b in p.acs_blocking() {
            out.push(Finding::new(
                "acs-gpu-pair",
                if cx.intent.rdma {
                    Sev::Error
                } else {
                    Sev::Warn
                },
                format!(
                    "ACS redirects peer-to-peer traffic between GPUs {} and {}",
                    p.a, p.b
                ),
                format!(
                    "bridge {} (below their common bridge {}, {:?}): ACSCtl {}",
                    b.bridge,
                    p.common_bridge,
                    p.distance,
                    b.bits.as_deref().unwrap_or("?")
                ),
                row.cause,
                row.fix.replace("BRIDGE", &b.bridge),
            ));
        }
    }
}

/// perftest's dma-buf support.
pub(super) fn perftest(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.intent.dmabuf
        && cx.facts.perftest.installed
        && cx.facts.perftest.cuda_dmabuf == Some(false)
        && !cx.failed("perftest")
    {
        out.push(Finding::new(
            "perftest-no-dmabuf",
            Sev::Warn,
            "ib_write_bw has no --use_cuda_dmabuf",
            format!(
                "perftest {}: `ib_write_bw --help` does not list --use_cuda_dmabuf",
                cx.facts.perftest.version.as_deref().unwrap_or("?")
            ),
            "perftest older than 6.26, or built without CUDA",
            format!(
                "manual GPU tests need perftest >= 6.26 built with CUDA; {} needs none",
                Suggest::new(names::BENCH_LOOPBACK).shown(&Given::none())
            ),
        ));
    }
}

/// The locked-memory limit.
pub(super) fn memlock(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.intent.rdma {
        if let Some(s) = cx.facts.limits.memlock_soft.as_deref() {
            if s != "unlimited" && s.parse::<u64>().is_ok_and(|b| b < (64 << 20)) {
                out.push(Finding::new("memlock-low", Sev::Warn, "the locked-memory limit is low", format!("Max locked memory {s} bytes"), "RDMA memory registration pins host memory against RLIMIT_MEMLOCK", "set `* - memlock unlimited` in /etc/security/limits.d and DefaultLimitMEMLOCK=infinity for services"));
            }
        }
    }
}

/// The RDMA user-space libraries.
pub(super) fn rdma_userspace(cx: &Cx, out: &mut Vec<Finding>) {
    if cx.facts.ofed.kind == OfedKindFact::Absent
        && cx.intent.rdma
        && cx.sure
        && !cx.facts.rdma_devices.is_empty()
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
}
