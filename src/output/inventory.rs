//! `inventory` as text: every fact in words, never by its Rust name. The
//! boot loader and the CPU are said as the planner reads them (where the
//! kernel command line is set: facts/boot_shape.rs; the architecture:
//! facts/arch.rs), so inventory and plan agree.

use crate::facts::arch::Arch;
use crate::facts::boot::BootLoaderKind;
use crate::facts::boot_shape::{CmdlineHome, Starter};
use crate::facts::iommu::IommuState;
use crate::facts::nvidia::Flavor;
use crate::facts::ofed::OfedKindFact;
use crate::facts::{CpuVendor, Facts, OsFamily};
use crate::host::Host;
use std::fmt::Write as _;

pub fn text(host: &Host, f: &Facts) -> String {
    let mut o = String::new();
    system(&mut o, host, f);
    gpus(&mut o, f);
    rdma(&mut o, f);
    kernel_state(&mut o, f);
    pcie(&mut o, f);
    crate::output::inventory_pcie::text(&mut o, f);
    topology(&mut o, f);
    o
}

/// The GPUs together: NVLink per GPU, pairs, shared upstream ports, fabric.
fn topology(w: &mut String, f: &Facts) {
    if f.gpus.is_empty() {
        return;
    }
    let _ = writeln!(w, "GPU topology:");
    if f.gpus.len() == 1 {
        let _ = writeln!(w, "  one GPU ({}): no GPU pair", f.gpus[0].pci);
    }
    for l in crate::output::node::topology_lines(&f.gpu_topology) {
        let _ = writeln!(w, "  {l}");
    }
}

pub fn family_words(f: OsFamily) -> &'static str {
    match f {
        OsFamily::Debian => "Debian family",
        OsFamily::Rhel => "RHEL family",
        OsFamily::Unknown => "OS family not recognised",
    }
}

/// The CPU as the IOMMU arguments depend on it: an arm64 CPU (Grace) by its
/// architecture and cores, an x86 one by its vendor.
pub fn cpu_words(f: &Facts) -> String {
    if f.arch.arch == Arch::Aarch64 {
        return match &f.arch.cpu {
            Some(cpu) => format!("arm64, {cpu}"),
            None => "arm64".into(),
        };
    }
    match f.cpu_vendor {
        CpuVendor::Intel => "Intel",
        CpuVendor::Amd => "AMD",
        CpuVendor::Other => "of another vendor",
        CpuVendor::Unknown => "vendor unknown (give --cpu-vendor)",
    }
    .into()
}

/// The boot loader as the boot modules see it: systemd-boot, none (the
/// command line set outside the root), else GRUB or BLS entries.
pub fn boot_words(f: &Facts) -> String {
    match &f.boot.cmdline_home {
        CmdlineHome::SystemdBoot(sd) => format!(
            "systemd-boot (ESP {}, {} entr{}{}){}",
            sd.esp,
            sd.entries.len(),
            if sd.entries.len() == 1 { "y" } else { "ies" },
            match sd.ukis.len() {
                0 => String::new(),
                1 => ", 1 unified kernel image".into(),
                n => format!(", {n} unified kernel images"),
            },
            match sd.efi_selected.as_deref() {
                Some(e) => format!(", running {e} (LoaderEntrySelected)"),
                None => String::new(),
            }
        ),
        CmdlineHome::Elsewhere {
            starter,
            unused_loader,
            ..
        } => format!(
            "none on this root: the kernel command line is set {}{}",
            match starter {
                Starter::Container => "by the host the container runs on",
                Starter::Hypervisor => "by the hypervisor (direct kernel boot)",
                Starter::Network => "by the network boot (PXE/iPXE)",
                Starter::Unknown => "by whatever boots it",
            },
            match unused_loader {
                Some(files) => format!(
                    " ({files} is in the image, but the running kernel was not started from this root: no BOOT_IMAGE= or boot loader variable, the kernel is not installed here)"
                ),
                None => String::new(),
            }
        ),
        CmdlineHome::OnHost { evidence } => match f.boot.kind {
            BootLoaderKind::GrubBls => "GRUB with BLS entries".into(),
            BootLoaderKind::GrubEfi => "GRUB (EFI)".into(),
            // GRUB for arm64 exists for EFI only.
            BootLoaderKind::GrubBios if f.arch.arch == Arch::Aarch64 => "GRUB (EFI)".into(),
            BootLoaderKind::GrubBios => "GRUB (BIOS)".into(),
            BootLoaderKind::Bls | BootLoaderKind::SystemdBoot | BootLoaderKind::External => {
                format!("BLS entries ({evidence})")
            }
            BootLoaderKind::Unknown => format!("a boot loader configured in {evidence}"),
        },
    }
}

