//! The test command and the test root (ripgrep's `tests/util.rs` shape):
//! run the gdrprov binary and check its exit code in one call, on a copy of
//! an example root in a temporary directory.

use crate::common::{example_root, gdrprov, json_of, stderr_of, stdout_of};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A copy of `examples/hosts/NAME` in a temporary directory, removed when
/// dropped. It derefs to its path, so it goes where a `&Path` does.
pub struct Root {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Root {
    pub fn example(name: &str) -> Root {
        let (dir, path) = example_root(name);
        Root { _dir: dir, path }
    }

    /// The root as a command-line argument.
    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }
}

impl std::ops::Deref for Root {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Root {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Root {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

/// Runs `gdrprov ARGS --root ROOT`, whatever its exit code.
pub fn gd(root: &Root, args: &[&str]) -> Output {
    gdrprov()
        .args(args)
        .args(["--root", root.arg()])
        .output()
        .unwrap()
}

/// Runs `gdrprov ARGS`, whatever its exit code.
pub fn run(args: &[&str]) -> Output {
    gdrprov().args(args).output().unwrap()
}

/// Runs `gdrprov ARGS`; the test fails, showing both outputs, unless it
/// exits with CODE.
#[track_caller]
pub fn exits(code: i32, args: &[&str]) -> Output {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(code),
        "gdrprov {}\nstdout:\n{}\nstderr:\n{}",
        args.join(" "),
        stdout_of(&out),
        stderr_of(&out)
    );
    out
}

/// Runs `gdrprov ARGS`; the test fails, showing stderr, unless it exits 0.
#[track_caller]
pub fn ok(args: &[&str]) -> Output {
    exits(0, args)
}

/// Runs `gdrprov ARGS --format json`, expecting exit CODE; its JSON.
#[track_caller]
pub fn json_exits(code: i32, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    json_of(&exits(code, &all))
}
