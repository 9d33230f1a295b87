//! Where the kernel command line of a root is set: by a boot loader on the
//! host that gdrprov can edit (GRUB's defaults, BLS or systemd-boot entries,
//! a UKI), or outside it (a hypervisor's direct kernel boot, PXE/iPXE, a
//! container's host). Read-only; planning decides what follows from it.

use super::kernel::KernelFacts;
use crate::host::Host;
use serde::Serialize;

/// Every file a boot loader or kernel-install setup keeps the command line
/// in (or builds it from). None of them present: the command line is not
/// set on this host.
const LOADER_FILES: [&str; 10] = [
    "/etc/default/grub",
    "/boot/grub/grub.cfg",
    "/boot/grub2/grub.cfg",
    "/etc/kernel/cmdline",
    "/etc/kernel/install.conf",
    "/boot/extlinux/extlinux.conf",
    "/boot/syslinux/syslinux.cfg",
    "/boot/firmware/cmdline.txt",
    "/etc/zipl.conf",
    "/boot/loader/loader.conf",
];

/// Where an EFI system partition (or the extended boot partition) is mounted.
pub const ESP_DIRS: [&str; 3] = ["/efi", "/boot/efi", "/boot"];

/// What sets the kernel command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CmdlineHome {
    /// A boot loader on this root (GRUB, BLS/systemd-boot entries, a UKI,
    /// extlinux, ...): the boot modules edit it.
    OnHost {
        /// The first boot loader file found, for people.
        evidence: String,
    },
    /// systemd-boot (or another Boot Loader Specification loader) with
    /// kernel-install: `/etc/kernel/cmdline` for future kernels, the entries'
    /// `options` lines (or UKIs) for the installed ones.
    SystemdBoot(SdBoot),
    /// Nothing on this root sets it: whatever starts the kernel does.
    Elsewhere {
        /// What starts the kernel, as far as the root tells.
        starter: Starter,
        /// What was looked for and not found, and what points to the starter.
        evidence: Vec<String>,
        /// The boot loader file on the root that does not start its kernel
        /// (a root booted from outside with GRUB's files in its image).
        #[serde(skip_serializing_if = "Option::is_none")]
        unused_loader: Option<String>,
    },
}

/// A systemd-boot/kernel-install root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SdBoot {
    /// Where the ESP (or XBOOTLDR) with `loader/` is mounted: `/efi`,
    /// `/boot/efi` or `/boot`.
    pub esp: String,
    /// Type #1 entries, `$ESP/loader/entries/*.conf`, sorted.
    pub entries: Vec<String>,
    /// Unified kernel images, `$ESP/EFI/Linux/*.efi`, sorted.
    pub ukis: Vec<String>,
    /// `layout=` of `/etc/kernel/install.conf` (or /usr/lib/kernel/install.conf).
    pub layout: Option<String>,
    /// `/usr/bin/kernel-install` exists.
    pub kernel_install: bool,
    /// Kernels with an image kernel-install can rebuild a UKI from, where
    /// the distribution keeps it: `/usr/lib/modules/VERSION/vmlinuz`
    /// (Fedora, Arch), else `/boot/vmlinuz-VERSION` (Debian, Ubuntu).
    pub kernel_images: Vec<KernelImage>,
    /// systemd-boot's EFI variables on the running system (entry ids, as
    /// the variables give them): the default `bootctl set-default` set
    /// (`LoaderEntryDefault`, it wins over loader.conf), the one-shot entry
    /// of the next boot (`LoaderEntryOneShot`, systemd-boot clears it when
    /// it boots it) and the entry this boot was started from
    /// (`LoaderEntrySelected`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efi_default: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efi_oneshot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub efi_selected: Option<String>,
}

impl SdBoot {
    /// The entry this boot was started from, by id (`LoaderEntrySelected`).
    pub fn selected_id(&self) -> Option<String> {
        var_id(&self.efi_selected)
    }

