//! PCIe link state of every GPU, RDMA NIC and the bridges above them, from
//! sysfs (`current_link_speed/width`, `max_link_speed/width`). A card that
//! trained below its maximum (a Gen5 x16 GPU at x8, or at 16 GT/s) is the
//! commonest cause of half the expected GPUDirect bandwidth.
//!
//! Each device's own attributes describe the link above it (endpoints,
//! upstream ports) or below it (root and downstream ports); both ends of a
//! link are listed, so a degraded link shows at the device and its bridge.

use super::gpu::Gpu;
use super::pci;
use super::rdma::RdmaDevice;
use super::util::read_trim;
use crate::host::Host;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Gpu,
    Nic,
    Bridge,
}

/// How the link compares with the device's maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LinkState {
    /// At its maximum speed and width.
    Full,
    /// Narrower than its maximum: a slot, riser or seating problem.
    NarrowWidth,
    /// Slower than its maximum (and at full width).
    LowSpeed,
    /// Slower and narrower.
    LowSpeedAndWidth,
    /// A value is missing, `Unknown`, or zero (a virtual function, an
    /// emulated bridge, a link that is down): nothing to judge.
    Unknown,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcieLink {
    pub address: String,
    pub role: Role,
    /// The GPUs and NICs below (or at) this device, for bridges.
    pub serves: Vec<String>,
    /// As sysfs writes it: `32.0 GT/s PCIe`, `Unknown`.
    pub current_speed: Option<String>,
    pub max_speed: Option<String>,
    pub current_width: Option<u32>,
    pub max_width: Option<u32>,
    pub state: LinkState,
}

/// `32.0 GT/s PCIe` (or `8 GT/s`, `2.5 GT/s`) in GT/s; `Unknown` gives None.
pub fn parse_speed(s: &str) -> Option<f64> {
    let n = s.split_whitespace().next()?;
    let v: f64 = n.parse().ok()?;
    (v > 0.0 && s.contains("GT/s")).then_some(v)
}

/// The PCIe generation of a per-lane rate.
pub fn generation(gts: f64) -> Option<u8> {
    [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(r, _)| (gts - r).abs() < 0.01)
    .map(|(_, g)| *g)
}

/// Usable one-direction bandwidth of a link in GB/s, after 8b/10b (Gen1/2)
/// or 128b/130b (Gen3+) encoding; before TLP overheads.
pub fn raw_gbytes(gts: f64, width: u32) -> f64 {
    let enc = if gts <= 5.0 { 0.8 } else { 128.0 / 130.0 };
    gts * enc * f64::from(width) / 8.0
}

impl PcieLink {
    pub fn current_gts(&self) -> Option<f64> {
        self.current_speed.as_deref().and_then(parse_speed)
    }
    pub fn max_gts(&self) -> Option<f64> {
        self.max_speed.as_deref().and_then(parse_speed)
    }
    pub fn degraded(&self) -> bool {
        !matches!(self.state, LinkState::Full | LinkState::Unknown)
    }
    /// `Gen5 x16` style; `?` for what is unknown.
    pub fn describe(gts: Option<f64>, width: Option<u32>) -> String {
        let g = gts
            .and_then(generation)
            .map(|g| format!("Gen{g}"))
            .or_else(|| gts.map(|v| format!("{v} GT/s")))
            .unwrap_or_else(|| "?".into());
        let w = width
            .filter(|w| *w > 0)
            .map(|w| format!("x{w}"))
            .unwrap_or_else(|| "x?".into());
        format!("{g} {w}")
    }
    pub fn current(&self) -> String {
        Self::describe(self.current_gts(), self.current_width)
    }
    pub fn maximum(&self) -> String {
        Self::describe(self.max_gts(), self.max_width)
    }
}

pub fn classify(
    cur_gts: Option<f64>,
    max_gts: Option<f64>,
    cur_w: Option<u32>,
    max_w: Option<u32>,
) -> LinkState {
    let (Some(cs), Some(ms), Some(cw), Some(mw)) = (cur_gts, max_gts, cur_w, max_w) else {
        return LinkState::Unknown;
    };
    if cw == 0 || mw == 0 {
        return LinkState::Unknown;
    }
    let slow = cs + 0.01 < ms;
    let narrow = cw < mw;
    match (slow, narrow) {
        (false, false) => LinkState::Full,
        (false, true) => LinkState::NarrowWidth,
        (true, false) => LinkState::LowSpeed,
        (true, true) => LinkState::LowSpeedAndWidth,
    }
}

