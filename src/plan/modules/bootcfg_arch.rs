//! Which platform the IOMMU arguments are for: an arm64 CPU (Grace) takes
//! `iommu.passthrough=`, an x86 CPU `iommu=` plus `intel_iommu=on` on
//! Intel. Pure: a function of the facts; says in warnings what it could not
//! know for sure.

use crate::error::{Error, Result};
use crate::facts::arch::Arch;
use crate::facts::{CpuVendor, Facts};
use crate::profile::IommuMode;
use gdrprov_boot::desired::CpuVendor as Vendor;
use gdrprov_boot::line;

/// The platform for `boot::desired`, and warnings for the plan. `modes`
/// are the IOMMU intents of the default entry and every extra entry.
pub fn platform(facts: &Facts, modes: &[Option<IommuMode>]) -> (Vendor, Vec<String>) {
    let managed = |m: IommuMode| modes.contains(&Some(m));
    let any = managed(IommuMode::Passthrough) || managed(IommuMode::Off) || managed(IommuMode::On);
    let mut warnings = Vec::new();
    match facts.arch.arch {
        Arch::Aarch64 => {
            if managed(IommuMode::Off) {
                warnings.push(
                    "arm64 has no command-line switch that turns the SMMU off: `boot.iommu: off` is `iommu.passthrough=0` here (translation on, passthrough off), as NVIDIA's GPUDirect Storage guide asks for Grace".into(),
                );
            }
            return (Vendor::Arm, warnings);
        }
        Arch::Other if any => warnings.push(format!(
            "the root's architecture ({}) is neither x86_64 nor aarch64: gdrprov knows the IOMMU arguments of those two only, and plans the x86 ones; pass --arch if it is wrong",
            facts.arch.source
        )),
        _ => {}
    }
    let vendor = match facts.cpu_vendor {
        CpuVendor::Intel => Vendor::Intel,
        CpuVendor::Amd => Vendor::Amd,
        CpuVendor::Other => Vendor::Other,
        CpuVendor::Unknown => Vendor::Unknown,
    };
    let unknown_arch = facts.arch.arch == Arch::Unknown;
    match facts.cpu_vendor {
        CpuVendor::Unknown if managed(IommuMode::Passthrough) || managed(IommuMode::On) => {
            warnings.push(format!(
                "the CPU vendor is unknown (no /proc/cpuinfo in the root): adding intel_iommu=on, which AMD hosts ignore; pass --cpu-vendor to be exact{}",
                if unknown_arch {
                    " (and --arch aarch64 for an arm64 image: its arguments differ)"
                } else {
                    ""
                }
            ));
        }
        CpuVendor::Other if any => warnings.push(
            "the CPU vendor is neither GenuineIntel nor AuthenticAMD/HygonGenuine: planning the AMD-style arguments (no intel_iommu=); pass --cpu-vendor intel or amd to be exact".into(),
        ),
        _ => {}
    }
    (vendor, warnings)
}

/// Refuses a boot line that would not fit the kernel's command line buffer
/// (`gdrprov_boot::line::fits`; 2048 bytes on every architecture, arm64's
/// kernels disagreeing: `line::COMMAND_LINE_SIZE`): `args` as
/// gdrprov writes them, `loader` what the boot loader puts before them.
/// `within` names the boot shape and file.
pub fn line_fits(within: &str, args: &[String], loader: &[String]) -> Result<()> {
    let size = line::command_line_size();
    line::fits(within, args, loader, size).map_err(|e| Error::Refused(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::arch::ArchFacts;
    use crate::facts::OsFamily;

    fn facts(arch: Arch, vendor: CpuVendor) -> Facts {
        let mut f = Facts::blank(OsFamily::Debian);
        f.arch = ArchFacts {
            arch,
            source: "test".into(),
            cpu: None,
        };
        f.cpu_vendor = vendor;
        f
    }

    #[test]
    fn arm64_is_arm_whatever_the_vendor_says() {
        let (v, w) = platform(
            &facts(Arch::Aarch64, CpuVendor::Unknown),
            &[Some(IommuMode::Passthrough)],
        );
        assert_eq!(v, Vendor::Arm);
        assert!(w.is_empty(), "{w:?}");
        let (_, w) = platform(
            &facts(Arch::Aarch64, CpuVendor::Unknown),
            &[Some(IommuMode::Off)],
        );
        assert!(w[0].contains("iommu.passthrough=0"), "{w:?}");
    }

    #[test]
    fn unknown_and_other_vendors_are_said() {
        let (v, w) = platform(
            &facts(Arch::X86_64, CpuVendor::Other),
            &[Some(IommuMode::Passthrough)],
        );
        assert_eq!(v, Vendor::Other);
        assert!(w[0].contains("neither GenuineIntel"), "{w:?}");
        let (v, w) = platform(
            &facts(Arch::Unknown, CpuVendor::Unknown),
            &[Some(IommuMode::Passthrough)],
        );
        assert_eq!(v, Vendor::Unknown);
        assert!(w[0].contains("--arch aarch64"), "{w:?}");
        let (_, w) = platform(
            &facts(Arch::X86_64, CpuVendor::Intel),
            &[Some(IommuMode::Off)],
        );
        assert!(w.is_empty());
    }
}
