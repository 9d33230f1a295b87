//! Where the kernel command line of a root is set: by a boot loader on the
//! host that gdrprov can edit (GRUB's defaults, BLS or systemd-boot entries,
//! a UKI), or outside it (a hypervisor's direct kernel boot, PXE/iPXE, a
//! container's host). Read-only; planning decides what follows from it.

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
    /// Kernels with an image kernel-install can rebuild a UKI from:
    /// `/usr/lib/modules/VERSION/vmlinuz`.
    pub kernel_images: Vec<String>,
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
    let mut kernel_images: Vec<String> = host
        .list_dir("/usr/lib/modules")
        .into_iter()
        .filter(|v| host.exists(&format!("/usr/lib/modules/{v}/vmlinuz")))
        .collect();
    kernel_images.sort();
    Some(SdBoot {
        entries: list(&format!("{esp}/loader/entries"), ".conf"),
        ukis: list(&format!("{esp}/EFI/Linux"), ".efi"),
        layout: install_conf_layout(host),
        kernel_install: host.exists("/usr/bin/kernel-install")
            || host.exists("/bin/kernel-install"),
        kernel_images,
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

/// Looks for every place a boot loader keeps the command line; with none
/// found, gathers what tells who starts the kernel instead.
pub fn probe(host: &Host, proc_cmdline: Option<&str>) -> CmdlineHome {
    if let Some(sd) = sdboot(host) {
        return CmdlineHome::SystemdBoot(sd);
    }
    if let Some(f) = LOADER_FILES.iter().find(|p| host.exists(p)) {
        return CmdlineHome::OnHost {
            evidence: (*f).to_string(),
        };
    }
    for esp in ESP_DIRS {
        let entries = format!("{}/loader/entries", esp.trim_end_matches('/'));
        if host.list_dir(&entries).iter().any(|e| e.ends_with(".conf")) {
            return CmdlineHome::OnHost { evidence: entries };
        }
        let ukis = format!("{}/EFI/Linux", esp.trim_end_matches('/'));
        if host
            .list_dir(&ukis)
            .iter()
            .any(|e| e.to_ascii_lowercase().ends_with(".efi"))
        {
            return CmdlineHome::OnHost { evidence: ukis };
        }
        // A GRUB installed for EFI keeps a grub.cfg in the ESP.
        let efi = format!("{}/EFI", esp.trim_end_matches('/'));
        for vendor in host.list_dir(&efi) {
            let cfg = format!("{efi}/{vendor}/grub.cfg");
            if host.exists(&cfg) {
                return CmdlineHome::OnHost { evidence: cfg };
            }
        }
    }
    let mut evidence = vec![
        "no boot loader configuration (no /etc/default/grub, grub.cfg, /etc/kernel/cmdline, loader entries, unified kernel image or extlinux.conf)".to_string(),
    ];
    let cmdline = proc_cmdline.unwrap_or("");
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
    let starter = if let Some(why) = container {
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
    };
    CmdlineHome::Elsewhere { starter, evidence }
}

#[cfg(test)]
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
        assert!(!probe(&h, None).is_elsewhere());
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
            assert!(!probe(&h, None).is_elsewhere(), "{f}");
        }
    }

    #[test]
    fn nothing_is_elsewhere_and_names_the_starter() {
        let (_d, h) = host_with(&[("/proc/cpuinfo", "flags\t\t: fpu sse hypervisor\n")]);
        match probe(&h, Some("console=ttyS0 root=/dev/vda")) {
            CmdlineHome::Elsewhere { starter, .. } => assert_eq!(starter, Starter::Hypervisor),
            other => panic!("{other:?}"),
        }
        let (_d, h) = host_with(&[("/.dockerenv", "")]);
        assert!(matches!(
            probe(&h, None),
            CmdlineHome::Elsewhere {
                starter: Starter::Container,
                ..
            }
        ));
        let (_d, h) = host_with(&[]);
        assert!(matches!(
            probe(&h, Some("BOOTIF=01-aa-bb ip=dhcp")),
            CmdlineHome::Elsewhere {
                starter: Starter::Network,
                ..
            }
        ));
        // An empty ESP directory is no boot loader.
        let (_d, h) = host_with(&[("/boot/efi/EFI/.keep", "")]);
        assert!(matches!(
            probe(&h, None),
            CmdlineHome::Elsewhere {
                starter: Starter::Unknown,
                ..
            }
        ));
    }
}