    /// The one-shot entry of the next boot, by id (`LoaderEntryOneShot`).
    pub fn oneshot_id(&self) -> Option<String> {
        var_id(&self.efi_oneshot)
    }

    /// The host builds UKIs through kernel-install.
    pub fn uki_layout(&self) -> bool {
        self.layout.as_deref() == Some("uki")
    }
}

/// A kernel and the image file kernel-install builds its UKI from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelImage {
    pub version: String,
    pub path: String,
}

/// The kernels' images, by version (oldest first): `/usr/lib/modules/V/vmlinuz`
/// where it is there, else `/boot/vmlinuz-V`.
fn kernel_images(host: &Host) -> Vec<KernelImage> {
    let mut out: Vec<KernelImage> = host
        .list_dir("/usr/lib/modules")
        .into_iter()
        .map(|v| (format!("/usr/lib/modules/{v}/vmlinuz"), v))
        .chain(
            host.list_dir_prefix("/boot", "vmlinuz-")
                .into_iter()
                .filter_map(|f| {
                    Some((
                        format!("/boot/{f}"),
                        f.strip_prefix("vmlinuz-")?.to_string(),
                    ))
                }),
        )
        .filter(|(path, v)| !v.is_empty() && host.exists(path))
        .map(|(path, version)| KernelImage { version, path })
        .collect();
    out.sort_by(|a, b| crate::versions::compare(&a.version, &b.version));
    out.dedup_by(|later, first| later.version == first.version);
    out
}

/// The GRUB files: any of them makes the GRUB modules responsible.
const GRUB_FILES: [&str; 3] = [
    "/etc/default/grub",
    "/boot/grub/grub.cfg",
    "/boot/grub2/grub.cfg",
];

fn install_conf_layout(host: &Host) -> Option<String> {
    ["/etc/kernel/install.conf", "/usr/lib/kernel/install.conf"]
        .iter()
        .find_map(|p| host.read_fact(p))
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("layout=")
                    .map(|v| v.trim().trim_matches('"').to_string())
            })
        })
}

/// A systemd-boot root: no GRUB, and an ESP with `loader/` or UKIs, or
/// kernel-install's own files.
fn sdboot(host: &Host) -> Option<SdBoot> {
    if GRUB_FILES.iter().any(|p| host.exists(p)) {
        return None;
    }
    let list = |dir: &str, ext: &str| -> Vec<String> {
        let mut v: Vec<String> = host
            .list_dir(dir)
            .into_iter()
            .filter(|e| e.to_ascii_lowercase().ends_with(ext))
            .map(|e| format!("{dir}/{e}"))
            .collect();
        v.sort();
        v
    };
    let esp = ESP_DIRS.iter().find(|d| {
        host.exists(&format!("{d}/loader/loader.conf"))
            || !list(&format!("{d}/loader/entries"), ".conf").is_empty()
            || !list(&format!("{d}/EFI/Linux"), ".efi").is_empty()
    });
    let kernel_files =
        host.exists("/etc/kernel/cmdline") || host.exists("/etc/kernel/install.conf");
    let esp = match esp {
        Some(e) => e.to_string(),
        None if kernel_files => ESP_DIRS
            .iter()
            .find(|d| host.exists(&format!("{d}/EFI")))
            .unwrap_or(&"/boot")
            .to_string(),
        None => return None,
    };
    Some(SdBoot {
        entries: list(&format!("{esp}/loader/entries"), ".conf"),
        ukis: list(&format!("{esp}/EFI/Linux"), ".efi"),
        layout: install_conf_layout(host),
        kernel_install: host.exists("/usr/bin/kernel-install")
            || host.exists("/bin/kernel-install"),
        kernel_images: kernel_images(host),
        esp,
        efi_default: loader_var(host, "LoaderEntryDefault"),
        efi_oneshot: loader_var(host, "LoaderEntryOneShot"),
        efi_selected: loader_var(host, "LoaderEntrySelected"),
    })
}

