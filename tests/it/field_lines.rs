//! Issue 48's failure modes from the field, end to end through the binary:
//! every NCCL log of `tests/fixtures/field-lines/nccl/` given to
//! `doctor --nccl-log` at once, the kernel lines of `kernel/` in a root's
//! kernel log, and a snapshot with Secure Boot on, an unsigned gdrcopy
//! module and a profile that requires gdrcopy. Each names its finding;
//! before issue 48 doctor found one of the NCCL families and none of the rest.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn field() -> std::path::PathBuf {
    repo().join("tests/fixtures/field-lines")
}

/// (file, the finding ids it must give) from `expected.txt`.
fn expected(prefix: &str) -> Vec<(String, Vec<String>)> {
    std::fs::read_to_string(field().join("expected.txt"))
        .unwrap()
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(|l| {
            let mut w = l.split_whitespace().map(String::from);
            (w.next().unwrap(), w.collect())
        })
        .collect()
}

fn doctor(root: &Path, args: &[&str]) -> (i32, Value) {
    let out = gdrprov()
        .args(["--format", "json", "doctor", "--root"])
        .arg(root)
        .args(args)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout_of(&out), stderr_of(&out)));
    (out.status.code().unwrap_or(-1), v)
}

fn ids(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

fn finding<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no finding {id} in {report:#}"))
}

#[test]
fn every_nccl_family_from_the_field_is_named_with_its_line_and_fix() {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("field.log");
    let mut text = String::new();
    for (file, _) in expected("nccl/") {
        text.push_str(&std::fs::read_to_string(field().join(&file)).unwrap());
    }
    std::fs::write(&log, &text).unwrap();
    let root = repo().join("examples/hosts/ubuntu-22.04-h100");
    let (_, rep) = doctor(&root, &["rdma-dmabuf", "--nccl-log", log.to_str().unwrap()]);
    let got = ids(&rep);
    for (file, want) in expected("nccl/") {
        for id in want {
            assert!(got.contains(&id), "{file}: no {id} in {got:?}");
        }
    }
    let f = finding(&rep, "nccl-memlock");
    assert!(
        f["evidence"]
            .as_str()
            .unwrap()
            .contains("Cannot allocate memory"),
        "{f}"
    );
    assert!(f["fix"].as_str().unwrap().contains("memlock"), "{f}");
    let f = finding(&rep, "nccl-retry-exceeded");
    assert!(
        f["fix"].as_str().unwrap().contains("NCCL_IB_GID_INDEX"),
        "{f}"
    );
    assert_eq!(
        finding(&rep, "nccl-fabric-manager-not-ready")["severity"],
        "error"
    );
}

#[test]
fn kernel_lines_of_nv_peer_mem_and_signatures_are_findings() {
    for (file, want) in expected("kernel/") {
        let (_t, root) = example_root("ubuntu-22.04-h100");
        let log = root.join("var/log/kern.log");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        std::fs::write(&log, std::fs::read_to_string(field().join(&file)).unwrap()).unwrap();
        let (_, rep) = doctor(&root, &[]);
        let got = ids(&rep);
        for id in &want {
            assert!(got.contains(id), "{file}: no {id} in {got:?}");
        }
        if file.contains("nv_peer_mem") {
            let f = finding(&rep, "peermem-symbol-mismatch");
            assert!(
                f["title"].as_str().unwrap().starts_with("nv_peer_mem"),
                "{f}"
            );
        }
        if file.contains("key-rejected") {
            let f = finding(&rep, "module-signature-rejected");
            assert!(f["title"].as_str().unwrap().contains("gasket"), "{f}");
            assert!(
                f["fix"].as_str().unwrap().contains("mokutil --import"),
                "{f}"
            );
        }
    }
}

/// The soft-RoCE snapshot with Secure Boot on, lockdown integrity, and
/// gdrcopy's module installed unsigned (what `modinfo` answered, recorded).
fn secure_boot_snapshot(gdrdrv_modinfo: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join("tests/fixtures/snapshots/vm-softroce"), &root);
    let efivars = root.join("sys/firmware/efi/efivars");
    std::fs::create_dir_all(&efivars).unwrap();
    std::fs::write(
        efivars.join("SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"),
        [6u8, 0, 0, 0, 1],
    )
    .unwrap();
    std::fs::create_dir_all(root.join("sys/kernel/security")).unwrap();
    std::fs::write(
        root.join("sys/kernel/security/lockdown"),
        "none [integrity] confidentiality\n",
    )
    .unwrap();
    let cmds = root.join(".gdrprov-snapshot/commands.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&cmds).unwrap()).unwrap();
    v.as_array_mut().unwrap().push(serde_json::json!({
        "argv": ["modinfo", "-k", "6.1.0-56-amd64", "gdrdrv"],
        "code": 0, "stdout": gdrdrv_modinfo, "stderr": "", "ran": true
    }));
    std::fs::write(&cmds, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    (t, root)
}

#[test]
fn secure_boot_names_an_unsigned_gdrcopy_module_and_its_fix() {
    let modinfo = "filename:       /lib/modules/6.1.0-56-amd64/updates/dkms/gdrdrv.ko\nversion:        2.4.4\nlicense:        Dual MIT/GPL\nname:           gdrdrv\nvermagic:       6.1.0-56-amd64 SMP preempt mod_unload modversions\n";
    let (t, root) = secure_boot_snapshot(modinfo);
    let (_, rep) = doctor(&root, &[]);
    let f = finding(&rep, "module-unsigned");
    assert_eq!(f["severity"], "error", "{f}");
    let ev = f["evidence"].as_str().unwrap();
    assert!(
        ev.contains("gdrdrv.ko has no signature")
            && ev.contains("Secure Boot is on")
            && ev.contains("lockdown is integrity"),
        "{ev}"
    );
    assert!(
        f["fix"].as_str().unwrap().contains("mokutil --import"),
        "{f}"
    );
    // gdrcopy as a profile requirement: installed 2.4.4 meets `>= 2.4`, not `>= 2.5`.
    for (want, met) in [(">= 2.4", true), (">= 2.5", false)] {
        let p = t.path().join("gdr.yaml");
        std::fs::write(
            &p,
            format!("extends: rdma-dmabuf\nrequires:\n  gdrcopy: \"{want}\"\n"),
        )
        .unwrap();
        let (_, rep) = doctor(&root, &[p.to_str().unwrap()]);
        let r = rep["requirements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["what"] == "gdrcopy")
            .unwrap_or_else(|| panic!("{rep:#}"));
        assert_eq!(r["actual"], "2.4.4", "{r}");
        assert_eq!(
            ids(&rep).contains(&"requirement-gdrcopy".to_string()),
            !met,
            "{want}: {rep:#}"
        );
    }
    // Signed with the key DKMS enrolled: nothing to say.
    let signed = format!("{modinfo}sig_id:         PKCS#7\nsigner:         DKMS module signing key\nsig_key:        2F:3A:11\nsig_hashalgo:   sha512\n");
    let (_t, root) = secure_boot_snapshot(&signed);
    let (_, rep) = doctor(&root, &[]);
    assert!(
        !ids(&rep).iter().any(|i| i.starts_with("module-")),
        "{:?}",
        ids(&rep)
    );
}
