//! Guard rails: what a profile may not ask for, or only when it says so
//! explicitly. `files:` may not write gdrprov's own state, the files another
//! section of the profile owns (GRUB's defaults, boot entries, the kernel
//! command line file, the modprobe.d and unit files gdrprov writes) or the
//! kernel's interfaces (/proc, /sys, /dev); `boot.cmdline.absent` may not
//! remove an argument a host needs to boot unless `boot.cmdline.allow-removing`
//! names it. (Blocking the module of the root disk or of the boot NIC needs
//! facts: that check is in planning, `plan::modules::guard`.)

/// Where `files:` may not write: the path itself or anything under it; a
/// trailing `*`: any file whose path starts so. What it is, and what to use
/// instead.
const NOT_FOR_FILES: &[(&str, &str, &str)] = &[
    (
        "/var/lib/gdrprov",
        "gdrprov's own journal and state",
        "gdrprov writes it itself; remove this entry",
    ),
    (
        "/proc",
        "the kernel's process interface, not a file on disk",
        KERNEL_FIX,
    ),
    ("/sys", "the kernel's sysfs, not a file on disk", KERNEL_FIX),
    ("/dev", "device nodes, not a file on disk", KERNEL_FIX),
    (
        "/etc/default/grub",
        "GRUB's defaults, which `boot:` edits argument by argument (and regenerates grub.cfg from)",
        BOOT_FIX,
    ),
    (
        "/etc/default/grub.d/",
        "GRUB's defaults, which `boot:` edits argument by argument",
        BOOT_FIX,
    ),
    (
        "/etc/grub.d/",
        "GRUB's entry scripts, where `boot:` writes its entries",
        BOOT_FIX,
    ),
    (
        "/boot/grub/",
        "GRUB's generated configuration and environment (update-grub, grub-reboot)",
        BOOT_FIX,
    ),
    (
        "/boot/grub2/",
        "GRUB's generated configuration and environment (grub2-mkconfig, grub2-reboot)",
        BOOT_FIX,
    ),
    (
        "/boot/loader/",
        "boot loader entries, which `boot:` edits",
        BOOT_FIX,
    ),
    (
        "/boot/efi/loader/",
        "systemd-boot's entries and loader.conf, which `boot:` edits",
        BOOT_FIX,
    ),
    (
        "/efi/loader/",
        "systemd-boot's entries and loader.conf, which `boot:` edits",
        BOOT_FIX,
    ),
    (
        "/boot/efi/EFI/",
        "the EFI system partition's boot files",
        BOOT_FIX,
    ),
    (
        "/etc/kernel/cmdline",
        "the kernel command line of kernel-install, which `boot:` edits",
        BOOT_FIX,
    ),
    (
        "/etc/modprobe.d/gdrprov-*",
        "a modprobe.d file gdrprov writes for `modules:`",
        MODULES_FIX,
    ),
    (
        "/etc/modules-load.d/gdrprov*",
        "the modules-load.d file gdrprov writes for `modules.present`",
        MODULES_FIX,
    ),
    (
        "/etc/systemd/system/gdrprov-*",
        "a unit gdrprov writes (modules:, pcie:, verify:)",
        SECTION_FIX,
    ),
    (
        "/etc/systemd/system/openibd.service.d/gdrprov-*",
        "openibd's drop-in gdrprov writes for nvidia_peermem",
        MODULES_FIX,
    ),
    (
        "/etc/systemd/system/multi-user.target.d/gdrprov-*",
        "the drop-in gdrprov writes for `verify.first-boot`",
        SECTION_FIX,
    ),
    (
        "/etc/systemd/system/multi-user.target.wants/gdrprov-*",
        "a unit link gdrprov makes (pcie.acs)",
        SECTION_FIX,
    ),
    (
        "/etc/systemd/network/10-gdrprov-*",
        "a .link file gdrprov writes for `network.mtu`",
        SECTION_FIX,
    ),
];