/// An entry id as systemd-boot's EFI variables name it (the file name).
fn var_id(v: &Option<String>) -> Option<String> {
    v.as_deref()
        .map(|v| gdrprov_boot::sdboot::id_of_var(v).to_string())
}

/// One of systemd-boot's EFI variables, as text (absent in an image).
fn loader_var(host: &Host, name: &str) -> Option<String> {
    let path = format!(
        "/sys/firmware/efi/efivars/{name}-{}",
        gdrprov_boot::sdboot::LOADER_GUID
    );
    host.read_fact_bytes(&path, 4096)
        .and_then(|raw| gdrprov_boot::sdboot::efivar_text(&raw))
}

/// What boots a host whose command line is not set on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Starter {
    /// A container: it runs on its host's kernel.
    Container,
    /// A VM whose hypervisor loads the kernel itself (direct kernel boot).
    Hypervisor,
    /// A network boot (PXE/iPXE) whose configuration names the arguments.
    Network,
    /// Not known (an image root, or nothing tells).
    Unknown,
}

impl Starter {
    /// Where the arguments must be set instead, for people.
    pub fn where_to_set(self) -> &'static str {
        match self {
            Starter::Container => {
                "the kernel command line of the machine the container runs on (containers share its kernel)"
            }
            Starter::Hypervisor => {
                "the hypervisor's kernel arguments for this VM (direct kernel boot: e.g. qemu -append, Firecracker's boot_args, libvirt's <cmdline>), or the cloud's instance or image settings"
            }
            Starter::Network => {
                "the kernel arguments of the PXE/iPXE boot configuration that boots this host"
            }
            Starter::Unknown => {
                "whatever boots this root (the hypervisor's or PXE's kernel arguments, the cloud's instance settings); if it is an image that gets a boot loader later, install the boot loader into it first"
            }
        }
    }
}

impl CmdlineHome {
    pub fn is_elsewhere(&self) -> bool {
        matches!(self, CmdlineHome::Elsewhere { .. })
    }
}

/// What started the running kernel, as the running system tells it. Read
/// only where the root shows a running kernel (`/proc/cmdline` in it: the
/// live system or a snapshot of one); an image root has none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Booted {
    /// `BOOT_IMAGE=` of the running command line: GRUB, syslinux and
    /// extlinux put the kernel's path there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boot_image: Option<String>,
    /// An `initrd=` with a path on the running command line: systemd-boot
    /// and other EFI loaders on the disk put it there (a hypervisor's
    /// firmware writes a bare `initrd=initrd`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_initrd: Option<String>,
    /// The running kernel (`/proc/sys/kernel/osrelease`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The running kernel is among the installed ones (`/lib/modules/V`,
    /// `/boot/vmlinuz-V`).
    pub kernel_installed: bool,
    /// Kernel images in `/boot` (`vmlinuz*`, `vmlinux*`, `bzImage*`,
    /// `Image*`, `kernel-*`), any version.
    pub boot_kernels: Vec<String>,
    /// The Boot Loader Interface variables of the loader that started this
    /// boot (`LoaderInfo`, `LoaderEntrySelected`: systemd-boot sets them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_info: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loader_entry: Option<String>,
}

impl Booted {
    /// The running kernel came from outside the root: no boot loader
    /// marked the command line or left its variables, and the kernel that
    /// runs is not installed here, nor any other in /boot.
    pub fn from_outside(&self) -> bool {
        self.boot_image.is_none()
            && self.loader_initrd.is_none()
            && self.loader_info.is_none()
            && self.loader_entry.is_none()
            && self.kernel.is_some()
            && !self.kernel_installed
            && self.boot_kernels.is_empty()
    }
}

/// Kernel image names in /boot, as boot loaders find them.
const BOOT_KERNEL_PREFIXES: [&str; 5] = ["vmlinuz", "vmlinux", "bzImage", "Image", "kernel-"];

