//! `modules:` — kernel modules present (loaded now and at every boot), absent
//! (unloaded now, blocked at boot) and their options. Persistent state is in
//! files gdrprov owns; the running kernel is only touched on the live system.

use super::files::ManagedFile;
use super::Part;
use crate::error::{Error, Result};
use crate::facts::rdma::RdmaDevice;
use crate::facts::OsFamily;
use crate::host::{CommandSpec, Host};
use crate::plan::{Action, Change, Context};

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
    let present = effective_present(ctx.host, &doc.present);
    let kernels = target_kernels(ctx.host);
    let header = super::files::header(ctx);

    // Present modules must exist for every kernel they will boot with.
    for m in &present {
        for k in &kernels {
            match module_status(ctx.host, k, m) {
                ModStatus::Missing => {
                    return Err(Error::Refused(format!(
                        "kernel module `{m}` does not exist for kernel {k} in {}: {} (nothing was changed)",
                        ctx.host.display("/lib/modules"),
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
        block_file_changes |= ctx.host.read_fact(BLOCK_CONF).as_deref() != Some(s.as_str());
        part.files.push(managed(BLOCK_CONF, s, None));
        for m in &doc.absent {
            for k in &kernels {
                if module_status(ctx.host, k, m) == ModStatus::Builtin {
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
            .filter(|m| ctx.host.is_live() && is_loaded(ctx.host, m))
            .map(|m| format!("`{m}` is loaded: its new options apply when it is next loaded"))
            .next();
        block_file_changes |= ctx.host.read_fact(OPTIONS_CONF).as_deref() != Some(s.as_str());
        part.files.push(managed(OPTIONS_CONF, s, reboot));
    }

    // The running kernel, only on the live system and not for image builds.
    if ctx.live_changes {
        for m in &doc.absent {
            if !is_loaded(ctx.host, m) {
                continue;
            }
            let holders = holders(ctx.host, m);
            let refcnt = refcnt(ctx.host, m);
            if holders.is_empty() && refcnt == 0 {
                let gone = removed_rdma_devices(&ctx.facts.rdma_devices, m);
                let why = if gone.is_empty() {
                    format!("Unload {m} now (it must be absent)")
                } else {
                    format!(
                        "Unload {m} now (it must be absent); this removes its RDMA device(s) {}",
                        gone.join(", ")
                    )
                };
                part.commands.push(run(&["modprobe", "-r", m], why, None));
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
            if !is_loaded(ctx.host, m) {
                part.commands.push(run(
                    &["modprobe", m],
                    format!("Load {m} now (it must be present)"),
                    None,
                ));
            }
        }
    } else if ctx.host.is_live() {
        for m in doc.absent.iter().filter(|m| is_loaded(ctx.host, m)) {
            part.reboot_pending.push(format!(
                "`{m}` is loaded; --no-reboot leaves it until the next boot"
            ));
        }
    }

    // A blocked or configured module inside an initramfs is only blocked once
    // the initramfs carries the new modprobe.d files.
    if block_file_changes {
        let family = crate::facts::os_family(ctx.host);
        for k in &kernels {
            let listed: Vec<&String> = doc.absent.iter().chain(doc.options.keys()).collect();
            let inside: Vec<&String> = listed
                .into_iter()
                .filter(|m| in_initramfs(ctx.host, family, k, m))
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
            part.commands.push(Change {
                module: MODULE.into(),
                description: spec.why.clone(),
                action: Action::Run { command: spec },
                reboot: Some(format!(
                    "the initramfs of {k} was rebuilt for {}",
                    names.join(", ")
                )),
            });
        }
    }
    Ok(part)
}

/// The RDMA devices that unloading module `m` deletes: those its driver
/// made (rxe0 for rdma_rxe) or, for an `_ib` module, those of its `_core`
/// PCI driver (mlx5_ib registers the mlx5_core functions' devices).
fn removed_rdma_devices(devices: &[RdmaDevice], m: &str) -> Vec<String> {
    let m = norm(m);
    let core = m.strip_suffix("_ib").map(|p| format!("{p}_core"));
    devices
        .iter()
        .filter(|d| {
            d.driver
                .as_deref()
                .map(norm)
                .is_some_and(|drv| drv == m || core.as_deref() == Some(drv.as_str()))
        })
        .map(|d| d.name.clone())
        .collect()
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
    let spec = CommandSpec::new(argv, why);
    Change {
        module: MODULE.into(),
        description: spec.why.clone(),
        action: Action::Run { command: spec },
        reboot,
    }
}

/// `legacy-peermem` asks for nvidia_peermem; drivers older than 470 ship no
/// such module, and the separate nv_peer_mem does the job there.
fn effective_present(host: &Host, present: &[String]) -> Vec<String> {
    let old_driver = driver_major(host).is_some_and(|v| v < 470);
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

fn driver_major(host: &Host) -> Option<u32> {
    let v = host.read_fact("/proc/driver/nvidia/version")?;
    let line = v.lines().next()?;
    line.split_whitespace()
        .find(|w| w.chars().next().is_some_and(|c| c.is_ascii_digit()) && w.contains('.'))
        .and_then(|w| w.split('.').next()?.parse().ok())
}

/// The kernels a module must work with: the running one on the live system,
/// every installed one in an image.
pub fn target_kernels(host: &Host) -> Vec<String> {
    if host.is_live() {
        if let Some(r) = host.read_fact("/proc/sys/kernel/osrelease") {
            return vec![r.trim().to_string()];
        }
    }
    host.list_dir("/lib/modules")
        .into_iter()
        .filter(|k| {
            host.exists(&format!("/lib/modules/{k}/kernel"))
                || host.exists(&format!("/lib/modules/{k}/modules.dep"))
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
fn module_status(host: &Host, kernel: &str, name: &str) -> ModStatus {
    let want = norm(name);
    let matches = |line: &str| {
        let path = line.split(':').next().unwrap_or("");
        let file = path.rsplit('/').next().unwrap_or("");
        let stem = file.split(".ko").next().unwrap_or("");
        !stem.is_empty() && norm(stem) == want
    };
    if let Some(b) = host.read_fact(&format!("/lib/modules/{kernel}/modules.builtin")) {
        if b.lines().any(matches) {
            return ModStatus::Builtin;
        }
    }
    match host.read_fact(&format!("/lib/modules/{kernel}/modules.dep")) {
        Some(dep) if dep.lines().any(matches) => ModStatus::Module,
        Some(dep) if !dep.trim().is_empty() => ModStatus::Missing,
        // An empty or absent index (no depmod run yet): look at the files.
        _ => {
            if find_ko(host, &format!("/lib/modules/{kernel}"), &want, 0) {
                ModStatus::Module
            } else if host.exists(&format!("/lib/modules/{kernel}/kernel")) {
                ModStatus::Missing
            } else {
                ModStatus::Unknown
            }
        }
    }
}

fn find_ko(host: &Host, dir: &str, want: &str, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    host.list_dir(dir).iter().any(|e| {
        let p = format!("{dir}/{e}");
        match e.split(".ko").next() {
            Some(stem) if e.contains(".ko") && norm(stem) == want => true,
            _ => !e.contains('.') && find_ko(host, &p, want, depth + 1),
        }
    })
}

/// Loaded modules have `/sys/module/NAME/initstate` (built-in ones do not).
pub fn is_loaded(host: &Host, name: &str) -> bool {
    host.exists(&format!("/sys/module/{}/initstate", norm(name)))
}

fn holders(host: &Host, name: &str) -> Vec<String> {
    host.list_dir(&format!("/sys/module/{}/holders", norm(name)))
}

fn refcnt(host: &Host, name: &str) -> u64 {
    host.read_fact(&format!("/sys/module/{}/refcnt", norm(name)))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Whether the initramfs of `kernel` carries the module, asked of the
/// distribution's own lister. No initramfs, or no lister: `false`.
fn in_initramfs(host: &Host, family: OsFamily, kernel: &str, name: &str) -> bool {
    let (image, argv): (String, Vec<String>) = match family {
        OsFamily::Rhel => {
            let img = format!("/boot/initramfs-{kernel}.img");
            (img.clone(), vec!["lsinitrd".into(), img])
        }
        _ => {
            let img = format!("/boot/initrd.img-{kernel}");
            (img.clone(), vec!["lsinitramfs".into(), img])
        }
    };
    if !host.exists(&image) {
        return false;
    }
    let args: Vec<&str> = argv.iter().map(String::as_str).collect();
    let Some(out) = host.query(&args) else {
        return false;
    };
    let want = norm(name);
    out.stdout.lines().any(|l| {
        let file = l.rsplit('/').next().unwrap_or("");
        file.contains(".ko") && norm(file.split(".ko").next().unwrap_or("")) == want
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(name: &str, driver: &str) -> RdmaDevice {
        RdmaDevice {
            name: name.into(),
            driver: Some(driver.into()),
            pci: None,
            sysfs_path: None,
            numa_node: None,
            ports: Vec::new(),
        }
    }

    #[test]
    fn unloading_names_the_rdma_devices_it_removes() {
        let devs = [dev("rxe0", "rdma_rxe"), dev("mlx5_0", "mlx5_core")];
        assert_eq!(removed_rdma_devices(&devs, "rdma-rxe"), ["rxe0"]);
        assert_eq!(removed_rdma_devices(&devs, "mlx5_ib"), ["mlx5_0"]);
        assert!(removed_rdma_devices(&devs, "nvidia_peermem").is_empty());
    }
}
