//! `fleet sweep report --format html` in a real browser: Debian's headless
//! Chromium loads the page with no console message, its DOM holds every
//! verdict of the report, the 4096 x 8 map is drawn whole (its speed target,
//! under 2 s, is bench/html-render.sh's: no timed test), and a
//! screenshot is taken (GDRPROV_UPDATE_DOCS=1 copies it and the example
//! page into docs/).

use crate::common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium's flags for a test: headless, nothing from the network, a fresh profile.
fn chromium(profile: &Path, extra: &[&str], page: &Path) -> (String, String, Duration) {
    let started = Instant::now();
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        // Files, not pipes: a DOM of a few hundred KiB would fill a pipe nobody reads yet.
        .stdout(std::fs::File::create(profile.with_extension("out")).unwrap())
        .stderr(std::fs::File::create(profile.with_extension("err")).unwrap())
        .spawn()
        .unwrap();
    // Bounded: a hung browser is killed after a minute.
    let deadline = started + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let took = started.elapsed();
    let status = child.wait().unwrap();
    let read = |ext: &str| std::fs::read_to_string(profile.with_extension(ext)).unwrap();
    assert!(status.success(), "chromium: {}", read("err"));
    (read("out"), read("err"), took)
}

/// The page's console messages (errors and uncaught exceptions included) as Chromium logs them.
fn console(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

fn attr(dom: &str, name: &str) -> Option<u64> {
    let at = dom.find(&format!("{name}=\""))? + name.len() + 2;
    dom[at..].split('"').next()?.parse().ok()
}

/// The report's page and its JSON, from the same results.
fn report(dir: &Path, format: &str) -> std::process::Output {
    gdrprov()
        .args(["fleet", "sweep", "report"])
        .arg(dir.join("gdrprov/results"))
        .arg("--verify-dir")
        .arg(dir.join("gdrprov/verify"))
        .arg("--drained")
        .arg(dir.join("gdrprov/drained.txt"))
        .args(["--format", format])
        .output()
        .unwrap()
}

#[test]
fn chromium_catches_console_errors() {
    // The check below is not blind: a page with an error is caught.
    if !have("chromium") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let page = t.path().join("bad.html");
    std::fs::write(
        &page,
        "<html><body><script>console.error('boom');</script><script>nope();</script></body></html>",
    )
    .unwrap();
    let (_, err, _) = chromium(&t.path().join("profile"), &["--dump-dom"], &page);
    let c = console(&err);
    assert_eq!(c.len(), 2, "{err}");
    assert!(c[1].contains("Uncaught ReferenceError"), "{c:?}");
}

#[test]
fn sweep_report_html_in_headless_chromium() {
    if !have("chromium") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    crate::monitoring::textfiles(&t.path().join("gdrprov"));
    let out = report(t.path(), "html");
    assert!(out.status.success(), "{}", stderr_of(&out));
    let html = stdout_of(&out);
    let json = json_of(&report(t.path(), "json"));
    // Self-contained: nothing it could fetch.
    for bad in ["http://", "https://", " src=", "<link", "@import", "url("] {
        assert!(!html.contains(bad), "the page has {bad}");
    }
    let page = t.path().join("sweep.html");
    std::fs::write(&page, &html).unwrap();
    let (dom, err, took) = chromium(&t.path().join("p1"), &["--dump-dom"], &page);
    assert!(console(&err).is_empty(), "console: {:?}", console(&err));
    let verdicts = json["verdicts"].as_array().unwrap();
    assert!(!verdicts.is_empty());
    for (i, v) in verdicts.iter().enumerate() {
        let tag = format!(
            "<details id=\"v{i}\" class=\"verdict\" data-node=\"{}\" data-kind=\"{}\"",
            v["node"].as_str().unwrap_or("*"),
            v["kind"].as_str().unwrap()
        );
        assert!(dom.contains(&tag), "no {tag} in the DOM");
    }
    assert_eq!(dom.matches("<details ").count(), verdicts.len());
    // n5's rail is fixable, n7 drained: both said in the page.
    assert!(dom.contains("<span class=\"fix\">fix</span>"), "{dom}");
    assert!(dom.contains("gdrprov apply rdma-dmabuf"), "{dom}");
    assert!(
        dom.contains("Drained once this sweep's decisions run: n5, n7."),
        "{dom}"
    );
    let rails = json["rails"].as_array().unwrap().len() as u64;
    assert_eq!(
        attr(&dom, "data-map-cells"),
        Some(8 * rails),
        "the script ran"
    );
    eprintln!("8 x {rails}: chromium {:.2} s", took.as_secs_f64());
}

/// The 4096 x 8 page renders whole: every cell of the map drawn, a `<details>` per verdict, no console
/// error, and the page's own render time recorded (`data-render-ms`). Its speed target (under two seconds)
/// is checked by `bench/html-render.sh`, which times the page beside a peer page in the same run: a bound
/// here failed at load 10 (2625 ms, the 2026-11-30 CI measure) and said nothing of the page.
#[test]
fn a_4096_by_8_sweep_renders_whole() {
    if !have("chromium") {
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let out = gdrprov()
        .args(["fleet", "sweep", "simulate", "--format", "html"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let page = t.path().join("big.html");
    std::fs::write(&page, &out.stdout).unwrap();
    let json = json_of(
        &gdrprov()
            .args(["fleet", "sweep", "simulate", "--format", "json"])
            .output()
            .unwrap(),
    );
    let (dom, err, took) = chromium(&t.path().join("p"), &["--dump-dom"], &page);
    assert!(console(&err).is_empty(), "console: {:?}", console(&err));
    assert_eq!(attr(&dom, "data-map-cells"), Some(4096 * 8));
    let found = json["found"].as_u64().unwrap() + json["false_verdicts"].as_u64().unwrap();
    assert!(dom.matches("<details ").count() as u64 >= found, "{found}");
    let ms = attr(&dom, "data-render-ms").unwrap();
    eprintln!(
        "4096 x 8: page parsed and map drawn {ms} ms after navigation; chromium start to exit {:.2} s",
        took.as_secs_f64()
    );

    // The screenshot (and the page) for docs/: a 256-node fleet, easier to see.
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "simulate",
            "--nodes",
            "256",
            "--bad-nodes",
            "3",
        ])
        .args(["--bad-rails", "12", "--format", "html"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    let example = t.path().join("sweep-report-example.html");
    std::fs::write(&example, &out.stdout).unwrap();
    let png = t.path().join("sweep-report.png");
    let shot = format!("--screenshot={}", png.display());
    let (_, err, _) = chromium(
        &t.path().join("p2"),
        &[&shot, "--window-size=1280,900"],
        &example,
    );
    assert!(console(&err).is_empty(), "console: {:?}", console(&err));
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{}",
        bytes.len()
    );
    if std::env::var_os("GDRPROV_UPDATE_DOCS").is_some() {
        std::fs::copy(&png, repo().join("docs/sweep-report.png")).unwrap();
        std::fs::copy(&example, repo().join("docs/sweep-report-example.html")).unwrap();
    }
}

#[test]
fn html_is_refused_where_it_means_nothing() {
    let out = gdrprov()
        .args(["doctor", "--format", "html"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    // The parser refuses it, naming what doctor writes (issue 45).
    assert_eq!(
        stderr_of(&out).trim(),
        "gdrprov: error: `gdrprov doctor` writes --format text or json, not \"html\""
    );
    let out = gdrprov()
        .args([
            "fleet",
            "sweep",
            "plan",
            "--nodelist",
            "a,b",
            "--format",
            "html",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out)
        .contains("`gdrprov fleet sweep plan` writes --format text or json, not \"html\""));
    assert!(out.stdout.is_empty());
}
