//! Extra boot entries, pure: the `/etc/grub.d` script gdrprov generates on
//! Debian/Ubuntu, the BLS entry file it derives on the RHEL family, and
//! readers for what GRUB will show (`grub.cfg` menu entries, BLS entries,
//! `grubenv`).

use super::cmdline;

/// Prefix of the `/etc/grub.d` scripts gdrprov owns: after `10_linux` (so the
/// first entry, GRUB's default, stays the distribution's) and `41_custom`.
pub const GRUBD_PREFIX: &str = "/etc/grub.d/42_gdrprov_";
/// The entry a trial boot uses (`apply --trial`).
pub const TRIAL_ENTRY: &str = "gdrprov-trial";
/// Infix of the BLS entry files gdrprov derives.
pub const BLS_INFIX: &str = "-gdrprov-";

/// The path of the generated script for an entry.
pub fn grubd_path(entry: &str) -> String {
    format!("{GRUBD_PREFIX}{entry}")
}

/// Whether a GRUB menu entry id or BLS id is one gdrprov made.
pub fn is_gdrprov_id(id: &str) -> bool {
    id.starts_with("gdrprov-") || id.contains(BLS_INFIX)
}

/// The title gdrprov gives an entry: its name and its own arguments.
pub fn title(entry: &str, own_args: &[String]) -> String {
    if own_args.is_empty() {
        format!("gdrprov: {entry}")
    } else {
        format!("gdrprov: {entry} ({})", own_args.join(" "))
    }
}

/// The fixed part of the `/etc/grub.d` script, after its variables: find the newest kernel and
/// its initrd the way `10_linux` does, the root device it would use, and print the menu entry.
const GRUBD_SCRIPT_BODY: &str = r#"prefix="/usr"
exec_prefix="/usr"
datarootdir="/usr/share"
. "${pkgdatadir}/grub-mkconfig_lib"

list=
for i in /boot/vmlinuz-* /vmlinuz-* ; do
  if grub_file_is_not_garbage "$i" ; then list="$list $i" ; fi
done
if [ "x$list" = x ] ; then
  echo "gdrprov: no kernel found for boot entry $entry_id" >&2
  exit 0
fi
linux=`version_find_latest $list`
basename=`basename "$linux"`
dirname=`dirname "$linux"`
rel_dirname=`make_system_path_relative_to_its_root "$dirname"`
version=`echo "$basename" | sed -e "s,^[^0-9]*-,,g"`

initrd=
for i in "initrd.img-$version" "initrd-$version.img" "initrd-$version" "initramfs-$version.img" ; do
  if test -e "$dirname/$i" ; then
    initrd="$i"
    break
  fi
done

# root=: a UUID (or PARTUUID) that udev knows, unless disabled or on LVM,
# else the device, as 10_linux decides.
root_device="$GRUB_DEVICE"
use_uuid=
if [ "x$GRUB_DEVICE_UUID" != x ] && [ "x$GRUB_DISABLE_LINUX_UUID" != xtrue ] \
    && test -e "/dev/disk/by-uuid/$GRUB_DEVICE_UUID" ; then
  use_uuid="UUID=$GRUB_DEVICE_UUID"
elif [ "x$GRUB_DEVICE_PARTUUID" != x ] && [ "x${GRUB_DISABLE_LINUX_PARTUUID-true}" != xtrue ] \
    && test -e "/dev/disk/by-partuuid/$GRUB_DEVICE_PARTUUID" ; then
  use_uuid="PARTUUID=$GRUB_DEVICE_PARTUUID"
fi
if [ "x$use_uuid" != x ] ; then
  if test -e "$GRUB_DEVICE" && uses_abstraction "$GRUB_DEVICE" lvm ; then
    :
  else
    root_device="$use_uuid"
  fi
fi
if [ "x$GRUB_FS" = xbtrfs ] ; then
  rootsubvol="`make_system_path_relative_to_its_root /`"
  rootsubvol="${rootsubvol#/}"
  if [ "x$rootsubvol" != x ] ; then
    entry_args="rootflags=subvol=$rootsubvol $entry_args"
  fi
fi
if [ "x$dirname" = x/ ] ; then
  boot_device="$GRUB_DEVICE"
