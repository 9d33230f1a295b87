//! PCI configuration space, parsed by walking its capability lists: the one parser
//! of config bytes (sysfs `config`, 256 bytes unprivileged or without extended space,
//! 4096 as root). The PCI Express capability (0x10: device capabilities and control,
//! and their second versions), and the extended capabilities ATS (0x000F),
//! Resizable BAR (0x0015) and ACS (0x000D). Pure: bytes in, facts out; it never
//! panics on any input (`fuzz/fuzz_targets/pci_config.rs`).

use serde::Serialize;

/// The PCI Express capability ID.
pub const CAP_PCIE: u8 = 0x10;
/// Extended capability IDs.
pub const EXT_ACS: u16 = 0x000d;
pub const EXT_ATS: u16 = 0x000f;
pub const EXT_REBAR: u16 = 0x0015;

/// Device Control's fields, as offsets and masks (the boot unit writes MaxReadReq).
pub const DEVCTL_OFFSET: usize = 8;
pub const DEVCTL_RELAXED_ORDERING: u16 = 1 << 4;
pub const DEVCTL_NO_SNOOP: u16 = 1 << 11;
pub const DEVCTL_MRRS_MASK: u16 = 0x7000;

/// The PCI Express capability's device fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PcieCap {
    /// Where the capability starts in config space.
    pub offset: u16,
    /// Device/port type (`endpoint`, `root-port`, `upstream-port`, `downstream-port`, ...).
    pub port_type: &'static str,
    /// MaxPayload the device supports, bytes (Device Capabilities).
    pub max_payload_supported: u32,
    /// MaxPayload set, bytes (Device Control).
    pub max_payload: u32,
    /// MaxReadReq set, bytes (Device Control).
    pub max_read_request: u32,
    /// Device Control, the raw register.
    pub devctl: u16,
    pub relaxed_ordering: bool,
    pub no_snoop: bool,
    /// 10-bit tag requester supported (Device Capabilities 2); `None` without it.
    pub ten_bit_tags_supported: Option<bool>,
    /// 10-bit tag requester enabled (Device Control 2); `None` without it.
    pub ten_bit_tags: Option<bool>,
}

/// Address Translation Services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ats {
    pub offset: u16,
    pub enabled: bool,
    /// Smallest translation unit, as encoded (4096 << stu bytes).
    pub stu: u8,
}

/// One resizable BAR.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResizableBar {
    /// The BAR it resizes (0..=5).
    pub bar: u8,
    /// Sizes the device supports, MiB, smallest first.
    pub supported_mib: Vec<u64>,
    /// The size set now, MiB.
    pub current_mib: u64,
}

/// What gdrprov reads of one device's config space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigFacts {
    /// How many bytes were read (256: no extended capabilities seen).
    pub bytes: usize,
    pub pcie: Option<PcieCap>,
    pub ats: Option<Ats>,
    pub resizable_bars: Vec<ResizableBar>,
    /// ACS control register; `None` without the capability.
    pub acs_control: Option<u16>,
}

