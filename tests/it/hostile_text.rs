//! Text that reaches a generated file or a command line (issue 37): one
//! validator for a profile's name (or its file's name), description, NCCL
//! values and a built-in template's variables. Before: `name:
//! "x)\ninstall nvme /bin/false\nblacklist nvme\n# ("` validated, and apply
//! wrote live `install nvme /bin/false` and `blacklist nvme` lines into
//! `gdrprov-blacklist.conf`, past the module-name check and the root-disk
//! guard.

use crate::common::*;
use crate::util::{gd, Root};
use std::path::Path;

fn write(dir: &Path, file: &str, yaml: &str) -> String {
    let p = dir.join(file);
    std::fs::write(&p, yaml).unwrap();
    p.display().to_string()
}

/// `profile validate`, `plan` and `apply` each refuse the profile: exit 1,
/// the key and the fix named, the root unchanged; under `--format json`
/// one JSON document with the error.
#[track_caller]
fn refused_everywhere(profile: &str, words: &[&str]) {
    let root = Root::example("ubuntu-22.04-h100");
    let before = snapshot(&root);
    let validate = gdrprov()
        .args(["profile", "validate", profile])
        .output()
        .unwrap();
    for (what, out) in [
        ("profile validate", validate),
        ("plan", gd(&root, &["plan", profile])),
        (
            "apply",
            gd(&root, &["apply", profile, "--yes", "--no-exec"]),
        ),
        (
            "apply --format json",
            gd(
                &root,
                &["apply", profile, "--yes", "--no-exec", "--format", "json"],
            ),
        ),
    ] {
        let err = stderr_of(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{what}: {err}{}",
            stdout_of(&out)
        );
        if what.ends_with("json") {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                panic!("{what}: not one JSON document ({e}): {}", stdout_of(&out))
            });
            let msg = v.to_string();
            assert!(words.iter().all(|w| msg.contains(w)), "{what}: {msg}");
        } else {
            for w in words {
                assert!(err.contains(w), "{what}: the message lacks {w:?}: {err}");
            }
        }
        assert_eq!(snapshot(&root), before, "{what} changed the root");
    }
}

#[test]
fn a_name_with_newlines_never_becomes_lines_of_a_generated_file() {
    let t = tempfile::tempdir().unwrap();
    let p = write(
        t.path(),
        "evil.yaml",
        "name: \"x)\\ninstall nvme /bin/false\\nblacklist nvme\\n# (\"\nextends: rdma-dmabuf\n",
    );
    refused_everywhere(&p, &["name", "a newline", "remove it"]);
}

#[test]
fn control_characters_and_overlong_text_are_refused_in_each_field() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        (
            "esc-name",
            "name: \"site\\e[2J\"\nextends: rdma-dmabuf\n",
            vec!["name", "U+001B"],
        ),
        (
            "cr-name",
            "name: \"site\\rfake\"\nextends: rdma-dmabuf\n",
            vec!["name", "a carriage return"],
        ),
        (
            "long-name",
            &format!("name: {}\nextends: rdma-dmabuf\n", "n".repeat(65)),
            vec!["name", "65 bytes", "64"],
        ),
        (
            "desc",
            "description: \"two\\nlines\"\nextends: rdma-dmabuf\n",
            vec!["description", "a newline", ">-"],
        ),
        (
            "long-desc",
            &format!("description: {}\nextends: rdma-dmabuf\n", "d".repeat(5000)),
            vec!["description", "5000 bytes"],
        ),
        (
            "nccl-long",
            &format!(
                "extends: rdma-dmabuf\nnccl: {{ NCCL_IB_HCA: {} }}\n",
                "m".repeat(2000)
            ),
            vec!["nccl.NCCL_IB_HCA", "2000 bytes"],
        ),
        (
            "nccl-sep",
            "extends: rdma-dmabuf\nnccl: { NCCL_IB_HCA: \"mlx5_0\\u2028NCCL_P2P_DISABLE=1\" }\n",
            vec!["nccl.NCCL_IB_HCA", "U+2028"],
        ),
    ];
    for (file, yaml, words) in cases {
        let p = write(t.path(), &format!("{file}.yaml"), yaml);
        refused_everywhere(&p, &words);
    }
}

/// A profile without `name:` is named after its file: a file name with a
/// newline is refused the same way.
#[test]
fn a_file_name_with_a_newline_is_refused_as_a_name() {
    let t = tempfile::tempdir().unwrap();
    let p = write(t.path(), "x)\ninstall nvme .yaml", "extends: rdma-dmabuf\n");
    refused_everywhere(&p, &["name", "a newline", "named after its file"]);
}

/// A folded description (`>-` or `>`) is one line and loads; a plain name
/// with spaces and non-ASCII letters too.
#[test]
fn one_line_text_still_loads() {
    let t = tempfile::tempdir().unwrap();
    let p = write(
        t.path(),
        "ok.yaml",
        "name: site rdma (Zürich)\ndescription: >\n  folded over\n  two lines\nextends: rdma-dmabuf\n",
    );
    let out = gdrprov()
        .args(["profile", "validate", &p])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
}
