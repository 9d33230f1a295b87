//! `modules:` — kernel modules present (loaded now and at every boot), absent
//! (unloaded now, blocked at boot) and their options. Persistent state is in
//! files gdrprov owns; the running kernel is only touched on the live system.

use super::files::ManagedFile;
use super::Part;
use crate::error::{Error, Result};
use crate::facts::rdma::RdmaDevice;
use crate::facts::OsFamily;
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::inputs::KernelModules;
use crate::plan::modules::Context;

pub const MODULE: &str = "modules";
pub const LOAD_CONF: &str = "/etc/modules-load.d/gdrprov.conf";
pub const BLOCK_CONF: &str = "/etc/modprobe.d/gdrprov-blacklist.conf";
pub const OPTIONS_CONF: &str = "/etc/modprobe.d/gdrprov-options.conf";
/// On a host with MLNX_OFED/DOCA's openibd, nvidia_peermem is loaded and
/// unloaded by a unit of its own, which openibd pulls in (this drop-in).
pub const OPENIBD_DROPIN: &str = "/etc/systemd/system/openibd.service.d/gdrprov-peermem.conf";
pub use crate::facts::ofed::PEERMEM_UNIT_NAME;
pub const PEERMEM_UNIT: &str = "/etc/systemd/system/gdrprov-peermem.service";

/// The unit that loads `m` after openibd and unloads it before openibd
/// stops. `After=` orders its start after openibd's and, reversed, its stop
/// before openibd's; `PartOf=` makes `systemctl stop|restart openibd` stop
/// (and restart) it too. So `openibd restart` (OFED upgrades, operators)
/// finds ib_core free, as it needs (Mellanox/doca-driver-build#481). An
/// `ExecStartPost=` in openibd's drop-in (Azure's HPC images) loads it in
/// the right order but nothing unloads it before the next stop.
pub fn peermem_unit(header: &str, m: &str) -> String {
    format!(
        "{header}\n[Unit]\nDescription={m}, loaded after openibd and unloaded before it stops (gdrprov)\nAfter=openibd.service\nPartOf=openibd.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/sbin/modprobe {m}\nExecStop=/sbin/modprobe -r {m}\n"
    )
}

/// openibd's drop-in: starting openibd starts gdrprov-peermem.service.
pub fn openibd_dropin(header: &str, m: &str) -> String {
    format!(
        "{header}\n# {m} is loaded by {PEERMEM_UNIT_NAME} after openibd has loaded the RDMA\n# stack (not from modules-load.d: `openibd restart` fails while {m}\n# holds ib_core), and unloaded before openibd stops.\n[Unit]\nWants={PEERMEM_UNIT_NAME}\n"
    )
}

/// sysfs and modprobe treat `-` and `_` in module names alike.
pub fn norm(name: &str) -> String {
    name.replace('-', "_")
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let present = effective_present(
        ctx.facts.nvidia_driver.major(),
        &ctx.desired.doc.modules.present,
    );
    check_present(ctx)?;
    // With openibd, nvidia_peermem is loaded after it (as Azure's HPC images
    // do): loaded earlier by systemd-modules-load, it holds ib_core, and
    // `openibd restart` (OFED upgrades, operators) fails.
    let (after_openibd, at_boot): (Vec<String>, Vec<String>) = present
        .iter()
        .cloned()
        .partition(|m| ctx.facts.ofed.openibd.is_some() && norm(m) == "nvidia_peermem");
    peermem_units(ctx, &mut part, &after_openibd);
    let block_file_changes = conf_files(ctx, &mut part, &at_boot);
    running_kernel(ctx, &mut part, &at_boot, &after_openibd);
    if block_file_changes {
        initramfs(ctx, &mut part);
    }
    Ok(part)
}

/// Present modules must exist for every kernel they will boot with (the
/// requirements gate says so first; this holds past --force too).
fn check_present(ctx: &Context) -> Result<()> {
    let doc = &ctx.desired.doc.modules;
    let kernels = &ctx.seen.kernels;
    if let Some(m) = missing(kernels, ctx.facts.nvidia_driver.major(), &doc.present).first() {
        return Err(Error::Refused(format!(
            "{} (nothing was changed)",
            m.message(&ctx.seen.display("/lib/modules"))
        )));
    }

    Ok(())
}