const KERNEL_FIX: &str = "set what you need with `boot:`, `modules:` or `network:`, or write a file that configures it at boot (sysctl.d, udev rules)";
const BOOT_FIX: &str =
    "set kernel arguments with `boot.cmdline.present` / `absent` (and `boot.entry`) instead";
const MODULES_FIX: &str = "use `modules.present`, `absent` and `options` instead";
const SECTION_FIX: &str = "use the profile section that writes it instead";

/// Whether `files:` may write `path` (absolute, plain): the reason it may
/// not, with the fix.
pub fn files_target(path: &str) -> Result<(), String> {
    for (at, what, fix) in NOT_FOR_FILES {
        let hit = match at.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => {
                let dir = at.trim_end_matches('/');
                path == dir || path.starts_with(&format!("{dir}/"))
            }
        };
        if hit {
            return Err(format!(
                "{path} is {what}: `files:` may not write it; {fix}"
            ));
        }
    }
    Ok(())
}

/// Kernel arguments a host needs to boot, by key, and why.
const BOOT_CRITICAL: &[(&str, &str)] = &[
    ("root", "it names the root filesystem"),
    (
        "ro",
        "the root filesystem is mounted read-only first, for fsck",
    ),
    ("rw", "the root filesystem is mounted read-write"),
    ("init", "it names the first program the kernel runs"),
    ("rootfstype", "it names the root filesystem's type"),
    ("rootflags", "it gives the root filesystem's mount options"),
    ("rootwait", "the kernel waits for the root device to appear"),
    (
        "rootdelay",
        "the kernel waits for the root device to appear",
    ),
    ("nfsroot", "the root filesystem is on NFS"),
    (
        "ip",
        "it configures the network the root filesystem is reached over",
    ),
    ("rd.lvm.lv", "the initramfs activates the root's LVM volume"),
    (
        "rd.lvm.vg",
        "the initramfs activates the root's LVM volume group",
    ),
    ("rd.luks.uuid", "the initramfs unlocks the encrypted root"),
    ("rd.luks.name", "the initramfs unlocks the encrypted root"),
    ("cryptdevice", "the initramfs unlocks the encrypted root"),
    (
        "rd.md.uuid",
        "the initramfs assembles the root's RAID array",
    ),
    ("mount.usr", "it names the /usr filesystem"),
    (
        "systemd.verity",
        "the initramfs verifies the root with dm-verity",
    ),
    ("roothash", "the initramfs verifies the root with dm-verity"),
];

/// `boot.cmdline.absent` entries that remove an argument a host needs to
/// boot and that `allow-removing` does not name: the message naming the
/// first, with the fix.
/// Kernel command-line keys that block modules by name (the kernel's own,
/// kmod's and dracut's): a module blocked so is checked against the root
/// disk and the boot NIC as `modules.absent` is (`plan::modules::guard`).
pub const BLOCKING_KEYS: &[&str] = &[
    "module_blacklist",
    "modprobe.blacklist",
    "rd.driver.blacklist",
];

/// The modules a kernel argument blocks, with its key; empty for any other.
pub fn blocked_by_arg(arg: &str) -> Vec<(String, &'static str)> {
    let Some((key, value)) = arg.split_once('=') else {
        return Vec::new();
    };
    let Some(key) = BLOCKING_KEYS.iter().find(|k| **k == key) else {
        return Vec::new();
    };
    value
        .split(',')
        .filter(|m| !m.is_empty())
        .map(|m| (m.replace('-', "_"), *key))
        .collect()
}

/// Every module a composed profile blocks: `modules.absent`, and those the
/// kernel arguments it adds block ([`BLOCKING_KEYS`]), in the default entry
/// or a profile's own; with the key that blocks each.
pub fn blocked_modules(c: &crate::profile::Composed) -> Vec<(String, String)> {
    let doc = &c.doc;
    let mut out: Vec<(String, String)> = doc
        .modules
        .absent
        .iter()
        .map(|m| (m.replace('-', "_"), "modules.absent".to_string()))
        .collect();
    let args = doc
        .boot
        .cmdline
        .present
        .iter()
        .chain(c.entries.iter().flat_map(|(_, b)| b.cmdline.present.iter()));
    for a in args {
        for (m, _) in blocked_by_arg(a) {
            out.push((m, format!("boot.cmdline.present `{a}`")));
        }
    }
    out
}

