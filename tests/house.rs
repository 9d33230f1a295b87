//! The house rules that a test can hold (issue 27): every line a user sees
//! goes through the output layer (src/output/); inventory says the boot
//! loader and the CPU as the planner reads them; usage errors under
//! `--format json` keep what clap named; every error line is a whole line.

mod common;

use common::*;
use std::path::{Path, PathBuf};

// ---- no print outside the output layer ----

/// What writes to standard output or standard error directly.
const PRINTS: [&str; 11] = [
    "print!(",
    "println!(",
    "eprint!(",
    "eprintln!(",
    "dbg!(",
    "io::stdout",
    "io::stderr",
    "::stdout()",
    "::stderr()",
    "STDOUT_FILENO",
    "STDERR_FILENO",
];

/// The lines of SOURCE (a Rust file) that print, with their numbers; test
/// modules (`#[cfg(test)] mod ... { ... }`) and comments are left out.
fn prints_in(source: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = source.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if t.starts_with("#[cfg(test)]") {
            // Skip the item it guards: to its `;` or to the brace that closes it.
            let mut depth = 0i32;
            let mut opened = false;
            i += 1;
            while i < lines.len() {
                let l = lines[i];
                depth += l.matches('{').count() as i32 - l.matches('}').count() as i32;
                opened |= l.contains('{');
                i += 1;
                if (opened && depth <= 0) || (!opened && l.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = match t.find("//") {
            Some(0) => "",
            _ => t,
        };
        if PRINTS.iter().any(|p| code.contains(p)) {
            found.push((i + 1, lines[i].trim().to_string()));
        }
        i += 1;
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Files that are test modules of their own (`#[path = "x_tests.rs"]`).
fn is_test_file(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs")
}

#[test]
fn no_print_outside_the_output_layer() {
    let repo = repo();
    let mut files = Vec::new();
    rust_files(&repo.join("src"), &mut files);
    for c in std::fs::read_dir(repo.join("crates")).unwrap().flatten() {
        rust_files(&c.path().join("src"), &mut files);
    }
    assert!(files.len() > 50, "{files:?}");
    let output = repo.join("src/output");
    let mut offences = Vec::new();
    for f in files
        .iter()
        .filter(|f| !f.starts_with(&output) && !is_test_file(f))
    {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in prints_in(&text) {
            offences.push(format!(
                "{}:{n}: {line}",
                f.strip_prefix(&repo).unwrap().display()
            ));
        }
    }
    assert!(
        offences.is_empty(),
        "prints outside src/output/ (print through output::Output or a function of src/output/):\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_print_finder_finds_prints_and_skips_tests_and_comments() {
    let src = r#"
fn a() {
    println!("x");
    // println!("in a comment");
    let _ = std::io::stdout().flush();
    if e.use_stderr() {}
}

#[cfg(test)]
mod tests {
    fn b() {
        eprintln!("SKIPPED");
    }
}

#[cfg(test)]
#[path = "x_tests.rs"]
mod more;

fn c() {
    eprint!("{q} [y/N] ");
}
"#;
    let found: Vec<usize> = prints_in(src).into_iter().map(|(n, _)| n).collect();
    assert_eq!(found, vec![3, 5, 21], "{:?}", prints_in(src));
}

// ---- inventory reads the facts the planner reads ----

fn put(root: &Path, path: &str, content: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

fn run_on(root: &Path, args: &[&str]) -> std::process::Output {
    gdrprov()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

/// A systemd-boot root as `bootctl install` + kernel-install leave it
/// (Debian 13, ESP at /boot/efi, no GRUB at all).
fn sdboot_root() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    let mid = "4f1c0a2b9d8e4c7f8a6b5c4d3e2f1a0b";
    let args = "root=UUID=0c5d6e7f-8a9b-4c1d-9e2f-3a4b5c6d7e8f ro quiet";
    put(&root, "/etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nID=debian\n");
    put(&root, "/etc/machine-id", &format!("{mid}\n"));
    put(
        &root,
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n",
    );
    put(&root, "/boot/efi/loader/loader.conf", "timeout 3\n");
    for k in ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"] {
        put(
            &root,
            &format!("/boot/efi/loader/entries/{mid}-{k}.conf"),
            &format!("title      Debian GNU/Linux 13 (trixie)\nversion    {k}\nmachine-id {mid}\nsort-key   debian\noptions    {args}\nlinux      /{mid}/{k}/linux\ninitrd     /{mid}/{k}/initrd.img-{k}\n"),
        );
    }
    put(&root, "/proc/cmdline", &format!("{args}\n"));
    for d in ["etc/kernel/postinst.d", "etc/modprobe.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    put(&root, "/usr/bin/bootctl", "");
    put(&root, "/usr/bin/kernel-install", "");
    (t, root)
}

fn line_of<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no `{start}` line in:\n{text}"))
}

#[test]
fn inventory_names_systemd_boot_where_plan_edits_its_entries() {
    let (_t, root) = sdboot_root();
    let plan = run_on(&root, &["plan", "rdma-dmabuf"]);
    assert_eq!(plan.status.code(), Some(0), "{}", stderr_of(&plan));
    assert!(
        stdout_of(&plan).contains("/boot/efi/loader/entries/"),
        "{}",
        stdout_of(&plan)
    );
    let inv = run_on(&root, &["inventory"]);
    assert_eq!(inv.status.code(), Some(0), "{}", stderr_of(&inv));
    let text = stdout_of(&inv);
    assert_eq!(
        line_of(&text, "Boot: "),
        "Boot: systemd-boot (ESP /boot/efi, 2 entries), EFI yes"
    );
    assert!(!text.contains("no GRUB or BLS boot loader found"), "{text}");
}

#[test]
fn inventory_says_arm64_and_efi_grub_on_a_grace_root() {
    let (_t, root) = example_root("ubuntu-24.04-gh200");
    // A copy of the host without its ESP mounted and without
    // /sys/firmware: nothing says EFI but the architecture.
    std::fs::remove_dir_all(root.join("boot/efi")).unwrap();
    let _ = std::fs::remove_dir_all(root.join("sys/firmware"));
    let inv = run_on(&root, &["inventory"]);
    assert_eq!(inv.status.code(), Some(0), "{}", stderr_of(&inv));
    let text = stdout_of(&inv);
    assert!(
        line_of(&text, "OS: ").ends_with(", CPU arm64, Arm Neoverse-V2 (NVIDIA Grace)"),
        "{text}"
    );
    assert!(!text.contains("--cpu-vendor"), "{text}");
    assert_eq!(line_of(&text, "Boot: "), "Boot: GRUB (EFI), EFI yes");
    // The planner reads the same: arm64's IOMMU argument.
    let plan = run_on(&root, &["plan", "rdma-dmabuf"]);
    assert!(
        stdout_of(&plan).contains("iommu.passthrough=1"),
        "{}",
        stdout_of(&plan)
    );
}

#[test]
fn inventory_says_where_a_direct_boot_gets_its_command_line() {
    let root = repo().join("tests/fixtures/snapshots/device-h200");
    let inv = run_on(&root, &["inventory"]);
    assert_eq!(inv.status.code(), Some(0), "{}", stderr_of(&inv));
    let text = stdout_of(&inv);
    assert_eq!(
        line_of(&text, "Boot: "),
        "Boot: none on this root: the kernel command line is set by the hypervisor (direct kernel boot), EFI no"
    );
}

// ---- errors under --format json ----

#[test]
fn a_usage_error_in_json_names_the_missing_argument() {
    let out = gdrprov()
        .args(["plan", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(v["command"], "plan", "{v:#}");
    assert_eq!(v["error"]["kind"], "usage", "{v:#}");
    assert_eq!(
        v["error"]["message"], "the following required arguments were not provided: <PROFILE>...",
        "{v:#}"
    );
    let out = gdrprov()
        .args(["plan", "x", "--bogus", "--format=json"])
        .output()
        .unwrap();
    let v = json_of(&out);
    let m = v["error"]["message"].as_str().unwrap();
    assert!(m.starts_with("unexpected argument '--bogus' found"), "{m}");
    assert!(!m.contains("Usage:"), "{m}");
}

#[test]
fn every_error_line_is_a_whole_line_in_json_too() {
    let (_t, root) = example_root("rocky-9-a100");
    let r = root.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["plan", "--format", "json"],
        vec!["plan", "no-such-profile", "--root", &r, "--format", "json"],
        vec!["bench", "copy", "--root", &r, "--format", "json"],
        vec!["profile", "validate", "/no/such/file", "--format", "json"],
        vec!["boot", "once", "nope", "--root", &r, "--format", "json"],
        vec!["history", "--root", "/no/such/root", "--format", "json"],
    ];
    for args in cases {
        let out = gdrprov().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = stderr_of(&out);
        assert!(
            err.contains("error: ") && err.ends_with('\n'),
            "{args:?}: {err:?}"
        );
        let stdout = stdout_of(&out);
        assert!(stdout.ends_with("}\n"), "{args:?}: {stdout:?}");
        json_of(&out);
    }
}
