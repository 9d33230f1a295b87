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
    out.extend(cuda_says_no(f));
    out
}

/// GPUs whose CUDA driver answers cuFile's P2PDMA question with "not supported" while the
/// registry keys P2PDMA needs are already in effect: nothing gdrprov sets would change that
/// answer. (Without the keys, "not supported" is what a fixable host answers too.)
fn cuda_says_no(f: &Facts) -> Vec<String> {
    use crate::facts::gds::P2PDMA_REGISTRY;
    let p = &f.nvidia_params;
    if p.source.is_none() || !P2PDMA_REGISTRY.iter().all(|k| p.registry(k) == Some("1")) {
        return Vec::new();
    }
    f.gpus
        .iter()
        .filter(|g| f.cuda_device(g).and_then(|c| c.pci_p2pdma) == Some(false))
        .map(|g| {
            format!(
                "a GPU the CUDA driver can serve PCI P2PDMA for (GPU {} answers not supported with {} already in NVreg_RegistryDwords)",
                g.pci,
                P2PDMA_REGISTRY.iter().map(|k| format!("{k}=1")).collect::<Vec<_>>().join(";")
            )
        })
        .collect()
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

    #[test]
    fn a_gpu_the_cuda_driver_refuses_is_named_once_the_registry_keys_are_set() {
        use crate::facts::cuda::{CudaDevice, CudaRuntime};
        use crate::facts::gpu::Gpu;
        let mut f = Facts::blank(OsFamily::Debian);
        f.gpus.push(Gpu {
            pci: "0000:00:06.0".into(),
            device_id: "0x2335".into(),
            name: Some("NVIDIA H200".into()),
            arch: Arch::Hopper,
            arch_source: "device-id",
            numa_node: None,
            sysfs_path: "/sys/devices/pci0000:00/0000:00:06.0".into(),
            driver: Some("nvidia".into()),
        });
        f.cuda.runtime = Some(CudaRuntime {
            driver_api: Some("13.0".into()),
            devices: vec![CudaDevice {
                pci_bus_id: Some("00000000:00:06.0".into()),
                pci_p2pdma: Some(false),
                ..CudaDevice::default()
            }],
            error: None,
        });
        // The H200 as lent: no registry keys, so "not supported" is what a fixable host says.
        f.nvidia_params.source = Some("/proc/driver/nvidia/params".into());
        assert!(p2pdma_missing(&f).is_empty(), "{:?}", p2pdma_missing(&f));
        f.nvidia_params.registry_dwords = vec![
            ("RMForceStaticBar1".into(), "1".into()),
            ("RmForceDisableIomapWC".into(), "1".into()),
        ];
        let m = p2pdma_missing(&f).join("; ");
        assert!(
            m.contains("GPU 0000:00:06.0 answers not supported")
                && m.contains("RMForceStaticBar1=1;RmForceDisableIomapWC=1"),
            "{m}"
        );
        f.cuda.runtime.as_mut().unwrap().devices[0].pci_p2pdma = Some(true);
        assert!(p2pdma_missing(&f).is_empty());
    }
}
