//! `requires:` — the version and flavour requirements a profile checks before anything is
//! applied (kernel, NVIDIA driver, OFED, GPU, tools), out of model.rs so that the schema's file
//! stays under the size limit; model.rs re-exports it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Version and flavour requirements checked before anything is applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Requires {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<VersionReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_driver: Option<DriverReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda: Option<VersionReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ofed: Option<OfedReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub perftest: Option<VersionReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nccl: Option<VersionReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuReq>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub erdma: Option<VersionReq>,
    /// AWS EFA: `">= 0"` asks for an EFA device or the efa driver; a
    /// version is the efa driver's (`/sys/module/efa/version`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa: Option<VersionReq>,
    /// gdrcopy's kernel module `gdrdrv` (UCX and NVSHMEM use it): `">= 0"`
    /// asks for it loaded or installed for the kernel; a version is the
    /// module's (`/sys/module/gdrdrv/version`, else `modinfo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdrcopy: Option<VersionReq>,
}

impl Requires {
    pub fn is_empty(&self) -> bool {
        *self == Requires::default()
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// The profile is not applied unless `--force`.
    #[default]
    Error,
    /// Reported, never blocking.
    Warn,
}

/// A version constraint such as `">= 5.12"`, written as a string or as a map
/// with a severity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct VersionReqFull {
    /// Comparison and version: `>=`, `>`, `<=`, `<`, `=`, `!=`; several joined by `,`.
    #[serde(deserialize_with = "super::de::constraint")]
    pub version: String,
    #[serde(default)]
    pub severity: Severity,
    /// Why the profile needs it, shown when it fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum VersionReq {
    Short(String),
    Full(VersionReqFull),
}

impl VersionReq {
    pub fn version(&self) -> &str {
        match self {
            VersionReq::Short(s) => s,
            VersionReq::Full(f) => &f.version,
        }
    }
    pub fn severity(&self) -> Severity {
        match self {
            VersionReq::Short(_) => Severity::Error,
            VersionReq::Full(f) => f.severity,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum DriverFlavor {
    /// NVIDIA open GPU kernel modules (`Dual MIT/GPL`), needed for dma-buf.
    Open,
    Proprietary,
    Any,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct DriverReq {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::de::opt_constraint"
    )]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flavor: Option<DriverFlavor>,
    #[serde(default)]
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OfedKind {
    /// MLNX_OFED or DOCA-OFED (`ofed_info -s` answers).
    Mlnx,
    /// The distribution's rdma-core.
    Inbox,
    Any,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OfedReq {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "super::de::opt_constraint"
    )]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<OfedKind>,
    #[serde(default)]
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GpuReq {
    /// Oldest GPU architecture, e.g. `turing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_arch: Option<String>,
    #[serde(default)]
    pub severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
