//! What operators look at (issue 36), from gdrprov's own output: the
//! textfiles of verify, recheck and the sweep report on fixture roots, turned
//! into series for `promtool test rules` (monitoring_rules.rs) and served to a
//! real Prometheus through a real node-exporter (monitoring_prometheus.rs).
//!
//! The one mock: the GPU copy bandwidth. No GPU exists on this machine, so
//! the copy report behind `gdrprov_copy_gbytes_per_second` is made here and
//! rendered by gdrprov's own metrics code (output::health_metrics).

use crate::common::*;
use crate::hostgen::*;
use std::collections::BTreeMap;
use std::path::Path;

pub const GEN5: &str = "32.0 GT/s PCIe";
const SW: &str = "pci0000:00/0000:00:01.0/0000:01:00.0";

/// The textfiles of every scenario, each as gdrprov wrote it.
pub struct Textfiles {
    /// n5: an example root before `gdrprov apply` (not ready), then after it (ready).
    pub n5_not_ready: String,
    pub n5_ready: String,
    /// n6: the H100 node of hostgen with its GPU link at x16, then trained at x8.
    pub n6_x16: String,
    pub n6_x8: String,
    /// n4: copy bandwidth (the mock GPU), then 40% lower.
    pub n4_copy: String,
    pub n4_copy_low: String,
    /// n3: a re-check after a package trigger, not ready.
    pub n3_recheck: String,
    /// The head node: `fleet sweep report --format prometheus`.
    pub head_sweep: String,
}

fn run_ok(args: &[&str]) -> std::process::Output {
    let out = gdrprov().args(args).output().unwrap();
    assert!(
        out.status.code().is_some_and(|c| c == 0 || c == 3),
        "gdrprov {args:?}: {}{}",
        stdout_of(&out),
        stderr_of(&out)
    );
    out
}

/// `gdrprov verify rdma-dmabuf --root ROOT --textfile FILE`; the file's text.
fn verify_textfile(root: &Path, file: &Path) -> String {
    let (r, f) = (root.display().to_string(), file.display().to_string());
    run_ok(&["verify", "rdma-dmabuf", "--root", &r, "--textfile", &f]);
    std::fs::read_to_string(file).unwrap()
}

/// A device's link attributes as sysfs has them.
fn link(g: &HostGen, path: &str, cur_w: u32) {
    let d = format!("/sys/devices/{path}");
    g.file(&format!("{d}/current_link_speed"), format!("{GEN5}\n"));
    g.file(&format!("{d}/current_link_width"), format!("{cur_w}\n"));
    g.file(&format!("{d}/max_link_speed"), format!("{GEN5}\n"));
    g.file(&format!("{d}/max_link_width"), "16\n");
}

fn h100_with_gpu_width(width: u32) -> HostGen {
    let g = h100_node(true, "575.51.03");
    link(&g, &format!("{SW}/0000:02:08.0/0000:03:00.0"), width);
    link(&g, &format!("{SW}/0000:02:08.0"), width);
    link(&g, &format!("{SW}/0000:02:10.0/0000:04:00.0"), 16);
    link(&g, SW, 16);
    g
}

/// MOCK (no GPU here): one H100's copy report, rendered by gdrprov's metrics code.
fn copy_textfile(h2d: f64, d2h: f64) -> String {
    use gdrprov::bench::copy::{CopyReport, GpuCopy, LinkReading};
    let gpu = GpuCopy {
        index: 0,
        name: "NVIDIA H100 80GB HBM3 (mock)".into(),
        pci_bus_id: "00000000:03:00.0".into(),
        pci: "0000:03:00.0".into(),
        link: LinkReading::default(),
        bytes: 256 << 20,
        h2d_gbs: h2d,
        d2h_gbs: d2h,
        h2d_runs: vec![h2d],
        d2h_runs: vec![d2h],
        floor_gbs: None,
        floor_source: "none".into(),
        numa: Default::default(),
        passed: true,
    };
    let h = gdrprov::checks::health::HealthReport {
        checks: Vec::new(),
        copy: Some(CopyReport {
            bytes: 256 << 20,
            runs: 1,
            method: "mock",
            gpus: vec![gpu],
            passed: true,
        }),
        nvml: None,
        concurrent: None,
        p2p: None,
        nccl: None,
        node_seconds: None,
        links: Vec::new(),
    };
    gdrprov::output::health_metrics::prometheus(&h)
}

/// Eight nodes, the planner's quick rounds, n5 slow on mlx5_1 (as tests/it/sweep.rs).
fn sweep_results(dir: &Path) {
    let out = run_ok(&[
        "fleet",
        "sweep",
        "plan",
        "--nodelist",
        "n[1-8]",
        "--rails",
        "mlx5_0,mlx5_1",
    ]);
    for line in stdout_of(&out).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        for rail in ["mlx5_0", "mlx5_1"] {
            let slow = rail == "mlx5_1" && (f[1] == "n5" || f[2] == "n5");
            let gbps = if slow { 41.0 } else { 96.0 };
            let d = dir.join(format!("round-{}", f[0]));
            std::fs::create_dir_all(&d).unwrap();
            let doc = serde_json::json!({
                "client": {"port": {"device": rail, "mtu": 4096}},
                "listener": {"port": {"device": rail, "mtu": 4096}},
                "results": [{"bytes": 8388608, "average_gbps": gbps, "line_rate_fraction": gbps / 100.0,
                             "data_check": {"passed": true}}],
                "data_check": {"passed": true}, "passed": true
            });
            let name = format!("{}+{}+{rail}.json", f[1], f[2]);
            std::fs::write(d.join(name), doc.to_string()).unwrap();
        }
    }
}

