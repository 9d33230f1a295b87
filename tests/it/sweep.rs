//! `gdrprov fleet sweep plan|report|simulate` through the binary, and the
//! Slurm runners: the batch script against stand-ins (always), the health
//! check against real slurmctld/slurmd/munge (skipped, with the reason, when
//! they are absent).

use crate::common::*;
use predicates::prelude::*;
use std::path::Path;

pub(crate) fn write_pair(dir: &Path, round: u32, a: &str, b: &str, rail: &str, gbps: f64) {
    let d = dir.join(format!("round-{round}"));
    std::fs::create_dir_all(&d).unwrap();
    let doc = serde_json::json!({
        "gdrprov": "0.1.0", "command": "bench pair", "role": "client",
        "client": {"port": {"device": rail, "mtu": 4096}},
        "listener": {"port": {"device": rail, "mtu": 4096}},
        "line_rate_gbps": 100.0,
        "results": [{"bytes": 8388608, "average_gbps": gbps, "line_rate_fraction": gbps / 100.0,
                     "data_check": {"passed": true}}],
        "data_check": {"passed": true}, "passed": true
    });
    std::fs::write(d.join(format!("{a}+{b}+{rail}.json")), doc.to_string()).unwrap();
}

/// Eight nodes, three quick rounds as the planner makes them, n5 slow on mlx5_1.
pub(crate) fn results(dir: &Path) {
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "n[1-8]",
            "--rails",
            "mlx5_0,mlx5_1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    for line in stdout_of(&out).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f[3], "mlx5_0,mlx5_1", "{line}");
        for rail in ["mlx5_0", "mlx5_1"] {
            let slow = rail == "mlx5_1" && (f[1] == "n5" || f[2] == "n5");
            write_pair(
                dir,
                f[0].parse().unwrap(),
                f[1],
                f[2],
                rail,
                if slow { 41.0 } else { 96.0 },
            );
        }
    }
}

#[test]
fn plan_all_pairs_json_meets_every_pair_once() {
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "g[01-07]",
            "--mode",
            "all-pairs",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["command"], "fleet sweep plan");
    let rounds = v["rounds"].as_array().unwrap();
    assert_eq!(rounds.len(), 7, "odd: N rounds with a bye each");
    let mut met = std::collections::HashSet::new();
    for r in rounds {
        assert_eq!(r["bye"].as_array().unwrap().len(), 1);
        for p in r["pairs"].as_array().unwrap() {
            let (a, b) = (
                p["listener"].as_str().unwrap(),
                p["client"].as_str().unwrap(),
            );
            assert!(met.insert((a.min(b).to_string(), a.max(b).to_string())));
        }
    }
    assert_eq!(met.len(), 21);
}

#[test]
fn report_names_the_bad_rail_with_evidence_and_the_drain() {
    let t = tempfile::tempdir().unwrap();
    results(t.path());
    let script = t.path().join("actions.sh");
    let out = gdrprov()
        .args(["fleet", "sweep", "report"])
        .arg(t.path())
        .arg("--slurm-script")
        .arg(&script)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = stdout_of(&out);
    assert!(
        text.contains("bad rail n5: rail mlx5_1 0.41 of line rate with 3 partners -> drain"),
        "{text}"
    );
    assert!(text.contains("slurm: drain 1, resume 0 (cap 1)"), "{text}");
    let actions = std::fs::read_to_string(&script).unwrap();
    assert!(actions.contains(
        "scontrol update NodeName=n5 State=DRAIN 'Reason=gdrprov: rail mlx5_1 0.41 of line rate with 3 partners'"
    ), "{actions}");
    // JSON: every pair per rail with --pairs, the verdict's evidence.
    let out = gdrprov()
        .args(["fleet", "sweep", "report", "--pairs", "--format", "json"])
        .arg(t.path())
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["command"], "fleet sweep report");
    assert_eq!(v["pairs"].as_array().unwrap().len(), 3 * 4 * 2);
    assert_eq!(v["verdicts"][0]["kind"], "bad-rail");
    assert_eq!(v["verdicts"][0]["evidence"].as_array().unwrap().len(), 3);
    assert_eq!(v["thresholds"]["relative"], 0.93);
    // Prometheus.
    let out = gdrprov()
        .args(["fleet", "sweep", "report", "--format", "prometheus"])
        .arg(t.path())
        .output()
        .unwrap();
    let prom = stdout_of(&out);
    assert!(
        prom.contains("gdrprov_sweep_bad{kind=\"bad-rail\",node=\"n5\",rail=\"mlx5_1\"} 1"),
        "{prom}"
    );
    assert!(prom.contains("# TYPE gdrprov_sweep_drain gauge"));
}

