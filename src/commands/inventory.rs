//! `gdrprov inventory`: every fact, for people or as JSON; with `--snapshot`,
//! a copy of everything the probes read.

use crate::error::Result;
use crate::facts::boot::BootLoaderKind;
use crate::facts::iommu::IommuState;
use crate::facts::nvidia::Flavor;
use crate::facts::ofed::OfedKindFact;

use crate::facts::{CpuVendor, Depth, Facts, OsFamily};
use crate::host::Host;
use crate::output::{Format, Output};
use std::fmt::Write as _;
use std::path::Path;

pub fn run(out: &Output, snapshot: Option<&Path>, cpu: Option<CpuVendor>) -> Result<i32> {
    let (root, format) = (out.root.as_path(), out.format);
    let mut host = Host::open(root, false)?;
    if snapshot.is_some() {
        host = host.recording();
    }
    let facts = Facts::gather_with(&host, cpu, Depth::WithCuda);
    if let Some(dir) = snapshot {
        let rec = host.recorded().unwrap_or_default();
        let s = crate::facts::snapshot::write(&host, &rec, dir)?;
        // Prove the copy answers the same.
        let again = Host::open(dir, true)
            .map(|h| Facts::gather_with(&h, cpu, Depth::WithCuda))
            .ok();
        let differs = again.map(|a| differing(&facts, &a)).unwrap_or_default();
        match format {
            Format::Json => out.document(
                "inventory",
                serde_json::json!({
                    "snapshot": dir.display().to_string(),
                    "files": s.files, "links": s.links, "dirs": s.dirs, "commands": s.commands,
                    "skipped": s.skipped,
                    "differs": differs,
                    // The facts of this run, the one the snapshot recorded: what a
                    // replay (`--root DIR`) must give again.
                    "facts": facts,
                }),
            ),
            Format::Text | Format::Prometheus => {
                println!(
                    "Snapshot of {} written to {}: {} files, {} symlinks, {} directories, {} command outputs.",
                    host.display("/"),
                    dir.display(),
                    s.files,
                    s.links,
                    s.dirs,
                    s.commands
                );
                for k in &s.skipped {
                    println!("  skipped (too large): {k}");
                }
                if differs.is_empty() {
                    println!(
                        "Checked: `gdrprov inventory --root {}` gives the same facts.",
                        dir.display()
                    );
                } else {
                    println!(
                        "warning: read back from the snapshot, these facts differ: {}",
                        differs.join(", ")
                    );
                }
            }
        }
        return Ok(crate::exit::OK);
    }
    match format {
        Format::Json => out.document("inventory", serde_json::json!({ "facts": facts })),
        Format::Text | Format::Prometheus => print!("{}", text(&host, &facts)),
    }
    Ok(crate::exit::OK)
}

/// Text output names things in words, never by their Rust names.
pub fn family_words(f: OsFamily) -> &'static str {
    match f {
        OsFamily::Debian => "Debian family",
        OsFamily::Rhel => "RHEL family",
        OsFamily::Unknown => "OS family not recognised",
    }
}

pub fn cpu_words(c: CpuVendor) -> &'static str {
    match c {
        CpuVendor::Intel => "Intel",
        CpuVendor::Amd => "AMD",
        CpuVendor::Other => "of another vendor",
        CpuVendor::Unknown => "vendor unknown (give --cpu-vendor)",
    }
}

pub fn boot_words(b: BootLoaderKind) -> &'static str {
    match b {
        BootLoaderKind::GrubBls => "GRUB with BLS entries",
        BootLoaderKind::GrubEfi => "GRUB (EFI)",
        BootLoaderKind::GrubBios => "GRUB (BIOS)",
        BootLoaderKind::Bls => "BLS entries without GRUB (systemd-boot)",
        BootLoaderKind::Unknown => "no GRUB or BLS boot loader found",
    }
}

pub fn iommu_words(s: IommuState) -> &'static str {
    match s {
        IommuState::Off => "off",
        IommuState::Passthrough => "passthrough",
        IommuState::Translated => "translating DMA",
        IommuState::Unknown => "state unknown",
    }
}

/// Top-level facts whose JSON differs (ignoring where they were read from).
pub fn differing(a: &Facts, b: &Facts) -> Vec<String> {
    let (Ok(serde_json::Value::Object(x)), Ok(serde_json::Value::Object(y))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return vec!["(could not compare)".into()];
    };
    x.iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "live" | "snapshot" | "observed") && y.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
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

pub fn text(host: &Host, f: &Facts) -> String {
    let mut o = String::new();
    let w = &mut o;
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
        cpu_words(f.cpu_vendor)
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
        boot_words(f.boot.kind),
        if f.boot.efi { "yes" } else { "no" }
    );
    let _ = writeln!(w, "Command line: {}", or_absent(f.proc_cmdline.as_deref()));
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
        let cc = f
            .cuda_device(g)
            .and_then(|c| c.compute_capability.clone())
            .map(|c| format!(", compute {c}"))
            .unwrap_or_default();
        let _ = writeln!(
            w,
            "  {}  {} [{}]  {} (from {}){cc}, NUMA {}, driver {}, {dmabuf}",
            g.pci,
            g.name.as_deref().unwrap_or("unknown model"),
            g.device_id,
            g.arch.name(),
            g.arch_source,
            g.numa_node.map(|n| n.to_string()).unwrap_or("-".into()),
            or_absent(g.driver.as_deref()),
        );
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
    o
}
