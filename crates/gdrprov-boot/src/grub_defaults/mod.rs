//! The pure editor for `/etc/default/grub` and `/etc/default/grub.d/*.cfg`.
//!
//! `grub-mkconfig` sources `/etc/default/grub` and then every
//! `/etc/default/grub.d/*.cfg` in glob order; the last assignment wins. This
//! module finds every assignment of a variable across those files, computes
//! the value a shell would, and plans the smallest byte edit that makes the
//! value right: it removes arguments where they are written, appends new ones
//! to the last assignment in its own quoting style, and re-checks the result.
//!
//! Anything it cannot understand for certain (command substitution, other
//! variables, conditionals, `eval`, sourcing, continuations, here-documents)
//! is refused with the file and line, never guessed. The variable is assumed
//! unset in the environment of `grub-mkconfig`.

use thiserror::Error;

use super::cmdline::{self, ArgError};
use super::line;
use super::shell::{self, LexError};

/// The variable whose arguments go to every kernel entry, recovery included.
pub const CMDLINE_LINUX: &str = "GRUB_CMDLINE_LINUX";
/// The variable whose arguments go to normal (non-recovery) entries only.
pub const CMDLINE_LINUX_DEFAULT: &str = "GRUB_CMDLINE_LINUX_DEFAULT";

mod decode;
mod dropins;
mod error;
mod parse;
mod splice;

use decode::*;
pub use dropins::{dropin_set, NotUtf8, DROPIN_DIR};
pub use error::GrubError;
use error::*;
use parse::*;
use splice::*;

/// How an assignment's value is quoted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quoting {
    /// `VAR=`
    Empty,
    /// `VAR=word`
    Unquoted,
    /// `VAR='...'`
    Single,
    /// `VAR="..."`
    Double,
}

/// One piece of a decoded value: a character with the raw bytes that wrote
/// it, or the self-reference `$VAR` / `${VAR}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    Char { ch: char, start: usize, end: usize },
    SelfRef,
}

/// One plain top-level assignment of the variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    /// Index of the file in the slice given.
    pub file: usize,
    /// 1-based line of the assignment.
    pub line: usize,
    /// Written as `export VAR=...`.
    pub exported: bool,
    /// Byte span of the value (after `=`, quotes included) in the file.
    pub value_span: (usize, usize),
    /// Quoting of the value.
    pub quoting: Quoting,
    /// The value includes the variable's previous value (`"$VAR ..."`).
    pub self_reference: bool,
    pieces: Vec<Piece>,
}

/// A planned new content for one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEdit {
    /// File name as given.
    pub name: String,
    /// The whole new content.
    pub new_content: String,
}

/// Every plain assignment of `var` across `files` (name, content), in the
/// order a shell runs them. Pass `/etc/default/grub` first, then the
/// `grub.d/*.cfg` files sorted by name (bytewise, as the C locale globs).
pub fn assignments(files: &[(&str, &str)], var: &str) -> Result<Vec<Assignment>, GrubError> {
    check_var(var)?;
    for (i, (name, _)) in files.iter().enumerate() {
        if files.iter().skip(i + 1).any(|(other, _)| other == name) {
            return Err(GrubError::DuplicateFile {
                file: (*name).to_owned(),
            });
        }
    }
    let mut out = Vec::new();
    for (idx, (name, text)) in files.iter().enumerate() {
        parse_file(idx, name, text, var, &mut out)?;
    }
    Ok(out)
}

/// The arguments `var` holds after a shell sources `files` in order, split
/// the way the kernel splits its command line.
pub fn effective_value(files: &[(&str, &str)], var: &str) -> Result<Vec<String>, GrubError> {
    let assigns = assignments(files, var)?;
    Ok(tokens(&expand(&assigns))
        .into_iter()
        .map(|t| t.text)
        .collect())
}

/// The arguments GRUB puts on a normal boot entry: `GRUB_CMDLINE_LINUX`
/// followed by `GRUB_CMDLINE_LINUX_DEFAULT`.
pub fn effective_cmdline(files: &[(&str, &str)]) -> Result<Vec<String>, GrubError> {
    let mut args = effective_value(files, CMDLINE_LINUX)?;
    args.extend(effective_value(files, CMDLINE_LINUX_DEFAULT)?);
    Ok(args)
}

