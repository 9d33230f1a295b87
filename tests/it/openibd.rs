//! legacy-peermem on OFED hosts: with MLNX_OFED/DOCA's openibd, nvidia_peermem
//! loads from its own unit, which openibd pulls in through an
//! `openibd.service.d` drop-in (loaded after openibd, unloaded before it
//! stops), not from modules-load.d; without openibd, from modules-load.d as
//! before. The systemd ordering itself is tested in the VM (13-openibd).

use crate::common::*;
use crate::util::*;
use std::path::Path;

const DROPIN: &str = "etc/systemd/system/openibd.service.d/gdrprov-peermem.conf";
const UNIT: &str = "etc/systemd/system/gdrprov-peermem.service";
const LOAD: &str = "etc/modules-load.d/gdrprov.conf";

/// The example H100 root with MLNX_OFED installed (its `ofed_info` script).
fn ofed_root() -> (tempfile::TempDir, std::path::PathBuf) {
    let (t, root) = example_root("ubuntu-22.04-h100");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::write(
        root.join("usr/bin/ofed_info"),
        "#!/bin/bash\nif [ \"$1\" = \"-s\" ]; then\n    echo MLNX_OFED_LINUX-24.10-3.2.5.0:\n    exit 0\nfi\n",
    )
    .unwrap();
    (t, root)
}

fn add_openibd(root: &Path, path: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(
        &p,
        "[Unit]\nDescription=openibd - configure Mellanox devices\n",
    )
    .unwrap();
}

fn apply(root: &Path) {
    ok(&[
        "apply",
        "legacy-peermem",
        "-y",
        "--root",
        root.to_str().unwrap(),
    ]);
}

#[test]
fn with_openibd_peermem_loads_from_a_dropin() {
    for unit in [
        "/usr/lib/systemd/system/openibd.service",
        "/etc/init.d/openibd",
    ] {
        let (_t, root) = ofed_root();
        add_openibd(&root, unit);
        apply(&root);
        let dropin = std::fs::read_to_string(root.join(DROPIN)).unwrap();
        assert!(dropin.contains("[Unit]\nWants=gdrprov-peermem.service\n"));
        let unit_text = std::fs::read_to_string(root.join(UNIT)).unwrap();
        assert!(
            unit_text.contains("\nPartOf=openibd.service\n"),
            "{unit_text}"
        );
        assert!(unit_text.contains("\nExecStop=/sbin/modprobe -r nvidia_peermem\n"));
        assert!(!root.join(LOAD).exists(), "{unit}");
    }
}

#[test]
fn without_openibd_peermem_stays_in_modules_load_d() {
    let (_t, root) = ofed_root();
    apply(&root);
    let load = std::fs::read_to_string(root.join(LOAD)).unwrap();
    assert!(load.ends_with("\nnvidia_peermem\n"));
    assert!(!root.join(DROPIN).exists());

    // OFED with openibd installed later: the next apply moves it.
    add_openibd(&root, "/etc/init.d/openibd");
    apply(&root);
    assert!(!root.join(LOAD).exists());
    assert!(root.join(DROPIN).exists() && root.join(UNIT).exists());

    // Rolled back: both files go, modules-load.d comes back.
    ok(&["rollback", "-y", "--root", root.to_str().unwrap()]);
    assert!(!root.join(DROPIN).exists() && !root.join(UNIT).exists());
    assert!(root.join(LOAD).exists());
}
