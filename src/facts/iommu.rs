//! IOMMU state: the kernel command line, IOMMU units in `/sys/class/iommu`,
//! groups in `/sys/kernel/iommu_groups` and their default domain type.

use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IommuState {
    /// No IOMMU translation (disabled, or none present).
    Off,
    /// Identity mapping for host devices (`iommu=pt`).
    Passthrough,
    /// DMA translation (`DMA` / `DMA-FQ` domains).
    Translated,
    Unknown,
}

impl IommuState {
    /// The state in words, for people.
    pub fn words(self) -> &'static str {
        match self {
            IommuState::Off => "off",
            IommuState::Passthrough => "passthrough",
            IommuState::Translated => "translating DMA",
            IommuState::Unknown => "state unknown",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct IommuFacts {
    pub state: IommuState,
    /// How the state was found.
    pub evidence: String,
    /// IOMMU-related arguments on the running command line.
    pub cmdline_args: Vec<String>,
    pub units: Vec<String>,
    pub groups: usize,
    /// Default domain types seen (`identity`, `DMA`, `DMA-FQ`).
    pub domain_types: Vec<String>,
}

fn from_cmdline(args: &[String]) -> Option<IommuState> {
    let has = |a: &str| args.iter().any(|x| x == a);
    if has("iommu=off") || has("intel_iommu=off") || has("amd_iommu=off") {
        Some(IommuState::Off)
    } else if has("iommu=pt") || has("iommu.passthrough=1") {
        Some(IommuState::Passthrough)
    } else if has("intel_iommu=on") || has("amd_iommu=on") || has("iommu.passthrough=0") {
        Some(IommuState::Translated)
    } else {
        None
    }
}

pub fn probe(host: &Host, cmdline: Option<&str>, gpu_pci: &[String]) -> IommuFacts {
    let cmdline_args: Vec<String> = cmdline
        .unwrap_or("")
        .split_whitespace()
        .filter(|a| a.contains("iommu"))
        .map(String::from)
        .collect();
    let units = host.list_dir("/sys/class/iommu");
    let groups = host.list_dir("/sys/kernel/iommu_groups");
    // The GPUs' groups say most; otherwise every group.
    let mut domain_types: Vec<String> = gpu_pci
        .iter()
        .filter_map(|a| read_trim(host, &format!("/sys/bus/pci/devices/{a}/iommu_group/type")))
        .collect();
    if domain_types.is_empty() {
        domain_types = groups
            .iter()
            .take(8)
            .filter_map(|g| read_trim(host, &format!("/sys/kernel/iommu_groups/{g}/type")))
            .collect();
    }
    domain_types.sort();
    domain_types.dedup();
    let sysfs = host.exists("/sys/kernel");
    let (state, evidence) = if !domain_types.is_empty() {
        if domain_types.iter().any(|t| t.starts_with("DMA")) {
            (
                IommuState::Translated,
                format!("IOMMU group domain type {}", domain_types.join(", ")),
            )
        } else if domain_types.iter().all(|t| t == "identity") {
            (
                IommuState::Passthrough,
                "IOMMU group domain type identity".to_string(),
            )
        } else {
            (
                IommuState::Unknown,
                format!("IOMMU group domain type {}", domain_types.join(", ")),
            )
        }
    } else if sysfs && groups.is_empty() && units.is_empty() {
        (
            IommuState::Off,
            "no IOMMU groups or units in /sys".to_string(),
        )
    } else if let Some(s) = from_cmdline(&cmdline_args) {
        (
            s,
            format!("kernel command line: {}", cmdline_args.join(" ")),
        )
    } else {
        (
            IommuState::Unknown,
            "no /sys and no IOMMU argument on the command line".to_string(),
        )
    };
    IommuFacts {
        state,
        evidence,
        cmdline_args,
        units,
        groups: groups.len(),
        domain_types,
    }
}