/// What started the running kernel; `None` for an image root (no
/// `/proc/cmdline`).
pub fn booted(host: &Host, proc_cmdline: Option<&str>, kernel: &KernelFacts) -> Option<Booted> {
    let line = proc_cmdline?;
    let args = gdrprov_boot::cmdline::split(line);
    let value = |key: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(key))
            .map(str::to_string)
    };
    let mut boot_kernels: Vec<String> = BOOT_KERNEL_PREFIXES
        .iter()
        .flat_map(|p| host.list_dir_prefix("/boot", p))
        .map(|f| format!("/boot/{f}"))
        .collect();
    boot_kernels.sort();
    boot_kernels.dedup();
    Some(Booted {
        boot_image: value("BOOT_IMAGE="),
        loader_initrd: value("initrd=").filter(|v| v.contains(['\\', '/'])),
        kernel_installed: kernel
            .running
            .as_ref()
            .is_some_and(|r| kernel.installed.contains(r)),
        kernel: kernel.running.clone(),
        boot_kernels,
        loader_info: loader_var(host, "LoaderInfo"),
        loader_entry: loader_var(host, "LoaderEntrySelected"),
    })
}

/// The boot loader configuration on the root, if any: systemd-boot with
/// kernel-install, else the first boot loader file found.
fn on_root(host: &Host) -> Option<CmdlineHome> {
    if let Some(sd) = sdboot(host) {
        return Some(CmdlineHome::SystemdBoot(sd));
    }
    if let Some(f) = LOADER_FILES.iter().find(|p| host.exists(p)) {
        return Some(CmdlineHome::OnHost {
            evidence: (*f).to_string(),
        });
    }
    for esp in ESP_DIRS {
        let entries = format!("{}/loader/entries", esp.trim_end_matches('/'));
        if host.list_dir(&entries).iter().any(|e| e.ends_with(".conf")) {
            return Some(CmdlineHome::OnHost { evidence: entries });
        }
        let ukis = format!("{}/EFI/Linux", esp.trim_end_matches('/'));
        if host
            .list_dir(&ukis)
            .iter()
            .any(|e| e.to_ascii_lowercase().ends_with(".efi"))
        {
            return Some(CmdlineHome::OnHost { evidence: ukis });
        }
        // A GRUB installed for EFI keeps a grub.cfg in the ESP.
        let efi = format!("{}/EFI", esp.trim_end_matches('/'));
        for vendor in host.list_dir(&efi) {
            let cfg = format!("{efi}/{vendor}/grub.cfg");
            if host.exists(&cfg) {
                return Some(CmdlineHome::OnHost { evidence: cfg });
            }
        }
    }
    None
}

/// Why a root's boot loader files do not set the running command line.
fn outside_evidence(b: &Booted, files: &str) -> Vec<String> {
    let k = b.kernel.as_deref().unwrap_or("?");
    vec![
        format!("the running kernel {k} was not started from this root: it is not installed here (no /lib/modules/{k}, no /boot/vmlinuz-{k}) and /boot holds no kernel"),
        "no boot loader marked the running command line (no BOOT_IMAGE=, which GRUB and syslinux add; no initrd= path) or set its EFI variables (no LoaderInfo, LoaderEntrySelected)".into(),
        format!("{files} is in the image, but the boot loader it configures does not start this host: editing it would not change the command line"),
    ]
}

