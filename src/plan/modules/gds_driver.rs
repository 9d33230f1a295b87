//! The kernel side of a GDS mode: the NVIDIA driver's registry keys P2PDMA needs, and the
//! nvidia-fs module for nvidia-fs.
//!
//! P2PDMA: NVIDIA's "GDS Support for NVMe Drives Using Linux PCI P2PDMA", chapter "Setting
//! the Driver Registries for Enabling PCI P2PDMA" (and the GDS troubleshooting guide, "NVMe
//! P2PDMA Troubleshooting"), asks for a static BAR1 and write-combining off on x86:
//! `options nvidia NVreg_RegistryDwords="RMForceStaticBar1=1;RmForceDisableIomapWC=1;"`.
//! `NVreg_RegistryDwords` is ONE option holding several `key=value;` settings, often set by
//! others already: gdrprov's file carries the value in effect (the last `NVreg_RegistryDwords`
//! of modprobe.d or the kernel command line, from `facts::nvidia_params`) with gdrprov's keys
//! merged in, so every other key is kept. modprobe reads modprobe.d's files in name order and
//! the last value of an option wins: [`CONF`] is named to sort after the usual ones
//! (`nvidia.conf`, `nvidia-p2pdma.conf`), and, as it holds their keys too, it loses nothing.
//!
//! nvidia-fs: loaded at boot from [`LOAD`] (modules-load.d, as `modules.present` is) and now
//! on the running system; where it is not installed, `any-direct` warns with the missing
//! package and `nvfs` is refused naming it.

use super::{Context, Part};
use crate::error::{Error, Result};
use crate::facts::gds::{GdsMode, P2PDMA_REGISTRY};
use crate::facts::nvidia_params::split_registry_dwords;
use crate::host::CommandSpec;
use crate::plan::change::ManagedFile;
use crate::profile::gds::GdsWant;

pub const MODULE: &str = "gds";
/// gdrprov's `options nvidia NVreg_RegistryDwords=` for P2PDMA (sorts after `nvidia*.conf`).
pub const CONF: &str = "/etc/modprobe.d/zz-gdrprov-gds.conf";
/// nvidia-fs at every boot.
pub const LOAD: &str = "/etc/modules-load.d/gdrprov-gds.conf";
const OPTION: &str = "RegistryDwords";

/// The `NVreg_RegistryDwords` value in effect without gdrprov's own file, and where it is set.
fn others<'a>(ctx: &Context<'a>) -> Option<(&'a str, &'a str)> {
    ctx.facts
        .nvidia_params
        .module_options
        .iter()
        .rev()
        .find(|o| o.name == OPTION && o.file != CONF)
        .map(|o| (o.value.as_str(), o.file.as_str()))
}

/// `existing` with each of gdrprov's keys set to 1 (changed in place, else added at the
/// end); every other setting kept in its order. `None`: nothing to add.
pub fn merge_registry(existing: &str) -> Option<String> {
    let mut kv = split_registry_dwords(existing);
    let mut changed = false;
    for k in P2PDMA_REGISTRY {
        match kv.iter_mut().find(|(key, _)| key == k) {
            Some((_, v)) if v == "1" => {}
            Some((_, v)) => {
                *v = "1".into();
                changed = true;
            }
            None => {
                kv.push(((*k).to_string(), "1".into()));
                changed = true;
            }
        }
    }
    changed.then(|| {
        kv.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(";")
    })
}

fn registry(ctx: &Context, part: &mut Part) {
    let (existing, from) = others(ctx).unwrap_or(("", ""));
    let Some(value) = merge_registry(existing) else {
        return;
    };
    let kept = if existing.is_empty() {
        "no other NVreg_RegistryDwords is set".to_string()
    } else {
        format!("merged with the value {from} sets (\"{existing}\"): its keys are kept")
    };
    if from == "/proc/cmdline" {
        part.warnings.push(format!(
            "nvidia.NVreg_RegistryDwords=\"{existing}\" is on the kernel command line; {CONF} carries its keys and gdrprov's, but a command-line value may win: add {} there too, or remove it from the command line",
            P2PDMA_REGISTRY.iter().map(|k| format!("{k}=1")).collect::<Vec<_>>().join(";")
        ));
    }
    let content = format!(
        "{}\n# GPUDirect Storage through PCI P2PDMA: a static BAR1 and write-combining off (NVIDIA, \"GDS Support\n# for NVMe Drives Using Linux PCI P2PDMA\", \"Setting the Driver Registries\"); {kept}.\noptions nvidia NVreg_RegistryDwords=\"{value}\"\n",
        super::files::header(ctx)
    );
    part.files.push(ManagedFile {
        path: CONF.into(),
        content,
        mode: 0o644,
        module: MODULE,
        reboot: Some(
            "the NVIDIA driver reads NVreg_RegistryDwords when it loads (P2PDMA's registry keys)"
                .into(),
        ),
    });
    // Only where the driver is installed: listing an initramfs costs seconds.
    let driver = ctx.facts.nvidia_driver.version.is_some();
    for k in ctx.seen.kernels.iter().map(|k| k.release.as_str()) {
        if driver && ctx.seen.in_initramfs(k, "nvidia") {
            part.warnings.push(format!("the nvidia module is in the initramfs of {k}: rebuild it (update-initramfs -u -k {k}, or dracut -f) so that it loads with {CONF}"));
        }
    }
}

