//! `modules:` — kernel modules present (loaded now and at every boot), absent
//! (unloaded now, blocked at boot) and their options. Persistent state is in
//! files gdrprov owns; the running kernel is only touched on the live system.

use super::files::ManagedFile;
use super::Part;
use crate::change::Change;
use crate::error::{Error, Result};
use crate::facts::planning::KernelModules;
use crate::facts::OsFamily;
use crate::host::CommandSpec;
use crate::modules::Context;

pub const MODULE: &str = "modules";
pub const LOAD_CONF: &str = "/etc/modules-load.d/gdrprov.conf";
pub const BLOCK_CONF: &str = "/etc/modprobe.d/gdrprov-blacklist.conf";
pub const OPTIONS_CONF: &str = "/etc/modprobe.d/gdrprov-options.conf";

/// sysfs and modprobe treat `-` and `_` in module names alike.
pub fn norm(name: &str) -> String {
    name.replace('-', "_")
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let doc = &ctx.desired.doc.modules;
    let present = effective_present(ctx.facts.nvidia_driver.major(), &doc.present);
    let kernels = &ctx.seen.kernels;
    let live = ctx.facts.live;
    let loaded = |m: &str| ctx.facts.modules.is_loaded(m);
    let header = super::files::header(ctx);

    // Present modules must exist for every kernel they will boot with.
    for m in &present {
        for k in kernels {
            match module_status(k, m) {
                ModStatus::Missing => {
                    return Err(Error::Refused(format!(
                        "kernel module `{m}` does not exist for kernel {} in {}: {} (nothing was changed)",
                        k.release,
                        ctx.seen.display("/lib/modules"),
                        provider_hint(m)
                    )))
                }
                ModStatus::Builtin | ModStatus::Module | ModStatus::Unknown => {}
            }
        }
    }

    if !present.is_empty() {
        let mut s =
            format!("{header}\n# Kernel modules loaded at every boot (systemd-modules-load).\n");
        for m in &present {
            s.push_str(m);
            s.push('\n');
        }
        part.files.push(managed(LOAD_CONF, s, None));
    }
    let mut block_file_changes = false;
    if !doc.absent.is_empty() {
        // `blacklist` alone only stops alias autoloading; `install ... /bin/false`
        // also stops an explicit `modprobe NAME` and anything depending on it.
        let mut s = format!("{header}\n# Kernel modules that must not load (blacklist stops autoloading; install stops modprobe).\n");
        for m in &doc.absent {
            s.push_str(&format!("blacklist {m}\ninstall {m} /bin/false\n"));
        }
        block_file_changes |= ctx.seen.file_fact(BLOCK_CONF) != Some(s.as_str());
        part.files.push(managed(BLOCK_CONF, s, None));
        for m in &doc.absent {
            for k in kernels {
                if module_status(k, m) == ModStatus::Builtin {
                    let k = &k.release;
                    part.warnings.push(format!(
                        "`{m}` is built into kernel {k}: modprobe.d cannot block it; use `{m}.blacklist=1`-style kernel arguments or another kernel"
                    ));
                }
            }
        }
    } else if ctx.state.files.contains_key(BLOCK_CONF) {
        block_file_changes = true;
    }
    if !doc.options.is_empty() {
        let mut s = format!("{header}\n# Kernel module parameters.\n");
        for (m, o) in &doc.options {
            s.push_str(&format!("options {m} {o}\n"));
        }
        let reboot = doc
            .options
            .keys()
            .filter(|m| live && loaded(m))
            .map(|m| format!("`{m}` is loaded: its new options apply when it is next loaded"))
            .next();
        block_file_changes |= ctx.seen.file_fact(OPTIONS_CONF) != Some(s.as_str());
        part.files.push(managed(OPTIONS_CONF, s, reboot));
    }

    // The running kernel, only on the live system and not for image builds.
    if ctx.live_changes {
        for m in &doc.absent {
            if !loaded(m) {
                continue;
            }
            let usage = ctx
                .seen
                .module_use
                .get(&norm(m))
                .cloned()
                .unwrap_or_default();
            let (holders, refcnt) = (usage.holders, usage.refcnt);
            if holders.is_empty() && refcnt == 0 {
                part.commands.push(run(
                    &["modprobe", "-r", m],
                    format!("Unload {m} now (it must be absent)"),
                    None,
                ));
            } else {
                let by = if holders.is_empty() {
                    format!("{refcnt} user(s)")
                } else {
                    holders.join(", ")
                };
                part.reboot_pending.push(format!(
                    "`{m}` is loaded and in use (by {by}); it stays loaded until the next boot, which will not load it"
                ));
            }
        }
        for m in &present {
            if !loaded(m) {
                part.commands.push(run(
                    &["modprobe", m],
                    format!("Load {m} now (it must be present)"),
                    None,
                ));
            }
        }
    } else if live {
        for m in doc.absent.iter().filter(|m| loaded(m)) {
            part.reboot_pending.push(format!(
                "`{m}` is loaded; --no-reboot leaves it until the next boot"
            ));
        }
    }

    // A blocked or configured module inside an initramfs is only blocked once
    // the initramfs carries the new modprobe.d files.
    if block_file_changes {
        let family = ctx.facts.os.family;
        for k in kernels.iter().map(|k| k.release.as_str()) {
            let listed: Vec<&String> = doc.absent.iter().chain(doc.options.keys()).collect();
            let inside: Vec<&String> = listed
                .into_iter()
                .filter(|m| ctx.seen.in_initramfs(k, m))
                .collect();
            if inside.is_empty() {
                continue;
            }
            let names: Vec<&str> = inside.iter().map(|s| s.as_str()).collect();
            let (argv, what): (Vec<&str>, &str) = match family {
                OsFamily::Rhel => (vec!["dracut", "-f", "--kver", k], "dracut"),
                _ => (vec!["update-initramfs", "-u", "-k", k], "update-initramfs"),
            };
            let spec = CommandSpec::new(
                &argv,
                format!(
                    "Rebuild the initramfs of {k} with {what}: it contains {}",
                    names.join(", ")
                ),
            )
            .regenerating();
            part.commands.push(Change::run(
                MODULE,
                spec,
                Some(format!(
                    "the initramfs of {k} was rebuilt for {}",
                    names.join(", ")
                )),
            ));
        }
    }
    Ok(part)
}

