//! One model of a boot line, for every boot shape: GRUB's defaults and
//! drop-ins, grubenv's `kernelopts`, BLS entries, systemd-boot entries and
//! `/etc/kernel/cmdline`, a unified kernel image's `.cmdline`, a kernel
//! booted from elsewhere.
//!
//! The kernel's arguments end at the first `--`: what follows is init's
//! (`ro quiet -- single` boots init with `single`). gdrprov judges, removes
//! and counts only the kernel's part, and adds arguments at its end, before
//! `--`, never after it ([`BootLine::with`] for a line as arguments,
//! [`edit_text`] for a line kept byte for byte). And the whole line, with
//! what the boot loader adds, must fit the kernel's `COMMAND_LINE_SIZE`, or
//! the kernel cuts it silently ([`fits`]).

use thiserror::Error;

use super::cmdline;

/// The word that ends the kernel's arguments.
pub const SEPARATOR: &str = "--";

/// A boot line parsed once: the kernel's arguments, and `--` with init's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootLine {
    /// The kernel's arguments: everything before the first `--`.
    pub kernel: Vec<String>,
    /// Init's arguments after `--`, when the line has one (`Some(empty)`
    /// for a line ending in `--`).
    pub init: Option<Vec<String>>,
}

/// Where the kernel's part of `args` ends: the index of the first `--`, or
/// the length.
pub fn kernel_end<S: AsRef<str>>(args: &[S]) -> usize {
    args.iter()
        .position(|a| a.as_ref() == SEPARATOR)
        .unwrap_or(args.len())
}

impl BootLine {
    /// A line as text, split as the kernel splits it.
    pub fn parse(text: &str) -> BootLine {
        BootLine::from_args(&cmdline::split(text))
    }

    /// A line already split into arguments.
    pub fn from_args<S: AsRef<str>>(args: &[S]) -> BootLine {
        let end = kernel_end(args);
        let own = |s: &[S]| s.iter().map(|a| a.as_ref().to_owned()).collect();
        BootLine {
            kernel: own(&args[..end]),
            init: (end < args.len()).then(|| own(&args[end + 1..])),
        }
    }

    /// Whether the line has `--`.
    pub fn has_separator(&self) -> bool {
        self.init.is_some()
    }

    /// Every argument: the kernel's, then `--` and init's.
    pub fn args(&self) -> Vec<String> {
        let mut v = self.kernel.clone();
        if let Some(init) = &self.init {
            v.push(SEPARATOR.to_owned());
            v.extend(init.iter().cloned());
        }
        v
    }

    /// The line as the kernel reads it: arguments joined by one space.
    pub fn text(&self) -> String {
        self.args().join(" ")
    }

    /// The line with every argument of `remove` taken out of the kernel's
    /// part and `add` appended to it, before `--`; init's part untouched.
    pub fn with(&self, add: &[String], remove: &[String]) -> BootLine {
        let mut kernel: Vec<String> = self
            .kernel
            .iter()
            .filter(|a| !remove.contains(a))
            .cloned()
            .collect();
        kernel.extend(add.iter().cloned());
        BootLine {
            kernel,
            init: self.init.clone(),
        }
    }
}

/// A line's text with `remove` taken out of the kernel's part (every
/// occurrence, exactly as written, with the blanks before it) and `add`
/// put at the end of the kernel's part: before `--` where the line has one,
/// else at the end. Everything else byte for byte.
pub fn edit_text(line: &str, add: &[String], remove: &[String]) -> String {
    let spans = cmdline::split_spans(line);
    let at = |(s, e): (usize, usize)| line.get(s..e).unwrap_or_default();
    let sep = spans.iter().position(|&sp| at(sp) == SEPARATOR);
    let kernel = &spans[..sep.unwrap_or(spans.len())];
    let split = sep.and_then(|i| spans.get(i)).map_or(line.len(), |sp| sp.0);
    let mut out = String::new();
    let mut last = 0;
    for &(s, e) in kernel {
        if remove.iter().any(|r| r == at((s, e))) {
            out.push_str(line[last..s].trim_end_matches([' ', '\t']));
            last = e;
        }
    }
    out.push_str(&line[last..split]);
    if !line.starts_with([' ', '\t']) {
        out = out.trim_start().to_string();
    }
    if out.trim().is_empty() {
        out.clear();
    }
    let tail = &line[split..];
    for a in add {
        if !out.is_empty() && !out.ends_with([' ', '\t']) {
            out.push(' ');
        }
        out.push_str(a);
    }
    if !tail.is_empty() && !out.is_empty() && !out.ends_with([' ', '\t']) {
        out.push(' ');
    }
    out.push_str(tail);
    out
}

/// The kernel's `COMMAND_LINE_SIZE`, its terminating NUL included, that
/// gdrprov holds a line to on every architecture it supports: 2048. x86_64
/// has 2048 (`arch/x86/include/asm/setup.h`); arm64 has had 2048 in mainline
/// for most versions and 4096 in others (`arch/arm64/include/uapi/asm/setup.h`),
/// and the running kernel of a root is not known at plan. The smaller of the
/// two is the one no kernel cuts: a line between 2048 and 4096 bytes would be
/// cut silently by a kernel of 2048.
pub const COMMAND_LINE_SIZE: usize = 2048;

/// The kernel's `COMMAND_LINE_SIZE` that a line is held to, whatever the
/// architecture: [`COMMAND_LINE_SIZE`] (see there why arm64's is not taken).
pub fn command_line_size() -> usize {
    COMMAND_LINE_SIZE
}

