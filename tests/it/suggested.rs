//! Every command gdrprov suggests runs as printed (issue 45): over every
//! example root, every snapshot fixture and every built-in profile (and a
//! profile file whose path needs quoting), the output of plan, apply,
//! apply --trial, verify, doctor, recover, recheck and fleet sweep report, in
//! text and JSON, is collected; each `gdrprov ...` it suggests is split as a
//! shell splits it and parsed by the real command line (`commands::cli::shared::try_parse_from`, what
//! `main` runs: clap's tree with each command's shared options),
//! and the ones that are safe to run are run on the same copy of the root.

use crate::common::{copy_tree, repo};
use gdrprov::commands::cli::shared::try_parse_from;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_gdrprov")
}

/// One run: what was asked, and everything it printed.
struct Seen {
    asked: String,
    out: Output,
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Seen {
    let mut c = Command::new(bin());
    c.args(args)
        .env_remove("GDRPROV_FAULT_AFTER_STEP")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    Seen {
        asked: format!("gdrprov {}", args.join(" ")),
        out: c.output().unwrap(),
    }
}

/// The example roots and the snapshot fixtures (each a root).
fn roots() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in ["examples/hosts", "tests/fixtures/snapshots"] {
        for e in std::fs::read_dir(repo().join(dir)).unwrap() {
            let p = e.unwrap().path();
            // A root has an etc/ (the snapshots' `-run` folders are outputs).
            if p.join("etc").is_dir() {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// The built-in profiles, and a profile file whose path has a space.
fn profiles(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(repo().join("profiles"))
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            p.file_stem().unwrap().to_str().unwrap().to_string()
        })
        .collect();
    v.sort();
    let file = dir.join("my site.yaml");
    std::fs::write(&file, "name: my-site\nextends: rdma-dmabuf\n").unwrap();
    v.push(file.display().to_string());
    v
}

/// A fresh copy of ROOT under T.
fn copy(root: &Path, t: &Path, name: &str) -> PathBuf {
    let to = t.join(name);
    copy_tree(root, &to);
    to
}

/// Runs the commands of every scenario on copies of ROOT for PROFILE under
/// T, in FORMAT.
fn scenario(root: &Path, profile: &str, format: &str, t: &Path) -> Vec<Seen> {
    let mut seen = Vec::new();
    let f = ["--format", format];
    let arg = |p: &Path| p.display().to_string();
    // apply --trial, then plan, verify and recheck during the trial.
    let trial = arg(&copy(root, t, "trial"));
    let on = |r: &str, a: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        v.extend(["--root".to_string(), r.to_string()]);
        v.extend(f.iter().map(|s| s.to_string()));
        v
    };
    let go = |seen: &mut Vec<Seen>, v: Vec<String>, env: &[(&str, &str)]| {
        let a: Vec<&str> = v.iter().map(String::as_str).collect();
        seen.push(run(&a, env));
    };
    go(
        &mut seen,
        on(&trial, &["apply", profile, "--trial", "--yes", "--no-exec"]),
        &[],
    );
    go(&mut seen, on(&trial, &["plan", profile]), &[]);
    go(&mut seen, on(&trial, &["verify", profile]), &[]);
    go(&mut seen, on(&trial, &["recheck"]), &[]);
    // apply --no-exec, then verify (owed commands), doctor, recheck.
    let applied = arg(&copy(root, t, "applied"));
    go(
        &mut seen,
        on(&applied, &["apply", profile, "--yes", "--no-exec"]),
        &[],
    );
    go(&mut seen, on(&applied, &["verify", profile]), &[]);
    go(&mut seen, on(&applied, &["doctor", profile]), &[]);
    go(&mut seen, on(&applied, &["recheck"]), &[]);
    // An apply killed after its first step; then recover and its next step.
    let killed = arg(&copy(root, t, "killed"));
    let fault = [("GDRPROV_FAULT_AFTER_STEP", "1")];
    go(
        &mut seen,
        on(&killed, &["apply", profile, "--yes", "--no-exec"]),
        &fault,
    );
    go(&mut seen, on(&killed, &["verify", profile]), &[]);
    go(&mut seen, on(&killed, &["recover", "--yes"]), &[]);
    seen
}

/// The `gdrprov ...` commands TEXT suggests: between backticks, or a whole
/// string/line that is one (a remedy's `command`). A plan's diff is a
/// file's content, not a suggestion, and is left out.
fn suggestions(text: &str) -> Vec<String> {
    let mut v = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        // A diff line of a plan (`+# Managed by gdrprov ...`).
        if line.starts_with("     ") && (t.starts_with('+') || t.starts_with('-')) {
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 1 && is_command(part) {
                v.push(part.to_string());
            }
        }
    }
    v
}

