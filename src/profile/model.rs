//! The profile format: what a host must look like, as intent (an IOMMU mode, a
//! module that must be absent), never as raw file edits. Unknown keys are
//! rejected so a typo is an error, not a silently ignored setting.
//! Every section's type is here but `requires:`'s (profile/requires.rs, re-exported) and
//! `gds:`'s (profile/gds.rs); each field's doc comment becomes its JSON schema description.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One profile document, as written in YAML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ProfileDoc {
    /// Short name; defaults to the file name without `.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Profiles this one builds on (built-in names or paths relative to this file).
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "super::de::extends"
    )]
    #[schemars(with = "super::de::OneOrMany<String>")]
    pub extends: Vec<String>,
    #[serde(default, skip_serializing_if = "Requires::is_empty")]
    pub requires: Requires,
    #[serde(default, skip_serializing_if = "Boot::is_empty")]
    pub boot: Boot,
    #[serde(default, skip_serializing_if = "Modules::is_empty")]
    pub modules: Modules,
    #[serde(default, skip_serializing_if = "Services::is_empty")]
    pub services: Services,
    #[serde(default, skip_serializing_if = "Network::is_empty")]
    pub network: Network,
    #[serde(default, skip_serializing_if = "Pcie::is_empty")]
    pub pcie: Pcie,
    /// Settings gdrprov owns in `/etc/nccl.conf` (`NCCL_KEY: value`); every
    /// other line of that file is left as it is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub nccl: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileSpec>,
    /// Variables for templates (`{{name}}`), overridable per file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "Verify::is_empty")]
    pub verify: Verify,
    #[serde(default, skip_serializing_if = "super::gds::Gds::is_empty")]
    pub gds: super::gds::Gds,
    /// Sections and files with a `when:`, taken out at load and added back
    /// at planning where their condition holds on the host's facts.
    #[serde(skip)]
    #[schemars(skip)]
    pub conditional: Vec<Conditional>,
}

/// `when:` — the facts a section or a file applies on. Every key given must
/// hold; a fact that is unknown (an image root without /proc) does not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct When {
    /// Version constraint on the NVIDIA driver, e.g. `"< 595"` or `">= 570, < 595"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvidia_driver: Option<String>,
    /// Version constraint on the kernel (the running one, or in an image the newest installed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<WhenArch>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtualization: Option<WhenVirt>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ofed: Option<WhenOfed>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhenArch {
    X86_64,
    Aarch64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WhenVirt {
    /// Bare metal.
    None,
    /// A virtual machine (hypervisor CPU flag, `/sys/hypervisor`, DMI vendor).
    Vm,
    /// A container (`/.dockerenv`, `/run/.containerenv`).
    Container,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum WhenOfed {
    /// MLNX_OFED or DOCA-OFED.
    Mlnx,
    /// The distribution's rdma-core.
    Inbox,
    None,
}

/// One conditional part of a profile: a document holding only that part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conditional {
    pub when: When,
    /// What it is, in the profile's words: `modules`, `files[/etc/x.conf]`.
    pub what: String,
    /// The profile it came from.
    pub source: String,
    pub doc: ProfileDoc,
}

