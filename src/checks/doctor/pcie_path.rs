//! The PCIe path's settings judged (issue 46): one set of findings for `doctor` and
//! verify's `pcie-path`. From the facts alone (config space, the resource tables, the
//! boot unit's read-back) and what the profile wishes: each names the device by PCI
//! address and role, gives the evidence from config space and the fix, and a setting
//! only firmware changes names the tool that changes it.

use super::{Finding, Sev};
use crate::facts::pcie_dev::{GpuBars, PcieDevFacts, PcieDevice};
use crate::facts::platform::VirtFact;
use crate::facts::Facts;
use crate::profile::{Pcie, RelaxedOrdering};

/// What the profile asks of the path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wish {
    /// MaxReadReq the NICs should have, bytes, and whether the profile sets it (then a
    /// NIC below it fails; the default wish only warns).
    pub max_read_request: Option<(u32, bool)>,
    pub relaxed_ordering: bool,
    /// BAR1 floor, MiB; `None`: BAR1 must cover the GPU's memory.
    pub bar1_min_mib: Option<u64>,
}

impl Wish {
    /// From the profile's `pcie:`; `rdma`: a GPUDirect RDMA profile on NICs it owns (then
    /// 4096 is wished by default and relaxed ordering warns unless `off`).
    pub fn of(p: &Pcie, rdma: bool) -> Wish {
        Wish {
            max_read_request: match p.max_read_request {
                Some(m) => Some((m, true)),
                None if rdma => Some((4096, false)),
                None => None,
            },
            relaxed_ordering: match p.relaxed_ordering {
                Some(r) => r == RelaxedOrdering::Warn,
                None => rdma,
            },
            bar1_min_mib: p.bar1_min_mib,
        }
    }
}

/// NICs whose register a cloud's hypervisor owns (EFA, eRDMA): not judged on MaxReadReq.
fn cloud_nic(f: &Facts, d: &PcieDevice) -> bool {
    f.rdma_devices.iter().any(|n| {
        (n.is_erdma() || n.driver.as_deref() == Some("efa"))
            && d.roles.iter().any(|r| r == &format!("nic {}", n.name))
    })
}

/// Every finding of the path, most serious first.
pub fn findings(f: &Facts, w: &Wish) -> Vec<Finding> {
    let mut out = Vec::new();
    let vm = f.platform.virtualization == VirtFact::Vm;
    for g in &f.pcie_devices.gpus {
        out.extend(bar1(g, w, vm));
    }
    let d = &f.pcie_devices;
    for dev in d.devices.iter().filter(|x| x.is_nic() && !cloud_nic(f, x)) {
        let Some(p) = dev.config.as_ref().and_then(|c| c.pcie.as_ref()) else {
            continue;
        };
        if let Some((want, set)) = w.max_read_request {
            if p.max_read_request < want {
                out.push(mrrs(dev, p.max_read_request, want, set, d, vm));
            }
        }
        if w.relaxed_ordering && !p.relaxed_ordering {
            out.push(relaxed_ordering(dev, p.devctl, f));
        }
    }
    out.extend(max_payload(d));
    out.extend(ats(f, vm));
    out.sort_by_key(|x| x.severity);
    out
}

fn bar1(g: &GpuBars, w: &Wish, vm: bool) -> Option<Finding> {
    let b = g.bar1.as_ref()?;
    let mib = b.bytes >> 20;
    let (floor, what) = match (w.bar1_min_mib, g.memory_mib) {
        (Some(m), _) => (m, format!("the profile's floor pcie.bar1-min-mib {m} MiB")),
        (None, Some(m)) => (m, format!("its memory, {m} MiB")),
        (None, None) => return None,
    };
    if mib >= floor {
        return None;
    }
    let rebar = g
        .resizable_bars
        .iter()
        .find(|r| r.bar == b.index)
        .map(|r| {
            format!(
                "; resizable BAR {}: {} MiB set, up to {} MiB supported",
                r.bar,
                r.current_mib,
                r.supported_mib.last().copied().unwrap_or(0)
            )
        })
        .unwrap_or_default();
    let fix = if vm {
        "this is a VM: give the guest a 64-bit MMIO window larger than the GPU's memory (the hypervisor's setting: qemu `-global q35-pcihost.pci-hole64-size=...`, or an instance type with large BARs), and boot the guest with `pci=realloc`".to_string()
    } else {
        "enable \"Above 4G Decoding\" and \"Resizable BAR\" (Re-Size BAR Support) in the BIOS; with resizable BAR the driver can also grow it at load (`options nvidia NVreg_EnableResizableBar=1`)".to_string()
    };
    Some(Finding::new(
        "bar1-small",
        Sev::Error,
        format!("GPU {}: BAR1 is smaller than {what}", g.gpu),
        format!(
            "gpu {}: BAR1 (sysfs resource {}) {mib} MiB{rebar}",
            g.gpu, b.index
        ),
        "GPUDirect RDMA maps GPU memory for the NIC through BAR1: registration beyond it fails, or NCCL turns GDR off",
        fix,
    ))
}

