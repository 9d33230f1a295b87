//! Unified kernel images (type #2 entries of the Boot Loader Specification,
//! `$ESP/EFI/Linux/*.efi`): a PE file whose sections carry the os-release
//! (`.osrel`), the kernel command line (`.cmdline`) and the kernel release
//! (`.uname`). systemd-boot and `bootctl list` name, order and show such an
//! entry from them; [`entry`] does the same, so that a UKI sorts among the
//! type #1 entries by [`crate::sdboot::compare`]. Pure: bytes in.

use crate::cmdline;
use crate::entries::BlsEntry;

/// The sections of a UKI that name it and carry its command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Uki {
    /// `.osrel`: os-release text of the system it boots.
    pub osrel: Option<String>,
    /// `.cmdline`: the kernel command line built in.
    pub cmdline: Option<String>,
    /// `.uname`: the kernel release.
    pub uname: Option<String>,
}

fn u16_at(b: &[u8], at: usize) -> Option<usize> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([s[0], s[1]]) as usize)
}

fn u32_at(b: &[u8], at: usize) -> Option<usize> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

/// The sections of a PE image, by name; `None` when `bytes` is not a PE
/// file (no `MZ`, no `PE\0\0` where the DOS header points). A section that
/// lies beyond the end of the bytes is left out.
pub fn parse(bytes: &[u8]) -> Option<Uki> {
    parse_with(bytes, |at, len| {
        bytes.get(at..at.checked_add(len)?).map(<[u8]>::to_vec)
    })
}

/// [`parse`] from the file's first bytes (`head`: its headers and section
/// table, [`HEAD_BYTES`] suffice) and `read(offset, len)`, which gives a
/// section's bytes (`None`, or fewer than `len`: left out). A UKI is tens of
/// megabytes; the three sections are a few hundred bytes.
pub fn parse_with(
    head: &[u8],
    mut read: impl FnMut(usize, usize) -> Option<Vec<u8>>,
) -> Option<Uki> {
    if head.get(..2)? != b"MZ" {
        return None;
    }
    let pe = u32_at(head, 0x3c)?;
    if head.get(pe..pe.checked_add(4)?)? != b"PE\0\0" {
        return None;
    }
    let coff = pe + 4;
    let count = u16_at(head, coff + 2)?;
    let optional = u16_at(head, coff + 16)?;
    let table = coff + 20 + optional;
    let mut uki = Uki::default();
    for i in 0..count.min(96) {
        let at = table + i * 40;
        let Some(name) = head.get(at..at + 8) else {
            break;
        };
        let name: Vec<u8> = name.iter().copied().take_while(|c| *c != 0).collect();
        let slot = match name.as_slice() {
            b".osrel" => &mut uki.osrel,
            b".cmdline" => &mut uki.cmdline,
            b".uname" => &mut uki.uname,
            _ => continue,
        };
        let (Some(vsize), Some(raw), Some(ptr)) = (
            u32_at(head, at + 8),
            u32_at(head, at + 16),
            u32_at(head, at + 20),
        ) else {
            break;
        };
        let len = if vsize == 0 { raw } else { vsize.min(raw) };
        if len > SECTION_MAX {
            continue;
        }
        let Some(data) = read(ptr, len).filter(|d| d.len() == len) else {
            continue;
        };
        let text = String::from_utf8_lossy(&data);
        *slot = Some(text.trim_end_matches('\0').to_string());
    }
    Some(uki)
}

/// How much of a PE file holds its headers and a section table of 96
/// entries (the most read).
pub const HEAD_BYTES: usize = 64 << 10;

/// The largest `.osrel`, `.cmdline` or `.uname` read (they are text of a
/// few hundred bytes; a larger one is not a UKI's).
const SECTION_MAX: usize = 1 << 20;