/// `boot.cmdline.present`: never `--` (it ends the kernel's part of the
/// command line: every argument after it, gdrprov's and the host's, would
/// go to init instead); a module blocked by a kernel argument must be a
/// module name (and is checked against the boot devices at plan time).
pub fn boot_present(present: &[String]) -> Result<(), String> {
    for a in present {
        if a == "--" {
            return Err(
                "boot.cmdline.present: `--` ends the kernel's arguments (everything after it goes to init, the host's own arguments included); remove it, and give init's arguments in its own configuration".into(),
            );
        }
        for (m, key) in blocked_by_arg(a) {
            if m.len() > 56 || !m.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!(
                    "boot.cmdline.present: `{a}`: `{m}` is not a kernel module name ({key}= takes module names separated by `,`)"
                ));
            }
        }
    }
    Ok(())
}

/// The keys a `present` entry replaces dangerously: the root filesystem,
/// its type and options, init, and ro/rw. Setting any other boot-critical
/// key (`rootdelay=10`, `ip=dhcp`) adds a value the host lacked or tunes
/// one; `absent` (removing) keeps the whole [`BOOT_CRITICAL`] list.
const PRESENT_REPLACES: &[&str] = &["root", "rootfstype", "rootflags", "init", "ro", "rw"];

/// `boot.cmdline.present` entries that replace an argument a host needs to
/// boot, guarded exactly as `absent` is ([`boot_args`]): a `key=value`
/// removes the host's other values of `key` (`present: [root=/dev/sdb1]`
/// takes out the host's `root=UUID=...`), and `rw` / `ro` override each
/// other (the kernel takes the last). Refused unless `allow-removing`
/// names the key replaced.
pub fn boot_replacing(present: &[String], allowed: &[String]) -> Result<(), String> {
    for a in present {
        let replaced = match a.split_once('=') {
            Some((k, _)) => k.replace('-', "_"),
            None if a == "rw" => "ro".to_string(),
            None if a == "ro" => "rw".to_string(),
            None => continue,
        };
        let Some((key, why)) = BOOT_CRITICAL
            .iter()
            .filter(|(k, _)| PRESENT_REPLACES.contains(k))
            .find(|(k, _)| k.replace('-', "_") == replaced)
        else {
            continue;
        };
        if allowed.iter().any(|x| x == key) {
            continue;
        }
        let how = if a.contains('=') {
            format!(
                "replaces the host's own `{key}=` value (every other value of `{key}` is removed)"
            )
        } else {
            format!("overrides the host's `{key}`")
        };
        return Err(format!(
            "boot.cmdline.present: `{a}` {how}, an argument a host needs to boot ({why}); with the wrong one the host may not boot again. Remove it from the list; or, if this profile really must replace it, say so: `boot.cmdline.allow-removing: [{key}]`"
        ));
    }
    Ok(())
}

