//! The GRUB defaults editor on arbitrary file sets: it either refuses, or
//! produces files where every wanted argument is on the command line, every
//! removed one is gone, every line it does not own survives byte for byte,
//! and a second edit is a no-op (edit(edit(x)) == edit(x)).
//!
//! Input: byte 0 picks arguments to add, byte 1 arguments to remove (from a
//! pool, plus the current arguments by index), the rest is the text of
//! `/etc/default/grub` and up to three `grub.d/*.cfg` files separated by NUL.
#![no_main]
use gdrprov_boot::grub_defaults::{self, FileEdit};
use libfuzzer_sys::fuzz_target;

const POOL: [&str; 8] = [
    "iommu=pt",
    "intel_iommu=on",
    "quiet",
    "splash",
    "iommu=off",
    "console=ttyS0,115200n8",
    "gdrprov.x=1",
    "amd_iommu=off",
];
const NAMES: [&str; 4] = [
    "/etc/default/grub",
    "/etc/default/grub.d/10-a.cfg",
    "/etc/default/grub.d/50-cloudimg.cfg",
    "/etc/default/grub.d/99-z.cfg",
];

fn apply(files: &[(String, String)], edits: &[FileEdit]) -> Vec<(String, String)> {
    for e in edits {
        assert!(
            files.iter().any(|(n, _)| *n == e.name),
            "edit of unknown file {}",
            e.name
        );
    }
    files
        .iter()
        .map(|(n, c)| {
            let new = edits.iter().find(|e| e.name == *n);
            (
                n.clone(),
                new.map_or_else(|| c.clone(), |e| e.new_content.clone()),
            )
        })
        .collect()
}

/// Lines the editor owns: assignments of the two cmdline variables.
fn owned(l: &str) -> bool {
    let t = l.trim_start();
    !t.starts_with('#')
        && ["GRUB_CMDLINE_LINUX=", "GRUB_CMDLINE_LINUX_DEFAULT="]
            .iter()
            .any(|v| {
                t.match_indices(v)
                    .any(|(i, _)| i == 0 || t[..i].ends_with([' ', '\t', ';']))
            })
}

fn check_lines_preserved(before: &[(String, String)], after: &[(String, String)]) {
    for ((n, old), (_, new)) in before.iter().zip(after) {
        let ol: Vec<&str> = old.split_inclusive('\n').collect();
        let nl: Vec<&str> = new.split_inclusive('\n').collect();
        assert!(nl.len() >= ol.len(), "{n}: lines were lost");
        for (i, (o, w)) in ol.iter().zip(&nl).enumerate() {
            // An unterminated last line gets its terminator (LF or CRLF)
            // when a line is appended after it; its bytes stay as they were.
            let last_unterminated = i + 1 == ol.len() && !o.ends_with('\n');
            let ok = o == w
                || owned(o)
                || (last_unterminated
                    && (w.strip_suffix('\n') == Some(o) || w.strip_suffix("\r\n") == Some(o)));
            assert!(ok, "{n}:{}: line changed:\n-{o:?}\n+{w:?}", i + 1);
        }
        for extra in nl.iter().skip(ol.len()) {
            assert!(
                extra.starts_with("GRUB_CMDLINE_LINUX=\""),
                "{n}: unexpected new line {extra:?}"
            );
        }
    }
}

fn refs(files: &[(String, String)]) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect()
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (add_bits, rm_bits) = (data[0], data[1]);
    let Ok(text) = std::str::from_utf8(&data[2..]) else {
        return;
    };
    let files: Vec<(String, String)> = text
        .split('\0')
        .take(NAMES.len())
        .enumerate()
        .map(|(i, t)| (NAMES[i].to_string(), t.to_string()))
        .collect();
    let r = refs(&files);
    let Ok(current) = grub_defaults::effective_cmdline(&r) else {
        // Refused: the same files must be refused by the editor too.
        assert!(grub_defaults::plan_cmdline_edit(&r, &["iommu=pt".into()], &[]).is_err());
        return;
    };
    let mut remove: Vec<String> = POOL
        .iter()
        .enumerate()
        .filter(|(i, _)| rm_bits & (1 << i) != 0)
        .map(|(_, a)| a.to_string())
        .collect();
    if rm_bits & 0x80 != 0 {
        if let Some(a) = current.get(usize::from(rm_bits & 0x0f)) {
            remove.push(a.clone());
        }
    }
    let add: Vec<String> = POOL
        .iter()
        .enumerate()
        .filter(|(i, a)| add_bits & (1 << i) != 0 && !remove.iter().any(|r| r == *a))
        .map(|(_, a)| a.to_string())
        .collect();
    let Ok(edits) = grub_defaults::plan_cmdline_edit(&r, &add, &remove) else {
        return;
    };
    let after = apply(&files, &edits);
    if edits.is_empty() {
        assert_eq!(after, files);
    }
    check_lines_preserved(&files, &after);
    let ar = refs(&after);
    let got = grub_defaults::effective_cmdline(&ar).expect("the editor's own output is refused");
    for a in &add {
        assert!(got.contains(a), "{a} missing after the edit: {got:?}");
    }
    for a in &remove {
        assert!(!got.contains(a), "{a} still there after the edit: {got:?}");
    }
    // edit(edit(x)) == edit(x)
    assert_eq!(
        grub_defaults::plan_cmdline_edit(&ar, &add, &remove),
        Ok(Vec::new()),
        "second edit is not a no-op"
    );
});