/// nvidia_peermem's own unit and openibd's drop-in, where openibd loads the
/// RDMA stack; systemd told to read them on the running system.
fn peermem_units(ctx: &Context, part: &mut Part, after_openibd: &[String]) {
    let header = super::files::header(ctx);
    let mut unit_files_change = [PEERMEM_UNIT, OPENIBD_DROPIN]
        .iter()
        .any(|p| ctx.state.files.contains_key(*p))
        && after_openibd.is_empty();
    if let Some(m) = after_openibd.first() {
        for (path, text) in [
            (PEERMEM_UNIT, peermem_unit(&header, m)),
            (OPENIBD_DROPIN, openibd_dropin(&header, m)),
        ] {
            unit_files_change |= ctx.seen.file_fact(path) != Some(text.as_str());
            part.files.push(managed(path, text, None));
        }
    }
    // systemd reads unit files at daemon-reload (rollback runs it again).
    if unit_files_change && ctx.facts.live {
        part.commands.push(Change::run(
            MODULE,
            CommandSpec::new(
                &["systemctl", "daemon-reload"],
                format!("Make systemd read {PEERMEM_UNIT} and openibd's drop-in"),
            )
            .regenerating(),
            None,
        ));
    }
}

/// The modprobe.d and modules-load.d files; whether the block list or the
/// options change (then an initramfs may need rebuilding).
fn conf_files(ctx: &Context, part: &mut Part, at_boot: &[String]) -> bool {
    let doc = &ctx.desired.doc.modules;
    let kernels = &ctx.seen.kernels;
    let live = ctx.facts.live;
    let loaded = |m: &str| ctx.facts.modules.is_loaded(m);
    let header = super::files::header(ctx);
    if !at_boot.is_empty() {
        let mut s =
            format!("{header}\n# Kernel modules loaded at every boot (systemd-modules-load).\n");
        for m in at_boot {
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

    block_file_changes
}

/// The running kernel: loads and unloads, only on the live system and not
/// for image builds.
fn running_kernel(ctx: &Context, part: &mut Part, at_boot: &[String], after_openibd: &[String]) {
    let doc = &ctx.desired.doc.modules;
    let live = ctx.facts.live;
    let loaded = |m: &str| ctx.facts.modules.is_loaded(m);
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
        for m in at_boot {
            if !loaded(m) {
                part.commands.push(run(
                    &["modprobe", m],
                    format!("Load {m} now (it must be present)"),
                    None,
                ));
            }
        }
        // Through its unit, even when loaded: only an active unit is stopped
        // (and the module unloaded) before openibd stops.
        let unit_active = ctx
            .seen
            .units
            .get(PEERMEM_UNIT_NAME)
            .is_some_and(|u| u.active);
        if let Some(m) = after_openibd.first().filter(|_| !unit_active) {
            part.commands.push(run(
                &["systemctl", "start", PEERMEM_UNIT_NAME],
                format!(
                    "Load {m} now through {PEERMEM_UNIT_NAME} (it must be present; the unit unloads it before openibd stops)"
                ),
                None,
            ));
        }
    } else if live {
        for m in doc.absent.iter().filter(|m| loaded(m)) {
            part.reboot_pending.push(format!(
                "`{m}` is loaded; --no-reboot leaves it until the next boot"
            ));
        }
    }
}

/// A blocked or configured module inside an initramfs is only blocked once
/// the initramfs carries the new modprobe.d files.
fn initramfs(ctx: &Context, part: &mut Part) {
    let doc = &ctx.desired.doc.modules;
    let kernels = &ctx.seen.kernels;
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
        .regenerating()
        .rebuilding_initramfs();
        let spec = super::esp_initrd::initramfs_command(ctx, k, spec);
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

/// The programs that rebuild initramfs images: those this module plans
/// (update-initramfs, dracut) and the other builders a journal may name.
const INITRAMFS_BUILDERS: &[&str] = &["update-initramfs", "dracut", "mkinitramfs", "mkinitcpio"];

/// A command read back from a journal, marked as the plan that made it
/// marked it: `rebuilds_initramfs` is not written out, so a rollback or a
/// recovery knows an initramfs rebuild again by its program.
pub fn as_planned(mut cmd: CommandSpec) -> CommandSpec {
    cmd.rebuilds_initramfs = rebuilds(&cmd);
    cmd
}

/// Whether `cmd` rebuilds initramfs images: as its plan marked it, or, read
/// back from a journal (which does not keep the mark), by its program.
pub fn rebuilds(cmd: &CommandSpec) -> bool {
    let tool = cmd.argv.first().map(|p| p.rsplit('/').next().unwrap_or(p));
    cmd.rebuilds_initramfs || tool.is_some_and(|t| INITRAMFS_BUILDERS.contains(&t))
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

/// A module the profile wants present that a target kernel does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingModule {
    pub module: String,
    pub release: String,
    /// Which package usually provides it.
    pub hint: String,
}

impl MissingModule {
    /// One line; `modules_dir` is `/lib/modules` as shown for this root.
    pub fn message(&self, modules_dir: &str) -> String {
        format!(
            "kernel module `{}` does not exist for kernel {} in {modules_dir}: {}",
            self.module, self.release, self.hint
        )
    }
}

/// The modules of `present` (as this driver branch loads them) missing for
/// a kernel they will boot with; the plan refuses them, the requirements
/// gate (plan, doctor, verify) reports them.
pub fn missing(
    kernels: &[KernelModules],
    driver_major: Option<u32>,
    present: &[String],
) -> Vec<MissingModule> {
    let mut out = Vec::new();
    for m in effective_present(driver_major, present) {
        for k in kernels {
            if module_status(k, &m) == ModStatus::Missing {
                out.push(MissingModule {
                    hint: provider_hint(&m),
                    module: m.clone(),
                    release: k.release.clone(),
                });
            }
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::OsFamily;
    use crate::plan::inputs::ModuleUse;
    use crate::plan::modules::testkit::{commands, desired, written, World};

    fn kernel(release: &str, index: &[&str], builtin: &[&str]) -> KernelModules {
        KernelModules {
            release: release.into(),
            builtin: Some(builtin.iter().map(|s| s.to_string()).collect()),
            index: (!index.is_empty()).then(|| index.iter().map(|s| s.to_string()).collect()),
            ko_files: Default::default(),
            has_kernel_dir: true,
        }
    }

    const ABSENT: &str = "modules: { absent: [nvidia_peermem, nv_peer_mem] }";
    const BLOCK: &str = "blacklist nvidia_peermem\ninstall nvidia_peermem /bin/false\nblacklist nv_peer_mem\ninstall nv_peer_mem /bin/false\n";

    #[test]
    fn peermem_loads_after_openibd_where_the_host_has_it() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![kernel("6.8.0-1", &["nvidia_peermem", "ib_core"], &[])];
        let d = desired("modules: { present: [nvidia_peermem, ib_core] }");
        // No openibd: modules-load.d, as before.
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, LOAD_CONF)
            .unwrap()
            .ends_with("\nnvidia_peermem\nib_core\n"));
        assert_eq!(written(&p, OPENIBD_DROPIN), None);
        // openibd: a drop-in, and modules-load.d keeps the others.
        w.facts.ofed.openibd = Some("/etc/init.d/openibd".into());
        let p = w.plan(&d).0.unwrap();
        let load = written(&p, LOAD_CONF).unwrap();
        assert!(load.ends_with("\nib_core\n") && !load.contains("nvidia_peermem"));
        let dropin = written(&p, OPENIBD_DROPIN).unwrap();
        assert!(
            dropin.ends_with("[Unit]\nWants=gdrprov-peermem.service\n"),
            "{dropin}"
        );
        let unit = written(&p, PEERMEM_UNIT).unwrap();
        for line in [
            "\nAfter=openibd.service\n",
            "\nPartOf=openibd.service\n",
            "\nRemainAfterExit=yes\n",
            "\nExecStart=/sbin/modprobe nvidia_peermem\n",
            "\nExecStop=/sbin/modprobe -r nvidia_peermem\n",
        ] {
            assert!(unit.contains(line), "{line:?} not in {unit}");
        }
        // An image: no systemctl at all.
        assert!(commands(&p).is_empty(), "{:?}", commands(&p));
        // Only peermem: no modules-load.d file at all.
        let p = w
            .plan(&desired("modules: { present: [nvidia-peermem] }"))
            .0
            .unwrap();
        assert_eq!(written(&p, LOAD_CONF), None);
        assert!(written(&p, PEERMEM_UNIT)
            .unwrap()
            .contains("modprobe -r nvidia-peermem\n"));
    }

    #[test]
    fn peermem_on_a_live_openibd_host_loads_through_its_unit() {
        let mut w = World::live(OsFamily::Debian);
        w.seen.kernels = vec![kernel("6.8.0-1", &["nvidia_peermem", "ib_core"], &[])];
        w.facts.ofed.openibd = Some("/usr/lib/systemd/system/openibd.service".into());
        let d = desired("modules: { present: [nvidia_peermem] }");
        let p = w.plan(&d).0.unwrap();
        assert_eq!(
            commands(&p),
            [
                "systemctl daemon-reload",
                "systemctl start gdrprov-peermem.service"
            ]
        );
        // Loaded by hand before: still started through the unit, so that
        // stopping openibd unloads it.
        w.facts.modules.loaded.push("nvidia_peermem".into());
        let p = w.plan(&d).0.unwrap();
        assert!(commands(&p).contains(&"systemctl start gdrprov-peermem.service".to_string()));
        // Files in place and the unit active: nothing to do.
        let text_unit = written(&p, PEERMEM_UNIT).unwrap().to_string();
        let text_dropin = written(&p, OPENIBD_DROPIN).unwrap().to_string();
        w.file(PEERMEM_UNIT, &text_unit)
            .file(OPENIBD_DROPIN, &text_dropin);
        w.seen.units.insert(
            PEERMEM_UNIT_NAME.into(),
            crate::plan::inputs::UnitFacts {
                exists: true,
                enabled: false,
                active: true,
            },
        );
        let p = w.plan(&d).0.unwrap();
        assert!(commands(&p).is_empty(), "{:?}", commands(&p));
    }

    #[test]
    fn present_module_goes_to_modules_load_d_for_every_kernel() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![
            kernel("6.8.0-1", &["rdma_rxe", "ib_core"], &[]),
            kernel("6.8.0-2", &["rdma_rxe"], &[]),
        ];
        let d = desired("modules: { present: [rdma_rxe] }");
        let (p, _) = w.plan(&d);
        let p = p.unwrap();
        assert!(written(&p, LOAD_CONF).unwrap().ends_with("\nrdma_rxe\n"));
        // An image: nothing is loaded now.
        assert!(commands(&p).is_empty());
    }

    #[test]
    fn a_module_missing_for_one_kernel_is_refused_with_the_package_to_install() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![
            kernel("6.8.0-1", &["rdma_rxe"], &[]),
            kernel("6.8.0-2", &["ib_core"], &[]),
        ];
        let d = desired("modules: { present: [rdma-rxe] }");
        let e = w.plan(&d).0.unwrap_err().to_string();
        assert!(
            e.contains("`rdma-rxe` does not exist for kernel 6.8.0-2 in /img/lib/modules"),
            "{e}"
        );
        assert!(e.contains("linux-modules-extra"), "{e}");
    }

    #[test]
    fn without_an_index_the_ko_files_decide() {
        let mut k = kernel("6.8.0-1", &[], &[]);
        k.ko_files.insert("erdma".into());
        assert_eq!(module_status(&k, "erdma"), ModStatus::Module);
        assert_eq!(module_status(&k, "siw"), ModStatus::Missing);
        k.has_kernel_dir = false;
        assert_eq!(module_status(&k, "siw"), ModStatus::Unknown);
        let b = kernel("6.8.0-1", &["x"], &["nv_peer_mem"]);
        assert_eq!(module_status(&b, "nv-peer-mem"), ModStatus::Builtin);
    }

    #[test]
    fn a_driver_older_than_470_gets_nv_peer_mem_even_when_only_modinfo_knows_it() {
        let mut w = World::image(OsFamily::Rhel);
        w.facts.nvidia_driver.version = Some("465.19.01".into());
        w.facts.nvidia_driver.source = Some("`modinfo -k 5.14.0 nvidia`".into());
        let d = desired("modules: { present: [nvidia_peermem] }");
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, LOAD_CONF).unwrap().ends_with("\nnv_peer_mem\n"));
        w.facts.nvidia_driver.version = Some("580.95.05".into());
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, LOAD_CONF)
            .unwrap()
            .ends_with("\nnvidia_peermem\n"));
    }

    #[test]
    fn a_loaded_absent_module_is_unloaded_unless_in_use() {
        let mut w = World::live(OsFamily::Debian);
        w.seen.kernels = vec![kernel("6.8.0-1", &["nvidia_peermem"], &[])];
        w.facts.modules.loaded = vec!["nvidia_peermem".into(), "nv_peer_mem".into()];
        w.seen.module_use.insert(
            "nv_peer_mem".into(),
            ModuleUse {
                holders: vec!["ib_core".into()],
                refcnt: 1,
            },
        );
        let d = desired(ABSENT);
        let p = w.plan(&d).0.unwrap();
        assert_eq!(commands(&p), ["modprobe -r nvidia_peermem"]);
        assert!(p.reboot_pending[0].contains("`nv_peer_mem` is loaded and in use (by ib_core)"));
        // --no-reboot: nothing runs, the reboot is owed.
        w.live_changes = false;
        let p = w.plan(&d).0.unwrap();
        assert!(commands(&p).is_empty());
        assert_eq!(p.reboot_pending.len(), 2);
    }

    #[test]
    fn initramfs_is_listed_only_when_the_block_list_changes() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![kernel("6.8.0-1", &["nvidia_peermem"], &[])];
        let d = desired(ABSENT);
        // New block list: the listing is asked for.
        let (_, missed) = w.plan(&d);
        assert!(missed.initramfs.contains("6.8.0-1"));
        // Listed, with the module inside: rebuilt.
        w.seen.initramfs.insert(
            "6.8.0-1".into(),
            Some(["nvidia_peermem".to_string()].into_iter().collect()),
        );
        let p = w.plan(&d).0.unwrap();
        assert_eq!(commands(&p), ["update-initramfs -u -k 6.8.0-1"]);
        // The block list is already there: no listing, no rebuild.
        let mut w = World::image(OsFamily::Rhel);
        w.seen.kernels = vec![kernel("5.14.0", &["nvidia_peermem"], &[])];
        let header = crate::plan::modules::files::header(&w.ctx(&d));
        w.file(BLOCK_CONF, &format!("{header}\n# Kernel modules that must not load (blacklist stops autoloading; install stops modprobe).\n{BLOCK}"));
        let (p, missed) = w.plan(&d);
        assert!(missed.initramfs.is_empty(), "{missed:?}");
        assert!(commands(&p.unwrap()).is_empty());
    }

    /// The rebuild is marked where it is planned (the runner no longer knows builders by
    /// name); the mark is not written out, and a command read back from a journal gets it
    /// again from its program.
    #[test]
    fn the_plan_marks_its_initramfs_rebuilds_and_a_journal_s_are_known_again() {
        let spec = CommandSpec::new(&["update-initramfs", "-u", "-k", "6.1"], "r")
            .regenerating()
            .rebuilding_initramfs();
        assert!(spec.rebuilds_initramfs());
        let json = serde_json::to_string(&spec).unwrap();
        assert!(!json.contains("rebuild"), "{json}");
        let back: CommandSpec = serde_json::from_str(&json).unwrap();
        assert!(!back.rebuilds_initramfs());
        assert!(as_planned(back).rebuilds_initramfs());
        for argv in [
            &["/usr/bin/dracut", "-f"][..],
            &["mkinitcpio", "-P"],
            &["mkinitramfs"],
        ] {
            assert!(rebuilds(&CommandSpec::new(argv, "")), "{argv:?}");
        }
        for argv in [&["update-grub"][..], &["grub2-mkconfig", "-o", "x"], &[]] {
            assert!(!rebuilds(&CommandSpec::new(argv, "")), "{argv:?}");
        }
    }

    /// On systemd-boot with type #1 entries (Debian 12), kernel-install's copy of the
    /// kernel and initrd to the FAT ESP is not crash-safe: update-initramfs runs with it
    /// bypassed and gdrprov places the initrd where the kernel's entry loads it from.
    #[test]
    fn on_systemd_boot_gdrprov_places_the_initrd_on_the_esp_itself() {
        use crate::facts::boot_shape::{CmdlineHome, SdBoot};
        use crate::host::Placement;
        let k = "6.1.0-56-amd64";
        let entry = |v: &str| {
            format!("title Debian\nversion {v}\noptions root=/dev/vda2 ro\nlinux /4f1c/{v}/linux\ninitrd /4f1c/{v}/initrd.img-{v}\n")
        };
        let sd = |layout: Option<&str>| SdBoot {
            esp: "/boot/efi".into(),
            entries: vec![
                "/boot/efi/loader/entries/4f1c-6.1.0-55-amd64.conf".into(),
                format!("/boot/efi/loader/entries/4f1c-{k}.conf"),
            ],
            ukis: vec![],
            layout: layout.map(str::to_string),
            kernel_install: true,
            kernel_images: vec![],
            efi_default: None,
            efi_oneshot: None,
            efi_selected: None,
        };
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![kernel(k, &["nvidia_peermem"], &[])];
        w.seen
            .initramfs
            .insert(k.into(), Some(["nvidia_peermem".to_string()].into()));
        w.file(
            "/boot/efi/loader/entries/4f1c-6.1.0-55-amd64.conf",
            &entry("6.1.0-55-amd64"),
        );
        w.file(
            &format!("/boot/efi/loader/entries/4f1c-{k}.conf"),
            &entry(k),
        );
        w.facts.boot.cmdline_home = CmdlineHome::SystemdBoot(sd(None));
        let run_of = |w: &World| {
            let p = w.plan(&desired(ABSENT)).0.unwrap();
            p.changes
                .iter()
                .find_map(|c| match &c.action {
                    crate::plan::Action::Run { command } => Some(command.clone()),
                    _ => None,
                })
                .unwrap()
        };
        let c = run_of(&w);
        assert_eq!(c.argv, ["update-initramfs", "-u", "-k", k]);
        assert_eq!(
            c.env,
            [("KERNEL_INSTALL_BYPASS".to_string(), "1".to_string())].into()
        );
        assert_eq!(
            c.place,
            [Placement {
                from: format!("/boot/initrd.img-{k}"),
                to: format!("/boot/efi/4f1c/{k}/initrd.img-{k}"),
            }]
        );
        assert!(c
            .shell_line()
            .starts_with("KERNEL_INSTALL_BYPASS=1 update-initramfs"));
        // UKIs are rebuilt by kernel-install: left to it.
        w.facts.boot.cmdline_home = CmdlineHome::SystemdBoot(sd(Some("uki")));
        let c = run_of(&w);
        assert!(c.env.is_empty() && c.place.is_empty(), "{c:?}");
        // No entry of this kernel (nothing on the ESP to tear), or GRUB: as before.
        let mut only_other = sd(None);
        only_other.entries.pop();
        w.facts.boot.cmdline_home = CmdlineHome::SystemdBoot(only_other);
        let c = run_of(&w);
        assert!(c.env.is_empty() && c.place.is_empty(), "{c:?}");
        // An initrd line climbing out of the ESP is not followed.
        w.facts.boot.cmdline_home = CmdlineHome::SystemdBoot(sd(None));
        w.file(
            &format!("/boot/efi/loader/entries/4f1c-{k}.conf"),
            &entry(k).replace("initrd /4f1c", "initrd /../../etc/4f1c"),
        );
        let c = run_of(&w);
        assert!(c.place.is_empty(), "{c:?}");
    }

    #[test]
    fn a_builtin_module_cannot_be_blocked_and_says_so() {
        let mut w = World::image(OsFamily::Debian);
        w.seen.kernels = vec![kernel("6.8.0-1", &["x"], &["nv_peer_mem"])];
        let p = w.plan(&desired(ABSENT)).0.unwrap();
        assert!(p
            .warnings
            .iter()
            .any(|x| x.contains("`nv_peer_mem` is built into kernel 6.8.0-1")));
    }

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