pub fn boot_args(absent: &[String], allowed: &[String]) -> Result<(), String> {
    for a in absent {
        // Removing `--` would hand init's arguments (the host's own) to the
        // kernel: it is the separator, not an argument gdrprov manages.
        if a == "--" {
            return Err(
                "boot.cmdline.absent: `--` is not a kernel argument but the end of them (what follows goes to init); removing it would give init's arguments to the kernel. Remove it from the profile".into(),
            );
        }
        let key = a.split_once('=').map_or(a.as_str(), |(k, _)| k);
        let Some((_, why)) = BOOT_CRITICAL.iter().find(|(k, _)| *k == key) else {
            continue;
        };
        if allowed.iter().any(|x| x == key || x == a) {
            continue;
        }
        return Err(format!(
            "boot.cmdline.absent: `{a}` removes an argument a host needs to boot ({why}); without it the host may not boot again. Remove it from the list; or, if this profile really must remove it, say so: `boot.cmdline.allow-removing: [{key}]`"
        ));
    }
    for x in allowed {
        if !BOOT_CRITICAL.iter().any(|(k, _)| k == x) {
            return Err(format!(
                "boot.cmdline.allow-removing: `{x}` is not one of the arguments gdrprov guards ({}); list only those, by key",
                BOOT_CRITICAL.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_may_not_write_what_another_section_owns() {
        for p in [
            "/var/lib/gdrprov/state.json",
            "/var/lib/gdrprov",
            "/proc/cmdline",
            "/sys/module/x/parameters/y",
            "/dev/sda",
            "/etc/default/grub",
            "/etc/default/grub.d/50-x.cfg",
            "/etc/grub.d/40_custom",
            "/boot/loader/entries/x.conf",
            "/boot/efi/loader/loader.conf",
            "/etc/kernel/cmdline",
            "/etc/modprobe.d/gdrprov-blacklist.conf",
            "/etc/modules-load.d/gdrprov.conf",
            "/etc/systemd/system/gdrprov-acs.service",
            "/etc/systemd/network/10-gdrprov-eth0.link",
        ] {
            assert!(files_target(p).is_err(), "{p}");
        }
        for p in [
            "/etc/nccl.conf",
            "/etc/default/grubby",
            "/etc/modprobe.d/mine.conf",
            "/var/lib/gdrprov-other/x",
            "/device.conf",
            "/etc/gdrprov-test.conf",
            "/procfile",
        ] {
            assert!(files_target(p).is_ok(), "{p}");
        }
        let e = files_target("/etc/default/grub").unwrap_err();
        assert!(e.contains("boot.cmdline.present"), "{e}");
    }

    #[test]
    fn removing_a_boot_argument_needs_saying_so() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let e = boot_args(&s(&["quiet", "root"]), &[]).unwrap_err();
        assert!(
            e.contains("`root`") && e.contains("allow-removing: [root]"),
            "{e}"
        );
        assert!(boot_args(&s(&["root=/dev/sda1"]), &[]).is_err());
        assert!(boot_args(&s(&["init=/bin/bash"]), &[]).is_err());
        assert!(boot_args(&s(&["root", "ro"]), &s(&["root", "ro"])).is_ok());
        assert!(boot_args(&s(&["quiet", "splash", "iommu"]), &[]).is_ok());
        let e = boot_args(&[], &s(&["quiet"])).unwrap_err();
        assert!(e.contains("allow-removing: `quiet`"), "{e}");
    }

    #[test]
    fn replacing_a_boot_argument_needs_saying_so_too() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        for (a, key) in [
            ("root=/dev/sdb1", "root"),
            ("init=/bin/bash", "init"),
            ("rootfstype=xfs", "rootfstype"),
            ("rootflags=ro", "rootflags"),
            ("rw", "ro"),
            ("ro", "rw"),
        ] {
            let e = boot_replacing(&s(&[a]), &[]).unwrap_err();
            assert!(
                e.contains(&format!("`{a}`")) && e.contains(&format!("allow-removing: [{key}]")),
                "{e}"
            );
            assert!(boot_replacing(&s(&[a]), &s(&[key])).is_ok(), "{a}");
        }
        assert!(boot_replacing(&s(&["iommu=pt", "quiet", "rootwait"]), &[]).is_ok());
        // Every other boot-critical key may be set by `present` (the
        // issue's list is the one above); removing it is still guarded.
        for (key, _) in BOOT_CRITICAL {
            if PRESENT_REPLACES.contains(key) {
                continue;
            }
            let a = format!("{key}=10");
            assert!(boot_replacing(&s(&[&a]), &[]).is_ok(), "{a}");
            assert!(boot_args(&s(&[key]), &[]).is_err(), "absent {key}");
        }
        for a in ["rootdelay=10", "ip=dhcp"] {
            assert!(boot_replacing(&s(&[a]), &[]).is_ok(), "{a}");
        }
    }
}