/// Runs every scenario in DIR.
pub fn textfiles(dir: &Path) -> Textfiles {
    // n5, and its verify JSON for the sweep (configuration causes: fixable).
    let (_t, root) = example_root("ubuntu-22.04-h100");
    let r = root.display().to_string();
    let n5_not_ready = verify_textfile(&root, &dir.join("n5-a.prom"));
    let vdir = dir.join("verify");
    std::fs::create_dir_all(&vdir).unwrap();
    let out = run_ok(&["verify", "rdma-dmabuf", "--root", &r, "--format", "json"]);
    std::fs::write(vdir.join("n5.json"), &out.stdout).unwrap();
    run_ok(&["apply", "rdma-dmabuf", "--yes", "--no-exec", "--root", &r]);
    // Settled as the image's first boot would (tests/it/fleet.rs does the same).
    let state_path = root.join("var/lib/gdrprov/state.json");
    let mut state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&state_path).unwrap()).unwrap();
    state["pending_commands"] = serde_json::json!([]);
    std::fs::write(&state_path, state.to_string()).unwrap();
    let n5_ready = verify_textfile(&root, &dir.join("n5-b.prom"));

    let g16 = h100_with_gpu_width(16);
    let n6_x16 = verify_textfile(g16.finish(), &dir.join("n6-a.prom"));
    let g8 = h100_with_gpu_width(8);
    let n6_x8 = verify_textfile(g8.finish(), &dir.join("n6-b.prom"));

    let (_t3, root3) = example_root("rocky-9-a100");
    let (r3, f3) = (
        root3.display().to_string(),
        dir.join("n3.prom").display().to_string(),
    );
    let m3 = dir.join("n3-markers").display().to_string();
    run_ok(&[
        "recheck",
        "rdma-dmabuf",
        "--root",
        &r3,
        "--textfile",
        &f3,
        "--marker-dir",
        &m3,
        "--reason",
        "package trigger /lib/modules",
    ]);
    let n3_recheck = std::fs::read_to_string(&f3).unwrap();

    let results = dir.join("results");
    sweep_results(&results);
    let drained = dir.join("drained.txt");
    std::fs::write(
        &drained,
        "n7|gdrprov: verify: modules failed\nn5|gdrprov: verify: configuration failed\n",
    )
    .unwrap();
    let out = run_ok(&[
        "fleet",
        "sweep",
        "report",
        &results.display().to_string(),
        "--verify-dir",
        &vdir.display().to_string(),
        "--drained",
        &drained.display().to_string(),
        "--format",
        "prometheus",
    ]);
    Textfiles {
        n5_not_ready,
        n5_ready,
        n6_x16,
        n6_x8,
        n4_copy: copy_textfile(50.0, 52.0),
        n4_copy_low: copy_textfile(30.0, 52.0),
        n3_recheck,
        head_sweep: stdout_of(&out),
    }
}

/// One sample of a textfile: the series (name and labels, as written) and its value.
pub fn samples(text: &str) -> Vec<(String, String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').unwrap();
            let name = series.split('{').next().unwrap().to_string();
            (name, series.to_string(), value.parse::<f64>().unwrap())
        })
        .collect()
}

/// The series with `instance` and `job` added, as a scrape of node-exporter gives it.
pub fn with_target(series: &str, instance: &str) -> String {
    let target = format!("instance=\"{instance}\",job=\"node\"");
    match series.strip_suffix('}') {
        Some(s) => format!("{s},{target}}}"),
        None => format!("{series}{{{target}}}"),
    }
}

/// promtool's input series from textfile snapshots: per instance, the
/// textfiles that node-exporter served from minute START on (until the
/// next one), over MINUTES minutes at one sample a minute. A
/// `*_timestamp_seconds` sample (when gdrprov ran) becomes the test
/// clock's time of that textfile's start.
pub fn input_series(timeline: &[(&str, Vec<(u32, &str)>)], minutes: u32) -> Vec<(String, String)> {
    let mut series: BTreeMap<String, Vec<Option<f64>>> = BTreeMap::new();
    for (instance, files) in timeline {
        for m in 0..=minutes {
            let Some((start, text)) = files.iter().rev().find(|(s, _)| *s <= m) else {
                continue;
            };
            for (name, s, v) in samples(text) {
                let v = if name.ends_with("_timestamp_seconds") {
                    f64::from(*start) * 60.0
                } else {
                    v
                };
                let values = series
                    .entry(with_target(&s, instance))
                    .or_insert_with(|| vec![None; minutes as usize + 1]);
                values[m as usize] = Some(v);
            }
        }
    }
    series
        .into_iter()
        .map(|(s, vs)| {
            let values: Vec<String> = vs
                .iter()
                .map(|v| v.map_or("_".to_string(), |v| format!("{v}")))
                .collect();
            (s, values.join(" "))
        })
        .collect()
}
