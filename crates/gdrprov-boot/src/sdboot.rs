//! systemd-boot's own files, pure: the `default` line of `loader.conf`
//! (an entry id with `.conf`, or a glob) and its edit, and the order in
//! which systemd-boot shows type #1 entries.

use super::entries::BlsEntry;

/// The value of `default` in loader.conf, if set.
pub fn loader_default(conf: &str) -> Option<String> {
    conf.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("default")?;
        rest.starts_with([' ', '\t'])
            .then(|| rest.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// loader.conf with `default ID.conf`: the first `default` line replaced,
/// or one appended; every other line as it was.
pub fn set_loader_default(conf: &str, id: &str) -> String {
    let want = format!("default {}", entry_file(id));
    let mut done = false;
    let mut out: Vec<String> = conf
        .lines()
        .map(|l| {
            let t = l.trim();
            if !done
                && t.strip_prefix("default")
                    .is_some_and(|r| r.starts_with([' ', '\t']))
            {
                done = true;
                want.clone()
            } else {
                l.to_string()
            }
        })
        .collect();
    if !done {
        out.push(want);
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// Whether an entry id matches a loader.conf `default` value: an exact
/// `ID.conf` (or ID), or a glob with `*` and `?`.
pub fn matches_default(pattern: &str, id: &str) -> bool {
    let file = entry_file(id);
    crate::wildcard::matches(pattern, &file) || pattern == id
}

/// The `initrd=` arguments systemd-boot passes for an entry's `initrd`
/// lines: the path on the ESP with backslashes.
pub fn initrd_args(entry: &str) -> Vec<String> {
    values(entry, "initrd")
        .map(|v| format!("initrd={}", v.replace('/', "\\")))
        .collect()
}

/// The values of an entry's `KEY value` lines (`initrd`, `version`,
/// `linux`), in order, trimmed; a line with the key alone has none.
pub fn values<'a>(entry: &'a str, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    entry.lines().filter_map(move |l| {
        let rest = l.trim_start().strip_prefix(key)?;
        rest.starts_with([' ', '\t']).then(|| rest.trim())
    })
}

/// An entry id without systemd's boot counter (`ID+LEFT` or
/// `ID+LEFT-DONE`), and the tries it has left, if it counts.
pub fn split_counter(id: &str) -> (&str, Option<u32>) {
    let Some((base, counter)) = id.rsplit_once('+') else {
        return (id, None);
    };
    let left = counter.split_once('-').map_or(counter, |(l, _)| l);
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let done_ok = counter.split_once('-').is_none_or(|(_, d)| digits(d));
    match left.parse::<u32>() {
        Ok(n) if digits(left) && done_ok && !base.is_empty() => (base, Some(n)),
        _ => (id, None),
    }
}

/// systemd's `strverscmp_improved` (the UAPI version format comparison),
/// which systemd-boot orders entries with. Written out here: it is a few
/// lines, and no crate implements systemd's variant (`~` older than the
/// end, `-` older than other separators, numbers newer than letters).
pub fn strverscmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let valid = |c: u8| c.is_ascii_alphanumeric() || b"~-^.".contains(&c);
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.is_empty() || b.is_empty() {
        return a.cmp(b);
    }
    let (mut i, mut j) = (0usize, 0usize);
    let at = |s: &[u8], k: usize| s.get(k).copied().unwrap_or(0);
    loop {
        while i < a.len() && !valid(a[i]) {
            i += 1;
        }
        while j < b.len() && !valid(b[j]) {
            j += 1;
        }
        for sep in [b'~', b'-', b'^', b'.'] {
            let (x, y) = (at(a, i) == sep, at(b, j) == sep);
            if x || y {
                // The one with the separator is older.
                let r = y.cmp(&x);
                if r != Ordering::Equal {
                    return r;
                }
                i += 1;
                j += 1;
            }
            if sep == b'~' && (i >= a.len() || j >= b.len()) {
                // One reached its end: the longer is newer.
                return a[i.min(a.len())..].cmp(&b[j.min(b.len())..]);
            }
        }
        let digit = |s: &[u8], k: usize| at(s, k).is_ascii_digit();
        if digit(a, i) || digit(b, j) {
            let (ea, eb) = (run(a, i, u8::is_ascii_digit), run(b, j, u8::is_ascii_digit));
            // A number is newer than no number.
            let r = (ea > i).cmp(&(eb > j));
            if r != Ordering::Equal {
                return r;
            }
            while at(a, i) == b'0' {
                i += 1;
            }
            while at(b, j) == b'0' {
                j += 1;
            }
            let r = (ea - i.min(ea))
                .cmp(&(eb - j.min(eb)))
                .then_with(|| a[i.min(ea)..ea].cmp(&b[j.min(eb)..eb]));
            if r != Ordering::Equal {
                return r;
            }
            (i, j) = (ea, eb);
        } else {
            let (ea, eb) = (
                run(a, i, u8::is_ascii_alphabetic),
                run(b, j, u8::is_ascii_alphabetic),
            );
            let n = (ea - i).min(eb - j);
            let r = a[i..i + n]
                .cmp(&b[j..j + n])
                .then_with(|| (ea - i).cmp(&(eb - j)));
            if r != Ordering::Equal {
                return r;
            }
            (i, j) = (ea, eb);
        }
    }
}

/// The end of the run of bytes from `k` that `f` accepts.
fn run(s: &[u8], k: usize, f: fn(&u8) -> bool) -> usize {
    let mut e = k;
    while e < s.len() && f(&s[e]) {
        e += 1;
    }
    e
}

/// systemd-boot's order of type #1 entries (its `boot_entry_compare`):
/// entries with no tries left last; entries with a `sort-key` before those
/// without; then by sort-key, machine-id, newest version; then newest id.
pub fn compare(a: &BlsEntry, b: &BlsEntry) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (ia, ta) = split_counter(&a.id);
    let (ib, tb) = split_counter(&b.id);
    let r = (ta == Some(0)).cmp(&(tb == Some(0)));
    if r != Ordering::Equal {
        return r;
    }
    let r = a.sort_key.is_none().cmp(&b.sort_key.is_none());
    if r != Ordering::Equal {
        return r;
    }
    if let (Some(ka), Some(kb)) = (&a.sort_key, &b.sort_key) {
        let r = ka
            .cmp(kb)
            .then_with(|| a.machine_id.cmp(&b.machine_id))
            .then_with(|| strverscmp(&b.version, &a.version));
        if r != Ordering::Equal {
            return r;
        }
    }
    strverscmp(ib, ia)
}

/// systemd-boot's menu order; without a default set, the first boots.
pub fn sort(es: &mut [BlsEntry]) {
    es.sort_by(compare);
}

/// The entry systemd-boot boots by default, from entries in its order: the
/// first that the EFI variable `LoaderEntryDefault` (`bootctl set-default`)
/// or else loader.conf's `default` matches, else the first.
pub fn default_of<'a>(
    sorted: &'a [BlsEntry],
    efi_default: Option<&str>,
    loader_conf: Option<&str>,
) -> Option<&'a BlsEntry> {
    let pattern = efi_default
        .map(str::to_string)
        .or_else(|| loader_conf.and_then(loader_default));
    pattern
        .and_then(|p| sorted.iter().find(|e| matches_default(&p, &e.id)))
        .or(sorted.first())
}

