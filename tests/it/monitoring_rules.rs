//! `promtool check rules` and `promtool test rules` on
//! examples/prometheus/gdrprov-rules.yml, the input series made from
//! gdrprov's own textfiles (monitoring.rs): each alert fires where the
//! scenario says, with its summary and command, and not elsewhere.

use crate::common::*;
use crate::monitoring::*;
use serde_json::{json, Value};

const RULES: &str = "examples/prometheus/gdrprov-rules.yml";
const WARN: (&str, &str) = ("severity", "warning");

/// An expected alert: its labels (job="node" and the severity added) and annotations.
fn alert(labels: &[(&str, &str)], summary: &str, command: &str) -> Value {
    let mut l: serde_json::Map<String, Value> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), json!(v)))
        .collect();
    l.insert("job".into(), json!("node"));
    l.entry("severity").or_insert(json!("warning"));
    json!({"exp_labels": l, "exp_annotations": {"summary": summary, "command": command}})
}

fn test_of(name: &str, at: &str, alerts: Vec<Value>) -> Value {
    json!({"eval_time": at, "alertname": name, "exp_alerts": alerts})
}

const NOT_READY_CMD: &str = "gdrprov doctor rdma-dmabuf; gdrprov verify rdma-dmabuf --format json";
const CHECK_CMD: &str = "gdrprov verify rdma-dmabuf --format json (the check's evidence and fix)";
const LINK_CMD: &str = "gdrprov doctor (pcie-links: the device, its maximum and the likely causes)";
const P: (&str, &str) = ("profiles", "rdma-dmabuf");

fn not_ready(instance: &str) -> Value {
    alert(
        &[P, ("instance", instance), WARN],
        &format!("{instance} is not ready for GPUDirect RDMA (gdrprov verify failed for 15 min)"),
        NOT_READY_CMD,
    )
}

fn check_failing(instance: &str, check: &str) -> Value {
    alert(
        &[P, ("instance", instance), ("check", check)],
        &format!("{instance}: check {check} fails"),
        CHECK_CMD,
    )
}

fn width_drop(device: &str, role: &str) -> Value {
    alert(
        &[("instance", "n6:9100"), ("device", device), ("role", role)],
        &format!("n6:9100: PCIe link of {role} {device} narrower than it was (x8)"),
        LINK_CMD,
    )
}

fn sweep(name: &str, severity: &str, summary: &str, command: &str) -> Value {
    test_of(
        name,
        "5m",
        vec![alert(
            &[
                ("instance", "head:9100"),
                ("kind", "bad-rail"),
                ("node", "n5"),
                ("rail", "mlx5_1"),
                ("severity", severity),
            ],
            summary,
            command,
        )],
    )
}

/// Every alert of the rules at the times the scenario decides.
fn alert_tests() -> Vec<Value> {
    let stale = "gdrprov recheck --textfile FILE (whatever runs it periodically has stopped); journalctl -u gdrprov-recheck";
    vec![
        test_of("GdrprovNodeNotReady", "10m", vec![]),
        test_of("GdrprovNodeNotReady", "20m", vec![not_ready("n3:9100"), not_ready("n5:9100"), not_ready("n6:9100")]),
        // n5 applied at 30 min: ready.
        test_of("GdrprovNodeNotReady", "45m", vec![not_ready("n3:9100"), not_ready("n6:9100")]),
        test_of("GdrprovCheckFailing", "35m", vec![
            check_failing("n3:9100", "configuration"),
            check_failing("n6:9100", "configuration"),
            check_failing("n6:9100", "pcie-links"),
        ]),
        // n3 re-checked at 0 and never again: stale past 2 h (+5 min); n6 (20 min) is not yet.
        test_of("GdrprovResultStale", "119m", vec![]),
        test_of("GdrprovResultStale", "140m", vec![alert(
            &[("instance", "n3:9100")],
            "n3:9100: gdrprov's last verify or re-check is 2h 20m 0s old",
            stale,
        )]),
        test_of("GdrprovRecheckNotReady", "1m", vec![alert(
            &[("instance", "n3:9100"), ("trigger", "package")],
            "n3:9100: the re-check after a package change found the host not ready",
            "journalctl -u gdrprov-recheck; gdrprov recheck --format json; gdrprov doctor",
        )]),
        // n4's h2d copy fell from 50 to 30 GB/s at 20 min (d2h stayed): pending, then firing.
        test_of("GdrprovCopyBandwidthDrop", "25m", vec![]),
        test_of("GdrprovCopyBandwidthDrop", "40m", vec![alert(
            &[("instance", "n4:9100"), ("gpu", "0"), ("pci", "0000:03:00.0"), ("direction", "h2d")],
            "n4:9100: GPU 0 h2d copy bandwidth dropped to 30 GB/s",
            "gdrprov doctor; gdrprov bench copy --format json",
        )]),
        // n6's GPU link (and the switch port above it) trained at x8 from 20 min.
        test_of("GdrprovPcieLinkWidthDrop", "15m", vec![]),
        test_of("GdrprovPcieLinkWidthDrop", "40m", vec![
            width_drop("0000:03:00.0", "gpu"),
            width_drop("0000:02:08.0", "bridge"),
        ]),
        test_of("GdrprovPcieLinkSpeedDrop", "40m", vec![]),
        sweep(
            "GdrprovSweepVerdict",
            "warning",
            "the pair sweep found a bad-rail on n5 rail mlx5_1",
            "gdrprov fleet sweep report RESULTS --format json (the verdict's evidence); gdrprov doctor on the node",
        ),
        sweep(
            "GdrprovSweepFixable",
            "info",
            "n5 rail mlx5_1 is slow for a configuration cause that gdrprov apply fixes",
            "gdrprov plan PROFILE; gdrprov apply PROFILE on the node (PROFILE: the profiles of the fix that gdrprov fleet sweep report names)",
        ),
        // n7 and n5 drained; n5 verified at 0 (fresh), n7 never.
        test_of("GdrprovDrainedWithoutFreshVerify", "20m", vec![alert(
            &[("instance", "head:9100"), ("node", "n7"), ("severity", "info")],
            "n7 is drained in Slurm and has no fresh gdrprov verify",
            "gdrprov recheck --format json on the node (examples/slurm/gdrprov-healthcheck.sh resumes it when it passes)",
        )]),
    ]
}