/// The value of `KEY=` in os-release text, unquoted.
pub fn osrel_field(osrel: &str, key: &str) -> Option<String> {
    osrel.lines().find_map(|l| {
        let v = l.trim().strip_prefix(key)?.strip_prefix('=')?;
        let v = v.trim();
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(v);
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// A UKI as a boot entry the way systemd's bootspec reads one: its id is
/// the file name (`.efi` included, as `bootctl list` and the EFI variables
/// give it), the title os-release's `PRETTY_NAME` (else `IMAGE_ID`, `NAME`,
/// `ID`), the version `IMAGE_VERSION` (else `VERSION`, `VERSION_ID`,
/// `BUILD_ID`), the sort key `IMAGE_ID` (else `ID`); the options are the
/// built-in command line; `linux` is the image's path.
pub fn entry(file_name: &str, path: &str, uki: &Uki) -> BlsEntry {
    let os = uki.osrel.as_deref().unwrap_or("");
    let first = |keys: &[&str]| keys.iter().find_map(|k| osrel_field(os, k));
    BlsEntry {
        id: file_name.to_string(),
        title: first(&["PRETTY_NAME", "IMAGE_ID", "NAME", "ID"])
            .unwrap_or_else(|| file_name.to_string()),
        version: first(&["IMAGE_VERSION", "VERSION", "VERSION_ID", "BUILD_ID"]).unwrap_or_default(),
        linux: path.to_string(),
        options: cmdline::split(uki.cmdline.as_deref().unwrap_or("").trim()),
        sort_key: first(&["IMAGE_ID", "ID"]),
        machine_id: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal PE file with the given sections, laid out one after the other.
    pub(crate) fn pe(sections: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = vec![0u8; 0x80];
        b[..2].copy_from_slice(b"MZ");
        b[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
        b[0x40..0x44].copy_from_slice(b"PE\0\0");
        let coff = 0x44;
        b[coff + 2..coff + 4].copy_from_slice(&(sections.len() as u16).to_le_bytes());
        b[coff + 16..coff + 18].copy_from_slice(&8u16.to_le_bytes());
        let table = coff + 20 + 8;
        b.resize(table + 40 * sections.len(), 0);
        let mut data_at = b.len();
        let mut data = Vec::new();
        for (i, (name, body)) in sections.iter().enumerate() {
            let at = table + 40 * i;
            b[at..at + name.len()].copy_from_slice(name.as_bytes());
            let len = body.len() as u32;
            b[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
            // Raw size rounded up, padded with NULs, as PE files are.
            b[at + 16..at + 20].copy_from_slice(&(len.div_ceil(16) * 16).to_le_bytes());
            b[at + 20..at + 24].copy_from_slice(&(data_at as u32).to_le_bytes());
            let mut body = body.to_vec();
            body.resize(body.len().div_ceil(16) * 16, 0);
            data_at += body.len();
            data.extend(body);
        }
        b.extend(data);
        b
    }

    const OSREL: &str = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nVERSION=\"13 (trixie)\"\nID=debian\n";

    #[test]
    fn sections_of_a_uki() {
        let b = pe(&[
            (".text", b"\x90\x90"),
            (".osrel", OSREL.as_bytes()),
            (".cmdline", b"root=UUID=1 ro iommu=pt\n\0"),
            (".uname", b"6.12.57+deb13-amd64"),
            (".linux", b"kernel"),
        ]);
        let u = parse(&b).unwrap();
        assert_eq!(u.cmdline.as_deref(), Some("root=UUID=1 ro iommu=pt\n"));
        assert_eq!(u.uname.as_deref(), Some("6.12.57+deb13-amd64"));
        let e = entry(
            "abc-6.12.57+deb13-amd64.efi",
            "/boot/efi/EFI/Linux/x.efi",
            &u,
        );
        assert_eq!(e.id, "abc-6.12.57+deb13-amd64.efi");
        assert_eq!(e.title, "Debian GNU/Linux 13 (trixie)");
        assert_eq!(e.version, "13 (trixie)");
        assert_eq!(e.sort_key.as_deref(), Some("debian"));
        assert_eq!(e.options, vec!["root=UUID=1", "ro", "iommu=pt"]);
    }

    #[test]
    fn not_a_pe_file_or_cut_short() {
        assert_eq!(parse(b""), None);
        assert_eq!(parse(b"MZ (a UKI)"), None);
        assert_eq!(parse(b"\x7fELF........"), None);
        let b = pe(&[(".cmdline", b"quiet")]);
        // Cut inside the section's data: the section is left out.
        let u = parse(&b[..b.len() - 12]).unwrap();
        assert_eq!(u.cmdline, None);
        // A name only: the file name stands in for the title.
        let e = entry("x.efi", "/efi/EFI/Linux/x.efi", &Uki::default());
        assert_eq!((e.title.as_str(), e.sort_key), ("x.efi", None));
    }

    /// From the headers and the three sections' ranges only: the kernel and
    /// initrd of a real UKI (tens of megabytes) are never read.
    #[test]
    fn only_the_headers_and_the_three_sections_are_read() {
        let kernel = vec![0x90u8; 3 << 20];
        let b = pe(&[
            (".linux", &kernel),
            (".osrel", OSREL.as_bytes()),
            (".cmdline", b"ro iommu=pt"),
        ]);
        let mut asked = Vec::new();
        let u = parse_with(&b[..HEAD_BYTES.min(b.len())], |at, len| {
            asked.push(len);
            b.get(at..at + len).map(<[u8]>::to_vec)
        })
        .unwrap();
        assert_eq!(u, parse(&b).unwrap());
        assert_eq!(u.cmdline.as_deref(), Some("ro iommu=pt"));
        assert_eq!(asked, [OSREL.len(), "ro iommu=pt".len()]);
        // A short read leaves the section out.
        let u = parse_with(&b[..HEAD_BYTES], |_, len| Some(vec![b'x'; len - 1])).unwrap();
        assert_eq!(u, Uki::default());
    }

    #[test]
    fn any_bytes_are_answered() {
        // The header fields pointing anywhere never panic.
        let mut b = pe(&[(".osrel", OSREL.as_bytes())]);
        for i in 0..b.len() {
            let keep = b[i];
            for v in [0u8, 0x7f, 0xff] {
                b[i] = v;
                let _ = parse(&b);
            }
            b[i] = keep;
        }
    }
}