fn u16_at(c: &[u8], o: usize) -> Option<u16> {
    let b = c.get(o..o.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

fn u32_at(c: &[u8], o: usize) -> Option<u32> {
    let b = c.get(o..o.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// The standard capability list: (ID, offset), at most 48 entries, a loop stops it.
pub fn capabilities(c: &[u8]) -> Vec<(u8, usize)> {
    let mut out = Vec::new();
    let status = u16_at(c, 6).unwrap_or(0);
    if status & 0x10 == 0 {
        return out;
    }
    let mut p = c.get(0x34).map_or(0, |b| (b & 0xfc) as usize);
    while p >= 0x40 && out.len() < 48 {
        let (Some(&id), Some(&next)) = (c.get(p), c.get(p + 1)) else {
            break;
        };
        if out.iter().any(|(_, o)| *o == p) {
            break;
        }
        out.push((id, p));
        p = (next & 0xfc) as usize;
    }
    out
}

/// The extended capability list from 0x100: (ID, offset). A hypervisor may hide a
/// capability by zeroing its ID and keeping the link (seen on the lent H200), so an
/// ID of 0 is skipped, not the end.
pub fn extended_capabilities(c: &[u8]) -> Vec<(u16, usize)> {
    let mut out = Vec::new();
    let mut off = 0x100usize;
    let mut seen = 0;
    while seen < 512 {
        seen += 1;
        let Some(h) = u32_at(c, off) else { break };
        if h == 0 || h == 0xffff_ffff {
            break;
        }
        if h & 0xffff != 0 {
            out.push(((h & 0xffff) as u16, off));
        }
        let next = ((h >> 20) & 0xffc) as usize;
        if next < 0x100 || out.iter().any(|(_, o)| *o == next) || next == off {
            break;
        }
        off = next;
    }
    out
}

fn port_type(t: u16) -> &'static str {
    match t {
        0 => "endpoint",
        1 => "legacy-endpoint",
        4 => "root-port",
        5 => "upstream-port",
        6 => "downstream-port",
        7 => "pcie-to-pci-bridge",
        8 => "pci-to-pcie-bridge",
        9 => "integrated-endpoint",
        10 => "event-collector",
        _ => "other",
    }
}

/// An encoded size field (`128 << n` bytes).
pub fn size_code(n: u16) -> u32 {
    128u32 << (n & 7)
}

/// The encoding of a MaxReadReq/MaxPayload size (128..=4096 bytes, a power of two).
pub fn size_encoding(bytes: u32) -> Option<u16> {
    (0..6u16).find(|n| size_code(*n) == bytes)
}

fn pcie_cap(c: &[u8], o: usize) -> Option<PcieCap> {
    let caps = u16_at(c, o + 2)?;
    let devcap = u32_at(c, o + 4)?;
    let devctl = u16_at(c, o + DEVCTL_OFFSET)?;
    // Device Capabilities 2 and Device Control 2 exist from version 2 of the capability.
    let v2 = caps & 0xf >= 2;
    let devcap2 = if v2 { u32_at(c, o + 0x24) } else { None };
    let devctl2 = if v2 { u16_at(c, o + 0x28) } else { None };
    Some(PcieCap {
        offset: o as u16,
        port_type: port_type((caps >> 4) & 0xf),
        max_payload_supported: size_code((devcap & 7) as u16),
        max_payload: size_code((devctl >> 5) & 7),
        max_read_request: size_code((devctl >> 12) & 7),
        devctl,
        relaxed_ordering: devctl & DEVCTL_RELAXED_ORDERING != 0,
        no_snoop: devctl & DEVCTL_NO_SNOOP != 0,
        ten_bit_tags_supported: devcap2.map(|d| d & (1 << 17) != 0),
        ten_bit_tags: devctl2.map(|d| d & (1 << 12) != 0),
    })
}

fn resizable_bars(c: &[u8], o: usize) -> Vec<ResizableBar> {
    let mut out = Vec::new();
    let Some(ctl0) = u32_at(c, o + 8) else {
        return out;
    };
    let n = ((ctl0 >> 5) & 7).clamp(1, 6) as usize;
    for i in 0..n {
        let (Some(cap), Some(ctl)) = (u32_at(c, o + 4 + 8 * i), u32_at(c, o + 8 + 8 * i)) else {
            break;
        };
        // Capability bits 4..=31: 1 MiB << (bit - 4); control bits 16..=31: 256 TiB and up.
        let mut supported: Vec<u64> = (4..32)
            .filter(|b| cap & (1 << b) != 0)
            .map(|b| 1u64 << (b - 4))
            .collect();
        supported.extend(
            (16..32)
                .filter(|b| ctl & (1 << b) != 0)
                .map(|b| 1u64 << (b - 16 + 28)),
        );
        out.push(ResizableBar {
            bar: (ctl & 7) as u8,
            supported_mib: supported,
            current_mib: 1u64 << ((ctl >> 8) & 0x3f).min(43),
        });
    }
    out
}

/// Parses one device's config space.
pub fn parse(c: &[u8]) -> ConfigFacts {
    let mut f = ConfigFacts {
        bytes: c.len(),
        ..ConfigFacts::default()
    };
    if let Some((_, o)) = capabilities(c).into_iter().find(|(id, _)| *id == CAP_PCIE) {
        f.pcie = pcie_cap(c, o);
    }
    for (id, o) in extended_capabilities(c) {
        match id {
            EXT_ATS if f.ats.is_none() => {
                f.ats = u16_at(c, o + 6).map(|ctl| Ats {
                    offset: o as u16,
                    enabled: ctl & 0x8000 != 0,
                    stu: (ctl & 0x1f) as u8,
                });
            }
            EXT_REBAR if f.resizable_bars.is_empty() => f.resizable_bars = resizable_bars(c, o),
            EXT_ACS if f.acs_control.is_none() => f.acs_control = u16_at(c, o + 6),
            _ => {}
        }
    }
    f
}

#[cfg(test)]
pub mod testkit {
    //! Config spaces built field by field, for the tests of the facts, checks and units.

    /// 4096 bytes with a PCIe capability (version 2) at 0x60 of `port_type`, MaxPayload
    /// supported/set and MaxReadReq as encodings, relaxed ordering as given.
    pub fn config(port_type: u16, mps_cap: u16, mps: u16, mrrs: u16, ro: bool) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        c[6] = 0x10;
        c[0x34] = 0x60;
        c[0x60] = super::CAP_PCIE;
        c[0x62..0x64].copy_from_slice(&(2 | (port_type << 4)).to_le_bytes());
        c[0x64..0x68].copy_from_slice(&u32::from(mps_cap).to_le_bytes());
        let ctl = (mps << 5)
            | (mrrs << 12)
            | if ro {
                super::DEVCTL_RELAXED_ORDERING
            } else {
                0
            };
        c[0x68..0x6a].copy_from_slice(&ctl.to_le_bytes());
        c
    }

    /// Appends extended capability `id` at `at` with `body` after its header, linked
    /// from the last one in the list (or placed at 0x100).
    pub fn push_ext(c: &mut [u8], at: usize, id: u16, body: &[u8]) {
        let list = super::extended_capabilities(c);
        if let Some((_, last)) = list.last() {
            let h = u32::from_le_bytes([c[*last], c[last + 1], c[last + 2], c[last + 3]]);
            let h = (h & 0x000f_ffff) | ((at as u32) << 20);
            c[*last..last + 4].copy_from_slice(&h.to_le_bytes());
        }
        c[at..at + 4].copy_from_slice(&(u32::from(id) | (1 << 16)).to_le_bytes());
        c[at + 4..at + 4 + body.len()].copy_from_slice(body);
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;

    #[test]
    fn device_control_fields_are_read() {
        // The lent H200: MaxPayload 256 of 256, MaxReadReq 4096, relaxed ordering on.
        let f = parse(&config(0, 1, 1, 5, true));
        let p = f.pcie.unwrap();
        assert_eq!(
            (p.max_payload_supported, p.max_payload, p.max_read_request),
            (256, 256, 4096)
        );
        assert!(p.relaxed_ordering && !p.no_snoop);
        assert_eq!(p.port_type, "endpoint");
        assert_eq!(p.ten_bit_tags, Some(false));
        assert_eq!(size_encoding(512), Some(2));
        assert_eq!(size_encoding(300), None);
    }

    #[test]
    fn extended_capabilities_past_a_hidden_one() {
        let mut c = config(6, 2, 0, 2, false);
        // A capability whose ID the hypervisor zeroed, still linking on.
        c[0x100..0x104].copy_from_slice(&((1u32 << 16) | (0x148 << 20)).to_le_bytes());
        push_ext(&mut c, 0x148, EXT_ACS, &[0x1f, 0, 0x1d, 0]);
        push_ext(&mut c, 0x160, EXT_ATS, &[0x20, 0, 0x00, 0x80]);
        // Resizable BAR: BAR 2, 64 MiB..256 GiB supported, 256 GiB set.
        let cap: u32 = ((1u32 << 13) - 1) << 10;
        let ctl: u32 = 2 | (1 << 5) | (18 << 8);
        let mut body = cap.to_le_bytes().to_vec();
        body.extend(ctl.to_le_bytes());
        push_ext(&mut c, 0x200, EXT_REBAR, &body);
        let f = parse(&c);
        assert_eq!(f.acs_control, Some(0x1d));
        assert_eq!(f.ats.as_ref().map(|a| a.enabled), Some(true));
        let r = &f.resizable_bars[0];
        assert_eq!((r.bar, r.current_mib), (2, 262_144));
        assert_eq!(r.supported_mib.first(), Some(&64));
        assert_eq!(r.supported_mib.last(), Some(&262_144));
        assert_eq!(parse(&c[..256]).ats, None);
    }

    #[test]
    fn loops_and_short_input_end_the_walk() {
        let mut c = config(0, 0, 0, 0, false);
        c[0x61] = 0x60; // the capability points to itself
        assert_eq!(capabilities(&c).len(), 1);
        c[0x100..0x104].copy_from_slice(&(0x000fu32 | (0x100 << 20)).to_le_bytes());
        assert_eq!(extended_capabilities(&c).len(), 1);
        for n in [0, 1, 7, 0x35, 0x61, 0x69, 0x101] {
            let _ = parse(&c[..n]);
        }
    }
}

#[cfg(test)]
mod real {
    /// The lent H200's config space, as `dd` read it there (issue 46).
    const H200: &[u8] = include_bytes!("../../fuzz/seeds/pci_config/h200-gpu");

    #[test]
    fn the_lent_h200_reads_as_measured() {
        let f = super::parse(H200);
        let p = f.pcie.unwrap();
        assert_eq!(f.bytes, 4096);
        assert_eq!(
            (p.max_payload_supported, p.max_payload, p.max_read_request),
            (256, 256, 4096)
        );
        assert!(p.relaxed_ordering && !p.no_snoop);
        assert_eq!(
            (p.ten_bit_tags_supported, p.ten_bit_tags),
            (Some(true), Some(true))
        );
        // The hypervisor hides ATS and resizable BAR; AER and others stay listed.
        assert!(f.ats.is_none() && f.resizable_bars.is_empty());
        assert!(super::extended_capabilities(H200).len() >= 4);
    }
}
