//! scripts/ensure-packages.sh: the `build` check asks for the library bindgen
//! really loads. A fresh image has libclang-cpp14 (`libclang-cpp.so.14`, the
//! C++ library) but not libclang-N-dev (`libclang.so`, `libclang-N.so`); the
//! old check took the first for the second and the first build failed.

use std::path::Path;
use std::process::Command;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A directory laid out like /usr/lib holding only `files` under llvm-14/lib.
fn libdir(files: &[&str]) -> tempfile::TempDir {
    let t = tempfile::tempdir().unwrap();
    let lib = t.path().join("llvm-14/lib");
    std::fs::create_dir_all(&lib).unwrap();
    for f in files {
        std::fs::write(lib.join(f), b"").unwrap();
    }
    t
}

/// `has_libclang DIR` from the script itself (sourced, not copied).
fn has_libclang(dir: &Path) -> bool {
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" && has_libclang "$2""#)
        .arg("bash")
        .arg(repo().join("scripts/ensure-packages.sh"))
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.status.success()
}

/// The whole `build` step in dry-run mode: what it would install and why.
fn build_step(dir: &Path) -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts/ensure-packages.sh"))
        .arg("build")
        .env("ENSURE_PACKAGES_LIBDIR", dir)
        .env("ENSURE_PACKAGES_DRY_RUN", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn libclang_cpp_alone_does_not_count() {
    let d = libdir(&["libclang-cpp.so.14"]);
    assert!(!has_libclang(d.path()));
    let said = build_step(d.path());
    assert!(said.contains("libclang-dev"), "{said}");
    assert!(
        said.contains("(the ibverbs binding's build needs them)"),
        "{said}"
    );
}

#[test]
fn runtime_library_without_dev_package_does_not_count() {
    // libclang1-14 alone: the library but not clang's headers bindgen needs.
    let d = libdir(&["libclang-14.so.1", "libclang.so.1", "libclang-cpp.so.14"]);
    assert!(!has_libclang(d.path()));
}

#[test]
fn libclang_dev_counts() {
    for files in [
        &["libclang-14.so.1", "libclang.so"][..],
        &["libclang-14.so.1", "libclang-14.so"][..],
    ] {
        let d = libdir(files);
        assert!(has_libclang(d.path()), "{files:?}");
        let said = build_step(d.path());
        assert!(!said.contains("libclang-dev"), "{files:?}: {said}");
    }
}

#[test]
fn nothing_missing_says_nothing() {
    // This machine has cmake and cc (it is building this test); with libclang
    // present the step prints nothing and installs nothing.
    let d = libdir(&["libclang.so"]);
    let which = |c: &str| {
        Command::new("bash")
            .args(["-c", &format!("command -v {c}")])
            .output()
            .unwrap()
            .status
            .success()
    };
    if which("cmake") && which("cc") {
        assert_eq!(build_step(d.path()), "");
    }
}

#[test]
fn unknown_step_is_refused() {
    let out = Command::new("bash")
        .arg(repo().join("scripts/ensure-packages.sh"))
        .arg("biuld")
        .env("ENSURE_PACKAGES_DRY_RUN", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown set 'biuld'"));
}

/// `package-build` on a machine with none of its tools (an empty PATH): what
/// scripts/package.sh needs before it builds both packages, on one line with why.
#[test]
fn package_build_names_what_package_sh_needs() {
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new("/bin/bash")
        .arg(repo().join("scripts/ensure-packages.sh"))
        .arg("package-build")
        .env("PATH", empty.path())
        .env("ENSURE_PACKAGES_DRY_RUN", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8(out.stdout).unwrap();
    assert!(
        said.starts_with("ensure-packages.sh: installing rpm rpm2cpio binutils gzip "),
        "{said}"
    );
    assert!(
        said.contains(" gcc "),
        "cargo install links with cc: {said}"
    );
    assert!(
        said.contains("(scripts/package.sh needs them: RPM's own tools"),
        "{said}"
    );
    assert_eq!(said.lines().count(), 1, "{said}");
}