else
  boot_device="$GRUB_DEVICE_BOOT"
fi

echo "Found gdrprov boot entry $entry_id: $linux" >&2
echo "menuentry '$entry_title' --class gnu-linux --class gnu --class os \$menuentry_id_option '$entry_id' {"
echo "	insmod gzio"
prepare_grub_to_access_device $boot_device | grub_add_tab
echo "	linux	$rel_dirname/$basename root=$root_device ro $entry_args"
if [ "x$initrd" != x ] ; then
  echo "	initrd	$rel_dirname/$initrd"
fi
echo "}"
"#;

/// The `/etc/grub.d` script for an extra entry. When `grub-mkconfig` runs it,
/// it prints one `menuentry` for the newest kernel (found the way `10_linux`
/// finds it), with the root device `10_linux` would use and exactly `args`.
/// `entry` must be letters, digits, `-`, `_` (checked by the profile loader)
/// and every argument must pass [`cmdline::validate_arg`]: both are written
/// inside single quotes, so nothing in them can reach a shell or GRUB.
pub fn grubd_script(
    header: &str,
    entry: &str,
    title: &str,
    args: &[String],
) -> Result<String, cmdline::ArgError> {
    cmdline::validate_args(args)?;
    if let Some(bad) = entry
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        return Err(cmdline::ArgError::ForbiddenChar {
            arg: entry.to_owned(),
            what: format!("{:?}", bad.1),
            index: bad.0,
        });
    }
    let title_ok: String = title
        .chars()
        .filter(|c| !matches!(c, '\'' | '\\' | '\n' | '\r'))
        .collect();
    Ok(format!(
        r#"#! /bin/sh
{header}
# Boot entry `{entry}` for grub-mkconfig: the newest kernel, the root device
# that 10_linux would use, and the command line gdrprov computed for it.
set -e

entry_id='{entry}'
entry_title='{title_ok}'
entry_args='{args}'

{GRUBD_SCRIPT_BODY}"#,
        args = args.join(" "),
    ))
}

/// One BLS entry file (`/boot/loader/entries/ID.conf`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlsEntry {
    /// The file name without `.conf`: what `grub2-reboot` takes.
    pub id: String,
    pub title: String,
    pub version: String,
    pub linux: String,
    /// `options` with `$kernelopts` expanded from grubenv.
    pub options: Vec<String>,
    /// `sort-key` and `machine-id`: systemd-boot orders entries by them.
    pub sort_key: Option<String>,
    pub machine_id: Option<String>,
}

/// The value of the first `key value` line of a BLS entry.
fn bls_field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| {
        let l = l.trim_start();
        let rest = l.strip_prefix(key)?;
        (rest.is_empty() || rest.starts_with([' ', '\t'])).then(|| rest.trim())
    })
}

pub fn parse_bls(id: &str, text: &str, kernelopts: &str) -> BlsEntry {
    let options = bls_field(text, "options")
        .unwrap_or_default()
        .replace("$kernelopts", kernelopts);
    BlsEntry {
        id: id.to_owned(),
        title: bls_field(text, "title").unwrap_or(id).to_owned(),
        version: bls_field(text, "version").unwrap_or_default().to_owned(),
        linux: bls_field(text, "linux").unwrap_or_default().to_owned(),
        options: cmdline::split(&options),
        sort_key: bls_field(text, "sort-key")
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
        machine_id: bls_field(text, "machine-id")
            .filter(|v| !v.is_empty())
            .map(str::to_owned),
    }
}

/// The file name (without `.conf`) of the entry derived from `default_id`:
/// the machine-id prefix, then `gdrprov-NAME` (ENTRY without a leading
/// `gdrprov-`). Not `DEFAULT-gdrprov-ENTRY`:
/// GRUB's blscfg sorts ids by version, and the default id with a suffix would
/// sort as the newest kernel and become the default when no `saved_entry` is
/// set.
pub fn bls_derived_id(default_id: &str, version: &str, entry: &str) -> String {
    let prefix = default_id
        .strip_suffix(version)
        .and_then(|p| p.strip_suffix('-'))
        .filter(|p| !p.is_empty() && !version.is_empty())
        .unwrap_or(default_id);
    // `gdrprov-gds` gives `MID-gdrprov-gds`, `gds` gives `MID-gdrprov-gds` too.
    let name = entry.strip_prefix("gdrprov-").unwrap_or(entry);
    format!("{prefix}{BLS_INFIX}{name}")
}