/// Plan the edit that makes `var` hold its current arguments minus every
/// occurrence of `remove`, plus those of `add` it does not hold yet (in
/// order). Only the kernel's part counts (the arguments before a `--` in
/// the value: what follows goes to init): removals are made there, and
/// additions go at its end, before `--`. Returns only the files that
/// change; nothing when already right.
pub fn plan_edit(
    files: &[(&str, &str)],
    var: &str,
    add: &[String],
    remove: &[String],
) -> Result<Vec<FileEdit>, GrubError> {
    let own = effective_value(files, var)?;
    edit_var(files, var, add, remove, line::kernel_end(&own))
}

/// [`plan_edit`] where the kernel's part of `var` is its first `kernel`
/// arguments (0 for `GRUB_CMDLINE_LINUX_DEFAULT` when `GRUB_CMDLINE_LINUX`,
/// which comes first on the line, has the `--`).
fn edit_var(
    files: &[(&str, &str)],
    var: &str,
    add: &[String],
    remove: &[String],
    kernel: usize,
) -> Result<Vec<FileEdit>, GrubError> {
    cmdline::validate_args(add)?;
    if let Some(arg) = add.iter().find(|a| remove.contains(a)) {
        return Err(GrubError::Contradiction { arg: arg.clone() });
    }
    let first = files.first().ok_or(GrubError::NoFiles)?;
    let assigns = assignments(files, var)?;
    let exp = expand(&assigns);
    let toks = tokens(&exp);
    let current: Vec<String> = toks.iter().map(|t| t.text.clone()).collect();
    let kernel = kernel.min(current.len());
    let (head, tail) = current.split_at(kernel);
    let mut intended: Vec<String> = head
        .iter()
        .filter(|t| !remove.contains(t))
        .cloned()
        .collect();
    let mut additions: Vec<String> = Vec::new();
    for a in add {
        if !intended.contains(a) && !additions.contains(a) {
            additions.push(a.clone());
        }
    }
    intended.extend(additions.iter().cloned());
    intended.extend(tail.iter().cloned());
    if intended == current {
        return Ok(Vec::new());
    }

    let mut contents: Vec<String> = files.iter().map(|(_, t)| (*t).to_owned()).collect();
    let splices = if assigns.is_empty() {
        vec![append_line(0, first.0, first.1, var, &additions)?]
    } else {
        let at = insertion(files, var, &assigns, &exp, toks.get(kernel), &additions)?;
        let kernel_toks = toks.get(..kernel).unwrap_or_default();
        let edit = ValueEdit {
            remove,
            additions: &additions,
            at,
        };
        value_splices(files, var, &assigns, &exp, kernel_toks, &edit)?
    };
    apply_splices(&mut contents, splices);

    let edited: Vec<(&str, &str)> = files
        .iter()
        .zip(&contents)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let got = effective_value(&edited, var)?;
    if got != intended {
        return Err(GrubError::VerifyFailed {
            var: var.to_owned(),
            want: intended,
            got,
        });
    }
    Ok(changed(files, &contents))
}

/// Where additions go when the value has a `--` (`sep`, the first token
/// after the kernel's part): the assignment that wrote it and the byte
/// before which they are put. `None` without a `--` or additions: they go
/// at the end of the last assignment.
fn insertion(
    files: &[(&str, &str)],
    var: &str,
    assigns: &[Assignment],
    exp: &[ExpChar],
    sep: Option<&Token>,
    additions: &[String],
) -> Result<Option<(usize, usize)>, GrubError> {
    let Some(t) = sep.filter(|_| !additions.is_empty()) else {
        return Ok(None);
    };
    let Some(c) = exp.get(t.range.0) else {
        return Ok(None);
    };
    let (ai, start, _) = c.origin;
    let a = assigns.get(ai);
    if let Some(a) = a.filter(|a| matches!(a.quoting, Quoting::Double | Quoting::Single)) {
        return Ok(Some((ai, start.max(a.value_span.0 + 1))));
    }
    let (file, line) = place_of(files, a);
    Err(GrubError::Unsupported {
        file,
        line,
        var: var.to_owned(),
        reason: "its unquoted value holds `--` (the end of the kernel's arguments), before which the new arguments must go".into(),
    })
}

/// Where an assignment stands, for an error: its file's name and its line
/// (empty and 0 when there is none).
fn place_of(files: &[(&str, &str)], a: Option<&Assignment>) -> (String, usize) {
    let file = a
        .and_then(|a| files.get(a.file))
        .map(|f| f.0)
        .unwrap_or_default()
        .to_owned();
    (file, a.map_or(0, |a| a.line))
}