fn read_link(host: &Host, address: &str, role: Role) -> Option<PcieLink> {
    let a = |n: &str| read_trim(host, &format!("/sys/bus/pci/devices/{address}/{n}"));
    // A virtual function has no link of its own; its attributes (when
    // present) repeat or garble the physical function's.
    if host.exists(&format!("/sys/bus/pci/devices/{address}/physfn")) {
        return None;
    }
    let current_speed = a("current_link_speed");
    let max_speed = a("max_link_speed");
    let width = |n: &str| a(n).and_then(|v| v.parse::<u32>().ok());
    let (current_width, max_width) = (width("current_link_width"), width("max_link_width"));
    if current_speed.is_none() && max_speed.is_none() && current_width.is_none() {
        return None;
    }
    let state = classify(
        current_speed.as_deref().and_then(parse_speed),
        max_speed.as_deref().and_then(parse_speed),
        current_width,
        max_width,
    );
    Some(PcieLink {
        address: address.to_string(),
        role,
        serves: Vec::new(),
        current_speed,
        max_speed,
        current_width,
        max_width,
        state,
    })
}

/// The links of every GPU and PCI RDMA NIC and of the bridges on their paths
/// (each bridge once, with the devices it serves), GPUs and NICs first.
pub fn probe(host: &Host, gpus: &[Gpu], nics: &[RdmaDevice]) -> Vec<PcieLink> {
    let mut ends: Vec<(String, String, Role)> = gpus
        .iter()
        .map(|g| (g.pci.clone(), g.sysfs_path.clone(), Role::Gpu))
        .collect();
    for n in nics {
        if let (Some(a), Some(p)) = (&n.pci, &n.sysfs_path) {
            if !ends.iter().any(|(x, _, _)| x == a) {
                ends.push((a.clone(), p.clone(), Role::Nic));
            }
        }
    }
    let mut out: Vec<PcieLink> = Vec::new();
    for (addr, _, role) in &ends {
        if let Some(l) = read_link(host, addr, *role) {
            out.push(l);
        }
    }
    let mut bridges: Vec<PcieLink> = Vec::new();
    for (addr, path, _) in &ends {
        let chain = pci::chain(path);
        for b in chain.iter().take(chain.len().saturating_sub(1)) {
            if let Some(l) = bridges.iter_mut().find(|l| &l.address == b) {
                if !l.serves.contains(addr) {
                    l.serves.push(addr.clone());
                }
                continue;
            }
            if let Some(mut l) = read_link(host, b, Role::Bridge) {
                l.serves.push(addr.clone());
                bridges.push(l);
            }
        }
    }
    bridges.sort_by(|a, b| a.address.cmp(&b.address));
    out.extend(bridges);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_and_states() {
        assert_eq!(parse_speed("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(parse_speed("2.5 GT/s"), Some(2.5));
        assert_eq!(parse_speed("Unknown"), None);
        assert_eq!(parse_speed("Unknown speed"), None);
        assert_eq!(generation(16.0), Some(4));
        assert_eq!(
            classify(Some(32.0), Some(32.0), Some(8), Some(16)),
            LinkState::NarrowWidth
        );
        assert_eq!(
            classify(Some(16.0), Some(32.0), Some(16), Some(16)),
            LinkState::LowSpeed
        );
        assert_eq!(
            classify(Some(32.0), Some(32.0), Some(16), Some(16)),
            LinkState::Full
        );
        assert_eq!(
            classify(None, Some(32.0), Some(16), Some(16)),
            LinkState::Unknown
        );
        assert_eq!(
            classify(Some(32.0), Some(32.0), Some(0), Some(16)),
            LinkState::Unknown
        );
        // Gen5 x16: 63 GB/s raw each way.
        assert!((raw_gbytes(32.0, 16) - 63.0).abs() < 0.1);
        assert!((raw_gbytes(16.0, 16) - 31.5).abs() < 0.1);
    }
}