#[test]
fn retest_plan_comes_from_the_results_and_stops() {
    let t = tempfile::tempdir().unwrap();
    results(t.path());
    let out = gdrprov()
        .args(["fleet", "sweep", "plan", "--nodelist", "n[1-8]", "--retest"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(stdout_of(&out), "", "everything is decided");
    assert!(stderr_of(&out).contains("nothing to retest"));
}

#[test]
fn the_retest_plan_classifies_with_the_reports_thresholds() {
    // n5 is a little slow (0.9 of the others) with two of its three partners: a suspect
    // under the default 0.93 rule, fine under --relative 0.85. The retest planner must
    // judge as the report does with the same options.
    let t = tempfile::tempdir().unwrap();
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "n[1-8]",
            "--rails",
            "mlx5_0",
        ])
        .output()
        .unwrap();
    let mut slow_partners = 0;
    for line in stdout_of(&out).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let with_n5 = f[1] == "n5" || f[2] == "n5";
        let slow = with_n5 && slow_partners < 2;
        slow_partners += usize::from(slow);
        write_pair(
            t.path(),
            f[0].parse().unwrap(),
            f[1],
            f[2],
            "mlx5_0",
            if slow { 86.0 } else { 96.0 },
        );
    }
    assert_eq!(slow_partners, 2);
    let plan = |extra: &[&str]| {
        let out = gdrprov()
            .args(["fleet", "sweep", "plan", "--nodelist", "n[1-8]", "--retest"])
            .arg(t.path())
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
        stdout_of(&out)
    };
    let report = |extra: &[&str]| {
        let out = gdrprov()
            .args(["fleet", "sweep", "report"])
            .arg(t.path())
            .args(extra)
            .args(["--format", "json"])
            .output()
            .unwrap();
        json_of(&out)["suspects"].as_array().unwrap().len()
    };
    let default = plan(&[]);
    assert!(
        default.lines().any(|l| l.split(' ').any(|w| w == "n5")),
        "n5 retested: {default}"
    );
    assert_eq!(report(&[]), 1, "the report's suspect is the one retested");
    assert_eq!(
        plan(&["--relative", "0.85"]),
        "",
        "nothing to retest under the same 0.85 as the report"
    );
    assert_eq!(report(&["--relative", "0.85"]), 0);
    let out = gdrprov()
        .args(["fleet", "sweep", "plan", "--nodelist", "n[1-8]", "--retest"])
        .arg(t.path())
        .args(["--min-gbps", "0"])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && stderr_of(&out).contains("--min-gbps"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn user_errors_are_one_clear_message() {
    let t = tempfile::tempdir().unwrap();
    for (args, want) in [
        (vec!["fleet", "sweep", "plan"], "give --hosts FILE"),
        (
            vec!["fleet", "sweep", "plan", "--nodelist", "a[1-"],
            "host list",
        ),
        (
            vec!["fleet", "sweep", "plan", "--nodelist", "solo"],
            "at least two hosts",
        ),
        (
            vec!["fleet", "sweep", "report", t.path().to_str().unwrap()],
            "no pair results found",
        ),
        (
            vec![
                "fleet",
                "sweep",
                "simulate",
                "--nodes",
                "10",
                "--bad-nodes",
                "6",
            ],
            "more than half",
        ),
    ] {
        let out = gdrprov().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            stderr_of(&out).contains(want),
            "{args:?}: {}",
            stderr_of(&out)
        );
    }
    std::fs::write(t.path().join("garbage.json"), "{}").unwrap();
    let out = gdrprov()
        .args(["fleet", "sweep", "report"])
        .arg(t.path())
        .output()
        .unwrap();
    assert!(
        stderr_of(&out).contains("LISTENER+CLIENT.json"),
        "{}",
        stderr_of(&out)
    );
}

