//! `gdrprov verify --in-job` (issue 48): the job's own limits, capabilities, device files,
//! providers and NCCL_IB_HCA, from inside it; only on the running system. The real job
//! contexts (a unit with LimitMEMLOCK=64K, a mount namespace without /dev/infiniband) are
//! scenario 12 of the VM testbed; the checks on literal facts are src/checks/injob.rs's tests.

use crate::common::*;
use crate::util::*;

#[test]
fn in_job_needs_no_profile_and_reports_every_job_check() {
    let out = run(&["verify", "--in-job", "--format", "json"]);
    let v = json_of(&out);
    let names: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "job-memlock",
            "job-ipc-lock",
            "job-rdma-devices",
            "job-rdma-provider",
            "job-nccl-hca"
        ]
    );
    assert_eq!(v["profiles"], serde_json::json!(["in-job"]));
    let ready = v["ready"].as_bool().unwrap();
    assert_eq!(out.status.code(), Some(if ready { 0 } else { 3 }));
    let m = check_named(&v, "job-memlock");
    assert!(
        m["evidence"]
            .as_str()
            .unwrap()
            .contains("getrlimit(RLIMIT_MEMLOCK): soft "),
        "{m}"
    );
}

#[test]
fn in_job_refuses_another_root_and_a_profile() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path().display().to_string();
    let out = exits(1, &["verify", "--in-job", "--root", &r]);
    assert!(
        stderr_of(&out).contains(
            "verify --in-job runs on the RDMA devices and GPUs of this machine, not on --root"
        ),
        "{}",
        stderr_of(&out)
    );
    let out = exits(1, &["verify", "--in-job", "rdma-dmabuf"]);
    assert!(
        stderr_of(&out).contains("cannot be used with"),
        "{}",
        stderr_of(&out)
    );
    exits(1, &["verify"]);
}