#[test]
fn promtool_checks_and_tests_the_rules_on_gdrprovs_own_output() {
    if !have("promtool") {
        return;
    }
    let rules = repo().join(RULES);
    let out = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(
        stdout_of(&out).contains("SUCCESS: 17 rules found"),
        "{}",
        stdout_of(&out)
    );

    let t = tempfile::tempdir().unwrap();
    let f = textfiles(t.path());
    // What each scenario's textfile must say for the test to mean anything.
    assert!(f
        .n5_not_ready
        .contains("gdrprov_ready{profiles=\"rdma-dmabuf\"} 0"));
    assert!(f
        .n5_ready
        .contains("gdrprov_ready{profiles=\"rdma-dmabuf\"} 1"));
    assert!(f
        .n6_x8
        .contains("gdrprov_pcie_link_width{device=\"0000:03:00.0\",role=\"gpu\"} 8\n"));
    assert!(f
        .n3_recheck
        .contains("gdrprov_recheck_ready{trigger=\"package\"} 0\n"));
    let timeline = [
        (
            "n5:9100",
            vec![(0, f.n5_not_ready.as_str()), (30, f.n5_ready.as_str())],
        ),
        (
            "n6:9100",
            vec![(0, f.n6_x16.as_str()), (20, f.n6_x8.as_str())],
        ),
        (
            "n4:9100",
            vec![(0, f.n4_copy.as_str()), (20, f.n4_copy_low.as_str())],
        ),
        ("n3:9100", vec![(0, f.n3_recheck.as_str())]),
        ("head:9100", vec![(0, f.head_sweep.as_str())]),
    ];
    let series: Vec<Value> = input_series(&timeline, 150)
        .into_iter()
        .map(|(s, v)| json!({"series": s, "values": v}))
        .collect();
    let test = json!({
        "rule_files": [rules.display().to_string()],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": alert_tests(),
            "promql_expr_test": [
                {"expr": "instance:gdrprov_checks_failing:count", "eval_time": "35m", "exp_samples": [
                    {"labels": "instance:gdrprov_checks_failing:count{instance=\"n3:9100\",job=\"node\"}", "value": 1},
                    {"labels": "instance:gdrprov_checks_failing:count{instance=\"n6:9100\",job=\"node\"}", "value": 2}
                ]},
                {"expr": "rail:gdrprov_sweep_of_rail_median:min", "eval_time": "5m", "exp_samples": [
                    {"labels": "rail:gdrprov_sweep_of_rail_median:min{rail=\"mlx5_0\"}", "value": 1},
                    {"labels": "rail:gdrprov_sweep_of_rail_median:min{rail=\"mlx5_1\"}", "value": 0.4271}
                ]}
            ]
        }]
    });
    // JSON is YAML: promtool reads it as it is.
    let file = t.path().join("gdrprov-rules.test.yml");
    std::fs::write(&file, serde_json::to_string_pretty(&test).unwrap()).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules {}:\n{}{}",
        file.display(),
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(stdout_of(&out).contains("SUCCESS"), "{}", stdout_of(&out));
}
