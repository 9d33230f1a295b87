//! What the whole-GPU-node tests share (`gpu_node`, `gpu_node_copy`, `gpu_node_fabric`): the
//! snapshot of the lent 2x H200 machine (`tests/fixtures/snapshots/device-h200x2`) copied into a
//! temporary directory, its recorded answers edited, and `verify` and `doctor` run on it.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const FIXTURE: &str = "tests/fixtures/snapshots/device-h200x2";

/// The lent machine's snapshot in a temporary directory: the root is its `root`.
pub fn lent() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join(FIXTURE), &root);
    (t, root)
}

/// Changes the snapshot's recorded JSON file `name` (`probes.json`, `commands.json`) by `edit`.
pub fn edit_recorded(root: &Path, name: &str, edit: impl FnOnce(&mut Value)) {
    let p = root.join(".gdrprov-snapshot").join(name);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// The snapshot in a temporary directory, its recorded topology changed by `edit`.
pub fn root_with(edit: impl FnOnce(&mut Value)) -> (tempfile::TempDir, PathBuf) {
    let (t, root) = lent();
    edit_recorded(&root, "probes.json", |v| {
        edit(
            v.get_mut("gpu-topology")
                .expect("the snapshot records gpu-topology"),
        )
    });
    (t, root)
}

/// Makes dpkg-query's recorded answer for `package` say it is installed at `version` (the lent
/// machine recorded "not installed": Fabric Manager runs on the VM's host).
pub fn with_package(root: &Path, package: &str, version: &str) {
    edit_recorded(root, "commands.json", |v| {
        let answers = v.as_array_mut().unwrap();
        answers.retain(|c| c["argv"].as_array().and_then(|a| a.last()) != Some(&package.into()));
        answers.push(serde_json::json!({
            "argv": ["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Version}\\n", package],
            "code": 0,
            "stdout": format!("ii  {version}\n"),
            "stderr": "",
            "ran": true
        }));
    });
}

/// `verify gds-iommu-off` on `root`, its JSON report.
pub fn verify(root: &Path) -> Value {
    let out = gdrprov()
        .args(["verify", "gds-iommu-off", "--format", "json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    json_of(&out)
}

/// `doctor`'s finding `id` on `root`, if it has one.
pub fn doctor_finding(root: &Path, id: &str) -> Option<Value> {
    let out = gdrprov()
        .args(["doctor", "--format", "json", "--root"])
        .arg(root)
        .output()
        .unwrap();
    json_of(&out)["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .cloned()
}

/// `inventory` on `root`, its text.
pub fn inventory(root: &Path) -> String {
    stdout_of(
        &gdrprov()
            .args(["inventory", "--root"])
            .arg(root)
            .output()
            .unwrap(),
    )
}