/// Plan the kernel command line edit GRUB needs: remove `remove` from both
/// `GRUB_CMDLINE_LINUX_DEFAULT` and `GRUB_CMDLINE_LINUX` (either can hold a
/// conflicting argument), and add `add` to `GRUB_CMDLINE_LINUX` (so recovery
/// entries get it too) unless `GRUB_CMDLINE_LINUX_DEFAULT` already holds it.
/// The line is `GRUB_CMDLINE_LINUX` then `GRUB_CMDLINE_LINUX_DEFAULT`; its
/// kernel's part ends at the first `--` ([`line`]): nothing after it is
/// removed or counted, and additions go before it.
pub fn plan_cmdline_edit(
    files: &[(&str, &str)],
    add: &[String],
    remove: &[String],
) -> Result<Vec<FileEdit>, GrubError> {
    let linux = effective_value(files, CMDLINE_LINUX)?;
    let default_now = effective_value(files, CMDLINE_LINUX_DEFAULT)?;
    let linux_kernel = line::kernel_end(&linux);
    let default_kernel = if linux_kernel < linux.len() {
        0
    } else {
        line::kernel_end(&default_now)
    };
    let step1 = edit_var(files, CMDLINE_LINUX_DEFAULT, &[], remove, default_kernel)?;
    let mid = merged(files, &step1);
    let mid_files: Vec<(&str, &str)> = files
        .iter()
        .zip(&mid)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let default_args = effective_value(&mid_files, CMDLINE_LINUX_DEFAULT)?;
    let default_kernel = if linux_kernel < linux.len() {
        0
    } else {
        line::kernel_end(&default_args)
    };
    let default_kernel_args = default_args.get(..default_kernel).unwrap_or_default();
    let add: Vec<String> = add
        .iter()
        .filter(|a| !default_kernel_args.contains(a))
        .cloned()
        .collect();
    let step2 = edit_var(&mid_files, CMDLINE_LINUX, &add, remove, linux_kernel)?;
    let end = merged(&mid_files, &step2);
    let end_files: Vec<(&str, &str)> = files
        .iter()
        .zip(&end)
        .map(|((n, _), c)| (*n, c.as_str()))
        .collect();
    let got = effective_value(&end_files, CMDLINE_LINUX_DEFAULT)?;
    if got != default_args {
        return Err(GrubError::VerifyFailed {
            var: CMDLINE_LINUX_DEFAULT.to_owned(),
            want: default_args,
            got,
        });
    }
    Ok(changed(files, &end))
}

/// The `linux` line `grub-mkconfig`'s `10_linux` writes into `grub.cfg` for a
/// normal entry with these arguments, wrapped in a menu entry: feed it to
/// `grub-script-check` to check that GRUB itself accepts the arguments.
pub fn grub_script_snippet(args: &[String]) -> String {
    format!(
        "menuentry 'gdrprov check' {{\n\tlinux\t/vmlinuz root=/dev/sda1 ro {}\n}}\n",
        args.join(" ")
    )
}