/// The text of the derived BLS entry: the default entry's lines with the
/// title marked, any `id` line renamed and `options` replaced by `args`.
pub fn bls_derived(default_text: &str, new_id: &str, entry: &str, args: &[String]) -> String {
    let mut out = String::new();
    let mut saw_options = false;
    for line in default_text.lines() {
        let key = line.split_whitespace().next().unwrap_or("");
        match key {
            "title" => {
                let t = bls_field(line, "title").unwrap_or_default();
                out.push_str(&format!("title {t} (gdrprov {entry})\n"));
            }
            "id" => out.push_str(&format!("id {new_id}\n")),
            // The whole command line on the first `options` line; later
            // ones (they add to it) are dropped.
            "options" if saw_options => {}
            "options" => {
                saw_options = true;
                out.push_str(&format!("options {}\n", args.join(" ")));
            }
            _ => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    if !saw_options {
        out.push_str(&format!("options {}\n", args.join(" ")));
    }
    out
}

/// Compares two version strings the way `sort -V` roughly does: runs of
/// digits numerically, everything else bytewise.
pub fn version_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn parts(s: &str) -> Vec<(bool, String)> {
        let mut v: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let d = c.is_ascii_digit();
            match v.last_mut() {
                Some((ld, t)) if *ld == d => t.push(c),
                _ => v.push((d, c.to_string())),
            }
        }
        v
    }
    let (pa, pb) = (parts(a), parts(b));
    for (x, y) in pa.iter().zip(&pb) {
        let o = match (x.0, y.0) {
            (true, true) => {
                let (tx, ty) = (x.1.trim_start_matches('0'), y.1.trim_start_matches('0'));
                tx.len().cmp(&ty.len()).then_with(|| tx.cmp(ty))
            }
            _ => x.1.cmp(&y.1),
        };
        if o.is_ne() {
            return o;
        }
    }
    pa.len().cmp(&pb.len())
}

/// A menu entry of `grub.cfg`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MenuEntry {
    pub title: String,
    /// The `--id` (`$menuentry_id_option`) value, if any.
    pub id: Option<String>,
    /// What `grub-reboot` / `GRUB_DEFAULT` take: `submenu>entry` ids (or
    /// titles) for an entry inside a submenu.
    pub path: String,
    /// Top-level position (the number `GRUB_DEFAULT=N` means), or `None`
    /// inside a submenu.
    pub index: Option<usize>,
    /// The kernel of the `linux` line.
    pub kernel: Option<String>,
    /// The arguments of the `linux` line.
    pub args: Vec<String>,
}

/// Words of a GRUB script line, with single and double quotes removed
/// (`'\''` joins into `'`). Enough for `menuentry` and `linux` lines.
fn grub_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            (None, c) if c == ' ' || c == '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// The menu entries of a `grub.cfg`, in order, submenus flattened into
/// `submenu>entry` paths.
pub fn parse_grub_cfg(text: &str) -> Vec<MenuEntry> {
    enum Frame {
        Submenu(String),
        Entry(usize),
        Other,
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut entries: Vec<MenuEntry> = Vec::new();
    let mut top = 0usize;
    for raw in text.lines() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        let words = grub_words(line);
        let first = words.first().map(String::as_str).unwrap_or("");
        if (first == "menuentry" || first == "submenu") && line.ends_with('{') {
            let title = words.get(1).cloned().unwrap_or_default();
            let id = words
                .iter()
                .position(|w| w == "$menuentry_id_option" || w == "--id")
                .and_then(|i| words.get(i + 1))
                .cloned();
            let me = id.clone().unwrap_or_else(|| title.clone());
            let parents: Vec<&str> = stack
                .iter()
                .filter_map(|f| match f {
                    Frame::Submenu(p) => Some(p.as_str()),
                    _ => None,
                })
                .collect();
            let index = parents.is_empty().then(|| {
                top += 1;
                top - 1
            });
            let path = if parents.is_empty() {
                me.clone()
            } else {
                format!("{}>{me}", parents.join(">"))
            };
            if first == "submenu" {
                stack.push(Frame::Submenu(me));
            } else {
                entries.push(MenuEntry {
                    title,
                    id,
                    path,
                    index,
                    kernel: None,
                    args: Vec::new(),
                });
                stack.push(Frame::Entry(entries.len() - 1));
            }
            continue;
        }
        if matches!(first, "linux" | "linuxefi" | "linux16") {
            let open = stack.iter().rev().find_map(|f| match f {
                Frame::Entry(i) => Some(*i),
                _ => None,
            });
            if let Some(e) = open.and_then(|i| entries.get_mut(i)) {
                if e.kernel.is_none() {
                    let rest = line.get(first.len()..).unwrap_or("").trim();
                    let mut args = cmdline::split(rest);
                    if !args.is_empty() {
                        e.kernel = Some(args.remove(0));
                    }
                    e.args = args;
                }
            }
        }
        if line.ends_with('{') {
            stack.push(Frame::Other);
        }
        if line == "}" || line.starts_with("} ") || line.ends_with(" }") || line.ends_with(";}") {
            stack.pop();
        }
    }
    entries
}