/// EFI firmware: seen, or implied by the boot loader (systemd-boot and
/// GRUB on arm64 run on EFI only).
fn efi(f: &Facts) -> bool {
    let grub = matches!(
        f.boot.kind,
        BootLoaderKind::GrubBios | BootLoaderKind::GrubEfi | BootLoaderKind::GrubBls
    );
    f.boot.efi
        || matches!(f.boot.cmdline_home, CmdlineHome::SystemdBoot(_))
        || (grub && f.arch.arch == Arch::Aarch64 && !f.boot.cmdline_home.is_elsewhere())
}

fn or_absent(v: Option<&str>) -> &str {
    v.unwrap_or("absent")
}

/// Modules worth showing among the loaded ones.
fn relevant_module(m: &str) -> bool {
    [
        "nvidia",
        "nv_peer_mem",
        "nouveau",
        "mlx",
        "ib_",
        "rdma",
        "erdma",
        "irdma",
        "bnxt_re",
        "efa",
        "iw_",
        "siw",
        "vfio",
    ]
    .iter()
    .any(|p| m.starts_with(p))
}

/// The root, the OS and CPU, the kernel and how it boots.
fn system(w: &mut String, host: &Host, f: &Facts) {
    let where_ = if f.live {
        "the running system".to_string()
    } else if f.snapshot {
        format!("snapshot {}", host.root().display())
    } else {
        format!("image {}", host.root().display())
    };
    let _ = writeln!(w, "Root: {where_}");
    let _ = writeln!(
        w,
        "OS: {} ({}), CPU {}",
        or_absent(f.os.pretty_name.as_deref().or(f.os.id.as_deref())),
        family_words(f.os.family),
        cpu_words(f)
    );
    let _ = writeln!(
        w,
        "Kernel: running {}, installed: {}",
        or_absent(f.kernel.running.as_deref()),
        if f.kernel.installed.is_empty() {
            "none found".to_string()
        } else {
            f.kernel.installed.join(", ")
        }
    );
    let _ = writeln!(
        w,
        "Boot: {}, EFI {}",
        boot_words(f),
        if efi(f) { "yes" } else { "no" }
    );
    let _ = writeln!(w, "Command line: {}", or_absent(f.proc_cmdline.as_deref()));
}

/// The NVIDIA driver, the GPUs and CUDA.
fn gpus(w: &mut String, f: &Facts) {
    let d = &f.nvidia_driver;
    let _ = writeln!(
        w,
        "NVIDIA driver: {}",
        match &d.version {
            Some(v) => format!(
                "{v} {} (from {})",
                match d.flavor {
                    Flavor::Open => "open kernel modules",
                    Flavor::Proprietary => "proprietary",
                    Flavor::Unknown => "flavour unknown",
                },
                d.source.as_deref().unwrap_or("?")
            ),
            None => "absent".into(),
        }
    );
    let _ = writeln!(
        w,
        "GPUs: {}",
        if f.gpus.is_empty() {
            "none".to_string()
        } else {
            f.gpus.len().to_string()
        }
    );
    for g in &f.gpus {
        let dmabuf = match f.cuda_device(g).and_then(|c| c.dmabuf_supported) {
            Some(true) => "dma-buf supported (CUDA)".to_string(),
            Some(false) => "dma-buf NOT supported (CUDA)".to_string(),
            None => "dma-buf support not asked".to_string(),
        };
        let gdr = match f.cuda_device(g).and_then(|c| c.gpudirect_rdma) {
            Some(true) => ", GPUDirect RDMA supported (CUDA)",
            Some(false) => ", GPUDirect RDMA NOT supported (CUDA)",
            None => "",
        };
        let cc = f
            .cuda_device(g)
            .and_then(|c| c.compute_capability.clone())
            .map(|c| format!(", compute {c}"))
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "  {}  {} [{}]  {} (from {}){cc}, NUMA {}, driver {}, {dmabuf}{gdr}",
            g.pci,
            g.name.as_deref().unwrap_or("unknown model"),
            g.device_id,
            g.arch.name(),
            g.arch_source,
            g.numa_node.map(|n| n.to_string()).unwrap_or("-".into()),
            or_absent(g.driver.as_deref()),
        );
        let _ = writeln!(w, "    P2PDMA memory (kernel): {}", p2pmem_words(g));
    }
    let c = &f.cuda;
    let _ = writeln!(
        w,
        "CUDA: driver API {}{}, toolkit {}",
        or_absent(c.driver_api.as_deref()),
        c.driver_api_source
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default(),
        or_absent(c.toolkit.as_deref())
    );
    if let Some(e) = c.runtime.as_ref().and_then(|r| r.error.as_ref()) {
        let _ = writeln!(w, "  CUDA driver API: {e}");
    }
}

