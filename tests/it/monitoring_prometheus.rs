//! A real Prometheus (Debian's `prometheus`, on loopback, in a temp dir)
//! scrapes real node-exporters (Debian's `prometheus-node-exporter`, the
//! textfile collector only) serving gdrprov's own textfiles, loads
//! examples/prometheus/gdrprov-rules.yml, and answers every PromQL
//! expression of examples/grafana/gdrprov.json with series. Bounded: the
//! daemons are killed when the test ends, and every wait has a deadline.

use crate::common::*;
use crate::monitoring::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon killed (and reaped) when dropped.
struct Daemon(Child, &'static str);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Daemon {
    fn start(what: &'static str, cmd: &mut Command, log: &Path) -> Daemon {
        let log = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        Daemon(child, what)
    }

    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET PATH on 127.0.0.1:PORT: the status line and the body, or None when
/// nothing answers.
fn get_status(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let (head, body) = buf.split_once("\r\n\r\n")?;
    let status = head.lines().next().unwrap_or_default().to_string();
    Some((status, body.to_string()))
}

/// GET PATH on 127.0.0.1:PORT: the body, or None when nothing answers.
fn get(port: u16, path: &str) -> Option<String> {
    get_status(port, path).map(|(_, body)| body)
}

/// Prometheus says it is ready: 200 on /-/ready. While it starts (and when
/// a loaded machine slows its start) it answers 503 "Service Unavailable",
/// to /-/ready and to queries alike.
fn ready(port: u16) -> bool {
    get_status(port, "/-/ready").is_some_and(|(status, _)| status.contains(" 200 "))
}

fn query(port: u16, expr: &str) -> Value {
    let body = get(port, &format!("/api/v1/query?query={}", encode(expr)))
        .unwrap_or_else(|| panic!("Prometheus did not answer `{expr}`"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("`{expr}`: {e}: {body}"))
}

fn series(v: &Value) -> usize {
    v["data"]["result"].as_array().map_or(0, Vec::len)
}

/// Waits (at most LIMIT) until EXPR returns series; false on the deadline.
fn wait_for(port: u16, expr: &str, limit: Duration, daemons: &mut [Daemon]) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        for d in daemons.iter_mut() {
            assert!(d.alive(), "{} exited", d.1);
        }
        if ready(port) && series(&query(port, expr)) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    false
}

/// Every `expr` of the dashboard's panels (rows included).
fn dashboard_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(e)) = m.get("expr") {
                out.push(e.clone());
            }
            m.values().for_each(|x| dashboard_exprs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| dashboard_exprs(x, out)),
        _ => {}
    }
}

fn node_exporter(dir: &Path, name: &str, files: &[(&str, &str)]) -> (Daemon, u16) {
    let d = dir.join(name);
    std::fs::create_dir_all(&d).unwrap();
    for (f, text) in files {
        std::fs::write(d.join(f), text).unwrap();
    }
    let port = free_port();
    let daemon = Daemon::start(
        "prometheus-node-exporter",
        Command::new("prometheus-node-exporter")
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            .arg(format!("--collector.textfile.directory={}", d.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
        &dir.join(format!("{name}.log")),
    );
    (daemon, port)
}

#[test]
fn prometheus_scrapes_node_exporter_and_answers_every_dashboard_query() {
    if !(have("prometheus") && have("prometheus-node-exporter")) {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let dir = t.path();
    let f = textfiles(&dir.join("gdrprov"));
    // Three nodes as node-exporter serves them: n6 (verify with its PCIe links,
    // and the copy bandwidth of the mock GPU), n3 (a re-check), the head node (the sweep).
    let (e6, p6) = node_exporter(
        dir,
        "n6",
        &[("gdrprov.prom", &f.n6_x8), ("copy.prom", &f.n4_copy)],
    );
    let (e3, p3) = node_exporter(dir, "n3", &[("gdrprov.prom", &f.n3_recheck)]);
    let (eh, ph) = node_exporter(dir, "head", &[("sweep.prom", &f.head_sweep)]);
    let rules = repo().join("examples/prometheus/gdrprov-rules.yml");
    let target = |port: u16, instance: &str| {
        format!(
            "      - targets: ['127.0.0.1:{port}']\n        labels: {{instance: '{instance}'}}\n"
        )
    };
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: ['{}']\nscrape_configs:\n  - job_name: node\n    static_configs:\n{}{}{}",
        rules.display(),
        target(p6, "n6:9100"),
        target(p3, "n3:9100"),
        target(ph, "head:9100"),
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let prom = Daemon::start(
        "prometheus",
        Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
        &dir.join("prometheus.log"),
    );
    let mut daemons = [e6, e3, eh, prom];
    let log = || std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default();
    // Every target up, and the recording rules evaluated at least once.
    for expr in [
        "count(up == 1) == 3",
        "gdrprov_sweep_rounds",
        "instance:gdrprov_result_age:seconds",
        "rail:gdrprov_sweep_of_rail_median:min",
    ] {
        assert!(
            wait_for(port, expr, Duration::from_secs(60), &mut daemons),
            "`{expr}` returned nothing within 60 s\n{}",
            log()
        );
    }
    // Every rule loaded and evaluated without error.
    let rules: Value = serde_json::from_str(&get(port, "/api/v1/rules").unwrap()).unwrap();
    let mut count = 0;
    for g in rules["data"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            assert_eq!(r["health"], "ok", "{r:#}");
            count += 1;
        }
    }
    assert_eq!(count, 17);

    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("examples/grafana/gdrprov.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = Vec::new();
    dashboard_exprs(&dash, &mut exprs);
    assert!(exprs.len() >= 20, "{exprs:?}");
    // Each must parse now, and return series within the deadline (a
    // recording rule's first evaluation may be a second away).
    let end = Instant::now() + Duration::from_secs(30);
    let mut empty = Vec::new();
    for e in &exprs {
        let mut v = query(port, e);
        assert_eq!(v["status"], "success", "`{e}`: {v}");
        while series(&v) == 0 && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(250));
            v = query(port, e);
        }
        if series(&v) == 0 {
            empty.push(e.clone());
        }
    }
    assert!(
        empty.is_empty(),
        "dashboard queries with no series: {empty:?}"
    );
    // The values are gdrprov's: n6's GPU link at x8 of x16, n5's mlx5_1 at 0.43 of the median.
    let v = query(port, "gdrprov_pcie_link_width{instance=\"n6:9100\",device=\"0000:03:00.0\"} / gdrprov_pcie_link_max_width");
    assert_eq!(v["data"]["result"][0]["value"][1], "0.5", "{v}");
    let v = query(
        port,
        "gdrprov_sweep_of_rail_median{node=\"n5\",rail=\"mlx5_1\"}",
    );
    assert_eq!(v["data"]["result"][0]["value"][1], "0.4271", "{v}");
}