/// `key=value` lines of a GRUB environment block (`grubenv`).
pub fn grubenv_get(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_owned))
        .filter(|v| !v.is_empty())
}

/// Whether the running command line is that of an entry: the arguments
/// `BOOT_IMAGE=` aside, the same list.
pub fn runs(proc_cmdline: &[String], kernel: Option<&str>, args: &[String]) -> bool {
    let running: Vec<&String> = proc_cmdline
        .iter()
        .filter(|a| !a.starts_with("BOOT_IMAGE="))
        .collect();
    let kernel_ok = match (
        proc_cmdline
            .iter()
            .find_map(|a| a.strip_prefix("BOOT_IMAGE=")),
        kernel,
    ) {
        (Some(img), Some(k)) => {
            let img = img.rsplit_once(')').map_or(img, |(_, p)| p);
            let k = k.rsplit_once(')').map_or(k, |(_, p)| p);
            img == k || img.ends_with(k) || k.ends_with(img)
        }
        _ => true,
    };
    kernel_ok && running.len() == args.len() && running.iter().zip(args).all(|(a, b)| *a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    const CFG: &str = r#"
set default="0"
if [ "${next_entry}" ] ; then
   set default="${next_entry}"
fi
menuentry 'Debian GNU/Linux' --class debian --class gnu-linux $menuentry_id_option 'gnulinux-simple-abc' {
	load_video
	insmod gzio
	if [ x$grub_platform = xxen ]; then insmod xzio; insmod lzopio; fi
	search --no-floppy --fs-uuid --set=root abc
	linux	/boot/vmlinuz-6.1.0-27-amd64 root=UUID=abc ro console=ttyS0 quiet
	initrd	/boot/initrd.img-6.1.0-27-amd64
}
submenu 'Advanced options for Debian GNU/Linux' $menuentry_id_option 'gnulinux-advanced-abc' {
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-27-amd64' --class debian $menuentry_id_option 'gnulinux-6.1.0-27-amd64-advanced-abc' {
		linux	/boot/vmlinuz-6.1.0-27-amd64 root=UUID=abc ro console=ttyS0 quiet
	}
	menuentry 'Debian GNU/Linux, with Linux 6.1.0-27-amd64 (recovery mode)' --class debian $menuentry_id_option 'gnulinux-6.1.0-27-amd64-recovery-abc' {
		linux	/boot/vmlinuz-6.1.0-27-amd64 root=UUID=abc ro single console=ttyS0
	}
}
menuentry 'gdrprov: gdrprov-gds (iommu=off)' --class gnu-linux $menuentry_id_option 'gdrprov-gds' {
	insmod gzio
	linux	/boot/vmlinuz-6.1.0-27-amd64 root=UUID=abc ro console=ttyS0 quiet iommu=off
}
"#;

    #[test]
    fn grub_cfg_entries() {
        let e = parse_grub_cfg(CFG);
        assert_eq!(e.len(), 4, "{e:#?}");
        assert_eq!(e[0].title, "Debian GNU/Linux");
        assert_eq!(e[0].id.as_deref(), Some("gnulinux-simple-abc"));
        assert_eq!(e[0].index, Some(0));
        assert_eq!(e[0].kernel.as_deref(), Some("/boot/vmlinuz-6.1.0-27-amd64"));
        assert_eq!(
            e[0].args,
            s(&["root=UUID=abc", "ro", "console=ttyS0", "quiet"])
        );
        assert_eq!(
            e[1].path,
            "gnulinux-advanced-abc>gnulinux-6.1.0-27-amd64-advanced-abc"
        );
        assert_eq!(e[1].index, None);
        assert_eq!(e[2].args[2], "single");
        assert_eq!(e[3].id.as_deref(), Some("gdrprov-gds"));
        assert_eq!(e[3].index, Some(2));
        assert_eq!(e[3].path, "gdrprov-gds");
        assert!(e[3].args.contains(&"iommu=off".to_string()));
    }

    #[test]
    fn running_entry() {
        let e = parse_grub_cfg(CFG);
        let proc = cmdline::split(
            "BOOT_IMAGE=/boot/vmlinuz-6.1.0-27-amd64 root=UUID=abc ro console=ttyS0 quiet iommu=off",
        );
        let hits: Vec<&str> = e
            .iter()
            .filter(|m| runs(&proc, m.kernel.as_deref(), &m.args))
            .map(|m| m.path.as_str())
            .collect();
        assert_eq!(hits, ["gdrprov-gds"]);
    }

    #[test]
    fn grubenv() {
        let env = "# GRUB Environment Block\nsaved_entry=gdrprov-gds\nnext_entry=\n########\n";
        assert_eq!(
            grubenv_get(env, "saved_entry").as_deref(),
            Some("gdrprov-gds")
        );
        assert_eq!(grubenv_get(env, "next_entry"), None);
    }

    #[test]
    fn script_refuses_unsafe_arguments() {
        assert!(grubd_script("#", "x", "t", &s(&["a'b"])).is_err());
        assert!(grubd_script("#", "x;y", "t", &s(&["a"])).is_err());
        let ok = grubd_script(
            "# h",
            "gdrprov-gds",
            "gdrprov: x (iommu=off)",
            &s(&["iommu=off"]),
        )
        .unwrap_or_default();
        assert!(ok.contains("entry_args='iommu=off'"), "{ok}");
        assert!(ok.starts_with("#! /bin/sh\n# h\n"));
    }

    #[test]
    fn bls_derivation() {
        let text = "title Rocky Linux (5.14.0-427) 9.4\nversion 5.14.0-427\nlinux /vmlinuz-5.14.0-427\noptions root=/dev/x ro quiet\ngrub_class rocky\n";
        let id = bls_derived_id("3c1d-5.14.0-427", "5.14.0-427", "gdrprov-gds");
        assert_eq!(id, "3c1d-gdrprov-gds");
        assert_eq!(
            bls_derived_id("odd", "5.14", "gdrprov-gds"),
            "odd-gdrprov-gds"
        );
        let d = bls_derived(
            text,
            &id,
            "gdrprov-gds",
            &s(&["root=/dev/x", "ro", "iommu=off"]),
        );
        assert_eq!(
            d,
            "title Rocky Linux (5.14.0-427) 9.4 (gdrprov gdrprov-gds)\nversion 5.14.0-427\nlinux /vmlinuz-5.14.0-427\noptions root=/dev/x ro iommu=off\ngrub_class rocky\n"
        );
        let e = parse_bls(&id, &d, "");
        assert_eq!(e.options, s(&["root=/dev/x", "ro", "iommu=off"]));
        let e = parse_bls("a", "options $kernelopts x\n", "root=/dev/y ro");
        assert_eq!(e.options, s(&["root=/dev/y", "ro", "x"]));
    }

    #[test]
    fn versions_sort_like_sort_v() {
        use std::cmp::Ordering::*;
        assert_eq!(version_cmp("5.14.0-427", "5.14.0-70"), Greater);
        assert_eq!(version_cmp("6.1.0-27", "6.1.0-27"), Equal);
        assert_eq!(version_cmp("6.10", "6.9"), Greater);
    }
}