fn mrrs(dev: &PcieDevice, have: u32, want: u32, set: bool, d: &PcieDevFacts, vm: bool) -> Finding {
    let readback = d.readback.iter().find(|r| r.pci == dev.pci);
    let (cause, fix) = match readback {
        Some(r) => (
            format!(
                "not kept: gdrprov-pcie.service wrote {} at boot and read back {}; the device{} does not keep the write",
                r.wrote,
                r.read.map_or("nothing".into(), |v| v.to_string()),
                if vm { " (or the hypervisor, which owns the register in a VM)" } else { "" }
            ),
            "the register cannot be set from this OS: set it where it is owned (the hypervisor's device configuration, or the NIC's firmware/BIOS), or remove pcie.max-read-request from the profile".to_string(),
        ),
        None => (
            "firmware or the BIOS set a small MaxReadReq; DMA reads from GPU memory then run well below line rate".to_string(),
            if set {
                "apply the profile: gdrprov-pcie.service writes pcie.max-read-request at every boot".to_string()
            } else {
                format!("set `pcie: max-read-request: {want}` in the profile (gdrprov writes it at every boot), or once with `setpci -s {} CAP_EXP+0x8.w={:x}:7000`", dev.pci, crate::facts::pcicfg::size_encoding(want).unwrap_or(5) << 12)
            },
        ),
    };
    Finding::new(
        "max-read-request-low",
        if set { Sev::Error } else { Sev::Warn },
        format!(
            "{} {}: MaxReadReq {have} is below {want}",
            dev.role(),
            dev.pci
        ),
        format!(
            "{} {}: Device Control MaxReadReq {have} bytes",
            dev.role(),
            dev.pci
        ),
        cause,
        fix,
    )
}

fn relaxed_ordering(dev: &PcieDevice, devctl: u16, f: &Facts) -> Finding {
    let drv = f
        .nvidia_params
        .get("EnablePCIERelaxedOrderingMode")
        .map(|v| format!("; the NVIDIA driver's EnablePCIERelaxedOrderingMode is {v}"))
        .unwrap_or_default();
    Finding::new(
        "relaxed-ordering-off",
        Sev::Warn,
        format!("{} {}: relaxed ordering is off", dev.role(), dev.pci),
        format!("{} {}: Device Control {devctl:#06x}, RlxdOrd-{drv}", dev.role(), dev.pci),
        "without relaxed ordering the NIC's writes into GPU memory are strictly ordered, which caps GPUDirect RDMA bandwidth on many root complexes (the kernel clears the bit itself where a root port is known to mishandle it)",
        "check the NIC's own write ordering in firmware (Mellanox/NVIDIA: `mlxconfig -d DEV set PCI_WR_ORDERING=1`, then a firmware reset) and that the BIOS does not disable relaxed ordering; or set `pcie: relaxed-ordering: off` if this platform must not use it",
    )
}

/// A bridge on a GPU–NIC path set to a smaller MaxPayload than both ends.
fn max_payload(d: &PcieDevFacts) -> Vec<Finding> {
    let mps = |pci: &str| {
        d.device(pci)
            .and_then(|x| x.config.as_ref()?.pcie.as_ref().map(|p| p.max_payload))
    };
    let mut out: Vec<Finding> = Vec::new();
    for p in &d.paths {
        let (Some(g), Some(n)) = (mps(&p.gpu), mps(&p.nic_pci)) else {
            continue;
        };
        for b in &p.bridges {
            let Some(bm) = mps(b).filter(|bm| *bm < g.min(n)) else {
                continue;
            };
            if out
                .iter()
                .any(|f| f.evidence.starts_with(&format!("bridge {b}:")))
            {
                continue;
            }
            out.push(Finding::new(
                "max-payload-path",
                Sev::Warn,
                format!("bridge {b}: MaxPayload {bm} is below both ends of GPU {} – {}", p.gpu, p.nic),
                format!("bridge {b}: Device Control MaxPayload {bm} bytes; gpu {}: {g}; nic {} {}: {n}", p.gpu, p.nic, p.nic_pci),
                "every TLP on the path is cut to the smallest MaxPayload: DMA between GPU and NIC runs below line rate",
                "MaxPayload is set at enumeration by the BIOS (its PCIe MaxPayload setting) or the kernel: boot with `pci=pcie_bus_perf` so each path gets the largest size all its devices support",
            ));
        }
    }
    out
}