/// Bytes kept free below the limit for what gdrprov cannot count exactly
/// (a longer kernel file name after an update, a boot loader that adds an
/// argument of its own, a firmware's quirks).
pub const MARGIN: usize = 64;

/// A line that would not fit the kernel's command line buffer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{within}: the kernel command line would be {len} bytes ({args} of arguments and {loader_len} the boot loader adds: {loader}), over the limit of {limit} bytes (the kernel's COMMAND_LINE_SIZE of {size} with its terminating NUL, less a margin of {margin}); the kernel would cut the rest silently. Remove arguments (the longest, or the profile's boot.cmdline.present) until the line is under {limit} bytes, then run gdrprov again; nothing was changed"
)]
pub struct TooLong {
    /// The boot shape and file, for people.
    pub within: String,
    /// The whole line's length, in bytes.
    pub len: usize,
    /// The arguments' part of it.
    pub args: usize,
    /// What the boot loader adds, and its length.
    pub loader: String,
    /// Its length.
    pub loader_len: usize,
    /// The most gdrprov writes.
    pub limit: usize,
    /// The kernel's COMMAND_LINE_SIZE.
    pub size: usize,
    /// [`MARGIN`].
    pub margin: usize,
}

/// Joined length of arguments, one space between each.
fn joined_len<S: AsRef<str>>(v: &[S]) -> usize {
    let bytes: usize = v.iter().map(|a| a.as_ref().len()).sum();
    bytes + v.len().saturating_sub(1)
}

/// Whether `args`, with `loader` (the arguments the boot loader puts before
/// them: `BOOT_IMAGE=...`, `root=` and `ro` of grub-mkconfig, `initrd=...`),
/// fits a kernel command line of `size` bytes with [`MARGIN`] to spare.
pub fn fits(
    within: &str,
    args: &[String],
    loader: &[String],
    size: usize,
) -> Result<(), Box<TooLong>> {
    let a = joined_len(args);
    let l = joined_len(loader);
    let len = a + l + usize::from(a > 0 && l > 0);
    let limit = size.saturating_sub(1 + MARGIN);
    if len <= limit {
        return Ok(());
    }
    Err(Box::new(TooLong {
        within: within.to_owned(),
        len,
        args: a,
        loader: if loader.is_empty() {
            "nothing".into()
        } else {
            loader.join(" ")
        },
        loader_len: l,
        limit,
        size,
        margin: MARGIN,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        cmdline::split(s)
    }

    #[test]
    fn the_kernels_part_ends_at_the_separator() {
        let l = BootLine::parse("ro quiet -- single x");
        assert_eq!(l.kernel, v("ro quiet"));
        assert_eq!(l.init, Some(v("single x")));
        assert_eq!(l.text(), "ro quiet -- single x");
        let l = BootLine::parse("ro --");
        assert_eq!(l.init, Some(Vec::new()));
        assert_eq!(l.args(), v("ro --"));
        let l = BootLine::parse("ro");
        assert!(!l.has_separator());
        let w = BootLine::parse("ro x -- x").with(&v("a"), &v("x"));
        assert_eq!(w.text(), "ro a -- x");
    }

    #[test]
    fn text_edits_go_before_the_separator() {
        let add = v("iommu=pt intel_iommu=on");
        for (line, want) in [
            (
                "ro quiet -- single",
                "ro quiet iommu=pt intel_iommu=on -- single",
            ),
            ("--", "iommu=pt intel_iommu=on --"),
            ("ro --", "ro iommu=pt intel_iommu=on --"),
            ("ro quiet", "ro quiet iommu=pt intel_iommu=on"),
            ("", "iommu=pt intel_iommu=on"),
            ("ro  --  a", "ro  iommu=pt intel_iommu=on --  a"),
        ] {
            assert_eq!(edit_text(line, &add, &[]), want, "{line:?}");
        }
        // Removal only in the kernel's part.
        assert_eq!(
            edit_text("iommu=off ro -- iommu=off", &v("iommu=pt"), &v("iommu=off")),
            "ro iommu=pt -- iommu=off"
        );
        assert_eq!(
            edit_text("ro iommu=off -- s", &[], &v("iommu=off")),
            "ro -- s"
        );
        assert_eq!(edit_text("a b", &[], &[]), "a b");
        assert_eq!(edit_text("iommu=off ro", &[], &v("iommu=off")), "ro");
    }

    #[test]
    fn a_line_fits_or_says_by_how_much() {
        let loader = v("BOOT_IMAGE=/boot/vmlinuz-6.8.0");
        assert!(fits("x", &v("ro quiet"), &loader, 2048).is_ok());
        let long: Vec<String> = (0..200).map(|i| format!("arg{i:04}=x")).collect();
        let e = fits("GRUB defaults /etc/default/grub", &long, &loader, 2048)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("/etc/default/grub"), "{e}");
        assert!(e.contains("COMMAND_LINE_SIZE of 2048"), "{e}");
        assert!(e.contains("limit of 1983"), "{e}");
        // Exactly at the limit fits; one byte more does not.
        let one = vec!["a".repeat(1983)];
        assert!(fits("x", &one, &[], 2048).is_ok());
        let one = vec!["a".repeat(1984)];
        assert!(fits("x", &one, &[], 2048).is_err());
        assert_eq!(command_line_size(), 2048);
    }
}
