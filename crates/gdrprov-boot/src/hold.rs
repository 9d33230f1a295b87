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

/// What `grubby --update-kernel=ALL --args=ADD --remove-args=REMOVE` makes of
/// a BLS entry's `options` (RHEL's grubby, the `grubby-bls` script's
/// `update_args`): each argument of `remove` goes (the first token equal to
/// it; one without `=` also takes the first `KEY=...`), then each of `add`
/// takes out the first token of its key (`KEY` or `KEY=...`), then `add` is
/// appended in order; blanks fold to one space. On the RHEL family gdrprov
/// writes this itself, as the switch of an entry held during `dracut`, before
/// grubby runs: grubby then finds the same arguments and writes the same line.
pub fn grubby_options(options: &str, add: &[&str], remove: &[&str]) -> String {
    let mut args: Vec<&str> = options.split_whitespace().collect();
    let drop_first = |args: &mut Vec<&str>, hit: &dyn Fn(&str) -> bool| {
        if let Some(i) = args.iter().position(|a| hit(a)) {
            args.remove(i);
        }
    };
    let key_of = |arg: &str, key: &str| {
        arg == key || arg.strip_prefix(key).is_some_and(|r| r.starts_with('='))
    };
    for r in remove.iter().flat_map(|r| r.split_whitespace()) {
        if r.contains('=') {
            drop_first(&mut args, &|a| a == r);
        } else {
            drop_first(&mut args, &|a| key_of(a, r));
        }
    }
    let add: Vec<&str> = add.iter().flat_map(|a| a.split_whitespace()).collect();
    for a in &add {
        let key = a.split('=').next().unwrap_or(a);
        drop_first(&mut args, &|x| key_of(x, key));
    }
    args.extend(add);
    args.join(" ")
}

/// `options` with each `$kernelopts` token (`${kernelopts}` too) written out
/// as `value`: RHEL 8's entries take their command line from grubenv's
/// `kernelopts`, which grubby edits; an entry held or switched by gdrprov
/// carries its line itself, so that grubenv changing under it cannot mix it.
/// Other variables (`$tuned_params`) are kept.
pub fn with_kernelopts(options: &str, value: &str) -> String {
    options
        .split_whitespace()
        .map(|t| if is_kernelopts(t) { value } else { t })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `options` read grubenv's `kernelopts` (RHEL 8's entries).
pub fn reads_kernelopts(options: &str) -> bool {
    options.split_whitespace().any(is_kernelopts)
}

/// `$kernelopts` or `${kernelopts}`, as GRUB expands it.
fn is_kernelopts(token: &str) -> bool {
    token == "$kernelopts" || token == "${kernelopts}"
}

/// Whether a line's key is `key` (a BLS entry's `options`, `initrd`...).
fn is_key(line: &str, key: &str) -> bool {
    line.strip_prefix(key)
        .is_some_and(|r| r.is_empty() || r.starts_with([' ', '\t', '\n', '\r']))
}

/// The value of a BLS entry's first `options` line, blanks trimmed.
pub fn options_of(text: &str) -> Option<&str> {
    text.lines()
        .find(|l| is_key(l, "options"))
        .map(|l| l["options".len()..].trim())
}

/// `text` with every `options` line made `options VALUE` (as grubby writes
/// it); every other line byte for byte. `None` when it has no such line.
pub fn with_options(text: &str, value: &str) -> Option<String> {
    let mut changed = false;
    let mut out = String::with_capacity(text.len() + value.len());
    for line in text.split_inclusive('\n') {
        if is_key(line, "options") {
            out.push_str("options ");
            out.push_str(value);
            if line.ends_with('\n') {
                out.push('\n');
            }
            changed = true;
        } else {
            out.push_str(line);
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

    #[test]
    fn grubby_removes_then_appends() {
        let opts = "root=/dev/mapper/rl-root ro  iommu=off quiet intel_iommu=on rhgb";
        assert_eq!(
            grubby_options(opts, &["iommu=pt intel_iommu=on"], &[]),
            "root=/dev/mapper/rl-root ro quiet rhgb iommu=pt intel_iommu=on"
        );
        // Removal: a bare key takes KEY=...; KEY=VALUE only that token.
        assert_eq!(
            grubby_options(opts, &[], &["iommu"]),
            "root=/dev/mapper/rl-root ro quiet intel_iommu=on rhgb"
        );
        assert_eq!(
            grubby_options(opts, &[], &["iommu=pt"]),
            "root=/dev/mapper/rl-root ro iommu=off quiet intel_iommu=on rhgb"
        );
        // Only the first of a key goes; a key is not a prefix of another.
        assert_eq!(
            grubby_options("a=1 a=2 ab=3", &["a=9"], &[]),
            "a=2 ab=3 a=9"
        );
        assert_eq!(grubby_options("quiet", &[], &["quie"]), "quiet");
        // Idempotent once applied, as `grubby` run again leaves the line.
        let once = grubby_options(opts, &["iommu=pt", "x"], &["rhgb"]);
        assert_eq!(grubby_options(&once, &["iommu=pt", "x"], &["rhgb"]), once);
    }

    #[test]
    fn an_entry_gets_its_options_line_replaced() {
        let e = "title R\nversion 5.14\nlinux /vmlinuz-5.14\ninitrd /initramfs-5.14.img $tuned_initrd\noptions  root=/dev/vda1 ro\ngrub_class rocky\n";
        assert_eq!(options_of(e), Some("root=/dev/vda1 ro"));
        assert_eq!(
            with_options(e, "root=/dev/vda1 ro iommu=pt").unwrap(),
            e.replace(
                "options  root=/dev/vda1 ro\n",
                "options root=/dev/vda1 ro iommu=pt\n"
            )
        );
        assert_eq!(options_of("optionsx a\n"), None);
        assert_eq!(with_options("title x\n", "a"), None);
    }

    #[test]
    fn kernelopts_is_written_out_and_other_variables_kept() {
        let value = "root=/dev/mapper/rl-root ro rhgb quiet";
        assert_eq!(
            with_kernelopts("$kernelopts $tuned_params", value),
            format!("{value} $tuned_params")
        );
        assert_eq!(with_kernelopts("${kernelopts}", value), value);
        assert_eq!(with_kernelopts("ro quiet", value), "ro quiet");
        // Then grubby's arguments apply to the line written out.
        let literal = with_kernelopts("$kernelopts $tuned_params", value);
        assert_eq!(
            grubby_options(&literal, &["iommu=pt"], &["quiet"]),
            "root=/dev/mapper/rl-root ro rhgb $tuned_params iommu=pt"
        );
    }
}
