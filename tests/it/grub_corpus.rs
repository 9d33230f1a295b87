//! The GRUB defaults editor against a corpus of real-world-shaped files.
//!
//! Every check uses real shells as the oracle: bash (and dash, which is what
//! `grub-mkconfig` runs on Debian and Ubuntu) source the files before and
//! after the edit, and `bash -n`, `dash -n` and `grub-script-check` (when
//! installed) must accept the result.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use gdrprov_boot::cmdline;
use gdrprov_boot::desired::{self, BootWants, CpuVendor, IommuIntent};
use gdrprov_boot::grub_defaults::{self, FileEdit, GrubError};
use gdrprov_boot::line::BootLine;

type Files = Vec<(String, String)>;

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/grub")
}

/// `grub` first, then `grub.d/*.cfg` sorted bytewise, as grub-mkconfig globs.
fn load(case: &str) -> Files {
    let dir = corpus_dir().join(case);
    let mut files = vec![(
        "grub".to_owned(),
        fs::read_to_string(dir.join("grub")).expect("read grub"),
    )];
    let mut dropins: Vec<String> = fs::read_dir(dir.join("grub.d"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".cfg"))
                .collect()
        })
        .unwrap_or_default();
    dropins.sort();
    for n in dropins {
        let text = fs::read_to_string(dir.join("grub.d").join(&n)).expect("read cfg");
        files.push((format!("grub.d/{n}"), text));
    }
    files
}

fn refs(files: &Files) -> Vec<(&str, &str)> {
    files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect()
}

fn apply(files: &Files, edits: &[FileEdit]) -> Files {
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

fn write_tree(files: &Files) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir_all(dir.path().join("grub.d")).expect("mkdir");
    for (n, c) in files {
        fs::write(dir.path().join(n), c).expect("write");
    }
    dir
}