/// Where the command line is set. A root whose running kernel came from
/// outside (`booted`, see [`Booted::from_outside`]) has it set elsewhere
/// even with boot loader files in its image; otherwise the boot loader
/// files decide, as in an image root (`booted` is `None`).
pub fn probe(host: &Host, proc_cmdline: Option<&str>, booted: Option<&Booted>) -> CmdlineHome {
    let mut unused_loader = None;
    let mut evidence = match (on_root(host), booted) {
        (Some(home), Some(b)) if b.from_outside() => {
            let files = match home {
                CmdlineHome::OnHost { evidence } => evidence,
                CmdlineHome::SystemdBoot(sd) => format!("systemd-boot's ESP {}", sd.esp),
                CmdlineHome::Elsewhere { .. } => String::new(),
            };
            let e = outside_evidence(b, &files);
            unused_loader = Some(files);
            e
        }
        (Some(home), _) => return home,
        (None, _) => vec![
            "no boot loader configuration (no /etc/default/grub, grub.cfg, /etc/kernel/cmdline, loader entries, unified kernel image or extlinux.conf)".to_string(),
        ],
    };
    let starter = starter(host, proc_cmdline.unwrap_or(""), &mut evidence);
    CmdlineHome::Elsewhere {
        starter,
        evidence,
        unused_loader,
    }
}

/// [`probe`] of a root on its own (for the `boot` commands, which gather
/// no other facts): its running command line and kernel read here.
pub fn probe_root(host: &Host) -> CmdlineHome {
    let line = host.read_fact("/proc/cmdline");
    let line = line.as_deref().map(str::trim);
    let kernel = super::kernel::probe(host);
    let booted = booted(host, line, &kernel);
    probe(host, line, booted.as_ref())
}

