//! Boot-loader files are made durable before success is reported
//! (src/apply/durable.rs decides, src/host/flush.rs runs it): the outcome names each filesystem that holds them
//! and how. On an image root (`--root`) that is a `syncfs`, never a freeze;
//! a run that touches nothing a boot loader reads does nothing of the kind.
//! The mechanism itself (ext4 checkpoint, guarded freeze/thaw, a kill while
//! frozen) is tested on a loop-mounted ext4 in the module's unit tests, and
//! a real power cut in tests/vm/scenarios/19-power-cut-any-instant.sh (formerly 11-power-cut).

use crate::common::*;

#[test]
fn a_boot_entry_written_on_an_image_root_is_synced_and_reported() {
    let (t, root) = example_root("rocky-9-a100");
    let gds = t.path().join("gds.yaml");
    std::fs::write(
        &gds,
        "extends: gds-iommu-off\nboot: { entry: gdrprov-gds }\n",
    )
    .unwrap();
    let out = gdrprov()
        .args([
            "apply",
            gds.to_str().unwrap(),
            "-y",
            "--no-exec",
            "--format",
            "json",
            "--root",
        ])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    let durable = v["outcome"]["durable"]
        .as_array()
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(
        durable.len(),
        1,
        "one filesystem holds the whole root here: {v:#}"
    );
    assert_eq!(
        durable[0]["method"], "syncfs",
        "an image root is never frozen: {v:#}"
    );
    assert_eq!(
        durable[0]["mount"],
        root.canonicalize().unwrap().display().to_string() + "/"
    );

    // Rollback removes the entry again: made durable the same way, and said in text.
    let out = gdrprov()
        .args(["rollback", "-y", "--no-exec", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("Boot files on disk for the boot loader: ")
            && stdout_of(&out).contains("synced"),
        "{}",
        stdout_of(&out)
    );
}

#[test]
fn a_run_that_touches_no_boot_file_makes_nothing_durable() {
    let (t, root) = example_root("rocky-9-a100");
    let p = t.path().join("nccl.yaml");
    std::fs::write(&p, "name: nccl-only\nnccl: { NCCL_DEBUG: INFO }\n").unwrap();
    let out = gdrprov()
        .args([
            "apply",
            p.to_str().unwrap(),
            "-y",
            "--no-exec",
            "--format",
            "json",
            "--root",
        ])
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let v = json_of(&out);
    assert!(
        v["outcome"]["generation"].is_u64(),
        "the apply changed something: {v:#}"
    );
    assert!(v["outcome"].get("durable").is_none(), "{v:#}");
}
