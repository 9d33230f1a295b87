//! `gds:` at plan: a profile that asks for `mode: p2pdma` on a host whose driver, kernel, CPU
//! architecture or GPU cannot have PCI P2PDMA is refused, naming each requirement (nothing is
//! changed). `any-direct` is never refused here: doctor and verify name what is missing.

use super::{Context, Part};
use crate::error::{Error, Result};
use crate::facts::arch::Arch as CpuArch;
use crate::facts::gpu::Arch;
use crate::facts::nvidia::Flavor;
use crate::facts::Facts;
use crate::profile::gds::GdsWant;

/// What P2PDMA needs that this host lacks (empty: nothing the facts show).
pub fn p2pdma_missing(f: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    if f.nvidia_driver.flavor == Flavor::Proprietary {
        out.push("the open NVIDIA kernel modules (this driver is the proprietary one)".to_string());
    }
    if let Some(m) = f.nvidia_driver.major().filter(|m| *m < 565) {
        out.push(format!("NVIDIA driver 565 or later (this is {m})"));
    }
    if f.gds.p2pdma.kernel_config == Some(false) {
        out.push("a kernel built with CONFIG_PCI_P2PDMA".to_string());
    }
    if f.arch.arch == CpuArch::Aarch64 {
        out.push(
            "an x86_64 host (NVIDIA's P2PDMA support excludes Arm64 and Grace Hopper)".to_string(),
        );
    }
    for g in &f.gpus {
        if g.arch < Arch::Ampere {
            out.push(format!(
                "an Ampere or newer GPU (GPU {} is {})",
                g.pci,
                g.arch.name()
            ));
        }
    }
    out
}

pub fn plan(ctx: &Context) -> Result<Part> {
    if ctx.desired.doc.gds.mode != Some(GdsWant::P2pdma) {
        return Ok(Part::default());
    }
    let missing = p2pdma_missing(ctx.facts);
    if missing.is_empty() {
        return Ok(Part::default());
    }
    Err(Error::Refused(format!(
        "the profile asks for `gds: {{ mode: p2pdma }}`, which this host cannot have: it needs {}. \
         Fix the host, or ask for `mode: any-direct` (nvidia-fs where P2PDMA cannot run); nothing was changed",
        missing.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::OsFamily;

    #[test]
    fn each_missing_requirement_is_named() {
        let mut f = Facts::blank(OsFamily::Debian);
        assert!(p2pdma_missing(&f).is_empty());
        f.nvidia_driver.version = Some("550.54.15".into());
        f.nvidia_driver.flavor = Flavor::Proprietary;
        f.gds.p2pdma.kernel_config = Some(false);
        let m = p2pdma_missing(&f).join("; ");
        assert!(
            m.contains("open NVIDIA kernel modules") && m.contains("565 or later (this is 550)"),
            "{m}"
        );
        assert!(m.contains("CONFIG_PCI_P2PDMA"), "{m}");
    }
}