/// Whether S is `gdrprov COMMAND ...` (not `gdrprov: ...`, not prose).
fn is_command(s: &str) -> bool {
    let mut w = s.split(' ');
    w.next() == Some("gdrprov")
        && w.next().is_some_and(|c| {
            gdrprov::names::ALL
                .iter()
                .any(|n| n.split(' ').next() == Some(c))
        })
}

/// Every string of a JSON document: suggestions between backticks in it,
/// and strings that are a command (leaving out `diff`, a file's content).
fn json_suggestions(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => {
            if is_command(s) {
                out.push(s.clone());
            }
            out.extend(suggestions(s));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| json_suggestions(x, out)),
        serde_json::Value::Object(m) => m
            .iter()
            .filter(|(k, _)| k.as_str() != "diff")
            .for_each(|(_, x)| json_suggestions(x, out)),
        _ => {}
    }
}

/// Every suggestion of one run: its stdout (text or JSON) and stderr.
fn of(s: &Seen, json: bool) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&s.out.stdout);
    let mut v = suggestions(&String::from_utf8_lossy(&s.out.stderr));
    if json {
        for doc in serde_json::Deserializer::from_str(&stdout).into_iter::<serde_json::Value>() {
            match doc {
                Ok(d) => json_suggestions(&d, &mut v),
                Err(e) => panic!("{}: not JSON ({e}):\n{stdout}", s.asked),
            }
        }
    } else {
        v.extend(suggestions(&stdout));
    }
    v
}

/// Why the suggestion LINE (from the run ASKED) does not run as printed.
fn refusal(line: &str, asked: &str) -> Option<String> {
    let words = match shlex::split(line) {
        Some(w) => w,
        None => return Some(format!("`{line}` (from `{asked}`): not one shell line")),
    };
    if let Err(e) = try_parse_from(&words) {
        return Some(format!("`{line}` (from `{asked}`): {}", e.render()));
    }
    None
}

