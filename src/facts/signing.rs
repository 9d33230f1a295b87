//! Module signing: whether the kernel insists on signed modules (Secure Boot
//! from its EFI variable, the lockdown mode, `module.sig_enforce`) and how
//! each out-of-tree module GPUDirect uses is signed (`modinfo`'s signer and
//! key; a loaded module's taint flags), so a module the kernel will refuse is
//! named before it is loaded. Each part says when it could not be read (no
//! EFI, no lockdown LSM, no modinfo in an image) instead of guessing.

use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

/// The EFI variable holding the Secure Boot state (4 bytes of attributes, then
/// one byte: 1 on).
pub const SECURE_BOOT_VAR: &str =
    "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// The out-of-tree modules GPUDirect setups load, whose signature matters.
pub const OUT_OF_TREE: &[&str] = &[
    "nvidia",
    "nvidia_peermem",
    "nv_peer_mem",
    "nvidia_fs",
    "gdrdrv",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SecureBoot {
    On,
    Off,
    /// Booted without EFI (no `/sys/firmware/efi`): no Secure Boot.
    NoEfi,
    /// Not readable here (an image root, efivarfs not mounted).
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleSig {
    pub module: String,
    /// The kernel `modinfo` was asked for.
    pub kernel: String,
    pub file: Option<String>,
    /// `intree: Y`: built with the kernel (signed with its key).
    pub in_tree: bool,
    pub signer: Option<String>,
    pub sig_key: Option<String>,
    pub version: Option<String>,
    /// `/sys/module/M/taint` of a loaded module (`O` out of tree, `E`
    /// unsigned or signed with a key the kernel lacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taint: Option<String>,
    /// Whether a key of the signer's name is in the kernel's keyrings
    /// (`/proc/keys`); `None` when unsigned or the keyrings are not readable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer_trusted: Option<bool>,
}

impl ModuleSig {
    pub fn signed(&self) -> bool {
        self.signer.is_some() || self.sig_key.is_some()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SigningFacts {
    pub secure_boot: SecureBoot,
    /// `/sys/kernel/security/lockdown`'s chosen mode: `none`, `integrity`,
    /// `confidentiality`; `None` without the lockdown LSM or outside a live system.
    pub lockdown: Option<String>,
    /// `/sys/module/module/parameters/sig_enforce` (`Y`: only validly signed modules load).
    pub sig_enforce: Option<bool>,
    /// The installed out-of-tree modules of [`OUT_OF_TREE`], as `modinfo` shows them.
    pub modules: Vec<ModuleSig>,
    /// Whether `modinfo` could be run at all (an image root without kmod: no).
    pub modinfo: bool,
}

impl SigningFacts {
    /// Nothing read (a blank root).
    pub fn blank() -> SigningFacts {
        SigningFacts {
            secure_boot: SecureBoot::Unknown,
            lockdown: None,
            sig_enforce: None,
            modules: Vec::new(),
            modinfo: false,
        }
    }

    /// Whether the kernel refuses a module without a trusted signature:
    /// `Some(true)` Secure Boot on, lockdown or sig_enforce; `Some(false)`
    /// when it is sure none is; `None` when it cannot tell.
    pub fn enforcing(&self) -> Option<bool> {
        let lockdown = self.lockdown.as_deref().map(|l| l != "none");
        if self.secure_boot == SecureBoot::On
            || lockdown == Some(true)
            || self.sig_enforce == Some(true)
        {
            return Some(true);
        }
        match self.secure_boot {
            SecureBoot::Off | SecureBoot::NoEfi if self.sig_enforce != Some(true) => Some(false),
            _ => None,
        }
    }

    pub fn module(&self, name: &str) -> Option<&ModuleSig> {
        let name = super::kmod::norm(name);
        self.modules.iter().find(|m| m.module == name)
    }
}

/// The Secure Boot state from the EFI variable's bytes.
pub fn secure_boot_of(efi_dir: bool, var: Option<&[u8]>) -> SecureBoot {
    match (efi_dir, var) {
        (_, Some(b)) if b.len() >= 5 => {
            if b[4] == 1 {
                SecureBoot::On
            } else {
                SecureBoot::Off
            }
        }
        (false, None) => SecureBoot::NoEfi,
        _ => SecureBoot::Unknown,
    }
}

/// The chosen mode of `/sys/kernel/security/lockdown` (`none [integrity] confidentiality`).
pub fn lockdown_of(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = text[start..].find(']')? + start;
    Some(text[start + 1..end].to_string())
}

/// One module's signature from `modinfo`'s output.
pub fn parse_modinfo(module: &str, kernel: &str, out: &str) -> ModuleSig {
    let field = |k: &str| {
        out.lines().find_map(|l| {
            let (key, v) = l.split_once(':')?;
            (key.trim() == k && !v.trim().is_empty()).then(|| v.trim().to_string())
        })
    };
    ModuleSig {
        module: super::kmod::norm(module),
        kernel: kernel.to_string(),
        file: field("filename"),
        in_tree: field("intree").as_deref() == Some("Y"),
        signer: field("signer"),
        sig_key: field("sig_key"),
        version: field("version"),
        taint: None,
        signer_trusted: None,
    }
}

/// Whether a key named SIGNER is among the asymmetric keys of `/proc/keys`
/// (`... asymmetric: DKMS module signing key: 3a2f...`).
pub fn signer_in_keys(signer: &str, proc_keys: &str) -> bool {
    proc_keys
        .lines()
        .filter_map(|l| l.split_once("asymmetric: ").map(|(_, d)| d))
        .any(|d| d.starts_with(signer))
}

/// Reads the signing facts of HOST for KERNEL (the one it runs or will boot).
pub fn probe(host: &Host, kernel: Option<&str>, live: bool) -> SigningFacts {
    let var = host.read_fact_bytes(SECURE_BOOT_VAR, 64);
    let efi = host.exists("/sys/firmware/efi");
    let observed_boot = live || host.exists("/sys/firmware");
    let secure_boot = match secure_boot_of(efi, var.as_deref()) {
        SecureBoot::NoEfi if !observed_boot => SecureBoot::Unknown,
        s => s,
    };
    let lockdown = host
        .read_fact("/sys/kernel/security/lockdown")
        .and_then(|t| lockdown_of(&t));
    let sig_enforce =
        read_trim(host, "/sys/module/module/parameters/sig_enforce").map(|v| v == "Y");
    let keys = host
        .read_fact("/proc/keys")
        .filter(|k| k.contains("asymmetric"));
    let mut modules = Vec::new();
    let mut modinfo = false;
    for m in OUT_OF_TREE {
        let mut argv = vec!["modinfo"];
        if let Some(k) = kernel {
            argv.extend(["-k", k]);
        }
        argv.push(m);
        let Some(out) = host.query(&argv) else {
            continue;
        };
        modinfo = true;
        if !out.success() {
            continue;
        }
        let mut sig = parse_modinfo(m, kernel.unwrap_or(""), &out.stdout);
        sig.taint = read_trim(host, &format!("/sys/module/{}/taint", sig.module));
        sig.signer_trusted = match (&sig.signer, &keys) {
            (Some(s), Some(k)) => Some(signer_in_keys(s, k)),
            _ => None,
        };
        modules.push(sig);
    }
    SigningFacts {
        secure_boot,
        lockdown,
        sig_enforce,
        modules,
        modinfo,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_boot_lockdown_and_modinfo_are_read() {
        assert_eq!(secure_boot_of(true, Some(&[6, 0, 0, 0, 1])), SecureBoot::On);
        assert_eq!(
            secure_boot_of(true, Some(&[6, 0, 0, 0, 0])),
            SecureBoot::Off
        );
        assert_eq!(secure_boot_of(true, None), SecureBoot::Unknown);
        assert_eq!(secure_boot_of(false, None), SecureBoot::NoEfi);
        assert_eq!(
            lockdown_of("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(
            lockdown_of("[none] integrity confidentiality").as_deref(),
            Some("none")
        );
        let sig = parse_modinfo(
            "gdrdrv",
            "6.8.0-45-generic",
            "filename:       /lib/modules/6.8.0-45-generic/updates/dkms/gdrdrv.ko.zst\nversion:        2.4.4\nlicense:        Dual MIT/GPL\nretpoline:      Y\nname:           gdrdrv\nvermagic:       6.8.0-45-generic SMP preempt mod_unload modversions\nsig_id:         PKCS#7\nsigner:         DKMS module signing key\nsig_key:        2F:3A:11\nsig_hashalgo:   sha512\n",
        );
        assert!(sig.signed() && !sig.in_tree);
        assert_eq!(sig.signer.as_deref(), Some("DKMS module signing key"));
        assert_eq!(sig.version.as_deref(), Some("2.4.4"));
        let unsigned = parse_modinfo(
            "nv_peer_mem",
            "5.4.0",
            "filename: /lib/modules/5.4.0/extra/nv_peer_mem.ko\nversion: 1.1-0\n",
        );
        assert!(!unsigned.signed());
        let keys = "1f2e3d4c I------     1 perm 1f010000     0     0 asymmetri DKMS module signing key: 3a2f11\n";
        let keys = keys.replace("asymmetri ", "asymmetric: ");
        assert!(signer_in_keys("DKMS module signing key", &keys));
        assert!(!signer_in_keys("Someone else", &keys));
    }

    #[test]
    fn enforcement_is_said_only_when_known() {
        let mut f = SigningFacts::blank();
        assert_eq!(f.enforcing(), None);
        f.secure_boot = SecureBoot::Off;
        assert_eq!(f.enforcing(), Some(false));
        f.lockdown = Some("integrity".into());
        assert_eq!(f.enforcing(), Some(true));
        f.lockdown = Some("none".into());
        f.secure_boot = SecureBoot::On;
        assert_eq!(f.enforcing(), Some(true));
    }
}