/// The file name of an entry by its id, as `bootctl` and loader.conf take
/// it: a type #1 entry's id is its file name without `.conf`; a type #2
/// entry (a unified kernel image) keeps its `.efi`.
pub fn entry_file(id: &str) -> String {
    if id.to_ascii_lowercase().ends_with(".efi") {
        id.to_string()
    } else {
        format!("{id}.conf")
    }
}

/// The vendor GUID of systemd-boot's EFI variables.
pub const LOADER_GUID: &str = "4a67b082-0a4c-41cf-b6c7-440b29bb8c4f";

/// The text of an efivarfs file: 4 bytes of attributes, then UTF-16LE up to
/// a NUL. `None` for anything else.
pub fn efivar_text(raw: &[u8]) -> Option<String> {
    let body = raw.get(4..)?;
    let units: Vec<u16> = body
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .take_while(|u| *u != 0)
        .collect();
    String::from_utf16(&units).ok().filter(|t| !t.is_empty())
}

/// An entry id as the EFI variables give it: systemd-boot's ids of type #1
/// entries are file names, with `.conf`.
pub fn id_of_var(v: &str) -> &str {
    v.strip_suffix(".conf").unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entries;

    fn entry(id: &str, text: &str) -> BlsEntry {
        entries::parse_bls(id, text, "")
    }

    #[test]
    fn versions_compare_as_systemd_does() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            ("6.1.0-28-amd64", "6.1.0-9-amd64", Greater),
            ("6.1.0-28-amd64", "6.1.0-28-amd64", Equal),
            ("6.10", "6.9", Greater),
            ("123~rc1", "123", Less),
            ("123", "123.1", Less),
            ("123-9", "123.1-1", Less),
            ("0123", "123", Equal),
            ("abc-6.1.0", "abc-gdrprov-gds", Greater),
            ("arch", "arch-gdrprov-gds", Less),
            ("a", "b", Less),
            ("", "a", Less),
        ] {
            assert_eq!(strverscmp(a, b), want, "{a} vs {b}");
            assert_eq!(strverscmp(b, a), want.reverse(), "{b} vs {a}");
        }
    }

    #[test]
    fn systemd_boot_order_and_default() {
        let k = |id: &str, v: &str| {
            entry(
                id,
                &format!("title Debian\nversion {v}\nsort-key debian\nmachine-id 4a0c\nlinux /l\n"),
            )
        };
        let mut es = vec![
            k("4a0c-6.1.0-9-amd64", "6.1.0-9-amd64"),
            k("4a0c-gdrprov-gds", "6.1.0-28-amd64"),
            k("4a0c-6.1.0-28-amd64", "6.1.0-28-amd64"),
            entry("manual", "title M\nlinux /l\n"),
            k("4a0c-bad+0-3", "7.0"),
        ];
        sort(&mut es);
        let ids: Vec<&str> = es.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "4a0c-6.1.0-28-amd64",
                "4a0c-gdrprov-gds",
                "4a0c-6.1.0-9-amd64",
                "manual",
                "4a0c-bad+0-3"
            ]
        );
        assert_eq!(
            default_of(&es, None, None).unwrap().id,
            "4a0c-6.1.0-28-amd64"
        );
        assert_eq!(
            default_of(&es, None, Some("default 4a0c-6.1.0-9*\n"))
                .unwrap()
                .id,
            "4a0c-6.1.0-9-amd64"
        );
        // The EFI variable wins over loader.conf.
        assert_eq!(
            default_of(&es, Some("manual.conf"), Some("default 4a0c-6.1.0-9*\n"))
                .unwrap()
                .id,
            "manual"
        );
        assert_eq!(split_counter("a+3"), ("a", Some(3)));
        assert_eq!(split_counter("a+0-2"), ("a", Some(0)));
        assert_eq!(split_counter("a+b"), ("a+b", None));
        let raw = [7u8, 0, 0, 0, b'a', 0, b'.', 0, b'c', 0, 0, 0];
        assert_eq!(efivar_text(&raw).as_deref(), Some("a.c"));
        assert_eq!(efivar_text(&[7, 0, 0, 0]), None);
    }

    #[test]
    fn loader_conf_default_read_and_set() {
        let c = "timeout 3\n#default old.conf\ndefault  abc-6.1.conf\nconsole-mode keep\n";
        assert_eq!(loader_default(c).as_deref(), Some("abc-6.1.conf"));
        assert_eq!(
            set_loader_default(c, "abc-gdrprov-gds"),
            "timeout 3\n#default old.conf\ndefault abc-gdrprov-gds.conf\nconsole-mode keep\n"
        );
        assert_eq!(
            set_loader_default("timeout 3", "x"),
            "timeout 3\ndefault x.conf\n"
        );
        assert!(matches_default("abc-*", "abc-6.1"));
        assert!(matches_default("abc-6.1.conf", "abc-6.1"));
        assert!(!matches_default("abc-6.1.conf", "abc-6.2"));
        assert_eq!(
            initrd_args("linux /a/linux\ninitrd     /a/6.1/initrd.img\n"),
            vec!["initrd=\\a\\6.1\\initrd.img".to_string()]
        );
        let e = "version 6.1\ninitrd     /4f1c/6.1/initrd.img-6.1\ninitrd\n";
        assert_eq!(
            values(e, "initrd").collect::<Vec<_>>(),
            ["/4f1c/6.1/initrd.img-6.1"]
        );
        // `initrdx` is not `initrd`.
        assert_eq!(values("initrdx /a\n", "initrd").count(), 0);
    }
}
