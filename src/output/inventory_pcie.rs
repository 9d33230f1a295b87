//! `inventory`'s PCIe settings (issue 46), beside the links and paths: each GPU's BAR1
//! and memory BARs, resizable BAR, the device control fields and ATS of every device on
//! a GPU–NIC path, and the NVIDIA driver's PCIe parameters.

use crate::facts::pcicfg::ConfigFacts;
use crate::facts::pcie_dev::GpuBars;
use crate::facts::Facts;
use std::fmt::Write as _;

fn on(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// One GPU's BARs in words.
pub fn gpu_line(g: &GpuBars) -> String {
    let bar1 = match &g.bar1 {
        Some(b) => format!("BAR1 (resource {}) {} MiB", b.index, b.bytes >> 20),
        None => "BAR1 not readable (no resource table)".into(),
    };
    let mem = match (g.memory_mib, &g.memory_source) {
        (Some(m), Some(s)) => format!(", memory {m} MiB ({s})"),
        _ => String::new(),
    };
    let bars = g
        .bars
        .iter()
        .map(|b| format!("{}: {} MiB", b.index, b.bytes >> 20))
        .collect::<Vec<_>>()
        .join(", ");
    let rebar = if g.resizable_bars.is_empty() {
        "resizable BAR: none in config space".to_string()
    } else {
        g.resizable_bars
            .iter()
            .map(|r| {
                format!(
                    "resizable BAR {}: {} MiB of {}",
                    r.bar,
                    r.current_mib,
                    r.supported_mib
                        .iter()
                        .map(u64::to_string)
                        .collect::<Vec<_>>()
                        .join("/")
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    if bars.is_empty() {
        return format!("{bar1}{mem}; {rebar}");
    }
    format!("{bar1}{mem}; memory BARs {bars}; {rebar}")
}

/// A device's control fields and ATS in words.
pub fn config_words(c: Option<&ConfigFacts>) -> String {
    let Some(c) = c else {
        return "config space not readable (needs root)".into();
    };
    let Some(p) = &c.pcie else {
        return format!("no PCI Express capability in {} bytes", c.bytes);
    };
    let tags = match (p.ten_bit_tags_supported, p.ten_bit_tags) {
        (Some(true), Some(e)) => format!(", 10-bit tags {}", on(e)),
        _ => String::new(),
    };
    let ats = match (&c.ats, c.bytes) {
        (Some(a), _) => format!("ATS {}", on(a.enabled)),
        (None, n) if n <= 256 => "ATS unknown (no extended config space)".into(),
        (None, _) => "no ATS".into(),
    };
    format!(
        "{}: MaxPayload {} (capable {}), MaxReadReq {}, relaxed ordering {}, no-snoop {}{tags}, {ats}",
        p.port_type,
        p.max_payload,
        p.max_payload_supported,
        p.max_read_request,
        on(p.relaxed_ordering),
        on(p.no_snoop),
    )
}

pub fn text(w: &mut String, f: &Facts) {
    let d = &f.pcie_devices;
    if d.devices.is_empty() && f.nvidia_params.source.is_none() {
        return;
    }
    let _ = writeln!(w, "PCIe settings:");
    for g in &d.gpus {
        let _ = writeln!(w, "  GPU {}: {}", g.gpu, gpu_line(g));
    }
    for dev in &d.devices {
        let _ = writeln!(
            w,
            "  {} {}: {}",
            dev.role(),
            dev.pci,
            config_words(dev.config.as_ref())
        );
    }
    for n in d.nics.iter().filter(|n| n.via_netdev.is_some()) {
        let _ = writeln!(
            w,
            "  {} is soft: its traffic goes through {} ({})",
            n.nic,
            n.via_netdev.as_deref().unwrap_or("-"),
            n.pci
        );
    }
    let p = &f.nvidia_params;
    if let Some(src) = &p.source {
        let shown: Vec<String> = ["EnablePCIERelaxedOrderingMode", "EnableResizableBar"]
            .iter()
            .filter_map(|k| p.get(k).map(|v| format!("{k} {v}")))
            .collect();
        let opts: Vec<String> = p
            .module_options
            .iter()
            .map(|o| format!("NVreg_{}={} ({})", o.name, o.value, o.file))
            .collect();
        let _ = writeln!(
            w,
            "  NVIDIA driver: {} ({} parameters in {src}); module options: {}",
            shown.join(", "),
            p.params.len(),
            if opts.is_empty() {
                "none".into()
            } else {
                opts.join(", ")
            }
        );
    }
}
