//! Signed modules before they are loaded: each out-of-tree module a profile
//! loads, against whether the kernel insists on signatures (Secure Boot,
//! lockdown, `module.sig_enforce`). The kernel's own refusal lines are
//! `kernlog_rules`'; these rows say it before `modprobe` does.

use super::modes::{Mode, Seen};
use super::{Finding, Sev};
use crate::facts::signing::{ModuleSig, SecureBoot, SigningFacts};
use crate::facts::Facts;

const ROW: Mode = Mode {
    id: "",
    seen: Seen::Host,
    severity: Sev::Error,
    all: &[],
    any: &[],
    not: &[],
    symptom: "",
    title: "",
    cause: "",
    fix: "",
    report: "",
};

/// How to enrol a key and sign through DKMS: the fix of every row.
const ENROL: &str = "enrol the key DKMS signs with (`mokutil --import /var/lib/dkms/mok.pub`; Ubuntu: /var/lib/shim-signed/mok/MOK.der), reboot and confirm it in MokManager, then rebuild so DKMS signs the module (`dkms autoinstall`); or sign it by hand with the kernel's `scripts/sign-file sha256 KEY CERT MODULE.ko`; or install the distribution's signed prebuilt modules";

pub const RULES: &[Mode] = &[
    Mode {
        id: "module-unsigned",
        symptom: "modprobe: ERROR: could not insert 'vboxdrv': Key was rejected by service",
        title: "an out-of-tree module the profile loads is not signed: the kernel will refuse it",
        cause: "Secure Boot (or lockdown, or module.sig_enforce) makes the kernel load only modules signed by a key it trusts, and this module, built out of tree, carries no signature",
        fix: ENROL,
        report: "https://github.com/linux-surface/linux-surface/issues/906",
        ..ROW
    },
    Mode {
        id: "module-key-not-enrolled",
        symptom: "modprobe: ERROR: could not insert 'r8126': Key was rejected by service",
        title: "an out-of-tree module is signed with a key the kernel does not hold",
        cause: "DKMS signed the module with its machine owner key (MOK), but the key was never enrolled (or enrolment was not confirmed at the next boot), so the kernel's keyrings lack it",
        fix: ENROL,
        report: "https://github.com/awesometic/realtek-r8126-dkms/issues/3",
        ..ROW
    },
];

fn rule(id: &str) -> Option<&'static Mode> {
    RULES.iter().find(|m| m.id == id)
}

/// Why the kernel insists on signatures, in words.
fn enforcement(s: &SigningFacts) -> String {
    let mut why = Vec::new();
    if s.secure_boot == SecureBoot::On {
        why.push("Secure Boot is on (EFI variable SecureBoot = 1)".to_string());
    }
    if let Some(l) = s.lockdown.as_deref().filter(|l| *l != "none") {
        why.push(format!("lockdown is {l}"));
    }
    if s.sig_enforce == Some(true) {
        why.push("module.sig_enforce is on".to_string());
    }
    why.join(", ")
}

fn evidence(m: &ModuleSig) -> String {
    let file = m.file.as_deref().unwrap_or("?");
    match (&m.signer, &m.sig_key) {
        (None, None) => format!(
            "`modinfo -k {} {}`: {file} has no signature",
            m.kernel, m.module
        ),
        (signer, key) => format!(
            "`modinfo -k {} {}`: {file} signed by {} (key {})",
            m.kernel,
            m.module,
            signer.as_deref().unwrap_or("?"),
            key.as_deref().unwrap_or("?")
        ),
    }
}