/// The kernel's PCI P2PDMA view of a GPU (its `p2pmem/`).
fn p2pmem_words(g: &crate::facts::gpu::Gpu) -> String {
    let bytes = |b: Option<u64>| {
        b.map(crate::bench::report::human_bytes)
            .unwrap_or("?".into())
    };
    match &g.p2pmem {
        None => format!("none registered (no /sys/bus/pci/devices/{}/p2pmem)", g.pci),
        Some(m) => format!(
            "{} registered, {} available, {}",
            bytes(m.size),
            bytes(m.available),
            match m.published {
                Some(true) => "published",
                Some(false) => "not published",
                None => "published ?",
            }
        ),
    }
}

/// The RDMA stack, perftest, NCCL, eRDMA and the RDMA devices.
fn rdma(w: &mut String, f: &Facts) {
    let _ = writeln!(
        w,
        "RDMA stack: {}",
        match f.ofed.kind {
            OfedKindFact::Mlnx => format!(
                "MLNX_OFED/DOCA-OFED {}",
                or_absent(f.ofed.version.as_deref())
            ),
            OfedKindFact::Inbox => format!(
                "inbox rdma-core {}",
                f.ofed.version.as_deref().unwrap_or("(version unknown)")
            ),
            OfedKindFact::Absent => "absent".into(),
        }
    );
    let p = &f.perftest;
    let _ = writeln!(
        w,
        "perftest: {}",
        if p.installed {
            format!(
                "{}, ib_write_bw --use_cuda_dmabuf: {}",
                p.version.as_deref().unwrap_or("version unknown"),
                match p.cuda_dmabuf {
                    Some(true) => "yes",
                    Some(false) => "no",
                    None => "unknown",
                }
            )
        } else {
            "absent".into()
        }
    );
    let _ = writeln!(
        w,
        "NCCL: {}",
        if f.nccl.installs.is_empty() {
            "absent".to_string()
        } else {
            f.nccl
                .installs
                .iter()
                .map(|i| format!("{} ({})", i.version, i.source))
                .collect::<Vec<_>>()
                .join("; ")
        }
    );
    let _ = writeln!(
        w,
        "eRDMA: {}",
        if f.erdma.present() {
            format!(
                "{} (module {})",
                or_absent(f.erdma.version.as_deref()),
                if f.erdma.module_loaded {
                    "loaded"
                } else {
                    "not loaded"
                }
            )
        } else {
            "absent".into()
        }
    );
    rdma_devices(w, f);
}

/// The RDMA devices and their ports.
fn rdma_devices(w: &mut String, f: &Facts) {
    let _ = writeln!(
        w,
        "RDMA devices: {}",
        if f.rdma_devices.is_empty() {
            "none (/sys/class/infiniband is empty)".to_string()
        } else {
            f.rdma_devices.len().to_string()
        }
    );
    for r in &f.rdma_devices {
        let _ = writeln!(
            w,
            "  {} ({}, {}, NUMA {})",
            r.name,
            or_absent(r.driver.as_deref()),
            r.pci.as_deref().unwrap_or("soft device"),
            r.numa_node.map(|n| n.to_string()).unwrap_or("-".into())
        );
        for port in &r.ports {
            let _ = writeln!(
                w,
                "    port {}: {} {} {}, netdev {} MTU {}",
                port.port,
                or_absent(port.state.as_deref()),
                match port.link_layer.as_deref() {
                    Some("Ethernet") => "RoCE/Ethernet",
                    Some(x) => x,
                    None => "?",
                },
                port.rate.as_deref().unwrap_or("?"),
                or_absent(port.netdev.as_deref()),
                port.mtu.map(|m| m.to_string()).unwrap_or("?".into())
            );
        }
    }
}

