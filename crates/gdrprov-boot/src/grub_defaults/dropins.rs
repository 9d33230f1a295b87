//! Which drop-ins grub-mkconfig reads: the one set every reader of the GRUB
//! defaults takes.

/// The directory of the GRUB defaults' drop-ins.
pub const DROPIN_DIR: &str = "/etc/default/grub.d";

/// A name in the drop-in directory that cannot be read as grub-mkconfig
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{DROPIN_DIR}/{shown}: the drop-in's name is not UTF-8 text, and grub-mkconfig sources it (its `*.cfg` matches any bytes), so gdrprov cannot read or edit the kernel command line it sets; rename it to a UTF-8 name (or move it out of {DROPIN_DIR}), then run gdrprov again; nothing was changed"
)]
pub struct NotUtf8 {
    /// The name as listed, each byte that is not UTF-8 shown as U+FFFD.
    pub shown: String,
}

/// The drop-ins grub-mkconfig sources after `/etc/default/grub`, in its
/// order: `for x in /etc/default/grub.d/*.cfg` in `/bin/sh`. The glob
/// matches names ending in `.cfg` that do not start with `.` (a dotfile is
/// never sourced, so never read nor edited), sorted byte by byte (dash's
/// order, bash's in the C locale). `names` are the directory's names as
/// listed, a byte that is not UTF-8 shown as U+FFFD: such a name ending in
/// `.cfg` is sourced too, and refused here by name, never skipped.
pub fn dropin_set(names: &[String]) -> Result<Vec<String>, NotUtf8> {
    let mut set: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with(".cfg") && !n.starts_with('.') && !n.contains('/'))
        .cloned()
        .collect();
    if let Some(bad) = set.iter().find(|n| n.contains('\u{FFFD}')) {
        return Err(NotUtf8 { shown: bad.clone() });
    }
    set.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    set.dedup();
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn the_set_is_the_glob_of_sh() {
        let names = s(&[
            "50-cloud.cfg",
            ".zz-hidden.cfg",
            ".cfg",
            "README",
            "40-x.cfg.bak",
            "Z.cfg",
            "a.cfg",
            "10_b.cfg",
            "x.CFG",
        ]);
        assert_eq!(
            dropin_set(&names),
            Ok(s(&["10_b.cfg", "50-cloud.cfg", "Z.cfg", "a.cfg"]))
        );
        // A name that is not UTF-8 but ends in .cfg is sourced: refused.
        let e = dropin_set(&s(&["a.cfg", "b\u{FFFD}.cfg"])).err();
        let msg = e.map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("/etc/default/grub.d/b\u{FFFD}.cfg"), "{msg}");
        assert!(msg.contains("not UTF-8"), "{msg}");
        // One that does not end in .cfg is not in the set.
        assert_eq!(dropin_set(&s(&["b\u{FFFD}.txt"])), Ok(Vec::new()));
    }
}