/// Runs LINE, where it is safe (it reads, or writes only the copy of the
/// root it names, with --no-exec), and says why it failed if it did.
fn runs(line: &str, asked: &str) -> Option<String> {
    let mut words = shlex::split(line)?;
    let cmd = words.get(1)?.clone();
    if words.iter().any(|w| w == "PROFILE") {
        return None;
    }
    match cmd.as_str() {
        "plan" | "verify" | "doctor" | "inventory" | "history" => {}
        // --force: a host the profile does not fit is refused, an answer too.
        "apply" => words.extend(["--no-exec", "--yes", "--dry-run", "--force"].map(String::from)),
        _ => return None,
    }
    if !words.iter().any(|w| w == "--root") {
        // Never on this machine's own root.
        return None;
    }
    let out = Command::new(bin()).args(&words[1..]).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 0 ok, 2 changes pending, 3 not ready, 4 boot elsewhere: each an
    // answer; so is a refusal that changed nothing (a profile that does not
    // fit the host: a module it lacks). Not a usage error, an unknown
    // profile or a crash.
    let refused = code == 1 && stderr.contains("(nothing was changed)");
    (![0, 2, 3, 4].contains(&code) && !refused).then(|| {
        format!(
            "`{line}` (from `{asked}`) exited {code}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// A sweep of 8 nodes where n5's rail mlx5_1 is slow, and n5's own
/// `verify --format json` (with PROFILE, on a fresh example root) names a
/// configuration cause: the report's remedy for n5, in FORMAT.
fn sweep(t: &Path, profile: &str, format: &str) -> Seen {
    let results = t.join("results");
    crate::sweep::results(&results);
    let root = copy(&repo().join("examples/hosts/ubuntu-22.04-h100"), t, "n5");
    let vdir = t.join("verify");
    std::fs::create_dir_all(&vdir).unwrap();
    let v = run(
        &[
            "verify",
            profile,
            "--root",
            root.to_str().unwrap(),
            "--format",
            "json",
        ],
        &[],
    );
    std::fs::write(vdir.join("n5.json"), &v.out.stdout).unwrap();
    let (r, d) = (results.display().to_string(), vdir.display().to_string());
    run(
        &[
            "fleet",
            "sweep",
            "report",
            &r,
            "--verify-dir",
            &d,
            "--format",
            format,
        ],
        &[],
    )
}

#[test]
fn every_suggested_command_parses_and_runs_as_printed() {
    let t = tempfile::tempdir().unwrap();
    let profiles = profiles(t.path());
    let roots = roots();
    assert!(roots.len() >= 8, "{roots:?}");
    let results: Vec<(usize, Vec<String>)> = std::thread::scope(|s| {
        let jobs: Vec<_> = roots
            .iter()
            .enumerate()
            .map(|(i, root)| {
                let profiles = &profiles;
                let base = t.path().join(format!("r{i}"));
                s.spawn(move || {
                    let (mut n, mut bad) = (0, Vec::new());
                    // Each suggestion is run once (text and JSON suggest the same).
                    let mut ran = std::collections::BTreeSet::new();
                    // doctor without a profile rates them all: once a root.
                    for format in ["text", "json"] {
                        let r = root.display().to_string();
                        let seen = run(&["doctor", "--root", &r, "--format", format], &[]);
                        for line in of(&seen, format == "json") {
                            n += 1;
                            bad.extend(refusal(&line, &seen.asked));
                        }
                    }
                    for (j, p) in profiles.iter().enumerate() {
                        for format in ["text", "json"] {
                            let dir = base.join(format!("{j}-{format}"));
                            std::fs::create_dir_all(&dir).unwrap();
                            for seen in scenario(root, p, format, &dir) {
                                for line in of(&seen, format == "json") {
                                    n += 1;
                                    bad.extend(refusal(&line, &seen.asked));
                                    let key = line.replace(" --format json", "");
                                    if ran.insert(key) {
                                        bad.extend(runs(&line, &seen.asked));
                                    }
                                }
                            }
                        }
                    }
                    (n, bad)
                })
            })
            .collect();
        jobs.into_iter().map(|j| j.join().unwrap()).collect()
    });
    let mut n: usize = results.iter().map(|r| r.0).sum();
    let mut bad: Vec<String> = results.into_iter().flat_map(|r| r.1).collect();
    for (j, p) in profiles.iter().enumerate() {
        for format in ["text", "json"] {
            let dir = t.path().join(format!("sweep-{j}-{format}"));
            let seen = sweep(&dir, p, format);
            let found = of(&seen, format == "json");
            assert!(
                found.iter().any(|l| l.starts_with("gdrprov apply")),
                "no remedy in `{}`:\n{}",
                seen.asked,
                String::from_utf8_lossy(&seen.out.stdout)
            );
            n += found.len();
            bad.extend(found.iter().filter_map(|l| refusal(l, &seen.asked)));
        }
    }
    bad.sort();
    bad.dedup();
    eprintln!("{n} suggested commands checked");
    assert!(
        n > 100,
        "only {n} suggestions seen: is the extraction right?"
    );
    assert!(
        bad.is_empty(),
        "{} do not run as printed:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

/// The `command` annotations of the shipped alert rules, rendered with a
/// node's `profiles` label (as promtool renders them in
/// tests/it/monitoring_rules.rs): each gdrprov command in them parses.
#[test]
fn every_alert_command_parses() {
    let rules =
        std::fs::read_to_string(repo().join("examples/prometheus/gdrprov-rules.yml")).unwrap();
    let doc: serde_json::Value = serde_saphyr::from_str(&rules).unwrap();
    let mut n = 0;
    let mut bad = Vec::new();
    for group in doc["groups"].as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let Some(command) = rule["annotations"]["command"].as_str() else {
                continue;
            };
            let rendered = command.replace(
                r#"{{ reReplaceAll "," " " $labels.profiles }}"#,
                "rdma-dmabuf legacy-peermem",
            );
            assert!(
                !rendered.contains("{{"),
                "{command}: a template this test does not render"
            );
            for part in rendered.split("; ") {
                // `CMD [on the node] [(note)]`.
                let cmd = part
                    .split(" (")
                    .next()
                    .unwrap()
                    .trim_end_matches(" on the node");
                if cmd.starts_with("gdrprov ") {
                    n += 1;
                    bad.extend(refusal(cmd, rule["alert"].as_str().unwrap_or("?")));
                }
            }
        }
    }
    assert!(n >= 10, "only {n} commands found");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