/// The IOMMU, the modules and the memlock limits.
fn kernel_state(w: &mut String, f: &Facts) {
    let _ = writeln!(
        w,
        "IOMMU: {} ({}; {} groups, units: {})",
        match f.iommu.state {
            IommuState::Off => "off",
            IommuState::Passthrough => "passthrough",
            IommuState::Translated => "translated (DMA)",
            IommuState::Unknown => "unknown",
        },
        f.iommu.evidence,
        f.iommu.groups,
        if f.iommu.units.is_empty() {
            "none".into()
        } else {
            f.iommu.units.join(" ")
        }
    );
    let shown: Vec<&String> = f
        .modules
        .loaded
        .iter()
        .filter(|m| relevant_module(m))
        .collect();
    let _ = writeln!(
        w,
        "Modules ({}): {} loaded; GPU/RDMA ones: {}",
        f.modules.source,
        f.modules.loaded.len(),
        if shown.is_empty() {
            "none".into()
        } else {
            shown
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" ")
        }
    );
    let (shown_blocked, other_blocked): (Vec<_>, Vec<_>) = f
        .modules
        .blocked
        .iter()
        .partition(|b| relevant_module(&b.module));
    for b in &shown_blocked {
        let _ = writeln!(w, "  blocked: {} ({} in {})", b.module, b.how, b.file);
    }
    if !other_blocked.is_empty() {
        let _ = writeln!(
            w,
            "  blocked, not GPU/RDMA: {} module(s) (--format json lists them)",
            other_blocked.len()
        );
    }
    if !f.modules.peermem_paths.is_empty() {
        let _ = writeln!(
            w,
            "  peer memory seen by NCCL: {}",
            f.modules.peermem_paths.join(", ")
        );
    }
    let _ = writeln!(
        w,
        "Memlock: soft {}, hard {}{}",
        or_absent(f.limits.memlock_soft.as_deref()),
        or_absent(f.limits.memlock_hard.as_deref()),
        if f.limits.configured.is_empty() {
            String::new()
        } else {
            format!("; configured: {}", f.limits.configured.join("; "))
        }
    );
}

/// The PCIe links and the GPU-NIC paths.
fn pcie(w: &mut String, f: &Facts) {
    if !f.links.is_empty() {
        let _ = writeln!(w, "PCIe links:");
    }
    for l in &f.links {
        let _ = writeln!(
            w,
            "  {:?} {}: {} (maximum {}){}",
            l.role,
            l.address,
            l.current(),
            l.maximum(),
            if l.degraded() { "  DEGRADED" } else { "" }
        );
    }
    if !f.pcie.is_empty() {
        let _ = writeln!(w, "PCIe paths:");
    }
    for p in &f.pcie {
        let acs = p.acs_blocking();
        let _ = writeln!(
            w,
            "  GPU {} <-> {} ({}): {:?}{}, NUMA {}/{}, ACS {}",
            p.gpu,
            p.nic,
            p.nic_pci,
            p.distance,
            p.common_bridge
                .as_deref()
                .map(|b| format!(" under {b}"))
                .unwrap_or_default(),
            p.gpu_numa.map(|n| n.to_string()).unwrap_or("-".into()),
            p.nic_numa.map(|n| n.to_string()).unwrap_or("-".into()),
            if acs.is_empty() {
                if p.bridges.iter().all(|b| b.control.is_none()) && !p.bridges.is_empty() {
                    "not readable or absent".to_string()
                } else {
                    "off".to_string()
                }
            } else {
                format!(
                    "ON at {}",
                    acs.iter()
                        .map(|b| b.bridge.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
}