#[test]
fn simulate_json_carries_the_figures() {
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "simulate",
            "--nodes",
            "512",
            "--bad-nodes",
            "5",
            "--bad-rails",
            "20",
            "--pair-seconds",
            "12",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v = json_of(&out);
    assert_eq!(v["command"], "fleet sweep simulate");
    for k in [
        "rounds",
        "missed",
        "wrongly_drained",
        "wall_seconds",
        "planner_classifier_seconds",
    ] {
        assert!(v.get(k).is_some(), "{k}: {v}");
    }
    assert_eq!(v["missed"], 0);
    assert_eq!(v["wrongly_drained"], 0);
    assert!(v["rounds"].as_u64().unwrap() <= 6);
}

#[test]
fn the_slurm_batch_script_end_to_end_against_stand_ins() {
    if !have("jq") {
        eprintln!("SKIP: tests/slurm/sweep-runner.sh needs jq");
        return;
    }
    let out = std::process::Command::new("bash")
        .arg(repo().join("tests/slurm/sweep-runner.sh"))
        .arg(env!("CARGO_BIN_EXE_gdrprov"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    assert!(stdout_of(&out).contains("PASS"));
}

#[test]
fn the_health_check_drains_and_resumes_under_real_slurm() {
    // Runs real slurmctld, slurmd and munged (tests/slurm/healthcheck.sh);
    // the script says SKIP and passes where they are absent or not root.
    let out = std::process::Command::new("bash")
        .arg(repo().join("tests/slurm/healthcheck.sh"))
        .arg(env!("CARGO_BIN_EXE_gdrprov"))
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}\n{}", stderr_of(&out));
    if text.starts_with("SKIP") {
        eprintln!("{text}");
        return;
    }
    assert!(text.contains("ALL PASSED"), "{text}");
}

#[test]
fn verify_writes_the_node_feature_discovery_file() {
    let (t, root) = example_root("ubuntu-22.04-h100");
    let p = t.path().join("files-only.yaml");
    std::fs::write(
        &p,
        "modules:\n  absent: [nvidia_peermem]\nfiles:\n  - path: /etc/gdrprov-nfd-test.conf\n    content: \"x\\n\"\n",
    )
    .unwrap();
    let nfd = t.path().join("features.d/gdrprov");
    std::fs::create_dir_all(nfd.parent().unwrap()).unwrap();
    let verify = |expect: i32| {
        let out = gdrprov()
            .arg("verify")
            .arg(&p)
            .arg("--root")
            .arg(&root)
            .arg("--nfd-file")
            .arg(&nfd)
            .args(["--nfd-expiry", "10m"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(expect), "{}", stdout_of(&out));
        std::fs::read_to_string(&nfd).unwrap()
    };
    let before = verify(3);
    assert!(before.contains("\ngdrprov.ready=false\n"), "{before}");
    assert!(before.contains("\ngdrprov.rdma-path=dma-buf\n"), "{before}");
    // The expiry is ten minutes from now, in RFC 3339.
    let line = before
        .lines()
        .find(|l| l.starts_with("# +expiry-time="))
        .unwrap();
    let when = humantime::parse_rfc3339(line.trim_start_matches("# +expiry-time=")).unwrap();
    let left = when
        .duration_since(std::time::SystemTime::now())
        .unwrap()
        .as_secs();
    assert!((590..=600).contains(&left), "{left}");
    for l in before.lines().filter(|l| !l.starts_with('#')) {
        let (name, value) = l.split_once('=').unwrap();
        assert!(
            !name.is_empty() && !value.is_empty() && value.len() <= 63,
            "{l}"
        );
    }
    gdrprov()
        .arg("apply")
        .arg(&p)
        .arg("-y")
        .arg("--root")
        .arg(&root)
        .assert()
        .success();
    let after = verify(0);
    assert!(after.contains("\ngdrprov.ready=true\n"), "{after}");
}

#[test]
fn the_ansible_sweep_end_to_end_on_local_hosts() {
    // Real ansible-playbook (the test venv's, else PATH's) over eight
    // inventory hosts that are this machine; the script says SKIP without it.
    let out = std::process::Command::new("bash")
        .arg(repo().join("tests/sweep/ansible.sh"))
        .arg(env!("CARGO_BIN_EXE_gdrprov"))
        .output()
        .unwrap();
    let text = stdout_of(&out);
    assert!(out.status.success(), "{text}\n{}", stderr_of(&out));
    if text.starts_with("SKIP") {
        eprintln!("{text}");
        return;
    }
    assert!(text.contains("PASS"), "{text}");
}

#[test]
fn the_kubernetes_daemonset_runs_verify_with_the_nfd_file() {
    let text =
        std::fs::read_to_string(repo().join("examples/kubernetes/gdrprov-nfd-daemonset.yml"))
            .unwrap();
    let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(v["kind"], "DaemonSet");
    let c = &v["spec"]["template"]["spec"]["containers"][0];
    let script = c["args"][0].as_str().unwrap();
    assert!(script.contains("--nfd-file /etc/kubernetes/node-feature-discovery/features.d/gdrprov"));
    assert!(script.contains("--nfd-expiry 15m"));
    // The options it passes are verify's own.
    gdrprov()
        .args(["verify", "--help"])
        .assert()
        .success()
        .stdout(
            predicates::str::contains("--nfd-file").and(predicates::str::contains("--nfd-expiry")),
        );
}

/// A node's `verify --format json` as the runner saves it, its `roce-gid` check saying
/// NCCL_IB_GID_INDEX is `gid` (`None`: not set).
fn verify_with_gid(dir: &Path, node: &str, gid: Option<u32>) {
    let detail = match gid {
        Some(g) => format!("NCCL_IB_GID_INDEX={g} (/etc/nccl.conf): mlx5_0:1 GID {g} ::ffff:10.0.0.1 (RoCE v2)"),
        None => "NCCL_IB_GID_INDEX is not set: NCCL picks a RoCE v2 GID itself; mlx5_0:1 routable RoCE v2 GID 3 ::ffff:10.0.0.1".into(),
    };
    let doc = serde_json::json!({"gdrprov": "0.1.0", "command": "verify", "profiles": ["rdma-dmabuf"],
        "ready": true, "checks": [{"name": "roce-gid", "status": "pass", "detail": detail}]});
    std::fs::write(dir.join(format!("{node}.json")), doc.to_string()).unwrap();
}

/// Issue 48: the report lists every node whose NCCL_IB_GID_INDEX differs from most nodes',
/// slow or not (n2 is fine in every measurement, n5 is slow), in text and JSON.
#[test]
fn report_lists_nodes_whose_gid_index_differs_from_most_slow_or_not() {
    let t = tempfile::tempdir().unwrap();
    let res = t.path().join("results");
    results(&res);
    let vdir = t.path().join("verify");
    std::fs::create_dir_all(&vdir).unwrap();
    for n in 1..=8 {
        let gid = match n {
            2 => Some(1),
            5 => None,
            _ => Some(3),
        };
        verify_with_gid(&vdir, &format!("n{n}"), gid);
    }
    let (r, v) = (res.to_str().unwrap(), vdir.to_str().unwrap());
    let args = ["fleet", "sweep", "report", r, "--verify-dir", v];
    let out = gdrprov()
        .args(args)
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    let j = json_of(&out);
    assert_eq!(
        j["gid_index_disagreement"],
        serde_json::json!({"usual": "3", "nodes_with_usual": 6, "odd": [
            {"node": "n2", "gid_index": "1"}, {"node": "n5", "gid_index": "unset"}]}),
        "{j:#}"
    );
    let text = stdout_of(&gdrprov().args(args).output().unwrap());
    assert!(
        text.contains("NCCL_IB_GID_INDEX differs from most nodes' (3 on 6): n2 (1), n5 (unset)"),
        "{text}"
    );
    // All alike: nothing said, and the JSON field is absent.
    verify_with_gid(&vdir, "n2", Some(3));
    verify_with_gid(&vdir, "n5", Some(3));
    let out = gdrprov()
        .args(args)
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    assert!(json_of(&out).get("gid_index_disagreement").is_none());
}
