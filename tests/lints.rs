//! CI fails on a new door broken: a call to `std::fs` or a process spawned
//! outside the host layer, a print outside the output layer, `unsafe` outside
//! the rdma and sys crates. The rules are this repository's own: the `[workspace.lints]`
//! tables of its Cargo.toml and its clippy.toml, copied into a scratch crate
//! laid out as gdrprov is (`src/host`, `src/output`, `src/commands`), on which
//! `cargo clippy -- -D warnings` (what .ci/run runs) is run twice:
//! - with one offence of each kind in `src/commands.rs`: it must fail, naming
//!   each lint at its line there, and nothing in `src/host` or `src/output`
//!   (which do the same things under their module-level `allow`s);
//! - without them: it must pass, so the failure above is the rules' doing.
//!
//! Needs cargo's clippy component (CI runs clippy anyway); without it the
//! test fails, saying so.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::path::Path;
use std::process::Command;

/// The `[workspace.lints.*]` tables of the repository's Cargo.toml, as text.
fn workspace_lints() -> String {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("read Cargo.toml");
    let mut out = String::new();
    let mut inside = false;
    for line in manifest.lines() {
        if line.starts_with('[') {
            inside = line.starts_with("[workspace.lints");
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(
        out.contains("unsafe_code") && out.contains("disallowed_methods"),
        "Cargo.toml has no [workspace.lints] tables with the house's lints:\n{out}"
    );
    out
}

const HOST: &str = r#"//! The door (as src/host/mod.rs allows it).
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros,
    reason = "the host layer is the door to the filesystem and to processes"
)]

pub fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

pub fn run(p: &str) -> bool {
    std::process::Command::new(p).status().is_ok_and(|s| s.success())
}
"#;

const OUTPUT: &str = r#"//! The output layer (as src/output/mod.rs allows it).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "the output layer is where every line a user sees is printed"
)]

pub fn say(s: &str) {
    println!("{s}");
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{s}");
}
"#;

/// A command module through the doors, and (when `offend`) one offence of
/// each kind, each on a line of its own: (what clippy says, line).
fn commands(offend: bool) -> (String, Vec<(&'static str, usize)>) {
    let mut src = String::from(
        "//! A command: it reads and prints through the doors.\n\
         pub fn run(p: &str) -> bool {\n    \
             crate::output::say(&crate::host::read(p).unwrap_or_default());\n    \
             crate::host::run(p)\n\
         }\n",
    );
    let mut expected = Vec::new();
    if offend {
        let offences = [
            ("a disallowed method `std::fs::read_to_string`", "pub fn a(p: &str) -> String { std::fs::read_to_string(p).unwrap_or_default() }"),
            ("a disallowed method `std::path::Path::exists`", "pub fn b(p: &std::path::Path) -> bool { p.exists() }"),
            ("a disallowed type `std::fs::File`", "pub fn c() -> Option<std::fs::File> { std::fs::File::open(\"x\").ok() }"),
            ("a disallowed type `std::process::Command`", "pub fn d() -> bool { std::process::Command::new(\"true\").status().is_ok() }"),
            ("use of `println!`", "pub fn e() { println!(\"x\"); }"),
            ("use of `eprintln!`", "pub fn f() { eprintln!(\"x\"); }"),
            ("a disallowed method `std::io::stdout`", "pub fn g() { let _ = std::io::stdout(); }"),
            ("usage of an `unsafe` block", "pub fn h() -> i32 { unsafe { libc_getpid() } }\nextern \"C\" { #[link_name = \"getpid\"] fn libc_getpid() -> i32; }"),
        ];
        for (lint, code) in offences {
            expected.push((lint, src.lines().count() + 1));
            src.push_str(code);
            src.push('\n');
        }
    }
    (src, expected)
}

/// Writes the scratch crate into `dir`.
fn scratch(dir: &Path, offend: bool) -> Vec<(&'static str, usize)> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.join("src/host")).unwrap();
    std::fs::create_dir_all(dir.join("src/output")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"doors\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n[lints]\nworkspace = true\n\n[workspace]\n\n{}",
            workspace_lints()
        ),
    )
    .unwrap();
    std::fs::copy(repo.join("clippy.toml"), dir.join("clippy.toml")).expect("copy clippy.toml");
    std::fs::write(
        dir.join("src/lib.rs"),
        "pub mod commands;\npub mod host;\npub mod output;\n",
    )
    .unwrap();
    std::fs::write(dir.join("src/host/mod.rs"), HOST).unwrap();
    std::fs::write(dir.join("src/output/mod.rs"), OUTPUT).unwrap();
    let (src, expected) = commands(offend);
    std::fs::write(dir.join("src/commands.rs"), src).unwrap();
    expected
}

/// `cargo clippy -- -D warnings` on the scratch crate: (success, stderr).
fn clippy(dir: &Path, target: &Path) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "clippy",
            "--offline",
            "--quiet",
            "--message-format",
            "short",
        ])
        .args(["--", "-D", "warnings"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CLIPPY_CONF_DIR")
        .output()
        .expect("run cargo clippy");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !err.contains("no such command") && !err.contains("is not installed"),
        "cargo clippy is not installed here (rustup component add clippy): {err}"
    );
    (out.status.success(), err)
}

#[test]
fn clippy_fails_on_a_new_fs_call_print_or_unsafe_outside_its_door() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("target");
    let dir = t.path().join("doors");
    let expected = scratch(&dir, true);
    let (ok, err) = clippy(&dir, &target);
    assert!(
        !ok,
        "clippy passed on std::fs, a process, prints and unsafe outside their doors:\n{err}"
    );
    for (says, line) in &expected {
        let at = format!("src/commands.rs:{line}:");
        assert!(
            err.lines()
                .any(|l| l.starts_with(&at) && l.contains("error") && l.contains(says)),
            "no error \"{says}\" at {at}:\n{err}"
        );
    }
    assert!(
        !err.contains("src/host/") && !err.contains("src/output/"),
        "the doors' own modules must pass under their allows:\n{err}"
    );

    // The same crate without the offences passes: the failure was the rules'.
    scratch(&dir, false);
    let (ok, err) = clippy(&dir, &target);
    assert!(ok, "clippy fails on the crate without offences:\n{err}");
}