/// ATS off (or absent) on a NIC in a VM whose bridges above it keep ACS on.
fn ats(f: &Facts, vm: bool) -> Vec<Finding> {
    let d = &f.pcie_devices;
    if !vm {
        return Vec::new();
    }
    let mut out = Vec::new();
    for n in &d.nics {
        let Some(dev) = d.device(&n.pci) else {
            continue;
        };
        let Some(cfg) = &dev.config else { continue };
        let acs_on: Vec<&str> = d
            .above(&n.pci)
            .iter()
            .filter_map(|b| {
                let ctl = d.device(b)?.config.as_ref()?.acs_control?;
                (ctl & crate::facts::pcie::ACS_P2P_BLOCKING != 0).then_some(b.as_str())
            })
            .collect();
        if acs_on.is_empty() || cfg.ats.as_ref().is_some_and(|a| a.enabled) {
            continue;
        }
        let state = match &cfg.ats {
            Some(a) => format!("ATS capability at {:#x}, Enable-", a.offset),
            None if cfg.bytes <= 256 => "no extended config space readable".into(),
            None => "no ATS capability".into(),
        };
        out.push(Finding::new(
            "ats-off",
            Sev::Error,
            format!("nic {} {}: ATS is off in a VM with ACS on", n.nic, n.pci),
            format!("nic {} {}: {state}; ACS redirect on {}", n.nic, n.pci, acs_on.join(", ")),
            "a guest keeps ACS on for device isolation, so peer-to-peer traffic goes up to the IOMMU unless the NIC translates addresses itself (ATS): GPUDirect RDMA falls back or crawls",
            "enable ATS on the NIC: in its firmware (`mlxconfig -d DEV set ATS_ENABLED=true`, then a firmware reset) and on the hypervisor's device (qemu: `ats=on` behind a pcie-root-port, with a virtual IOMMU that supports it)",
        ));
    }
    out
}

/// verify's `pcie-path`: fails on an error finding, warns on the rest, passes with what
/// was read; nothing where no GPU BAR or NIC config space could be read.
pub fn check(f: &Facts, w: &Wish) -> Option<crate::checks::Check> {
    use crate::checks::Check;
    const NAME: &str = "pcie-path";
    let d = &f.pcie_devices;
    let nics: Vec<&PcieDevice> = d
        .devices
        .iter()
        .filter(|x| x.is_nic() && x.config.as_ref().is_some_and(|c| c.pcie.is_some()))
        .collect();
    let gpus: Vec<&GpuBars> = d.gpus.iter().filter(|g| g.bar1.is_some()).collect();
    if nics.is_empty() && gpus.is_empty() {
        return None;
    }
    let found = findings(f, w);
    let line = |x: &Finding| format!("{}: {} ({})", x.title, x.evidence, x.cause);
    let fixes = |v: &[&Finding]| {
        v.iter()
            .map(|x| format!("{}: {}", x.id, x.fix))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let errors: Vec<&Finding> = found.iter().filter(|x| x.severity == Sev::Error).collect();
    let warns: Vec<&Finding> = found.iter().filter(|x| x.severity != Sev::Error).collect();
    if !errors.is_empty() {
        let mut ev: Vec<String> = errors.iter().map(|x| line(x)).collect();
        ev.extend(warns.iter().map(|x| format!("warning: {}", line(x))));
        return Some(Check::fail(NAME, ev.join("; "), fixes(&errors)));
    }
    if !warns.is_empty() {
        let ev: Vec<String> = warns.iter().map(|x| line(x)).collect();
        return Some(Check::warn(NAME, ev.join("; "), fixes(&warns)));
    }
    let mut seen: Vec<String> = gpus
        .iter()
        .map(|g| {
            format!(
                "GPU {}: BAR1 {} MiB{}",
                g.gpu,
                g.bar1_mib().unwrap_or(0),
                g.memory_mib
                    .map(|m| format!(" (memory {m} MiB)"))
                    .unwrap_or_default()
            )
        })
        .collect();
    seen.extend(nics.iter().filter_map(|n| {
        let p = n.config.as_ref()?.pcie.as_ref()?;
        Some(format!(
            "{} {}: MaxReadReq {}, MaxPayload {}, relaxed ordering {}",
            n.role(),
            n.pci,
            p.max_read_request,
            p.max_payload,
            if p.relaxed_ordering { "on" } else { "off" }
        ))
    }));
    Some(Check::pass(NAME, seen.join("; ")))
}
