//! The kernel log, read once for every check that looks at it: GPU and PCIe
//! trouble (NVIDIA Xid errors, PCIe AER errors, link down/up events of PCIe
//! slots and RDMA NICs, mlx5 port module events) as events, and the error and
//! warning lines about the GPU and RDMA modules (a peer-memory module the
//! kernel refused) as lines. Live: the kernel ring buffer (`/dev/kmsg`, read
//! without blocking; `dmesg --level=err,warn` when it cannot be opened); a
//! snapshot replays what was read; an image or copied root: its
//! `var/log/kern.log` or `var/log/messages`.

use crate::host::Host;
use serde::{Deserialize, Serialize};

/// The Xids azurehpc-health-checks fails a node on.
pub const FATAL_XIDS: &[u32] = &[
    48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    Xid,
    Aer,
    LinkDown,
    LinkUp,
    PortModule,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelEvent {
    pub kind: EventKind,
    /// The PCI address the line names (`0000:3b:00.0`).
    pub device: Option<String>,
    /// The Xid number.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xid: Option<u32>,
    /// AER: `Corrected`, `Uncorrected (Non-Fatal)`, `Uncorrected (Fatal)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// A fatal Xid, an uncorrected AER error, a module/cable error.
    pub serious: bool,
    pub line: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelLog {
    /// `/dev/kmsg`, `dmesg`, `/var/log/kern.log`, ...
    pub source: String,
    pub lines: usize,
    pub events: Vec<KernelEvent>,
    /// Error and warning lines about the GPU and RDMA modules (a log file
    /// has no levels: every line about them), the last [`MAX_MODULE_LINES`].
    #[serde(default)]
    pub module_lines: Vec<String>,
}

/// Most module lines kept.
pub const MAX_MODULE_LINES: usize = 100;

/// What a line about the GPU and RDMA modules names.
const MODULE_WORDS: &[&str] = &[
    "nvidia",
    "peer_mem",
    "peermem",
    "mlx5",
    "rdma",
    "infiniband",
    "ib_",
    "erdma",
    "rxe",
    "iommu",
    "DMAR",
    "AMD-Vi",
    "ACS",
    // gdrcopy's module, and the kernel refusing or tainting a module for its
    // signature (Secure Boot, lockdown; the line may name no module).
    "gdrdrv",
    "module verification failed",
    "unsigned module",
    "unavailable key",
    "Key was rejected",
    "Required key not available",
];

fn about_modules(line: &str) -> bool {
    MODULE_WORDS.iter().any(|w| line.contains(w))
}

/// The PCI address in a line: `0000:3b:00.0`, or Xid's `0000:3b:00`.
fn address_in(s: &str) -> Option<String> {
    let b = s.as_bytes();
    for i in 0..b.len() {
        if i > 0 && b[i - 1].is_ascii_hexdigit() {
            continue;
        }
        let t = &s[i..];
        if t.len() >= 12 && crate::facts::pci::is_address(&t[..12]) {
            return Some(t[..12].to_ascii_lowercase());
        }
        let tb = t.as_bytes();
        if t.len() >= 10
            && tb[4] == b':'
            && tb[7] == b':'
            && t[..10]
                .chars()
                .enumerate()
                .all(|(k, c)| matches!(k, 4 | 7) || c.is_ascii_hexdigit())
            && !tb
                .get(10)
                .is_some_and(|c| c.is_ascii_hexdigit() || *c == b'.')
        {
            return Some(format!("{}.0", t[..10].to_ascii_lowercase()));
        }
    }
    None
}

/// One kernel log line (syslog, dmesg or kmsg text part) as an event.
pub fn parse_line(line: &str) -> Option<KernelEvent> {
    let ev = |kind, device, xid, severity, serious| {
        Some(KernelEvent {
            kind,
            device,
            xid,
            severity,
            serious,
            line: line.trim().to_string(),
        })
    };
    if let Some(i) = line.find("NVRM: Xid (") {
        let rest = &line[i + "NVRM: Xid (".len()..];
        let (dev, after) = rest.split_once(')')?;
        let num: String = after
            .trim_start_matches(':')
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        let xid: u32 = num.parse().ok()?;
        return ev(
            EventKind::Xid,
            address_in(dev.trim_start_matches("PCI:")),
            Some(xid),
            None,
            FATAL_XIDS.contains(&xid),
        );
    }
    // `AER: enabled with IRQ 24` at boot is no error: only error reports count.
    if line.contains("PCIe Bus Error:")
        || (line.contains("AER:") && line.to_ascii_lowercase().contains("error"))
    {
        let severity = if let Some(i) = line.find("severity=") {
            let s = &line[i + 9..];
            Some(s.split(',').next().unwrap_or(s).trim().to_string())
        } else if line.contains("Uncorrected (Fatal)") {
            Some("Uncorrected (Fatal)".to_string())
        } else if line.contains("Uncorrected (Non-Fatal)") {
            Some("Uncorrected (Non-Fatal)".to_string())
        } else if line.contains("Corrected") {
            Some("Corrected".to_string())
        } else {
            None
        };
        // `AER: ... error received: 0000:3b:00.0` names the device that reported.
        let device = line
            .find("received: ")
            .and_then(|i| address_in(&line[i..]))
            .or_else(|| address_in(line));
        let serious = severity
            .as_deref()
            .is_some_and(|s| s.starts_with("Uncorrected"));
        return ev(EventKind::Aer, device, None, severity, serious);
    }
    let lower = line.to_ascii_lowercase();
    if lower.contains("port module event") {
        let serious = lower.contains("error") || lower.contains("unplugged");
        return ev(EventKind::PortModule, address_in(line), None, None, serious);
    }
    let is_link_line = (line.contains("pciehp") || line.contains("mlx5_core"))
        || (line.contains("pcieport") && lower.contains("link"));
    if is_link_line && lower.ends_with("link down") {
        return ev(EventKind::LinkDown, address_in(line), None, None, false);
    }
    if is_link_line && lower.ends_with("link up") {
        return ev(EventKind::LinkUp, address_in(line), None, None, false);
    }
    None
}

/// Every event in a log's text. `/dev/kmsg` records (`6,123,456,-;text`) and
/// syslog lines both work: the parser looks inside the line. Module lines
/// are kept from a kmsg record of level error or worse than a warning, and
/// from every line of a text without levels (`dmesg --level=err,warn` has
/// only those; a log file does not say).
pub fn parse(source: &str, text: &str) -> KernelLog {
    let mut events = Vec::new();
    let mut module_lines = Vec::new();
    let mut lines = 0;
    for l in text.lines() {
        lines += 1;
        let (level, l) = match l.split_once(";") {
            Some((head, body)) if head.split(',').count() >= 3 && !head.contains(' ') => {
                let prio = head.split(',').next().and_then(|p| p.parse::<u32>().ok());
                (prio.map(|p| p & 7), body)
            }
            _ => (None, l),
        };
        if let Some(e) = parse_line(l) {
            events.push(e);
        }
        if level.is_none_or(|v| v <= 4) && about_modules(l) {
            module_lines.push(l.to_string());
        }
    }
    let extra = module_lines.len().saturating_sub(MAX_MODULE_LINES);
    module_lines.drain(..extra);
    KernelLog {
        source: source.to_string(),
        lines,
        events,
        module_lines,
    }
}

/// The kernel ring buffer of the running system, read without blocking
/// (through the host layer), at most a log's size.
/// `None` when it cannot be opened (not root with dmesg_restrict).
pub fn read_kmsg() -> Option<String> {
    let max = usize::try_from(crate::host::ReadLimit::Log.max_bytes()).unwrap_or(usize::MAX);
    crate::host::read_kmsg(max)
}

/// The one reading of the kernel log (see the module's header): the running
/// system's ring buffer, a snapshot's record of it, or an image root's log
/// file. `None` when there is none to read.
pub fn probe(host: &Host) -> Option<KernelLog> {
    if host.is_live() || host.is_snapshot() {
        // Only the parsed events and module lines are kept (and recorded in
        // a snapshot).
        let read = || read_kmsg().map(|t| parse("/dev/kmsg", &t));
        if let Some(Some(log)) = host.probe("kernel-log", read) {
            return Some(log);
        }
        // Without /dev/kmsg (and in an older snapshot, which recorded this
        // command only): dmesg's errors and warnings. Never chrooted into an
        // image: there dmesg would read the builder's kernel log.
        if let Some(out) = host.query(&["dmesg", "--level=err,warn"]) {
            return Some(parse("dmesg --level=err,warn", &out.stdout));
        }
        if host.is_live() {
            return None;
        }
    }
    for p in ["/var/log/kern.log", "/var/log/messages"] {
        if let Some(text) = host.read_fact(p) {
            return Some(parse(p, &text));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_lines() {
        let e = parse_line("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=2437, name=python3, GPU has fallen off the bus.").unwrap();
        assert_eq!((e.kind, e.xid, e.serious), (EventKind::Xid, Some(79), true));
        assert_eq!(e.device.as_deref(), Some("0000:3b:00.0"));
        let e = parse_line("NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=a.out, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)").unwrap();
        assert!(!e.serious);
        let e = parse_line(
            "kernel: pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0",
        )
        .unwrap();
        assert_eq!(e.device.as_deref(), Some("0000:3b:00.0"));
        assert!(e.serious);
        let e = parse_line("nvidia 0000:3b:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)").unwrap();
        assert_eq!(e.severity.as_deref(), Some("Corrected"));
        assert!(!e.serious);
        let e = parse_line("mlx5_core 0000:4b:00.0 ens1f0np0: Link down").unwrap();
        assert_eq!(e.kind, EventKind::LinkDown);
        assert_eq!(e.device.as_deref(), Some("0000:4b:00.0"));
        let e = parse_line("pcieport 0000:00:01.0: pciehp: Slot(1): Link Up").unwrap();
        assert_eq!(e.kind, EventKind::LinkUp);
        assert!(parse_line("EXT4-fs (sda1): mounted filesystem").is_none());
        assert!(parse_line("pcieport 0000:00:1c.0: AER: enabled with IRQ 24").is_none());
        let log = parse("kmsg", "6,811,5512000,-;nvidia-nvlink: Nvlink Core is being initialized\n3,812,5512345,-;NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.\n SUBSYSTEM=pci\n4,813,5512400,-;nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)\n");
        assert_eq!(log.events.len(), 1);
        assert_eq!(log.events[0].xid, Some(48));
        // Module lines: errors and warnings only where the record has a level.
        assert_eq!(log.module_lines.len(), 1);
        assert!(log.module_lines[0].starts_with("nvidia_peermem: Unknown symbol"));
    }

    #[test]
    fn module_lines_of_a_log_file_keep_the_last_ones() {
        let mut text = String::new();
        for i in 0..150 {
            text.push_str(&format!(
                "Nov 1 00:00:{i:02} n kernel: mlx5_core line {i}\n"
            ));
        }
        text.push_str("Nov 1 00:01:00 n kernel: [ 65.4] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client\nNov 1 00:01:01 n kernel: EXT4-fs mounted\n");
        let log = parse("/var/log/kern.log", &text);
        assert_eq!(log.module_lines.len(), MAX_MODULE_LINES);
        assert!(log.module_lines[MAX_MODULE_LINES - 1].contains("disagrees about version"));
        assert!(log.module_lines[0].ends_with("line 51"));
    }
}