/// What starts the kernel of a root whose command line is set outside it,
/// with what tells so added to `evidence`.
fn starter(host: &Host, cmdline: &str, evidence: &mut Vec<String>) -> Starter {
    let args: Vec<&str> = cmdline.split_whitespace().collect();
    let container = super::platform::container_marker(host);
    let network = args.iter().any(|a| {
        a.starts_with("BOOTIF=")
            || a.starts_with("nfsroot=")
            || *a == "root=/dev/nfs"
            || a.starts_with("ip=")
            || a.starts_with("initrd=http")
    });
    let firecracker = args.contains(&"--firecracker-init");
    let hypervisor = super::platform::hypervisor(host);
    let dmi = host
        .read_fact("/sys/class/dmi/id/sys_vendor")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if let Some(why) = container {
        evidence.push(format!("a container marker: {why}"));
        Starter::Container
    } else if network {
        evidence
            .push("the running command line names a network boot (BOOTIF=, ip=, nfsroot=)".into());
        Starter::Network
    } else if firecracker || hypervisor.is_some() {
        if firecracker {
            evidence.push("the running command line is Firecracker's (--firecracker-init)".into());
        }
        if let Some(why) = hypervisor {
            evidence.push(format!("{why} (a virtual machine)"));
        }
        if let Some(v) = dmi {
            evidence.push(format!("the system vendor is {v}"));
        }
        Starter::Hypervisor
    } else {
        Starter::Unknown
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    fn host_with(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
        let dir = tempfile::tempdir().unwrap();
        for (p, c) in files {
            let path = dir.path().join(p.trim_start_matches('/'));
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, c).unwrap();
        }
        let host = Host::open(dir.path(), true).unwrap();
        (dir, host)
    }

    #[test]
    fn grub_defaults_is_on_host() {
        let (_d, h) = host_with(&[("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n")]);
        assert!(!probe(&h, None, None).is_elsewhere());
    }

    #[test]
    fn loader_entry_on_esp_or_uki_is_on_host() {
        for f in [
            "/efi/loader/entries/abc-6.8.conf",
            "/boot/efi/loader/entries/x.conf",
            "/boot/efi/EFI/Linux/abc-6.8.efi",
            "/boot/efi/EFI/ubuntu/grub.cfg",
        ] {
            let (_d, h) = host_with(&[(f, "x\n")]);
            assert!(!probe(&h, None, None).is_elsewhere(), "{f}");
        }
    }

    #[test]
    fn nothing_is_elsewhere_and_names_the_starter() {
        let (_d, h) = host_with(&[("/proc/cpuinfo", "flags\t\t: fpu sse hypervisor\n")]);
        match probe(&h, Some("console=ttyS0 root=/dev/vda"), None) {
            CmdlineHome::Elsewhere { starter, .. } => assert_eq!(starter, Starter::Hypervisor),
            other => panic!("{other:?}"),
        }
        let (_d, h) = host_with(&[("/.dockerenv", "")]);
        assert!(matches!(
            probe(&h, None, None),
            CmdlineHome::Elsewhere {
                starter: Starter::Container,
                ..
            }
        ));
        let (_d, h) = host_with(&[]);
        assert!(matches!(
            probe(&h, Some("BOOTIF=01-aa-bb ip=dhcp"), None),
            CmdlineHome::Elsewhere {
                starter: Starter::Network,
                ..
            }
        ));
        // An empty ESP directory is no boot loader.
        let (_d, h) = host_with(&[("/boot/efi/EFI/.keep", "")]);
        assert!(matches!(
            probe(&h, None, None),
            CmdlineHome::Elsewhere {
                starter: Starter::Unknown,
                ..
            }
        ));
    }

    #[test]
    fn grub_files_of_a_kernel_booted_from_outside_are_not_in_use() {
        let grub = ("/etc/default/grub", "GRUB_CMDLINE_LINUX=\"\"\n");
        let (_d, h) = host_with(&[grub, ("/proc/sys/kernel/osrelease", "6.18-fc\n")]);
        let kernel = super::super::kernel::probe(&h);
        let line = "console=ttyS0 -- --firecracker-init";
        let b = booted(&h, Some(line), &kernel).unwrap();
        assert!(b.from_outside(), "{b:?}");
        match probe(&h, Some(line), Some(&b)) {
            CmdlineHome::Elsewhere {
                starter,
                unused_loader,
                ..
            } => {
                assert_eq!(starter, Starter::Hypervisor);
                assert_eq!(unused_loader.as_deref(), Some("/etc/default/grub"));
            }
            other => panic!("{other:?}"),
        }
        // An image root (no running kernel) keeps its boot loader.
        assert!(booted(&h, None, &kernel).is_none());
        assert!(!probe(&h, None, None).is_elsewhere());
        // Any one sign of a boot loader on the root: GRUB's files are used.
        for (extra, line) in [
            (("/boot/vmlinuz-6.8.0", ""), line),
            (("/lib/modules/6.18-fc/modules.dep", ""), line),
            (("/x", ""), "BOOT_IMAGE=/vmlinuz-6.18-fc ro"),
            (("/x", ""), "initrd=\\abc\\6.18\\initrd ro"),
        ] {
            let (_d, h) = host_with(&[grub, ("/proc/sys/kernel/osrelease", "6.18-fc\n"), extra]);
            let kernel = super::super::kernel::probe(&h);
            let b = booted(&h, Some(line), &kernel).unwrap();
            assert!(!b.from_outside(), "{extra:?} {line}: {b:?}");
            assert!(!probe(&h, Some(line), Some(&b)).is_elsewhere());
        }
        // A hypervisor's firmware writes a bare initrd=: no boot loader's mark.
        let b = booted(&h, Some("initrd=initrd ro"), &kernel).unwrap();
        assert!(b.from_outside(), "{b:?}");
    }

    #[test]
    fn kernel_images_where_the_distribution_keeps_them() {
        let (_d, h) = host_with(&[
            ("/usr/lib/modules/6.12.1/vmlinuz", "k"),
            ("/boot/vmlinuz-6.12.1", "k"),
            ("/usr/lib/modules/6.12.9/modules.dep", ""),
            ("/boot/vmlinuz-6.12.9", "k"),
            ("/usr/lib/modules/6.1.0/modules.dep", ""),
        ]);
        let got: Vec<(String, String)> = kernel_images(&h)
            .into_iter()
            .map(|k| (k.version, k.path))
            .collect();
        assert_eq!(
            got,
            [
                ("6.12.1".into(), "/usr/lib/modules/6.12.1/vmlinuz".into()),
                ("6.12.9".into(), "/boot/vmlinuz-6.12.9".into()),
            ]
        );
    }
}