fn managed(path: &str, content: String, reboot: Option<String>) -> ManagedFile {
    ManagedFile {
        path: path.into(),
        content,
        mode: 0o644,
        module: MODULE,
        reboot,
    }
}

fn run(argv: &[&str], why: String, reboot: Option<String>) -> Change {
    Change::run(MODULE, CommandSpec::new(argv, why), reboot)
}

/// `legacy-peermem` asks for nvidia_peermem; drivers older than 470 ship no
/// such module, and the separate nv_peer_mem does the job there. The driver
/// version is the facts' (`/proc/driver/nvidia/version`, else modinfo).
fn effective_present(driver_major: Option<u32>, present: &[String]) -> Vec<String> {
    let old_driver = driver_major.is_some_and(|v| v < 470);
    present
        .iter()
        .map(|m| {
            if old_driver && norm(m) == "nvidia_peermem" {
                "nv_peer_mem".to_string()
            } else {
                m.clone()
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ModStatus {
    Module,
    Builtin,
    Missing,
    /// No module index for that kernel: cannot tell.
    Unknown,
}

/// Looks a module up in the kernel's own index (`modules.dep`, which depmod
/// writes, DKMS modules included) and in `modules.builtin`.
fn module_status(k: &KernelModules, name: &str) -> ModStatus {
    let want = norm(name);
    if k.builtin.as_ref().is_some_and(|b| b.contains(&want)) {
        return ModStatus::Builtin;
    }
    match &k.index {
        Some(index) if index.contains(&want) => ModStatus::Module,
        Some(_) => ModStatus::Missing,
        // An empty or absent index (no depmod run yet): look at the files.
        None if k.ko_files.contains(&want) => ModStatus::Module,
        None if k.has_kernel_dir => ModStatus::Missing,
        None => ModStatus::Unknown,
    }
}

/// Which package usually provides a module, for the "does not exist" error.
fn provider_hint(m: &str) -> String {
    match norm(m).as_str() {
        "nvidia_peermem" => "it comes with the NVIDIA driver (nvidia-dkms-*-open / kmod-nvidia-open-dkms) and is only built when MLNX_OFED or DOCA-OFED was installed first: reinstall the driver after OFED, or use the rdma-dmabuf profile".into(),
        "nv_peer_mem" => "it comes with the nvidia-peer-memory package (for drivers older than 470; newer drivers ship nvidia_peermem)".into(),
        "erdma" => "it comes with the eRDMA driver package (Alibaba Cloud's erdma installer; check with `eadm ver`)".into(),
        "rdma_rxe" | "siw" => "it comes with the distribution's extra kernel modules (linux-modules-extra-* / kernel-modules-extra)".into(),
        _ => "install the package that ships it for this kernel, or remove it from `modules.present`".into(),
    }
}
