//! `gds:` — GPUDirect Storage: which mode is wanted and the mounts to check.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The GDS mode a profile asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GdsWant {
    /// NVMe reads straight into GPU memory through the kernel's PCI P2PDMA (CUDA 12.8+, open driver 565+).
    P2pdma,
    /// Through the nvidia-fs kernel module.
    Nvfs,
    /// P2PDMA where the host can have it, else nvidia-fs; neither possible: a warning, not a refusal.
    AnyDirect,
}

impl GdsWant {
    pub fn name(self) -> &'static str {
        match self {
            GdsWant::P2pdma => "p2pdma",
            GdsWant::Nvfs => "nvfs",
            GdsWant::AnyDirect => "any-direct",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Gds {
    /// The mode wanted (a later profile's replaces an earlier one's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<GdsWant>,
    /// Mount points whose file system, options, device and udev record are checked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mounts: Vec<String>,
}

impl Gds {
    pub fn is_empty(&self) -> bool {
        self.mode.is_none() && self.mounts.is_empty()
    }

    /// A later profile's mode wins; mounts are the union, in order.
    pub fn merge(&mut self, later: &Gds) {
        self.mode = later.mode.or(self.mode);
        for m in &later.mounts {
            if !self.mounts.contains(m) {
                self.mounts.push(m.clone());
            }
        }
    }
}