fn have(tool: &str) -> bool {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(HashMap::new()));
    let mut seen = seen.lock().expect("lock");
    *seen.entry(tool.to_owned()).or_insert_with(|| {
        Command::new("sh")
            .arg("-c")
            .arg(format!("command -v {tool}"))
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// (GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT) as `shell` computes them
/// by sourcing the tree the way grub-mkconfig does.
fn shell_values(shell: &str, dir: &Path) -> (String, String) {
    let script = r#"{ . ./grub; for f in ./grub.d/*.cfg; do if [ -e "$f" ]; then . "$f"; fi; done; } >/dev/null
printf '%s\037%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT""#;
    let out = Command::new(shell)
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env_remove("GRUB_CMDLINE_LINUX")
        .env_remove("GRUB_CMDLINE_LINUX_DEFAULT")
        .output()
        .expect("run shell");
    assert!(out.status.success(), "{shell} failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("utf8");
    let (l, d) = text.split_once('\x1f').expect("separator");
    (l.to_owned(), d.to_owned())
}

fn bash_args(files: &Files) -> (Vec<String>, Vec<String>) {
    let dir = write_tree(files);
    let (l, d) = shell_values("bash", dir.path());
    if have("dash") {
        assert_eq!(
            shell_values("dash", dir.path()),
            (l.clone(), d.clone()),
            "dash and bash differ"
        );
    }
    (cmdline::split(&l), cmdline::split(&d))
}

fn syntax_check(files: &Files) {
    let dir = write_tree(files);
    for (n, _) in files {
        for sh in ["bash", "dash"] {
            if sh == "dash" && !have("dash") {
                continue;
            }
            let st = Command::new(sh)
                .arg("-n")
                .arg(n)
                .current_dir(dir.path())
                .status()
                .expect("sh -n");
            assert!(st.success(), "{sh} -n {n} failed");
        }
    }
}

/// Whether GRUB's own parser accepts the `linux` line 10_linux would write
/// for these arguments (true when grub-script-check is not installed).
fn grub_accepts(linux: &[String], default: &[String]) -> bool {
    if !have("grub-script-check") {
        return true;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let all: Vec<String> = linux.iter().chain(default).cloned().collect();
    let p = dir.path().join("snippet.cfg");
    fs::write(&p, grub_defaults::grub_script_snippet(&all)).expect("write snippet");
    Command::new("grub-script-check")
        .arg(&p)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Every line the editor does not own must survive byte for byte: the only
/// changed lines are assignments of the cmdline variables, and the only new
/// lines are appended `GRUB_CMDLINE_LINUX=` lines.
fn check_lines_preserved(before: &Files, after: &Files) {
    let owned = |l: &str| {
        let t = l.trim_start();
        !t.starts_with('#')
            && ["GRUB_CMDLINE_LINUX=", "GRUB_CMDLINE_LINUX_DEFAULT="]
                .iter()
                .any(|v| {
                    t.match_indices(v)
                        .any(|(i, _)| i == 0 || t[..i].ends_with([' ', '\t', ';']))
                })
    };
    for ((n, old), (_, new)) in before.iter().zip(after) {
        let ol: Vec<&str> = old.split_inclusive('\n').collect();
        let nl: Vec<&str> = new.split_inclusive('\n').collect();
        assert!(nl.len() >= ol.len(), "{n}: lines were lost");
        for (i, (o, w)) in ol.iter().zip(&nl).enumerate() {
            let last_unterminated = i + 1 == ol.len() && !o.ends_with('\n');
            let ok = o == w
                || owned(o)
                || (last_unterminated
                    && w.strip_suffix('\n').map(|w| w.trim_end_matches('\r')) == Some(o));
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

fn minus(args: &[String], remove: &[String]) -> Vec<String> {
    args.iter()
        .filter(|a| !remove.contains(a))
        .cloned()
        .collect()
}

/// Edit with `add`/`remove`, check everything, and return the new files.
fn edit_and_check(files: &Files, add: &[String], remove: &[String]) -> Files {
    let (linux0, default0) = bash_args(files);
    let edits = match grub_defaults::plan_cmdline_edit(&refs(files), add, remove) {
        Ok(e) => e,
        Err(e) => panic!("plan_cmdline_edit: {e}"),
    };
    let after = apply(files, &edits);
    let (linux1, default1) = bash_args(&after);
    let want_default = minus(&default0, remove);
    let mut want_linux = minus(&linux0, remove);
    for a in add {
        if !want_linux.contains(a)
            && !want_default.contains(a)
            && !want_linux.iter().any(|x| x == a)
        {
            want_linux.push(a.clone());
        }
    }
    assert_eq!(linux1, want_linux, "GRUB_CMDLINE_LINUX after the edit");
    assert_eq!(
        default1, want_default,
        "GRUB_CMDLINE_LINUX_DEFAULT after the edit"
    );
    assert_eq!(
        grub_defaults::effective_value(&refs(&after), grub_defaults::CMDLINE_LINUX).ok(),
        Some(linux1.clone()),
        "editor and bash disagree on the result"
    );
    if edits.is_empty() {
        assert_eq!(&after, files);
    }
    syntax_check(&after);
    if grub_accepts(&linux0, &default0) {
        assert!(
            grub_accepts(&linux1, &default1),
            "grub-script-check rejects the result"
        );
    }
    check_lines_preserved(files, &after);
    // edit(edit(x)) == edit(x)
    let again = grub_defaults::plan_cmdline_edit(&refs(&after), add, remove);
    assert_eq!(again, Ok(Vec::new()), "second edit is not a no-op");
    after
}

struct Case {
    dir: &'static str,
    iommu: IommuIntent,
    vendor: CpuVendor,
    /// The whole file set must plan nothing.
    compliant: bool,
    /// GRUB_CMDLINE_LINUX after the profile is applied, written by hand.
    linux_after: &'static str,
}

const PT: IommuIntent = IommuIntent::Passthrough;
const INTEL: CpuVendor = CpuVendor::Intel;

fn case(dir: &'static str, linux_after: &'static str) -> Case {
    Case {
        dir,
        iommu: PT,
        vendor: INTEL,
        compliant: false,
        linux_after,
    }
}

fn cases() -> Vec<Case> {
    vec![
        case("ubuntu-22.04-server", "iommu=pt intel_iommu=on"),
        case("ubuntu-24.04-server", "iommu=pt intel_iommu=on"),
        case("ubuntu-24.04-desktop", "iommu=pt intel_iommu=on"),
        case("ubuntu-22.04-desktop-nvidia", "iommu=pt intel_iommu=on"),
        case("ubuntu-22.04-cloud", "iommu=pt intel_iommu=on"),
        case("ubuntu-24.04-cloud-selfref", "pci=realloc=off iommu=pt intel_iommu=on"),
        Case { vendor: CpuVendor::Amd, ..case("debian-12", "iommu=pt") },
        case(
            "rhel-8",
            "crashkernel=auto resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet iommu=pt intel_iommu=on",
        ),
        case(
            "rhel-9",
            "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet iommu=pt intel_iommu=on",
        ),
        Case {
            compliant: true,
            ..case("rhel-9-compliant", "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rd.lvm.lv=rhel/root rhgb quiet intel_iommu=on iommu=pt")
        },
        Case { compliant: true, ..case("ubuntu-compliant-default", "") },
        case("single-quotes", "console=ttyS0,115200n8 console=tty0 iommu=pt intel_iommu=on"),
        case("unquoted-word", "nomodeset iommu=pt intel_iommu=on"),
        case("unquoted-conflict", "iommu=pt intel_iommu=on"),
        case("empty-unquoted", "iommu=pt intel_iommu=on"),
        case("self-reference", "rd.auto=1 console=ttyS0 mitigations=auto iommu=pt intel_iommu=on"),
        case("selfref-first", "quiet iommu=pt intel_iommu=on"),
        case(
            "escaped-quotes",
            r#"acpi_osi=Linux acpi_osi="Windows 2020" pcie_aspm=off iommu=pt intel_iommu=on"#,
        ),
        case("quoted-spaces-single", r#"acpi_osi="Windows 2015" quiet iommu=pt intel_iommu=on"#),
        case("no-cmdline-line", "iommu=pt intel_iommu=on"),
        case("commented-out", "quiet iommu=pt intel_iommu=on"),
        case("only-commented", "iommu=pt intel_iommu=on"),
        case("export", "quiet iommu=pt intel_iommu=on"),
        case("crlf", "iommu=pt intel_iommu=on"),
        case("crlf-no-line", "iommu=pt intel_iommu=on"),
        case("no-trailing-newline", "quiet iommu=pt intel_iommu=on"),
        case("no-trailing-newline-no-line", "iommu=pt intel_iommu=on"),
        case("dead-assignment", "quiet iommu=pt intel_iommu=on"),
        case("one-line-two-vars", "rd.shell=0 iommu=pt intel_iommu=on"),
        case("default-holds-conflict", "crashkernel=512M-:192M iommu=pt intel_iommu=on"),
        case("grubd-overrides", "console=ttyS1,115200 intel_iommu=on iommu=pt"),
        case("tabs-and-spaces", "quiet splash iommu=pt intel_iommu=on"),
        case("compound-elsewhere", "quiet iommu=pt intel_iommu=on"),
        // Already has iommu=off: GPUDirect Storage's profile plans nothing.
        Case {
            iommu: IommuIntent::Off,
            compliant: true,
            ..case("ubuntu-24.04-cloud-selfref", "iommu=off pci=realloc=off")
        },
        Case {
            iommu: IommuIntent::Off,
            ..case("rhel-8", "crashkernel=auto resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap rhgb quiet iommu=off")
        },
        Case {
            iommu: IommuIntent::Off,
            ..case("rhel-9-compliant", "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M rd.lvm.lv=rhel/root rhgb quiet iommu=off")
        },
    ]
}

#[test]
fn every_corpus_directory_has_a_case() {
    let listed: Vec<&str> = cases().iter().map(|c| c.dir).collect();
    for e in fs::read_dir(corpus_dir()).expect("corpus") {
        let e = e.expect("entry");
        if e.path().is_dir() {
            let n = e.file_name().to_string_lossy().into_owned();
            assert!(listed.contains(&n.as_str()), "no test case for fixture {n}");
        }
    }
}

#[test]
fn editor_reads_what_bash_reads() {
    for c in cases() {
        let files = load(c.dir);
        let (linux, default) = bash_args(&files);
        let r = refs(&files);
        assert_eq!(
            grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX),
            Ok(linux.clone()),
            "{}",
            c.dir
        );
        assert_eq!(
            grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX_DEFAULT),
            Ok(default.clone()),
            "{}",
            c.dir
        );
        let mut all = linux;
        all.extend(default);
        assert_eq!(grub_defaults::effective_cmdline(&r), Ok(all), "{}", c.dir);
    }
}

#[test]
fn profiles_apply_to_the_corpus() {
    for c in cases() {
        let files = load(c.dir);
        let wants = BootWants {
            iommu: c.iommu,
            vendor: c.vendor,
            present: vec![],
            absent: vec![],
        };
        let current = grub_defaults::effective_cmdline(&refs(&files)).expect("read");
        let plan =
            desired::plan_args(&BootLine::from_args(&current), &wants, &[], None).expect("plan");
        assert_eq!(plan.is_noop(), c.compliant, "{}: {plan:?}", c.dir);
        let after = edit_and_check(&files, &plan.add, &plan.remove);
        if c.compliant {
            assert_eq!(after, files, "{}", c.dir);
        }
        let (linux, default) = bash_args(&after);
        assert!(
            grub_accepts(&linux, &default),
            "{}: grub-script-check",
            c.dir
        );
        assert_eq!(linux, cmdline::split(c.linux_after), "{}", c.dir);
        // The kernel sees LINUX then LINUX_DEFAULT: the wanted arguments are
        // there and no conflicting one is, anywhere.
        let mut all = linux;
        all.extend(default);
        let replan = desired::plan_args(
            &BootLine::from_args(&all),
            &wants,
            &plan.owned,
            Some(&BootLine::from_args(&all)),
        )
        .expect("replan");
        assert!(replan.is_noop(), "{}: not idempotent: {replan:?}", c.dir);
        assert!(!replan.reboot_needed(), "{}", c.dir);
        for bad in ["iommu=off", "intel_iommu=off"] {
            if c.iommu == PT {
                assert!(!all.iter().any(|a| a == bad), "{}: {bad} left", c.dir);
            }
        }
    }
}

#[test]
fn release_removes_only_what_gdrprov_added() {
    for c in cases() {
        let files = load(c.dir);
        let (linux0, default0) = bash_args(&files);
        let wants = BootWants {
            iommu: c.iommu,
            vendor: c.vendor,
            present: vec![],
            absent: vec![],
        };
        let current = grub_defaults::effective_cmdline(&refs(&files)).expect("read");
        let plan =
            desired::plan_args(&BootLine::from_args(&current), &wants, &[], None).expect("plan");
        let applied = edit_and_check(&files, &plan.add, &plan.remove);
        let now = grub_defaults::effective_cmdline(&refs(&applied)).expect("read");
        let release =
            desired::release_args(&BootLine::from_args(&now), &plan.owned, None).expect("release");
        let released = edit_and_check(&applied, &release.add, &release.remove);
        let (linux, default) = bash_args(&released);
        // Back to the original minus the conflicts the profile removed; the
        // user's own arguments (even wanted ones) stay.
        assert_eq!(linux, minus(&linux0, &plan.remove), "{}", c.dir);
        assert_eq!(default, minus(&default0, &plan.remove), "{}", c.dir);
        if plan.remove.is_empty()
            && !c.dir.contains("unquoted")
            && !c.dir.contains("no-")
            && !c.dir.contains("only-commented")
            && !c.dir.contains("crlf-no-line")
        {
            assert_eq!(
                released, files,
                "{}: release did not restore the bytes",
                c.dir
            );
        }
    }
}

/// Remove each argument in turn and add one, on every corpus file.
#[test]
fn remove_each_argument_and_add_one() {
    let add = vec!["gdrprov.test=1".to_owned()];
    for c in cases() {
        let files = load(c.dir);
        let all = grub_defaults::effective_cmdline(&refs(&files)).expect("read");
        for a in &all {
            edit_and_check(&files, &add, std::slice::from_ref(a));
        }
        edit_and_check(&files, &add, &all);
    }
}

// ----------------------------------------------------------- refusals

fn refusal(text: &str) -> GrubError {
    let files = vec![("/etc/default/grub".to_owned(), text.to_owned())];
    let add = vec!["iommu=pt".to_owned()];
    match grub_defaults::plan_cmdline_edit(&refs(&files), &add, &[]) {
        Ok(e) => panic!("edited {text:?}: {e:?}"),
        Err(e) => e,
    }
}

#[test]
fn refuses_what_it_cannot_understand() {
    let cases: &[(&str, usize, &str)] = &[
        (
            "GRUB_CMDLINE_LINUX=\"$(cat /etc/cmdline)\"\n",
            1,
            "command substitution",
        ),
        (
            "A=1\nGRUB_CMDLINE_LINUX=\"`cat /x` quiet\"\n",
            2,
            "backticks",
        ),
        ("GRUB_CMDLINE_LINUX=\"$EXTRA quiet\"\n", 1, "$EXTRA"),
        (
            "GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX:-quiet}\"\n",
            1,
            "$ expansion",
        ),
        (
            "if true; then\n  GRUB_CMDLINE_LINUX=\"quiet\"\nfi\n",
            2,
            "inside",
        ),
        (
            "GRUB_CMDLINE_LINUX=\"quiet \\\nsplash\"\n",
            1,
            "backslash-newline",
        ),
        (
            "GRUB_CMDLINE_LINUX=quiet \\\n  GRUB_TIMEOUT=1\n",
            1,
            "several lines",
        ),
        ("GRUB_CMDLINE_LINUX=\"quiet\nsplash\"\n", 1, "several lines"),
        ("GRUB_CMDLINE_LINUX+=\" quiet\"\n", 1, "+="),
        ("GRUB_CMDLINE_LINUX=\"a\"'b'\n", 1, "mixes"),
        (
            "GRUB_CMDLINE_LINUX=\"${GRUB_CMDLINE_LINUX}quiet\"\n",
            1,
            "glued",
        ),
        (
            "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX $GRUB_CMDLINE_LINUX\"\n",
            1,
            "more than once",
        ),
        ("[ -d /x ] && GRUB_CMDLINE_LINUX=\"quiet\"\n", 1, "&&"),
        ("unset GRUB_CMDLINE_LINUX\n", 1, "plain assignments"),
        ("GRUB_X=\"$GRUB_CMDLINE_LINUX\"\n", 1, "refers to it"),
        ("export A GRUB_CMDLINE_LINUX=quiet\n", 1, "more than one"),
        (
            "export GRUB_CMDLINE_\"\"LINUX=evil\n",
            1,
            "a command uses it",
        ),
        (
            "readonly GRUB_CMDLINE_\\LINUX=evil\n",
            1,
            "a command uses it",
        ),
        ("GRUB_CMDLINE_LINUX=~/x\n", 1, "tilde"),
        ("f() {\n GRUB_CMDLINE_LINUX=quiet\n}\n", 2, "inside"),
    ];
    for (text, line, needle) in cases {
        let e = refusal(text);
        let msg = e.to_string();
        match &e {
            GrubError::Unsupported { line: l, .. } => assert_eq!(l, line, "{text:?}: {msg}"),
            other => panic!("{text:?}: {other:?}"),
        }
        assert!(msg.contains(needle), "{text:?}: {msg}");
        assert!(msg.contains(&format!("/etc/default/grub:{line}:")), "{msg}");
        assert!(msg.contains("by hand"), "{msg}");
    }
}

#[test]
fn refuses_opaque_commands_and_broken_shell() {
    for text in [
        "GRUB_TIMEOUT=5\n. /etc/default/grub.local\n",
        "source /etc/x\n",
        "eval \"$(cat /x)\"\n",
        "if true; then . /x; fi\n",
        "[ -e /x ] && return\nGRUB_CMDLINE_LINUX=quiet\n",
        "exit 0\n",
        "N=GRUB_CMDLINE_\nexport \"${N}LINUX=evil\"\n",
        "N=x\nunset \"$N\"\n",
        "\"eval\" x\n",
    ] {
        assert!(
            matches!(refusal(text), GrubError::Opaque { .. }),
            "{text:?}"
        );
    }
    for text in [
        "GRUB_CMDLINE_LINUX=\"quiet\n",
        "cat <<EOF\nGRUB_CMDLINE_LINUX=x\nEOF\n",
        "A='x\n",
        "GRUB_CMDLINE_LINUX=(quiet splash)\n",
        "GRUB_CMDLINE_LINUX=$'quiet'\n",
    ] {
        let e = refusal(text);
        assert!(matches!(e, GrubError::Syntax { .. }), "{text:?}: {e:?}");
    }
}

/// Where the lexer's view of a substitution could differ from the shell's
/// (a `)` in a comment or a `case` pattern inside `$(...)`), the unbalanced
/// nesting it leaves behind makes the editor refuse instead of misreading.
#[test]
fn misparsed_substitutions_are_refused_not_misread() {
    for text in [
        "X=$(echo a # )\nGRUB_CMDLINE_LINUX=evil\n)\n",
        "X=$(case a in a) echo ;; esac)\nGRUB_CMDLINE_LINUX=quiet\n",
    ] {
        let files = vec![("grub".to_owned(), text.to_owned())];
        let r = grub_defaults::effective_value(&refs(&files), grub_defaults::CMDLINE_LINUX);
        if let Ok(v) = r {
            assert_eq!(v, bash_args(&files).0, "{text:?}");
        }
    }
}

#[test]
fn refuses_unsafe_arguments_before_touching_anything() {
    let files = load("ubuntu-22.04-server");
    for bad in [
        "a\"b", "a'b", "x=$HOME", "a`id`", "a;reboot", "a\\b", "a b", "a\nb", "a\x07",
    ] {
        let r = grub_defaults::plan_cmdline_edit(&refs(&files), &[bad.to_owned()], &[]);
        match r {
            Err(GrubError::BadArgument(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
}

#[test]
fn grubd_files_are_edited_where_the_argument_lives() {
    let files = load("ubuntu-24.04-cloud-selfref");
    let edits = grub_defaults::plan_cmdline_edit(
        &refs(&files),
        &["iommu=pt".to_owned()],
        &["iommu=off".to_owned()],
    )
    .expect("plan");
    let names: Vec<&str> = edits.iter().map(|e| e.name.as_str()).collect();
    // iommu=off lives in /etc/default/grub; the last assignment is in 60-gpu.cfg.
    assert_eq!(names, ["grub", "grub.d/60-gpu.cfg"]);
    let after = apply(&files, &edits);
    assert!(
        after[0].1.contains("\nGRUB_CMDLINE_LINUX=\"\"\n"),
        "{}",
        after[0].1
    );
    assert!(after[3]
        .1
        .contains("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX pci=realloc=off iommu=pt\""));
}

#[test]
fn quoting_style_is_kept() {
    let files = load("single-quotes");
    let edits = grub_defaults::plan_edit(
        &refs(&files),
        "GRUB_CMDLINE_LINUX",
        &["iommu=pt".to_owned()],
        &["intel_iommu=off".to_owned()],
    )
    .expect("plan");
    assert_eq!(edits.len(), 1);
    assert!(edits[0]
        .new_content
        .contains("GRUB_CMDLINE_LINUX='console=ttyS0,115200n8 console=tty0 iommu=pt'\n"));
    let files = load("crlf");
    let edits = grub_defaults::plan_cmdline_edit(
        &refs(&files),
        &["iommu=pt".to_owned()],
        &["iommu=off".to_owned()],
    )
    .expect("plan");
    assert!(edits[0]
        .new_content
        .contains("GRUB_CMDLINE_LINUX=\"iommu=pt\"\r\n"));
    let files = load("crlf-no-line");
    let edits = grub_defaults::plan_cmdline_edit(&refs(&files), &["iommu=pt".to_owned()], &[])
        .expect("plan");
    assert!(edits[0]
        .new_content
        .ends_with("GRUB_TIMEOUT=5\r\nGRUB_CMDLINE_LINUX=\"iommu=pt\"\r\n"));
}

// ------------------------------------------------ generated file sets

/// xorshift64*: a tiny deterministic generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// Kernel arguments as they appear in a value (before shell quoting).
const POOL: &[&str] = &[
    "quiet",
    "splash",
    "iommu=off",
    "iommu=pt",
    "intel_iommu=on",
    "intel_iommu=off",
    "console=ttyS0,115200n8",
    "rd.lvm.lv=rhel/root",
    "acpi_osi=\"Windows 2020\"",
    "nomodeset",
    "pci=realloc=off",
    "crashkernel=1G-4G:192M,4G-:256M",
];

fn gen_value(rng: &mut Rng, var: &str) -> String {
    let n = rng.below(4);
    let mut parts: Vec<String> = (0..n).map(|_| rng.pick(POOL).to_owned()).collect();
    let self_ref = rng.chance(30);
    let style = rng.below(4);
    if style == 0 {
        // Unquoted: one plain word, a self-reference, or nothing.
        let word = parts
            .iter()
            .find(|p| !p.contains('"'))
            .cloned()
            .unwrap_or_default();
        return match (self_ref, rng.below(2)) {
            (true, 0) => format!("${var}"),
            (true, _) => format!("${{{var}}}"),
            _ => word,
        };
    }
    let ws = |rng: &mut Rng| rng.pick(&[" ", " ", "  ", "\t"]).to_owned();
    if self_ref {
        let r = if rng.chance(50) {
            format!("${var}")
        } else {
            format!("${{{var}}}")
        };
        if style != 1 && rng.chance(50) {
            parts.insert(0, r);
        } else if style != 1 {
            parts.push(r);
        }
    }
    let mut body = String::new();
    if rng.chance(20) {
        body.push_str(&ws(rng));
    }
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            body.push_str(&ws(rng));
        }
        body.push_str(p);
    }
    if rng.chance(20) {
        body.push_str(&ws(rng));
    }
    if style == 1 {
        format!("'{body}'")
    } else {
        format!("\"{}\"", body.replace('"', "\\\""))
    }
}

fn gen_file(rng: &mut Rng) -> String {
    let nl = if rng.chance(15) { "\r\n" } else { "\n" };
    let mut out = String::new();
    for _ in 0..rng.below(7) {
        let line = match rng.below(8) {
            0 => "# If you change this file, run 'update-grub' afterwards".to_owned(),
            1 => "#GRUB_CMDLINE_LINUX=\"iommu=off\"".to_owned(),
            2 => "GRUB_TIMEOUT=5".to_owned(),
            3 => "GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`".to_owned(),
            4 => "GRUB_TERMINAL_OUTPUT=\"$(echo console)\"".to_owned(),
            _ => {
                let var = rng.pick(&["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"]);
                let export = if rng.chance(15) { "export " } else { "" };
                let comment = if rng.chance(15) { " # set by hand" } else { "" };
                format!("{export}{var}={}{comment}", gen_value(rng, var))
            }
        };
        out.push_str(&line);
        out.push_str(nl);
    }
    if rng.chance(15) {
        while out.ends_with(['\r', '\n']) {
            out.pop();
        }
    }
    out
}

fn gen_files(rng: &mut Rng) -> Files {
    let mut files = vec![("grub".to_owned(), gen_file(rng))];
    for i in 0..rng.below(3) {
        files.push((format!("grub.d/{}-gen.cfg", 40 + i * 10), gen_file(rng)));
    }
    files
}

#[test]
fn generated_file_sets_edit_like_bash() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let wanted = ["iommu=pt", "intel_iommu=on", "gdrprov.x=1", "quiet"];
    for round in 0..40 {
        let files = gen_files(&mut rng);
        let (linux, default) = bash_args(&files);
        let r = refs(&files);
        let ours = (
            grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX),
            grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX_DEFAULT),
        );
        assert_eq!(
            ours,
            (Ok(linux.clone()), Ok(default.clone())),
            "round {round}: {files:#?}"
        );
        let mut remove: Vec<String> = linux
            .iter()
            .chain(&default)
            .filter(|_| rng.chance(40))
            .cloned()
            .collect();
        if rng.chance(30) {
            remove.push(rng.pick(POOL).to_owned());
        }
        let add: Vec<String> = wanted
            .iter()
            .filter(|a| rng.chance(50) && !remove.iter().any(|r| r == *a))
            .map(|a| (*a).to_owned())
            .collect();
        let after = edit_and_check(&files, &add, &remove);
        // And back: remove what was added.
        edit_and_check(&after, &[], &add);
    }
}

// ------------------------------------------- differential: atom soup

/// Like `shell_values`, but `None` when the shell rejects or fails the files.
fn try_shell_values(shell: &str, files: &Files) -> Option<(Vec<String>, Vec<String>)> {
    let dir = write_tree(files);
    for (n, _) in files {
        let ok = Command::new(shell)
            .arg("-n")
            .arg(n)
            .current_dir(dir.path())
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !ok {
            return None;
        }
    }
    let script = r#"{ . ./grub; for f in ./grub.d/*.cfg; do if [ -e "$f" ]; then . "$f"; fi; done; } >/dev/null
printf '%s\037%s' "$GRUB_CMDLINE_LINUX" "$GRUB_CMDLINE_LINUX_DEFAULT""#;
    let out = Command::new(shell)
        .arg("-c")
        .arg(script)
        .current_dir(dir.path())
        .env_remove("GRUB_CMDLINE_LINUX")
        .env_remove("GRUB_CMDLINE_LINUX_DEFAULT")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let (l, d) = text.split_once('\x1f')?;
    Some((cmdline::split(l), cmdline::split(d)))
}

const ATOMS: &[&str] = &[
    "GRUB_CMDLINE_LINUX=",
    "GRUB_CMDLINE_LINUX=",
    "GRUB_CMDLINE_LINUX=\"",
    "GRUB_CMDLINE_LINUX_DEFAULT=",
    "export ",
    "\"",
    "\"",
    "'",
    "\\",
    "\\\"",
    "$GRUB_CMDLINE_LINUX",
    "${GRUB_CMDLINE_LINUX}",
    "$GRUB_CMDLINE_LINUX_DEFAULT",
    "$X",
    "${X:-a}",
    " ",
    " ",
    "\t",
    "\n",
    "\r\n",
    "# c\n",
    "#",
    ";",
    " && ",
    " || ",
    " | cat",
    "if true; then ",
    "; fi",
    "{ ",
    "; }",
    "( ",
    " )",
    "quiet",
    "iommu=off",
    "iommu=pt",
    "a=b",
    "`echo q`",
    "$(echo w)",
    "X=1 ",
    "=",
    "~",
    "!",
    "*",
    "acpi_osi=\\\"W 2\\\"",
    "+=",
    "unset ",
    "true ",
    " > /dev/null",
];

/// Value atoms that keep a quoted value closed most of the time.
const INNER: &[&str] = &[
    " ",
    "\t",
    "quiet",
    "iommu=off",
    "iommu=pt",
    "$GRUB_CMDLINE_LINUX",
    "${GRUB_CMDLINE_LINUX}",
    "$GRUB_CMDLINE_LINUX_DEFAULT",
    "acpi_osi=\\\"W 2\\\"",
    "\\",
    "$X",
    "*",
    "~",
    "#",
    ";",
    "`echo q`",
    "$(echo w)",
];

fn soup(rng: &mut Rng) -> String {
    let mut out = String::new();
    for _ in 0..1 + rng.below(6) {
        if rng.chance(60) {
            // Mostly well-formed: prefix, quote, inner atoms, same quote.
            out.push_str(rng.pick(&["", "", "export ", "X=1 ", "true && "]));
            out.push_str(rng.pick(&["GRUB_CMDLINE_LINUX=", "GRUB_CMDLINE_LINUX_DEFAULT="]));
            let q = rng.pick(&["\"", "\"", "'", ""]);
            out.push_str(q);
            for _ in 0..rng.below(5) {
                out.push_str(rng.pick(INNER));
            }
            out.push_str(q);
            out.push_str(rng.pick(&["", "", "", " # c", ";", " ;GRUB_TIMEOUT=1", "\r"]));
        } else {
            for _ in 0..rng.below(6) {
                out.push_str(rng.pick(ATOMS));
            }
        }
        out.push('\n');
    }
    out
}

/// Whatever the editor accepts, it reads as bash and dash do, and whatever it
/// edits, it edits right.
#[test]
fn differential_against_shells() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let (mut valid, mut accepted, mut edited) = (0, 0, 0);
    for _ in 0..700 {
        let mut files = vec![("grub".to_owned(), soup(&mut rng))];
        if rng.chance(30) {
            files.push(("grub.d/50-x.cfg".to_owned(), soup(&mut rng)));
        }
        let Some(b) = try_shell_values("bash", &files) else {
            continue;
        };
        let Some(d) = try_shell_values("dash", &files) else {
            continue;
        };
        valid += 1;
        let r = refs(&files);
        let ours = grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX);
        if std::env::var("SHOW_REFUSALS").is_ok() {
            if let Err(e) = &ours {
                eprintln!("REFUSED {e}\n   {files:?}");
            }
        }
        let Ok(ours) = ours else {
            continue;
        };
        let Ok(ours_d) = grub_defaults::effective_value(&r, grub_defaults::CMDLINE_LINUX_DEFAULT)
        else {
            continue;
        };
        accepted += 1;
        assert_eq!(
            (&ours, &ours_d),
            (&b.0, &b.1),
            "editor vs bash on {files:#?}"
        );
        assert_eq!(b, d, "bash vs dash on accepted {files:#?}");
        let mut remove: Vec<String> = ours
            .iter()
            .chain(&ours_d)
            .filter(|_| rng.chance(50))
            .cloned()
            .collect();
        remove.push("iommu=off".into());
        let add = vec!["iommu=pt".to_owned(), "intel_iommu=on".to_owned()];
        let add: Vec<String> = add.into_iter().filter(|a| !remove.contains(a)).collect();
        if grub_defaults::plan_cmdline_edit(&r, &add, &remove).is_ok() {
            edit_and_check(&files, &add, &remove);
            edited += 1;
        }
    }
    eprintln!("differential: {valid} valid, {accepted} accepted, {edited} edited");
    assert!(
        accepted >= 60 && edited >= 50,
        "generator too weak: {valid}/{accepted}/{edited}"
    );
}