pub use super::requires::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum IommuMode {
    /// `iommu=pt`, plus `intel_iommu=on` on Intel CPUs (RDMA).
    Passthrough,
    /// `iommu=off` (GPUDirect Storage).
    Off,
    /// `intel_iommu=on` / `amd_iommu=on` with translation.
    On,
    /// Leave the IOMMU arguments as they are.
    Unmanaged,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Boot {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iommu: Option<IommuMode>,
    #[serde(default, skip_serializing_if = "Cmdline::is_empty")]
    pub cmdline: Cmdline,
    /// Put this profile's command line in an extra boot entry of this id
    /// instead of the default entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
}

impl Boot {
    pub fn is_empty(&self) -> bool {
        *self == Boot::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Cmdline {
    /// Arguments that must be on the kernel command line (`key=value` or `flag`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<String>,
    /// Arguments that must not be: `key=value`, or `key` for every value of it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
    /// Arguments a host needs to boot (`root`, `ro`, `rw`, `init`, ...) that
    /// `absent` may remove all the same: each must be named here, by key,
    /// or the profile is refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_removing: Vec<String>,
}

impl Cmdline {
    pub fn is_empty(&self) -> bool {
        self.present.is_empty() && self.absent.is_empty() && self.allow_removing.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Modules {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// Loaded now (on the running system) and at every boot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub present: Vec<String>,
    /// Unloaded now and blocked at boot (`blacklist` and `install NAME /bin/false`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub absent: Vec<String>,
    /// Module parameters: `module: "key=value key2=value2"`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
    /// Modules of `absent` that drive the disk of the root filesystem or the
    /// network interface of the default route, blocked all the same: each
    /// must be named here or the profile is refused on such a host.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_blocking: Vec<String>,
    /// Comment out the lines of other files that ask to load an `absent`
    /// module at boot (`/etc/modules-load.d/*.conf`, `/etc/modules`); they
    /// are reported either way. Lines in `/usr/lib` and units are reported only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_load_requests: Option<bool>,
}

impl Modules {
    pub fn is_empty(&self) -> bool {
        *self == Modules::default()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Services {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// systemd units disabled (and stopped on the running system).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled: Vec<String>,
    /// NVIDIA Fabric Manager on NVSwitch boards (HGX): `nvidia-fabricmanager` and
    /// `nvidia-persistenced` enabled (and started on the running system); gdrprov installs
    /// nothing. Unset: left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric_manager: Option<FabricManagerMode>,
}

impl Services {
    pub fn is_empty(&self) -> bool {
        self.disabled.is_empty() && self.fabric_manager.is_none()
    }
}

/// `services.fabric-manager`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FabricManagerMode {
    /// On an NVSwitch board: refused when the Fabric Manager package is missing or not the
    /// driver's version; in an image root (no PCI devices to tell) enabled all the same.
    Required,
    /// On an NVSwitch board seen here: enabled when installed at the driver's version, else a
    /// warning and nothing planned for it.
    Auto,
    /// Left alone.
    Off,
}

impl FabricManagerMode {
    pub fn word(self) -> &'static str {
        match self {
            FabricManagerMode::Required => "required",
            FabricManagerMode::Auto => "auto",
            FabricManagerMode::Off => "off",
        }
    }
}

/// `network:` — settings of the network interfaces behind the RDMA devices.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Network {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<MtuSpec>,
    /// What lossless Ethernet the RoCE ports should have (doctor and verify name a port
    /// that falls short; gdrprov sets none of it). Unset: a port with neither PFC nor ECN
    /// is a warning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossless: Option<Lossless>,
    /// The priority (0..=7) PFC must be on, with `lossless: pfc` or `pfc-and-ecn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfc_priority: Option<u8>,
}

/// `network.lossless:` — the wish the RoCE ports' PFC and ECN are held to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Lossless {
    /// PFC on (on `pfc-priority` where given).
    Pfc,
    /// ECN for RoCE (notification and reaction point) on.
    Ecn,
    /// Both.
    PfcAndEcn,
    /// Either: a port with neither fails.
    Any,
    /// Not checked.
    Off,
}

impl Lossless {
    pub fn word(self) -> &'static str {
        match self {
            Lossless::Pfc => "pfc",
            Lossless::Ecn => "ecn",
            Lossless::PfcAndEcn => "pfc-and-ecn",
            Lossless::Any => "any",
            Lossless::Off => "off",
        }
    }
}

impl Network {
    pub fn is_empty(&self) -> bool {
        *self == Network::default()
    }
}

/// The MTU of some interfaces: persisted in a systemd `.link` file and set
/// on the running system.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MtuSpec {
    /// Which interfaces: `{ rdma: "erdma_*" }` (the netdevs of these RDMA
    /// devices), `{ driver: "virtio_net" }`, `{ name: "eth1" }`, or a list.
    #[serde(deserialize_with = "super::de::net_matches")]
    #[schemars(with = "super::de::OneOrMany<NetMatch>")]
    pub devices: Vec<NetMatch>,
    /// Bytes (68..=9216), or `auto`: 8500 where the interface allows jumbo
    /// frames, else 1400 (the eRDMA rule for NCCL's LL128 protocol).
    pub value: MtuValue,
}

/// One way of naming interfaces (the network facts resolve it).
pub use crate::facts::net::NetMatch;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum MtuValue {
    Bytes(u32),
    #[serde(with = "auto_str")]
    #[schemars(with = "AutoWord")]
    Auto,
}

impl std::fmt::Display for MtuValue {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            MtuValue::Bytes(n) => write!(f, "{n}"),
            MtuValue::Auto => f.write_str("auto"),
        }
    }
}

