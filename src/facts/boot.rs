//! Boot loader kind: GRUB (BIOS or EFI) with grub.cfg, or BLS entries.

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BootLoaderKind {
    /// GRUB with Boot Loader Specification entries (`/boot/loader/entries`, RHEL family).
    GrubBls,
    /// GRUB booted through EFI.
    GrubEfi,
    /// GRUB booted from BIOS.
    GrubBios,
    /// systemd-boot or another BLS loader without GRUB.
    Bls,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct BootFacts {
    pub kind: BootLoaderKind,
    /// Firmware is EFI (`/sys/firmware/efi`, or an EFI system partition in an image).
    pub efi: bool,
    /// The generated GRUB configuration, if any.
    pub grub_cfg: Option<String>,
    /// BLS entry files.
    pub bls_entries: Vec<String>,
    /// Where the kernel command line is set: on this host, or elsewhere.
    pub cmdline_home: super::boot_shape::CmdlineHome,
}

pub fn probe(host: &Host, proc_cmdline: Option<&str>) -> BootFacts {
    let grub_cfg = ["/boot/grub/grub.cfg", "/boot/grub2/grub.cfg"]
        .into_iter()
        .find(|p| host.exists(p))
        .map(String::from);
    let bls_entries: Vec<String> = host
        .list_dir("/boot/loader/entries")
        .into_iter()
        .filter(|e| e.ends_with(".conf"))
        .collect();
    let efi = host.exists("/sys/firmware/efi") || !host.list_dir("/boot/efi/EFI").is_empty();
    let grub = grub_cfg.is_some() || host.exists("/etc/default/grub");
    let kind = match (grub, !bls_entries.is_empty(), efi) {
        (true, true, _) => BootLoaderKind::GrubBls,
        (true, false, true) => BootLoaderKind::GrubEfi,
        (true, false, false) => BootLoaderKind::GrubBios,
        (false, true, _) => BootLoaderKind::Bls,
        (false, false, _) => BootLoaderKind::Unknown,
    };
    BootFacts {
        kind,
        efi,
        grub_cfg,
        bls_entries,
        cmdline_home: super::boot_shape::probe(host, proc_cmdline),
    }
}