/// One module's finding, if its signature stands in the way.
fn finding(m: &ModuleSig, s: &SigningFacts) -> Option<Finding> {
    let enforcing = s.enforcing();
    let (id, sev, note) = match (m.signed(), m.signer_trusted, enforcing) {
        (false, _, Some(true)) => ("module-unsigned", Sev::Error, enforcement(s)),
        (true, Some(false), Some(true)) => ("module-key-not-enrolled", Sev::Error, enforcement(s)),
        (false, _, None) => (
            "module-unsigned",
            Sev::Warn,
            "whether the machine enforces signatures could not be read here (an image root, or no efivarfs): where Secure Boot is on, the kernel refuses it".to_string(),
        ),
        (false, _, Some(false)) => (
            "module-unsigned",
            Sev::Info,
            "Secure Boot is off: it loads now (tainting the kernel), and is refused once Secure Boot is turned on".to_string(),
        ),
        _ => return None,
    };
    let row = rule(id)?;
    let mut f = row.finding(format!("{}; {note}", evidence(m)));
    f.severity = sev;
    f.title = format!("{} ({})", row.title, m.module);
    Some(f)
}

/// The signing findings. WANTED: the modules the profile loads (the NVIDIA
/// driver's `nvidia` is always wanted); `None`: every out-of-tree module
/// installed. A module already loaded was accepted by the kernel and is
/// not judged again.
pub fn findings(facts: &Facts, wanted: Option<&[String]>) -> Vec<Finding> {
    let s = &facts.signing;
    let wants = |m: &str| {
        m == "nvidia" || wanted.is_none_or(|w| w.iter().any(|x| crate::facts::kmod::norm(x) == m))
    };
    s.modules
        .iter()
        .filter(|m| !m.in_tree && wants(&m.module) && !facts.modules.is_loaded(&m.module))
        .filter_map(|m| finding(m, s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::signing::parse_modinfo;
    use crate::facts::OsFamily;

    fn facts(sb: SecureBoot, modinfo: &str, trusted: Option<bool>) -> Facts {
        let mut f = Facts::blank(OsFamily::Debian);
        f.signing.secure_boot = sb;
        f.signing.modinfo = true;
        let mut m = parse_modinfo("gdrdrv", "6.8.0-45-generic", modinfo);
        m.signer_trusted = trusted;
        f.signing.modules.push(m);
        f
    }

    const UNSIGNED: &str =
        "filename: /lib/modules/6.8.0-45-generic/updates/dkms/gdrdrv.ko\nversion: 2.4.4\n";
    const SIGNED: &str = "filename: /lib/modules/6.8.0-45-generic/updates/dkms/gdrdrv.ko\nsigner: DKMS module signing key\nsig_key: 2F:3A\n";

    #[test]
    fn each_case_of_secure_boot_and_signature() {
        let want = ["gdrdrv".to_string()];
        let f = findings(&facts(SecureBoot::On, UNSIGNED, None), Some(&want));
        assert_eq!(
            (f[0].id.as_str(), f[0].severity),
            ("module-unsigned", Sev::Error)
        );
        assert!(
            f[0].evidence.contains("no signature") && f[0].evidence.contains("Secure Boot is on")
        );
        assert!(f[0].fix.contains("mokutil --import") && f[0].fix.contains("dkms"));
        let f = findings(&facts(SecureBoot::On, SIGNED, Some(false)), Some(&want));
        assert_eq!(f[0].id, "module-key-not-enrolled");
        assert!(f[0].evidence.contains("DKMS module signing key"));
        assert!(findings(&facts(SecureBoot::On, SIGNED, Some(true)), Some(&want)).is_empty());
        // Signed, keyrings unreadable: nothing said.
        assert!(findings(&facts(SecureBoot::On, SIGNED, None), Some(&want)).is_empty());
        // An image root: not known whether the target enforces.
        let f = findings(&facts(SecureBoot::Unknown, UNSIGNED, None), Some(&want));
        assert_eq!(f[0].severity, Sev::Warn);
        let f = findings(&facts(SecureBoot::Off, UNSIGNED, None), Some(&want));
        assert_eq!(f[0].severity, Sev::Info);
        // A module the profile does not load, or one already loaded, is not judged.
        assert!(findings(&facts(SecureBoot::On, UNSIGNED, None), Some(&[])).is_empty());
        let mut loaded = facts(SecureBoot::On, UNSIGNED, None);
        loaded.modules.loaded.push("gdrdrv".into());
        assert!(findings(&loaded, Some(&want)).is_empty());
    }
}
