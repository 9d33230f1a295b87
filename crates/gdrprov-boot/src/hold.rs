//! Holding a boot entry on its initramfs while the initramfs is rebuilt.
//!
//! A boot loader reads two things that must belong together: the kernel
//! command line and the initramfs (the boot file that names both: grub.cfg,
//! a type #1 loader entry). The tools that rebuild an initramfs
//! (update-initramfs, dracut) write it in place, at the path the current entry
//! names; a power cut while the entry has been switched to the new command line
//! but the initramfs is still the old one (or the other way round) boots a
//! state that is neither before nor after (issue 37, "the boot switch last").
//!
//! So before the rebuild, the entry is *held*: a copy of the initramfs it reads
//! is made beside it (`NAME.gdrprov-held`), and the entry is rewritten to read
//! that copy, with its command line unchanged. The rebuild then writes where
//! no boot reads; the switch (update-grub, the entry written with its new
//! options) names the rebuilt file together with the new command line; the
//! held copy goes once nothing names it. Pure: text in, text out.

/// What a held copy's name ends with.
pub const HELD_SUFFIX: &str = ".gdrprov-held";

/// Whether a line loads initramfs images: GRUB's `initrd` (`initrd16`,
/// `initrdefi` on some distributions) or a type #1 entry's `initrd` key.
fn is_initrd_line(line: &str) -> bool {
    let t = line.trim_start();
    ["initrdefi", "initrd16", "initrd"].iter().any(|k| {
        t.strip_prefix(k)
            .is_some_and(|r| r.starts_with([' ', '\t']))
    })
}

/// The last component of a path as a boot file writes it (`/` or `\`).
fn file_name(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// Whether `text` (grub.cfg or an entry) loads an initramfs named `name`
/// (a file name, `initrd.img-6.1.0-56-amd64`), wherever it lies.
pub fn names(text: &str, name: &str) -> bool {
    text.lines()
        .filter(|l| is_initrd_line(l))
        .flat_map(|l| l.split_whitespace().skip(1))
        .any(|p| file_name(p.trim_matches(['"', '\''])) == name)
}

/// `text` with every initrd path named `name` made to name `name` +
/// [`HELD_SUFFIX`] in the same directory; everything else byte for byte.
/// `None` when no line loads `name` (nothing to hold: the boot reads it
/// under another name, or reads the held copy already).
pub fn hold(text: &str, name: &str) -> Option<String> {
    let held = format!("{name}{HELD_SUFFIX}");
    let mut changed = false;
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        if !is_initrd_line(line) {
            out.push_str(line);
            continue;
        }
        // Tokens separated by blanks; the first is the key.
        let mut rest = line;
        let mut first = true;
        while !rest.is_empty() {
            let blank = rest.len() - rest.trim_start_matches([' ', '\t', '\n', '\r']).len();
            out.push_str(&rest[..blank]);
            rest = &rest[blank..];
            let end = rest.find([' ', '\t', '\n', '\r']).unwrap_or(rest.len());
            let token = &rest[..end];
            let bare = token.trim_matches(['"', '\'']);
            if !first && !token.is_empty() && file_name(bare) == name {
                let at = token.rfind(name).unwrap_or(0);
                out.push_str(&token[..at]);
                out.push_str(&held);
                out.push_str(&token[at + name.len()..]);
                changed = true;
            } else {
                out.push_str(token);
            }
            first = false;
            rest = &rest[end..];
        }
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRUB: &str = "menuentry 'Debian GNU/Linux' --class debian {\n\tlinux\t/boot/vmlinuz-6.1.0-56-amd64 root=UUID=8a1e ro quiet\n\tinitrd\t/boot/initrd.img-6.1.0-56-amd64\n}\nmenuentry 'old' {\n\tinitrd\t/boot/intel-ucode.img /boot/initrd.img-6.1.0-55-amd64\n}\n";
    const ENTRY: &str = "title      Debian\nversion    6.1.0-56-amd64\noptions    root=UUID=1 ro\nlinux      /4f1c/6.1.0-56-amd64/linux\ninitrd     /4f1c/6.1.0-56-amd64/initrd.img-6.1.0-56-amd64\n";

    #[test]
    fn grub_cfg_is_held_only_for_that_kernel() {
        let name = "initrd.img-6.1.0-56-amd64";
        assert!(names(GRUB, name));
        let held = hold(GRUB, name).unwrap();
        assert_eq!(
            held,
            GRUB.replace(
                "/boot/initrd.img-6.1.0-56-amd64",
                "/boot/initrd.img-6.1.0-56-amd64.gdrprov-held"
            )
        );
        assert!(held.contains("/boot/intel-ucode.img /boot/initrd.img-6.1.0-55-amd64\n"));
        assert!(!names(&held, name));
        assert!(names(&held, &format!("{name}{HELD_SUFFIX}")));
        // Held already: nothing more to do.
        assert_eq!(hold(&held, name), None);
        // The kernel line is not an initrd line, even if it held the name.
        let linux_only = "\tlinux\t/boot/initrd.img-6.1.0-56-amd64\n";
        assert_eq!(hold(linux_only, name), None);
    }

    #[test]
    fn an_entry_keeps_its_alignment_and_options() {
        let name = "initrd.img-6.1.0-56-amd64";
        let held = hold(ENTRY, name).unwrap();
        assert_eq!(
            held,
            ENTRY.replace(
                "initrd.img-6.1.0-56-amd64\n",
                "initrd.img-6.1.0-56-amd64.gdrprov-held\n"
            )
        );
        assert!(held.contains("options    root=UUID=1 ro\n"));
        // A name that is only a prefix of the file's is not it.
        assert_eq!(hold(ENTRY, "initrd.img-6.1.0-5"), None);
        // No trailing newline: kept so.
        let bare = "initrd /k/initrd.img-6.1.0-56-amd64";
        assert_eq!(
            hold(bare, name).as_deref(),
            Some("initrd /k/initrd.img-6.1.0-56-amd64.gdrprov-held")
        );
    }
}