fn nvidia_fs(ctx: &Context, part: &mut Part, want: GdsWant) -> Result<()> {
    let fs = &ctx.facts.gds.nvidia_fs;
    if !fs.present && !fs.loaded {
        let what = "nvidia-fs is not installed for this kernel (the nvidia-fs DKMS package, `nvidia-fs-dkms` or `nvidia-gds`)";
        if want == GdsWant::Nvfs {
            return Err(Error::Refused(format!(
                "the profile asks for `gds: {{ mode: nvfs }}`, but {what}. Install it, or ask for `mode: any-direct`; nothing was changed"
            )));
        }
        part.warnings.push(format!(
            "GDS: P2PDMA cannot run here and {what}: cuFile will run in compat mode; install it and apply again"
        ));
        return Ok(());
    }
    part.files.push(ManagedFile {
        path: LOAD.into(),
        content: format!("{}\nnvidia-fs\n", super::files::header(ctx)),
        mode: 0o644,
        module: MODULE,
        reboot: None,
    });
    if !fs.loaded {
        ctx.now_or_next_boot(
            part,
            MODULE,
            CommandSpec::new(
                &["modprobe", "nvidia-fs"],
                "Load nvidia-fs now (GDS mode nvfs)",
            )
            .undone_by(&["modprobe", "-r", "nvidia-fs"]),
            || "nvidia-fs is loaded at the next boot (modules-load.d)".into(),
        );
    }
    Ok(())
}

/// The driver part of the mode gdrprov sets up (`mode`) for the profile's `want`.
pub fn plan(ctx: &Context, want: GdsWant, mode: GdsMode) -> Result<Part> {
    let mut part = Part::default();
    match mode {
        GdsMode::P2pdma => registry(ctx, &mut part),
        GdsMode::Nvfs => nvidia_fs(ctx, &mut part, want)?,
        GdsMode::Compat => {}
    }
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::nvidia_params::ModuleOption;
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{desired, written, World};

    fn set(w: &mut World, value: &str, file: &str) {
        w.facts.nvidia_params.module_options.push(ModuleOption {
            name: OPTION.into(),
            value: value.into(),
            file: file.into(),
        });
    }

    #[test]
    fn keys_set_elsewhere_need_no_file_and_the_command_line_is_warned_of() {
        let d = desired("gds: { mode: p2pdma }");
        let mut w = World::image(OsFamily::Debian);
        w.facts.nvidia_driver.version = Some("580.95.05".into());
        set(
            &mut w,
            "RmForceDisableIomapWC=1;RMForceStaticBar1=1",
            "/etc/modprobe.d/nvidia-p2pdma.conf",
        );
        assert_eq!(written(&w.plan(&d).0.unwrap(), CONF), None);
        // gdrprov's own file is not "elsewhere": re-planning keeps it.
        let mut w = World::image(OsFamily::Debian);
        w.facts.nvidia_driver.version = Some("580.95.05".into());
        set(&mut w, "RMForceStaticBar1=1;RmForceDisableIomapWC=1", CONF);
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, CONF)
            .is_some_and(|t| t.contains("\"RMForceStaticBar1=1;RmForceDisableIomapWC=1\"")));
        let mut w = World::image(OsFamily::Debian);
        w.facts.nvidia_driver.version = Some("580.95.05".into());
        set(&mut w, "RmX=3", "/proc/cmdline");
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, CONF)
            .is_some_and(|t| t.contains("\"RmX=3;RMForceStaticBar1=1;RmForceDisableIomapWC=1\"")));
        assert!(
            p.warnings.iter().any(|x| x.contains("kernel command line")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn registry_keys_are_merged_never_replaced() {
        assert_eq!(
            merge_registry("").as_deref(),
            Some("RMForceStaticBar1=1;RmForceDisableIomapWC=1")
        );
        assert_eq!(
            merge_registry("RmFoo=0x2;RMForceStaticBar1=0").as_deref(),
            Some("RmFoo=0x2;RMForceStaticBar1=1;RmForceDisableIomapWC=1")
        );
        assert_eq!(
            merge_registry("RmForceDisableIomapWC=1;RMForceStaticBar1=1;X=3"),
            None
        );
    }
}
