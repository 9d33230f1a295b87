//! GPUDirect Storage at plan, apply and rollback (issue 47, "The profile"): on copies of the
//! lent H200 machine's snapshot (tests/fixtures/snapshots/device-h200-gds) with one fact
//! changed each. /etc/cufile.json edited losslessly (only properties.use_pci_p2pdma is
//! gdrprov's), installed as a higher-priority alternative where it is a link through
//! /etc/alternatives (the real update-alternatives, in a chroot), NVreg_RegistryDwords
//! merged, nvidia-fs for nvfs; each put back byte for byte by rollback.

use crate::common::{copy_tree, gdrprov, repo, snapshot, stderr_of, stdout_of, without_state};
use crate::reliability::{install_with_libs, is_root};
use std::path::{Path, PathBuf};

const SNAP: &str = "tests/fixtures/snapshots/device-h200-gds";
const PKG: &str = "usr/local/cuda-13.0/gds/cufile.json";
const KERNEL: &str = "6.18.44-fc-v657-gpu";

/// A copy of the GDS snapshot.
fn snap_root() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join(SNAP), &root);
    (t, root)
}

fn gd(root: &Path, args: &[&str]) -> std::process::Output {
    gdrprov()
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

fn ok(root: &Path, args: &[&str]) -> String {
    let out = gd(root, args);
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    stdout_of(&out)
}

/// A profile file asking for `mode`.
fn profile(dir: &Path, mode: &str) -> String {
    let p = dir.join(format!("gds-{mode}.yaml"));
    std::fs::write(&p, format!("name: gds-{mode}\ngds:\n  mode: {mode}\n")).unwrap();
    p.display().to_string()
}

/// The tree as it is, but for gdrprov's state and update-alternatives' log.
fn files(root: &Path) -> std::collections::BTreeMap<String, (Vec<u8>, u32)> {
    let mut s = without_state(snapshot(root));
    s.retain(|k, _| k != "var/log/alternatives.log");
    s
}

/// The lines of `a` and `b` that differ.
fn changed_lines(a: &str, b: &str) -> Vec<(String, String)> {
    assert_eq!(a.lines().count(), b.lines().count());
    a.lines()
        .zip(b.lines())
        .filter(|(x, y)| x != y)
        .map(|(x, y)| (x.trim().to_string(), y.trim().to_string()))
        .collect()
}

/// `file` installed at `priority` as the `cufile.json` alternative, by the root's own
/// update-alternatives (as a CUDA package's postinst does).
fn install_alternative(root: &Path, file: &str, priority: &str) {
    let st = std::process::Command::new("chroot")
        .arg(root)
        .args([
            "update-alternatives",
            "--quiet",
            "--install",
            "/etc/cufile.json",
        ])
        .args(["cufile.json", file, priority])
        .status()
        .unwrap();
    assert!(
        st.success(),
        "update-alternatives --install {file} {priority} in the root"
    );
}

#[test]
fn a_cufile_json_alternative_is_installed_and_rolled_back_for_real() {
    if !is_root() {
        eprintln!("SKIPPED: update-alternatives in a chroot needs root (CI runs as root)");
        return;
    }
    let (t, root) = snap_root();
    // The CUDA package's state, made as its postinst makes it (libcufile-13-0:
    // `update-alternatives --install /etc/cufile.json cufile.json <pkg file> 130`).
    std::fs::remove_file(root.join("etc/cufile.json")).unwrap();
    std::fs::remove_file(root.join("etc/alternatives/cufile.json")).unwrap();
    install_with_libs(
        &root,
        "/usr/bin/update-alternatives",
        "/usr/bin/update-alternatives",
    );
    for d in ["var/lib/dpkg/alternatives", "var/log"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    install_alternative(&root, "/usr/local/cuda-13.0/gds/cufile.json", "130");
    // The admin file as the lent machine has it (/var/lib/dpkg/alternatives/cufile.json).
    let admin = root.join("var/lib/dpkg/alternatives/cufile.json");
    assert_eq!(
        std::fs::read_to_string(&admin).unwrap(),
        "auto\n/etc/cufile.json\n\n/usr/local/cuda-13.0/gds/cufile.json\n130\n\n"
    );
    let before = files(&root);
    let pkg = std::fs::read_to_string(root.join(PKG)).unwrap();

    let plan = ok(&root, &["plan", "gds-iommu-off", "--boot-elsewhere"]);
    assert!(
        plan.contains("gdrprov's key properties.use_pci_p2pdma: false -> true"),
        "{plan}"
    );
    assert!(
        plan.contains("update-alternatives --install /etc/cufile.json cufile.json /etc/gdrprov/cufile.json 1000"),
        "{plan}"
    );
    assert!(
        plan.contains("the package's file is left as it is"),
        "{plan}"
    );
    ok(
        &root,
        &["apply", "gds-iommu-off", "--boot-elsewhere", "--yes"],
    );
    // The link now leads to gdrprov's copy; the package's file is untouched; the copy differs
    // from it in gdrprov's key alone.
    let alt = std::fs::read_link(root.join("etc/alternatives/cufile.json")).unwrap();
    assert_eq!(alt, Path::new("/etc/gdrprov/cufile.json"));
    assert_eq!(std::fs::read_to_string(root.join(PKG)).unwrap(), pkg);
    let copy = std::fs::read_to_string(root.join("etc/gdrprov/cufile.json")).unwrap();
    assert_eq!(
        changed_lines(&pkg, &copy),
        [(
            "\"use_pci_p2pdma\": false,".to_string(),
            "\"use_pci_p2pdma\": true,".to_string()
        )]
    );
    // Applied: nothing is left to do.
    let again = ok(&root, &["plan", "gds-iommu-off", "--boot-elsewhere"]);
    assert!(again.contains("Plan: 0 change(s)"), "{again}");

    ok(&root, &["rollback", "--yes"]);
    let alt = std::fs::read_link(root.join("etc/alternatives/cufile.json")).unwrap();
    assert_eq!(alt, Path::new("/usr/local/cuda-13.0/gds/cufile.json"));
    // Every file, link and the alternatives admin file byte for byte as before.
    crate::common::assert_same(&before, &files(&root), "after rollback");

    // Applied again, then a CUDA upgrade installs its own file at 131: gdrprov's copy (1000)
    // stays in effect, and the next plan remakes it from the new package's file.
    ok(
        &root,
        &["apply", "gds-iommu-off", "--boot-elsewhere", "--yes"],
    );
    let new = root.join("usr/local/cuda-13.1/gds");
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(
        new.join("cufile.json"),
        pkg.replacen('{', "{\n    // 13.1", 1),
    )
    .unwrap();
    install_alternative(&root, "/usr/local/cuda-13.1/gds/cufile.json", "131");
    let plan = ok(
        &root,
        &["plan", "gds-iommu-off", "--boot-elsewhere", "--full-diff"],
    );
    assert!(plan.contains("Update /etc/gdrprov/cufile.json"), "{plan}");
    assert!(plan.contains("+    // 13.1"), "{plan}");
    assert!(!plan.contains("--install"), "{plan}");
    drop(t);
}

#[test]
fn a_plain_cufile_json_is_edited_in_place_and_rolled_back_byte_for_byte() {
    let (_t, root) = snap_root();
    std::fs::remove_file(root.join("etc/cufile.json")).unwrap();
    std::fs::remove_file(root.join("etc/alternatives/cufile.json")).unwrap();
    let pkg = std::fs::read_to_string(root.join(PKG)).unwrap();
    std::fs::write(root.join("etc/cufile.json"), &pkg).unwrap();
    let before = files(&root);
    let plan = ok(&root, &["plan", "gds-iommu-off", "--boot-elsewhere"]);
    assert!(
        plan.contains("Update /etc/cufile.json: gdrprov's key properties.use_pci_p2pdma: false -> true; every other key and comment kept"),
        "{plan}"
    );
    assert!(!plan.contains("update-alternatives"), "{plan}");
    ok(
        &root,
        &["apply", "gds-iommu-off", "--boot-elsewhere", "--yes"],
    );
    let now = std::fs::read_to_string(root.join("etc/cufile.json")).unwrap();
    assert_eq!(changed_lines(&pkg, &now).len(), 1);
    ok(&root, &["rollback", "--yes"]);
    crate::common::assert_same(&before, &files(&root), "after rollback");
}

#[test]
fn registry_dwords_set_elsewhere_are_merged_never_replaced() {
    let (_t, root) = snap_root();
    std::fs::create_dir_all(root.join("etc/modprobe.d")).unwrap();
    let theirs = "options nvidia NVreg_RegistryDwords=\"RmFoo=0x2;RMForceStaticBar1=0\" NVreg_EnableResizableBar=1\n";
    std::fs::write(root.join("etc/modprobe.d/nvidia.conf"), theirs).unwrap();
    let plan = ok(
        &root,
        &["plan", "gds-iommu-off", "--boot-elsewhere", "--full-diff"],
    );
    assert!(
        plan.contains("+options nvidia NVreg_RegistryDwords=\"RmFoo=0x2;RMForceStaticBar1=1;RmForceDisableIomapWC=1\""),
        "{plan}"
    );
    assert!(
        plan.contains("merged with the value /etc/modprobe.d/nvidia.conf sets"),
        "{plan}"
    );
    ok(
        &root,
        &["apply", "gds-iommu-off", "--boot-elsewhere", "--yes"],
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/modprobe.d/nvidia.conf")).unwrap(),
        theirs
    );
    // gdrprov's file sorts after nvidia.conf: modprobe's last value is the merged one.
    let mut names: Vec<String> = std::fs::read_dir(root.join("etc/modprobe.d"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names.last().map(String::as_str),
        Some("zz-gdrprov-gds.conf")
    );
}

#[test]
fn nvfs_without_nvidia_fs_is_refused_and_any_direct_warns() {
    let (t, root) = snap_root();
    let out = gd(&root, &["plan", &profile(t.path(), "nvfs")]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout_of(&out));
    let err = stderr_of(&out);
    assert!(
        err.contains("asks for `gds: { mode: nvfs }`, but nvidia-fs is not installed"),
        "{err}"
    );
    // P2PDMA impossible (a kernel built without it: one fact changed): any-direct falls back
    // to nvidia-fs, which is missing too; the plan warns and does not fail.
    std::fs::write(
        root.join(format!("boot/config-{KERNEL}")),
        "# CONFIG_PCI_P2PDMA is not set\n",
    )
    .unwrap();
    let out = gd(&root, &["plan", &profile(t.path(), "any-direct")]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let all = format!("{}{}", stdout_of(&out), stderr_of(&out));
    assert!(
        all.contains("P2PDMA cannot run here and nvidia-fs is not installed"),
        "{all}"
    );
    assert!(!all.contains("NVreg_RegistryDwords=\""), "{all}");
}

#[test]
fn nvfs_with_nvidia_fs_installed_loads_it_at_boot() {
    let (t, root) = snap_root();
    let dir = root.join(format!("lib/modules/{KERNEL}/updates/dkms"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("nvidia-fs.ko"), "").unwrap();
    let plan = ok(&root, &["plan", &profile(t.path(), "nvfs"), "--full-diff"]);
    assert!(
        plan.contains("Create /etc/modules-load.d/gdrprov-gds.conf"),
        "{plan}"
    );
    assert!(plan.contains("+nvidia-fs"), "{plan}");
    // nvfs: cuFile must not take the P2PDMA path; the package's value (false) stands.
    assert!(!plan.contains("cufile.json"), "{plan}");
    assert!(!plan.contains("RegistryDwords"), "{plan}");
}