#[derive(JsonSchema)]
#[allow(dead_code)]
enum AutoWord {
    #[serde(rename = "auto")]
    Auto,
}

mod auto_str {
    pub fn serialize<S: serde::Serializer>(s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("auto")
    }
}

/// `pcie:` — PCIe settings between GPUs and RDMA NICs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Pcie {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acs: Option<AcsMode>,
    /// MaxReadReq, in bytes (128, 256, 512, 1024, 2048 or 4096), written at every boot to
    /// the device control register of each RDMA NIC by `gdrprov-pcie.service`, which
    /// reads it back; a value the device does not keep fails `verify` (`pcie-path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_read_request: Option<u32>,
    /// `warn` (the default of every built-in): `verify` warns when relaxed ordering is
    /// off on an RDMA NIC; `off`: not checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaxed_ordering: Option<RelaxedOrdering>,
    /// The smallest BAR1 (MiB) a GPU may have; without it, BAR1 must cover the GPU's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bar1_min_mib: Option<u64>,
}

/// `pcie.relaxed-ordering`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RelaxedOrdering {
    /// Warn when an RDMA NIC has relaxed ordering off.
    Warn,
    /// Not checked.
    Off,
}

impl Pcie {
    pub fn is_empty(&self) -> bool {
        *self == Pcie::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum AcsMode {
    /// On bare metal, clear ACS control at every boot on the bridges between
    /// a GPU and an RDMA NIC (never in a VM).
    Disable,
    /// Leave ACS as it is.
    Unmanaged,
}

/// A file gdrprov owns: inline `content` or a handlebars `template`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FileSpec {
    /// Only on hosts whose facts match (see `when:` in docs/profiles.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<When>,
    /// Absolute path inside the root.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A built-in template name (see `templates/`) or a path relative to the profile file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Octal mode for a new file, e.g. "0644".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Variables for this file's template, over the profile's `vars`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, serde_json::Value>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Verify {
    /// Loopback bandwidth must reach this fraction of the port's line rate
    /// (default 0.90 for GPU memory, 0.95 for host memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_line_rate_fraction: Option<f64>,
    /// Run the RDMA loopback test in `verify` (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loopback: Option<bool>,
    /// Install `gdrprov-verify.service`, which runs `gdrprov verify` at every boot and writes
    /// `/run/gdrprov/ready` or `/run/gdrprov/failed` (after `apply --trial`: then `gdrprov commit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_boot: Option<bool>,
}

impl Verify {
    pub fn is_empty(&self) -> bool {
        *self == Verify::default()
    }
}

/// A profile ready to use: its own document merged over everything it extends.
#[derive(Debug, Clone)]
pub struct LoadedProfile {
    pub name: String,
    /// Where it came from, as shown in messages: `built-in rdma-dmabuf` or a path.
    pub source: String,
    /// A built-in profile (not a file), as `state.json` records it.
    pub builtin: bool,
    pub doc: ProfileDoc,
}