// ---------------------------------------------------------------- parsing

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| (*x).to_owned()).collect()
    }

    fn one(text: &str) -> Vec<(&'static str, &str)> {
        vec![("/etc/default/grub", text)]
    }

    fn edit(text: &str, add: &[&str], remove: &[&str]) -> String {
        match plan_edit(&one(text), CMDLINE_LINUX, &s(add), &s(remove)) {
            Ok(e) => e
                .first()
                .map_or_else(|| text.to_owned(), |e| e.new_content.clone()),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn assignment_model() {
        let text = "A=1\nexport GRUB_CMDLINE_LINUX='quiet'\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX x\"\n";
        let a = assignments(&one(text), CMDLINE_LINUX).unwrap_or_default();
        assert_eq!(a.len(), 2);
        assert_eq!(
            (a[0].line, a[0].exported, a[0].quoting),
            (2, true, Quoting::Single)
        );
        assert_eq!(&text[a[0].value_span.0..a[0].value_span.1], "'quiet'");
        assert!(!a[0].self_reference);
        assert_eq!(
            (a[1].line, a[1].quoting, a[1].self_reference),
            (3, Quoting::Double, true)
        );
        assert_eq!(
            effective_value(&one(text), CMDLINE_LINUX),
            Ok(s(&["quiet", "x"]))
        );
    }

    #[test]
    fn minimal_edits() {
        assert_eq!(edit("X=\"a b\"\n", &[], &[]), "X=\"a b\"\n");
        let t = "GRUB_CMDLINE_LINUX=\"a iommu=off b\"\n";
        assert_eq!(
            edit(t, &["iommu=pt"], &["iommu=off"]),
            "GRUB_CMDLINE_LINUX=\"a b iommu=pt\"\n"
        );
        let t = "GRUB_CMDLINE_LINUX=\"iommu=off b\"\n";
        assert_eq!(edit(t, &[], &["iommu=off"]), "GRUB_CMDLINE_LINUX=\"b\"\n");
        let t = "GRUB_CMDLINE_LINUX=\"b \"\n";
        assert_eq!(edit(t, &["c"], &[]), "GRUB_CMDLINE_LINUX=\"b c\"\n");
        let t = "GRUB_CMDLINE_LINUX=b\n";
        assert_eq!(edit(t, &["c"], &[]), "GRUB_CMDLINE_LINUX=\"b c\"\n");
        let t = "GRUB_CMDLINE_LINUX=$GRUB_CMDLINE_LINUX\n";
        assert_eq!(
            edit(t, &["c"], &[]),
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX c\"\n"
        );
        let t = "GRUB_TIMEOUT=5";
        assert_eq!(
            edit(t, &["c"], &[]),
            "GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX=\"c\"\n"
        );
        // Already there: nothing to do; duplicates in `add` are added once.
        let t = "GRUB_CMDLINE_LINUX=\"c\"\n";
        assert_eq!(
            edit(t, &["c", "d", "d"], &["e"]),
            "GRUB_CMDLINE_LINUX=\"c d\"\n"
        );
    }

    #[test]
    fn additions_go_before_the_separator_and_init_is_left_alone() {
        let add = s(&["iommu=pt", "intel_iommu=on"]);
        let cases = [
            (
                "GRUB_CMDLINE_LINUX=\"ro quiet -- single\"\n",
                "GRUB_CMDLINE_LINUX=\"ro quiet iommu=pt intel_iommu=on -- single\"\n",
            ),
            (
                "GRUB_CMDLINE_LINUX='--'\n",
                "GRUB_CMDLINE_LINUX='iommu=pt intel_iommu=on --'\n",
            ),
            (
                "GRUB_CMDLINE_LINUX=\"iommu=off -- iommu=off\"\n",
                "GRUB_CMDLINE_LINUX=\"iommu=pt intel_iommu=on -- iommu=off\"\n",
            ),
            // `--` in LINUX: DEFAULT is init's, never edited nor counted.
            (
                "GRUB_CMDLINE_LINUX=\"ro --\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"iommu=pt iommu=off\"\n",
                "GRUB_CMDLINE_LINUX=\"ro iommu=pt intel_iommu=on --\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"iommu=pt iommu=off\"\n",
            ),
            // `--` in DEFAULT: LINUX comes first, so appending is before it.
            (
                "GRUB_CMDLINE_LINUX=\"ro\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"iommu=off -- iommu=off\"\n",
                "GRUB_CMDLINE_LINUX=\"ro iommu=pt intel_iommu=on\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"-- iommu=off\"\n",
            ),
            // A self-reference after the `--`: added in the assignment that wrote it.
            (
                "GRUB_CMDLINE_LINUX=\"ro -- s\"\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX quiet\"\n",
                "GRUB_CMDLINE_LINUX=\"ro iommu=pt intel_iommu=on -- s\"\nGRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX quiet\"\n",
            ),
        ];
        for (text, want) in cases {
            let e = plan_cmdline_edit(&one(text), &add, &s(&["iommu=off"]))
                .unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(
                e.first().map(|e| e.new_content.as_str()),
                Some(want),
                "{text:?}"
            );
            let again = plan_cmdline_edit(&one(want), &add, &s(&["iommu=off"]));
            assert_eq!(again, Ok(Vec::new()), "{want:?}");
        }
        // An unquoted `--` cannot take words before it: refused, naming the line.
        let e = plan_cmdline_edit(&one("GRUB_CMDLINE_LINUX=--\n"), &add, &[]);
        assert!(
            matches!(e, Err(GrubError::Unsupported { line: 1, .. })),
            "{e:?}"
        );
    }

    #[test]
    fn bad_requests() {
        let t = "GRUB_CMDLINE_LINUX=\"\"\n";
        assert_eq!(
            plan_edit(&one(t), CMDLINE_LINUX, &s(&["a"]), &s(&["a"])),
            Err(GrubError::Contradiction { arg: "a".into() })
        );
        assert_eq!(
            plan_edit(&[], CMDLINE_LINUX, &s(&["a"]), &[]),
            Err(GrubError::NoFiles)
        );
        assert!(matches!(
            effective_value(&one(t), "1X"),
            Err(GrubError::BadVariable { .. })
        ));
        let two = vec![("g", t), ("g", t)];
        assert!(matches!(
            effective_value(&two, CMDLINE_LINUX),
            Err(GrubError::DuplicateFile { .. })
        ));
        assert!(matches!(
            plan_edit(&one("X=1\\"), CMDLINE_LINUX, &s(&["a"]), &[]),
            Err(GrubError::Unsupported { .. })
        ));
    }

    #[test]
    fn mentions_whole_identifiers_only() {
        assert!(mentions("A=$GRUB_CMDLINE_LINUX", CMDLINE_LINUX));
        assert!(mentions("${GRUB_CMDLINE_LINUX}", CMDLINE_LINUX));
        assert!(!mentions("GRUB_CMDLINE_LINUX_DEFAULT=x", CMDLINE_LINUX));
        assert!(!mentions("MY_GRUB_CMDLINE_LINUX=x", CMDLINE_LINUX));
    }

    /// A poor man's fuzzer until the cargo-fuzz targets exist: random text
    /// from a shell-heavy alphabet must never panic, and whatever edit is
    /// planned must be idempotent.
    #[test]
    fn random_text_never_panics_and_edits_are_idempotent() {
        const ALPHABET: &[&str] = &[
            "GRUB_CMDLINE_LINUX=",
            "GRUB_CMDLINE_LINUX_DEFAULT=",
            "$GRUB_CMDLINE_LINUX",
            "${GRUB_CMDLINE_LINUX}",
            "\"",
            "'",
            "\\",
            "$",
            "{",
            "}",
            "(",
            ")",
            "`",
            " ",
            "\t",
            "\n",
            "\r\n",
            "#",
            ";",
            "&",
            "|",
            "<",
            ">",
            "iommu=off",
            "quiet",
            "a=\"b c\"",
            "é",
            "if ",
            "fi",
            "export ",
            "=",
            "\u{0}",
        ];
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for _ in 0..20_000 {
            let n = next() % 12;
            let text: String = (0..n)
                .map(|_| {
                    ALPHABET
                        .get((next() % ALPHABET.len() as u64) as usize)
                        .copied()
                        .unwrap_or("")
                })
                .collect();
            let files = one(&text);
            let add = s(&["iommu=pt"]);
            let remove = s(&["iommu=off", "quiet", "a=\"b c\""]);
            if let Ok(edits) = plan_cmdline_edit(&files, &add, &remove) {
                let new = edits
                    .first()
                    .map_or(text.as_str(), |e| e.new_content.as_str());
                assert_eq!(
                    plan_cmdline_edit(&one(new), &add, &remove),
                    Ok(Vec::new()),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn hostile_input_does_not_panic() {
        let inputs = [
            "",
            "\"",
            "'",
            "\\",
            "$",
            "${",
            "$(",
            "`",
            "GRUB_CMDLINE_LINUX=\"\\",
            "GRUB_CMDLINE_LINUX=$",
            "GRUB_CMDLINE_LINUX=${",
            "GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX\"",
            "GRUB_CMDLINE_LINUX=é\\é",
            "GRUB_CMDLINE_LINUX=\"é\\",
            "(((",
            ")))",
            "}}}",
            "fi fi",
            "GRUB_CMDLINE_LINUX=\"a\"\r",
            "\r",
            "GRUB_CMDLINE_LINUX=\"\u{0}\"",
            "GRUB_CMDLINE_LINUX=\"acpi=\\\"x\"",
        ];
        for t in inputs {
            let _ = plan_cmdline_edit(
                &one(t),
                &s(&["iommu=pt"]),
                &s(&["a", "\"", "x\"", "acpi=\"x"]),
            );
            let _ = effective_cmdline(&one(t));
        }
    }
}
