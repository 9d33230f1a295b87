//! Boot loader kind: GRUB (BIOS or EFI) with grub.cfg, or BLS entries; and
//! which boot runs: the one-shot `next_entry` of grubenv, the gdrprov entry
//! the running kernel was started from, and whether that is a trial boot.

use super::boot_shape::CmdlineHome;
use crate::host::Host;
use gdrprov_boot::{cmdline, entries};
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
    /// BLS entries without GRUB, and no systemd-boot with kernel-install.
    Bls,
    /// systemd-boot with kernel-install: type #1 entries
    /// (`$ESP/loader/entries`) or unified kernel images (`$ESP/EFI/Linux`).
    SystemdBoot,
    /// Boot loader files in the image, but the running kernel was started
    /// from outside the root (a hypervisor's direct kernel boot): they are
    /// not in use.
    External,
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
    /// grubenv's `next_entry`: the entry the next boot uses once
    /// (`grub-reboot`); GRUB clears it when it boots it.
    pub next_entry: Option<String>,
    /// The entry gdrprov generated (`boot.entry`, `apply --trial`) that the
    /// running kernel was started from: its grub.cfg id or BLS id, found by
    /// matching `/proc/cmdline` with the entries' kernel lines.
    pub running_entry: Option<String>,
    /// The running kernel was started from the trial entry of
    /// `apply --trial`: its [`TRIAL_MARKER`] is on `/proc/cmdline`.
    pub trial_running: bool,
    /// Where the kernel command line is set: on this host, or elsewhere.
    pub cmdline_home: super::boot_shape::CmdlineHome,
    /// What started the running kernel (`None` in an image root).
    pub booted: Option<super::boot_shape::Booted>,
}

/// The argument only the trial entry's kernel line carries, so that the
/// trial boot is told apart from the default even when their arguments are
/// otherwise the same. A dotted name the kernel ignores (an unused module
/// parameter) and never passes to init.
pub const TRIAL_MARKER: &str = "gdrprov.trial=1";

const GRUBENVS: [&str; 2] = ["/boot/grub/grubenv", "/boot/grub2/grubenv"];

pub fn probe(
    host: &Host,
    proc_cmdline: Option<&str>,
    kernel: &super::kernel::KernelFacts,
) -> BootFacts {
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
    let booted = super::boot_shape::booted(host, proc_cmdline, kernel);
    let cmdline_home = super::boot_shape::probe(host, proc_cmdline, booted.as_ref());
    let kind = match (grub, !bls_entries.is_empty(), efi) {
        _ if matches!(cmdline_home, CmdlineHome::SystemdBoot(_)) => BootLoaderKind::SystemdBoot,
        _ if matches!(
            cmdline_home,
            CmdlineHome::Elsewhere {
                unused_loader: Some(_),
                ..
            }
        ) =>
        {
            BootLoaderKind::External
        }
        (true, true, _) => BootLoaderKind::GrubBls,
        (true, false, true) => BootLoaderKind::GrubEfi,
        (true, false, false) => BootLoaderKind::GrubBios,
        (false, true, _) => BootLoaderKind::Bls,
        (false, false, _) => BootLoaderKind::Unknown,
    };
    let env = GRUBENVS
        .iter()
        .find_map(|p| host.read_fact(p))
        .unwrap_or_default();
    let running: Option<Vec<String>> = host
        .read_fact("/proc/cmdline")
        .map(|s| cmdline::split(s.trim()));
    // systemd-boot says itself which entry runs and which boots next.
    let (running_entry, next_entry) = match &cmdline_home {
        CmdlineHome::SystemdBoot(sd) => (
            sd.selected_id().filter(|i| entries::is_gdrprov_id(i)),
            sd.oneshot_id(),
        ),
        _ => (
            running
                .as_deref()
                .and_then(|r| running_gdrprov_entry(host, grub_cfg.as_deref(), &env, r)),
            entries::grubenv_get(&env, "next_entry"),
        ),
    };
    BootFacts {
        kind,
        efi,
        grub_cfg,
        bls_entries,
        next_entry,
        running_entry,
        trial_running: running
            .as_deref()
            .is_some_and(|r| r.iter().any(|a| a == TRIAL_MARKER)),
        cmdline_home,
        booted,
    }
}

/// The gdrprov entry whose kernel line is the running command line.
fn running_gdrprov_entry(
    host: &Host,
    grub_cfg: Option<&str>,
    env: &str,
    running: &[String],
) -> Option<String> {
    let from_cfg = grub_cfg
        .and_then(|p| host.read_fact(p))
        .map(|cfg| entries::parse_grub_cfg(&cfg))
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.id.as_deref().is_some_and(entries::is_gdrprov_id))
        .find(|m| entries::runs(running, m.kernel.as_deref(), &m.args))
        .and_then(|m| m.id);
    if from_cfg.is_some() {
        return from_cfg;
    }
    let kernelopts = entries::grubenv_get(env, "kernelopts").unwrap_or_default();
    host.list_dir("/boot/loader/entries")
        .into_iter()
        .filter_map(|n| n.strip_suffix(".conf").map(str::to_string))
        .filter(|id| id.contains(entries::BLS_INFIX))
        .find(|id| {
            host.read_fact(&format!("/boot/loader/entries/{id}.conf"))
                .map(|t| entries::parse_bls(id, &t, &kernelopts))
                .is_some_and(|e| entries::runs(running, Some(&e.linux), &e.options))
        })
}
