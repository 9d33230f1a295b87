//! `gds:` at plan: a profile that asks for `mode: p2pdma` on a host whose driver, kernel, CPU
//! architecture or GPU cannot have PCI P2PDMA is refused, naming each requirement (nothing is
//! changed). `any-direct` is never refused here: doctor and verify name what is missing.

use super::{Context, Part};
use crate::error::{Error, Result};
use crate::facts::arch::Arch as CpuArch;
use crate::facts::gds::GdsMode;
use crate::facts::gpu::Arch;
use crate::facts::nvidia::Flavor;
use crate::facts::Facts;
use crate::profile::gds::GdsWant;

/// What P2PDMA needs that this host lacks (empty: nothing the facts show).
pub fn p2pdma_missing(f: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    if f.nvidia_driver.version.is_none() {
        // No driver: nothing to set its registry keys for (a VM or an image without it).
        out.push("the NVIDIA driver (none is installed)".to_string());
    }
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

/// The mode gdrprov sets up for what the profile wants: `any-direct` is P2PDMA where the
/// host can have it, else nvidia-fs.
pub fn effective(f: &Facts, want: GdsWant) -> GdsMode {
    match want {
        GdsWant::P2pdma => GdsMode::P2pdma,
        GdsWant::Nvfs => GdsMode::Nvfs,
        GdsWant::AnyDirect if p2pdma_missing(f).is_empty() => GdsMode::P2pdma,
        GdsWant::AnyDirect => GdsMode::Nvfs,
    }
}

/// The `gds:` part: refused where `mode: p2pdma` cannot be had; else cufile.json
/// ([`super::gds_cufile`]) and the driver's keys or nvidia-fs ([`super::gds_driver`]).
pub fn plan(ctx: &Context) -> Result<Part> {
    let Some(want) = ctx.desired.doc.gds.mode else {
        return super::gds_cufile::plan(ctx, None);
    };
    refuse_p2pdma(ctx, want)?;
    let mode = effective(ctx.facts, want);
    let mut part = super::gds_cufile::plan(ctx, Some(mode))?;
    part.absorb(super::gds_driver::plan(ctx, want, mode)?);
    Ok(part)
}

fn refuse_p2pdma(ctx: &Context, want: GdsWant) -> Result<()> {
    if want != GdsWant::P2pdma {
        return Ok(());
    }
    let missing = p2pdma_missing(ctx.facts);
    if missing.is_empty() {
        return Ok(());
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
        assert!(p2pdma_missing(&f)
            .join("; ")
            .contains("the NVIDIA driver (none"));
        f.nvidia_driver.version = Some("580.95.05".into());
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
