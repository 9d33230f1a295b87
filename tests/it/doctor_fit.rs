//! doctor as a user reads it (issue 45): the best fit is the profile a
//! GPUDirect RDMA host means (never the storage profile for asking less), one
//! fact gives one finding, a title never says more than its evidence, and the
//! host line says what the profile table says.

use crate::common::*;
use serde_json::Value;

fn doctor_json(example: &str, profile: Option<&str>) -> Value {
    let root = repo().join("examples/hosts").join(example);
    let mut c = gdrprov();
    c.arg("doctor");
    if let Some(p) = profile {
        c.arg(p);
    }
    let out = c
        .args(["--format", "json", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    json_of(&out)
}

fn doctor_text(example: &str) -> String {
    let root = repo().join("examples/hosts").join(example);
    let out = gdrprov()
        .args(["doctor", "--root"])
        .arg(&root)
        .output()
        .unwrap();
    stdout_of(&out)
}

fn fit<'a>(v: &'a Value, profile: &str) -> &'a Value {
    v["fits"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["profile"] == profile))
        .unwrap_or_else(|| panic!("no fit for {profile}: {v:#}"))
}

/// On every example with an RDMA NIC, the best fit is an RDMA profile that
/// fits: rdma-dmabuf where it fits, the cloud's own profile on its cloud;
/// gds-iommu-off (GPUDirect Storage, the IOMMU off) fits too and asks less,
/// which never makes it best.
#[test]
fn the_best_fit_of_an_rdma_host_is_an_rdma_profile() {
    for (example, best) in [
        ("ubuntu-24.04-gh200", "rdma-dmabuf"),
        ("ubuntu-22.04-h100", "rdma-dmabuf"),
        ("alinux3-erdma", "erdma-cloud"),
        ("rocky-9-a100", "rdma-dmabuf"),
    ] {
        let v = doctor_json(example, None);
        assert_eq!(v["best_fit"], best, "{example}: {v:#}");
        assert_ne!(fit(&v, best)["purpose"], "other", "{example}");
        assert_eq!(fit(&v, "gds-iommu-off")["purpose"], "other", "{example}");
        let text = doctor_text(example);
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("Best fit: {best}"))),
            "{example}:\n{text}"
        );
    }
    // The GH200 example of the issue: gds-iommu-off fits with no more
    // warnings than rdma-dmabuf, and is still not the best.
    let v = doctor_json("ubuntu-24.04-gh200", None);
    assert_eq!(fit(&v, "gds-iommu-off")["fits"], true, "{v:#}");
    assert_eq!(fit(&v, "rdma-dmabuf")["fits"], true, "{v:#}");
}

/// The GH200's GPU and NIC sit under two host bridges of one NUMA node
/// (NODE, NUMA 0/0): one finding says so, under the name verify's check has,
/// and its title says NODE, not "another CPU socket".
#[test]
fn one_fact_one_finding_titled_as_its_evidence() {
    for profile in [None, Some("rdma-dmabuf"), Some("legacy-peermem")] {
        let v = doctor_json("ubuntu-24.04-gh200", profile);
        let about_distance: Vec<&Value> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| {
                let e = f["evidence"].as_str().unwrap_or("");
                e.contains("mlx5_0") && e.contains("NODE")
            })
            .collect();
        assert_eq!(about_distance.len(), 1, "{profile:?}: {v:#}");
        let f = about_distance[0];
        assert_eq!(f["id"], "gpu-nic-affinity", "{f:#}");
        let (title, evidence) = (
            f["title"].as_str().unwrap(),
            f["evidence"].as_str().unwrap(),
        );
        assert!(evidence.contains("NUMA 0/0"), "{evidence}");
        for said in [
            title,
            f["cause"].as_str().unwrap(),
            f["fix"].as_str().unwrap(),
        ] {
            assert!(
                !said.contains("another CPU socket") && !said.contains("same CPU socket"),
                "{profile:?}: says a socket where the evidence says one NUMA node: {said}"
            );
        }
        assert!(title.contains("NODE"), "{title}");
    }
}

/// The Rocky 9 example is an image root (no /sys, no /proc/modules): the
/// host line says the driver, GPUs and NICs are not determined, as the
/// requirements do, and a profile whose hard requirements could not be
/// checked fits only "as far as this root shows".
#[test]
fn the_host_line_and_the_table_agree_on_an_image_root() {
    let text = doctor_text("rocky-9-a100");
    let host = text.lines().next().unwrap();
    assert!(
        !host.contains("no GPU") && !host.contains("driver absent"),
        "{host}"
    );
    assert!(
        host.contains("GPUs not determined")
            && host.contains("NVIDIA driver not determined")
            && host.contains("RDMA devices not determined"),
        "{host}"
    );
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("rdma-dmabuf"))
        .unwrap();
    assert!(row.contains("fits as far as this root shows"), "{row}");
    assert!(row.contains("not determined"), "{row}");
    let v = doctor_json("rocky-9-a100", None);
    let n = fit(&v, "rdma-dmabuf")["undetermined"].as_u64().unwrap();
    assert!(n >= 3, "{v:#}");
    // With the profile named, its requirements say the same.
    let (v, text) = (
        doctor_json("rocky-9-a100", Some("rdma-dmabuf")),
        doctor_text("rocky-9-a100"),
    );
    let unknown = v["requirements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "unknown")
        .count();
    assert!(unknown as u64 >= n, "{v:#}\n{text}");
    // A root that shows its state still says "no GPU" where there is none.
    let h100 = doctor_text("ubuntu-22.04-h100");
    assert!(
        h100.lines().next().unwrap().contains("1 x NVIDIA H100"),
        "{h100}"
    );
}
