//! The docs test (issue 45): every example in README.md and docs/*.md runs, or says in the doc
//! why it cannot run here.
//!
//! A fenced block is an example when its language is `sh`, `bash`, `shell` or `console`, or
//! when it is `yaml` (a profile, or a fragment marked as such). A fence without a language is
//! refused (say `text` for a block that is not an example). Each command of a shell block (a
//! line, with its `\` continuations; `#` comments dropped) runs with bash, in order, in a
//! sandbox made for each doc file: a copy of `examples/`, `target/release/gdrprov` linked to the
//! binary under test, and `gdrprov` on PATH as a shim that runs that binary
//!
//! - on the example root `examples/hosts/ubuntu-22.04-h100` (a copy: the block's `root:` names
//!   another) when the line gives no `--root` and the command reads a root;
//! - with `--no-exec` and `--yes` added to the commands that change a root (`apply`,
//!   `rollback`, `recover`, `commit`, `boot set-default|once`): the example roots hold no boot
//!   tools to run, and the test has no terminal to answer the question.
//!
//! In a `console` block, `$ ` starts a command and the lines up to the next one are its output
//! (standard output and error together), compared line by line: a line `...` stands for any
//! number of lines, `[..]` inside a line for any text. A changed output is then a change of
//! those lines in the doc; the failure prints the actual output to paste. Exit status 0 is
//! expected unless the block says otherwise.
//!
//! An HTML comment on the line(s) right above a fence says the rest, one entry a line:
//!
//! ```text
//! <!-- docs-test:
//!   not run: REASON                 the whole block (a real GPU, a real NIC, a running Slurm)
//!   not run "TEXT": REASON          its commands containing TEXT
//!   exit "TEXT": N                  a command containing TEXT exits N (verify's 3: not ready)
//!   root: NAME                      the example root of commands without --root
//!   tmp: /ABS/DIR                   that directory of the machine, replaced by a sandbox one
//!   path: /ABS/DIR = DIR            a path of an installed package, replaced by the checkout's
//!   env: NAME=VALUE                 set for the block's commands
//!   needs: TOOL                     its TOOL commands skipped, the reason printed, without TOOL
//!   file: NAME                      the block is a file the next examples use, written to NAME
//!   profile: NAME                   (yaml) a whole profile: `profile validate` and `plan` on
//!                                   examples/hosts/NAME must both accept it
//!   fragment: REASON                (yaml) part of a profile, not run
//! -->
//! ```
//!
//! Only `gdrprov`, `packer`, `promtool` and `printf` run, and no line naming a path of the
//! machine (`/...`, `~`, `$HOME`) runs: anything else must be marked, so the test never changes
//! the machine it runs on. It prints how many examples ran and how many are marked, and fails on
//! any example neither run nor marked, or run and failed. The sandbox's own path is taken out of
//! the output before it is compared. A second test checks that every relative link of those
//! docs names a file, and every anchor a heading.
// Test code: the sandbox is built with std::fs and the binary is run as a process; the house's
// doors (clippy.toml) are for the product's code.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const DEFAULT_ROOT: &str = "ubuntu-22.04-h100";
/// What may run: the binary under test, packer (validate), promtool (check rules), and printf to
/// write a file in the sandbox. Anything else is marked in the doc.
const RUNNABLE: &[&str] = &["gdrprov", "packer", "promtool", "printf"];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fenced block and the directive above it.
struct Block {
    file: String,
    line: usize,
    lang: String,
    body: Vec<String>,
    directive: Vec<String>,
}

/// The fenced blocks of one Markdown file (`lang` empty for a fence without a language).
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim_start();
        if let Some(info) = t.strip_prefix("```") {
            let indent = lines[i].len() - t.len();
            let lang = info.split_whitespace().next().unwrap_or("").to_string();
            let directive = directive_above(&lines, i);
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                let l = lines[i];
                body.push(
                    l.get(indent.min(l.len() - l.trim_start().len())..)
                        .unwrap_or(l)
                        .to_string(),
                );
                i += 1;
            }
            out.push(Block {
                file: file.to_string(),
                line: start + 1,
                lang,
                body,
                directive,
            });
        }
        i += 1;
    }
    out
}

/// The entries of a `<!-- docs-test: ... -->` comment ending on the line above the fence.
fn directive_above(lines: &[&str], fence: usize) -> Vec<String> {
    if fence == 0 || !lines[fence - 1].trim_end().ends_with("-->") {
        return Vec::new();
    }
    let mut start = fence - 1;
    while !lines[start].contains("<!--") {
        if start == 0 {
            return Vec::new();
        }
        start -= 1;
    }
    let joined = lines[start..fence].join("\n");
    let Some(rest) = joined.trim().strip_prefix("<!-- docs-test") else {
        return Vec::new();
    };
    let rest = rest
        .trim_start_matches(':')
        .trim_end()
        .trim_end_matches("-->");
    rest.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect()
}

/// The directive's entries by kind.
#[derive(Default)]
struct Directive {
    not_run: Option<String>,
    not_run_lines: Vec<(String, String)>,
    exits: Vec<(String, i32)>,
    root: Option<String>,
    tmp: Vec<String>,
    paths: Vec<(String, String)>,
    env: Vec<(String, String)>,
    needs: Vec<String>,
    file: Option<String>,
    profile: Option<String>,
    fragment: Option<String>,
}

fn quoted(entry: &str, key: &str) -> Option<(String, String)> {
    let rest = entry.strip_prefix(key)?.trim_start().strip_prefix('"')?;
    let (pat, rest) = rest.split_once('"')?;
    let value = rest.trim_start().strip_prefix(':')?.trim();
    Some((pat.to_string(), value.to_string()))
}

fn parse_directive(b: &Block) -> Result<Directive, String> {
    let mut d = Directive::default();
    for e in &b.directive {
        let plain = |k: &str| e.strip_prefix(k).map(|v| v.trim().to_string());
        if let Some((pat, why)) = quoted(e, "not run") {
            d.not_run_lines.push((pat, why));
        } else if let Some((pat, code)) = quoted(e, "exit") {
            let code = code
                .parse()
                .map_err(|_| format!("{}:{}: exit {code:?} is not a number", b.file, b.line))?;
            d.exits.push((pat, code));
        } else if let Some(v) = plain("not run:") {
            d.not_run = Some(v);
        } else if let Some(v) = plain("root:") {
            d.root = Some(v);
        } else if let Some(v) = plain("path:") {
            let (abs, rel) = v
                .split_once('=')
                .ok_or(format!("{}:{}: path: /ABS = DIR", b.file, b.line))?;
            d.paths
                .push((abs.trim().to_string(), rel.trim().to_string()));
        } else if let Some(v) = plain("tmp:") {
            d.tmp.push(v);
        } else if let Some(v) = plain("env:") {
            let (k, v) = v
                .split_once('=')
                .ok_or(format!("{}:{}: env: NAME=VALUE", b.file, b.line))?;
            d.env.push((k.to_string(), v.to_string()));
        } else if let Some(v) = plain("needs:") {
            d.needs.push(v);
        } else if let Some(v) = plain("file:") {
            d.file = Some(v);
        } else if let Some(v) = plain("profile:") {
            d.profile = Some(v);
        } else if let Some(v) = plain("fragment:") {
            d.fragment = Some(v);
        } else {
            return Err(format!(
                "{}:{}: unknown docs-test entry {e:?} (tests/docs.rs lists them)",
                b.file, b.line
            ));
        }
    }
    Ok(d)
}

/// One command of a shell block, with its expected output for a console block.
struct Cmd {
    text: String,
    expected: Option<Vec<String>>,
}

/// The commands of a shell block: `\` continuations joined, comments and blank lines dropped.
fn commands(b: &Block) -> Vec<Cmd> {
    let console = b.lang == "console";
    let mut out: Vec<Cmd> = Vec::new();
    let mut pending = String::new();
    for l in &b.body {
        if console && !l.starts_with("$ ") && pending.is_empty() {
            if let Some(c) = out.last_mut() {
                c.expected.get_or_insert_with(Vec::new).push(l.clone());
            }
            continue;
        }
        let l = if console {
            l.strip_prefix("$ ").unwrap_or(l)
        } else {
            l.as_str()
        };
        let t = l.trim();
        if pending.is_empty() && (t.is_empty() || t.starts_with('#')) {
            continue;
        }
        let t = strip_comment(t);
        if let Some(head) = t.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(&t);
        out.push(Cmd {
            text: std::mem::take(&mut pending),
            expected: console.then(Vec::new),
        });
    }
    out
}

/// A line without its trailing `# comment` (a `#` at the start of a word, outside quotes).
fn strip_comment(line: &str) -> String {
    let (mut quote, mut prev) = (None, ' ');
    for (i, c) in line.char_indices() {
        match (quote, c) {
            (None, '\'' | '"') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') if prev.is_whitespace() => return line[..i].trim_end().to_string(),
            _ => {}
        }
        prev = c;
    }
    line.trim_end().to_string()
}

/// The sandbox of one doc file: a copy of examples/, the binary, the shim.
struct Sandbox {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let status = Command::new("cp")
        .arg("-a")
        .arg(repo().join("examples"))
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gdrprov"));
    std::fs::create_dir_all(path.join("target/release")).unwrap();
    std::os::unix::fs::symlink(&bin, path.join("target/release/gdrprov")).unwrap();
    std::fs::create_dir_all(path.join(".bin")).unwrap();
    std::fs::create_dir_all(path.join("tmp")).unwrap();
    let shim = path.join(".bin/gdrprov");
    std::fs::write(&shim, SHIM.replace("@BIN@", &bin.display().to_string())).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox { _dir: dir, path }
}

/// `gdrprov` as the docs test runs it (the module comment says why each option is added).
const SHIM: &str = r#"#!/bin/bash
set -u
bin=@BIN@
words=(); root=0; skip=0; yes=0; noexec=0
for a in "$@"; do
  if [ "$skip" = 1 ]; then skip=0; continue; fi
  case $a in
    --root) root=1; skip=1 ;;
    --root=*) root=1 ;;
    --format|--color) skip=1 ;;
    --yes|-y) yes=1 ;;
    --no-exec) noexec=1 ;;
    -*) ;;
    *) words+=("$a") ;;
  esac
done
cmd=${words[0]:-}; sub=${words[1]:-}
extra=()
case $cmd in
  bench|fleet|profile|completions|man|ansible-module|help|'') ;;
  *) [ "$root" = 1 ] || extra+=(--root "$DOCS_TEST_ROOT") ;;
esac
changes=0
case $cmd in
  apply|rollback|recover|commit) changes=1 ;;
  boot) case $sub in set-default|once) changes=1 ;; esac ;;
esac
if [ "$changes" = 1 ]; then
  [ "$noexec" = 1 ] || extra+=(--no-exec)
  case $cmd in apply|rollback|recover) [ "$yes" = 1 ] || extra+=(--yes) ;; esac
fi
exec "$bin" "$@" "${extra[@]}"
"#;

/// Whether `tool` is on PATH.
fn installed(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[derive(Default)]
struct Tally {
    ran: usize,
    marked: Vec<String>,
    skipped: Vec<String>,
    failures: Vec<String>,
}

/// Why a command may not run here, when it names something other than the sandbox.
fn unrunnable(cmd: &str) -> Option<String> {
    let first = cmd.split_whitespace().next().unwrap_or("");
    if !RUNNABLE.contains(&first) {
        return Some(format!(
            "`{first}` is not one of the commands the test runs ({RUNNABLE:?})"
        ));
    }
    // One simple command (a redirection to a relative file allowed): a second command after
    // `;`, `&&`, `|` or inside `$(...)` would run unchecked.
    if let Some(op) = [";", "&&", "||", "|", "$(", "`", "<", "${"]
        .into_iter()
        .find(|op| cmd.contains(op))
    {
        return Some(format!(
            "`{op}` makes it more than one simple command of the sandbox (mark it)"
        ));
    }
    let words =
        || cmd.split(|c: char| c.is_whitespace() || c == '=' || c == '>' || c == '\'' || c == '"');
    if let Some(w) = words().find(|w| w.split('/').any(|part| part == "..")) {
        return Some(format!("it names {w}, outside the sandbox (mark it)"));
    }
    let abs = words().find(|w| w.starts_with('/') || w.starts_with('~') || w.starts_with("$HOME"));
    abs.map(|w| {
        format!("it names {w}, a path of the machine (mark it, or map it with `tmp:` or `path:`)")
    })
}

/// Compares output with the doc's expected lines (`...` any lines, `[..]` any text).
fn matches(expected: &[String], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((e, rest)) if e.trim() == "..." => {
            (0..=actual.len()).any(|k| matches(rest, &actual[k..]))
        }
        Some((e, rest)) => actual
            .split_first()
            .is_some_and(|(a, arest)| line_matches(e, a) && matches(rest, arest)),
    }
}

fn line_matches(expected: &str, actual: &str) -> bool {
    let parts: Vec<&str> = expected.trim_end().split("[..]").collect();
    let actual = actual.trim_end();
    if parts.len() == 1 {
        return parts[0] == actual;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !actual.starts_with(first) || !actual[first.len()..].ends_with(last) {
        return false;
    }
    let mut at = first.len();
    let end = actual.len() - last.len();
    for p in &parts[1..parts.len() - 1] {
        match actual[at..end].find(p) {
            Some(k) => at += k + p.len(),
            None => return false,
        }
    }
    at <= end
}

/// Runs one command in the sandbox; a failure's message, or None.
fn run(sb: &Sandbox, d: &Directive, root: &str, c: &Cmd) -> Option<String> {
    let mut text = c.text.clone();
    for (abs, rel) in &d.paths {
        text = text.replace(abs.as_str(), rel);
    }
    for (i, t) in d.tmp.iter().enumerate() {
        let dir = sb.path.join(format!("tmp/{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        text = text.replace(t.as_str(), &dir.display().to_string());
    }
    let out = Command::new("timeout")
        .args([
            "120",
            "bash",
            "-o",
            "pipefail",
            "-c",
            &format!("exec 2>&1\n{text}"),
        ])
        .current_dir(&sb.path)
        .env(
            "PATH",
            format!(
                "{}:{}",
                sb.path.join(".bin").display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .env("DOCS_TEST_ROOT", format!("examples/hosts/{root}"))
        .env("CHECKPOINT_DISABLE", "1")
        .env("PACKER_CACHE_DIR", sb.path.join("tmp/packer_cache"))
        .env("NO_COLOR", "1")
        .env_remove("GDRPROV_PAIR_TOKEN")
        .envs(d.env.iter().cloned())
        .output()
        .unwrap();
    let want = d
        .exits
        .iter()
        .find(|(p, _)| c.text.contains(p.as_str()))
        .map_or(0, |(_, n)| *n);
    let got = out.status.code().unwrap_or(-1);
    // The sandbox's own path is not part of what the doc shows.
    let stdout =
        String::from_utf8_lossy(&out.stdout).replace(&format!("{}/", sb.path.display()), "");
    let actual: Vec<&str> = stdout.lines().collect();
    let shown = || {
        actual
            .iter()
            .map(|l| format!("    {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if got != want {
        return Some(format!(
            "exit {got}, the doc expects {want}; output:\n{}",
            shown()
        ));
    }
    if let Some(expected) = &c.expected {
        let trimmed: Vec<String> = expected.iter().map(|l| l.trim_end().to_string()).collect();
        if !matches(&trimmed, &actual) {
            return Some(format!(
                "output differs from the doc's; the doc shows:\n{}\nthe command printed (paste it, keeping `...` and `[..]` where the output varies):\n{}",
                expected.iter().map(|l| format!("    {l}")).collect::<Vec<_>>().join("\n"),
                shown()
            ));
        }
    }
    None
}

/// A yaml block: a profile validated and planned, a file written, or a marked fragment.
fn yaml_block(sb: &Sandbox, b: &Block, d: &Directive, tally: &mut Tally, at: &str) {
    if let Some(name) = &d.file {
        std::fs::write(sb.path.join(name), b.body.join("\n") + "\n").unwrap();
        tally.ran += 1;
    } else if let Some(root) = &d.profile {
        let file = sb.path.join(format!("profile-{}.yaml", b.line));
        std::fs::write(&file, b.body.join("\n") + "\n").unwrap();
        let f = file.display().to_string();
        for text in [
            format!("gdrprov profile validate {f}"),
            format!("gdrprov plan {f} --root examples/hosts/{root}"),
        ] {
            let c = Cmd {
                text: text.clone(),
                expected: None,
            };
            if let Some(why) = run(sb, &Directive::default(), root, &c) {
                tally
                    .failures
                    .push(format!("{at}: the profile example: `{text}`: {why}"));
            }
        }
        tally.ran += 1;
    } else if let Some(why) = d.fragment.as_ref().or(d.not_run.as_ref()) {
        tally.marked.push(format!("{at}: {why}"));
    } else {
        tally.failures.push(format!(
            "{at}: a yaml example neither run nor marked: say `profile: ROOT`, `file: NAME` or `fragment: REASON` above it"
        ));
    }
}

fn shell_block(sb: &Sandbox, b: &Block, d: &Directive, tally: &mut Tally, at: &str) {
    let root = d.root.as_deref().unwrap_or(DEFAULT_ROOT);
    if let Some(name) = &d.file {
        std::fs::write(sb.path.join(name), b.body.join("\n") + "\n").unwrap();
    }
    for c in commands(b) {
        let line = format!("{at}: `{}`", c.text);
        if let Some(why) = &d.not_run {
            tally.marked.push(format!("{line}: {why}"));
            continue;
        }
        if let Some((_, why)) = d
            .not_run_lines
            .iter()
            .find(|(p, _)| c.text.contains(p.as_str()))
        {
            tally.marked.push(format!("{line}: {why}"));
            continue;
        }
        let first = c.text.split_whitespace().next().unwrap_or("");
        if let Some(tool) = d.needs.iter().find(|t| *t == first && !installed(t)) {
            tally
                .skipped
                .push(format!("{line}: SKIPPED: {tool} is not installed"));
            continue;
        }
        let mut text = c.text.clone();
        for t in &d.tmp {
            text = text.replace(t.as_str(), "tmp");
        }
        for (abs, rel) in &d.paths {
            text = text.replace(abs.as_str(), rel);
        }
        if let Some(why) = unrunnable(&text) {
            tally
                .failures
                .push(format!("{line}: neither run nor marked: {why}"));
            continue;
        }
        tally.ran += 1;
        if let Some(why) = run(sb, d, root, &c) {
            tally.failures.push(format!("{line}: {why}"));
        }
    }
}

/// README.md and docs/*.md, in name order.
fn doc_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    files.sort();
    files.insert(0, "README.md".into());
    files
}

#[test]
fn every_example_in_the_docs_runs_or_is_marked() {
    let mut tally = Tally::default();
    let mut per_file = BTreeMap::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(repo().join(&file)).unwrap();
        let found = blocks(&file, &text);
        let sb = sandbox();
        let before = tally.ran;
        for b in &found {
            let at = format!("{}:{}", b.file, b.line);
            let d = match parse_directive(b) {
                Ok(d) => d,
                Err(e) => {
                    tally.failures.push(e);
                    continue;
                }
            };
            match b.lang.as_str() {
                _ if d.file.is_some() && !matches!(b.lang.as_str(), "sh" | "bash" | "shell" | "console") => yaml_block(&sb, b, &d, &mut tally, &at),
                "sh" | "bash" | "shell" | "console" => shell_block(&sb, b, &d, &mut tally, &at),
                "yaml" | "yml" => yaml_block(&sb, b, &d, &mut tally, &at),
                "" => tally.failures.push(format!(
                    "{at}: a fence without a language: write ```sh for a shell example, ```text for anything else"
                )),
                _ => {}
            }
        }
        per_file.insert(file, tally.ran - before);
    }
    println!(
        "docs test: {} example(s) ran, {} marked as not runnable here, {} skipped",
        tally.ran,
        tally.marked.len(),
        tally.skipped.len()
    );
    for (f, n) in &per_file {
        println!("  ran {n:3} in {f}");
    }
    for m in &tally.marked {
        println!("  marked: {m}");
    }
    for s in &tally.skipped {
        println!("  {s}");
    }
    assert!(
        tally.failures.is_empty(),
        "{} example(s) failed or are neither run nor marked:\n{}",
        tally.failures.len(),
        tally.failures.join("\n\n")
    );
}

#[test]
fn output_patterns_match_as_documented() {
    let e = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches(&e(&["a", "...", "c"]), &["a", "b", "b", "c"]));
    assert!(matches(&e(&["a", "..."]), &["a"]));
    assert!(!matches(&e(&["a", "c"]), &["a", "b", "c"]));
    assert!(line_matches(
        "Best fit: [..] (x)",
        "Best fit: rdma-dmabuf (x)"
    ));
    assert!(!line_matches("Best fit: [..] (x)", "Best fit: rdma-dmabuf"));
    assert!(line_matches("[..]", "anything"));
}

/// Only the allowed commands run, and none naming a path of the machine.
#[test]
fn nothing_outside_the_sandbox_runs() {
    assert!(unrunnable("gdrprov plan rdma-dmabuf --root examples/hosts/x").is_none());
    assert!(unrunnable("gdrprov verify x --textfile /var/lib/x.prom").is_some());
    assert!(unrunnable("gdrprov verify x --textfile=/var/lib/x.prom").is_some());
    assert!(unrunnable("gdrprov apply x --root $HOME/img").is_some());
    assert!(unrunnable("gdrprov report > ~/x").is_some());
    assert!(unrunnable("install -m 755 a b").is_some());
    assert!(unrunnable("gdrprov plan x; rm -rf y").is_some());
    assert!(unrunnable("gdrprov plan x && cat y").is_some());
    assert!(unrunnable("gdrprov man | man -l -").is_some());
    assert!(unrunnable("gdrprov plan $(cat y)").is_some());
    assert!(unrunnable("gdrprov apply x --root ../..").is_some());
    assert!(unrunnable("gdrprov apply x --root ${HOME}").is_some());
    assert!(unrunnable("gdrprov fleet sweep report r --format html > sweep.html").is_none());
    assert_eq!(
        strip_comment("gdrprov plan x   # a '#' comment"),
        "gdrprov plan x"
    );
    assert_eq!(
        strip_comment("printf '# not a comment'"),
        "printf '# not a comment'"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside fences), with GitHub's `-1`, `-2` for repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut fenced = false;
    for l in text.lines() {
        if l.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !l.starts_with('#') {
            continue;
        }
        let a = anchor(l.trim_start_matches('#'));
        let n = seen.entry(a.clone()).or_insert(0);
        out.push(if *n == 0 { a } else { format!("{a}-{n}") });
        *n += 1;
    }
    out
}

/// Every relative link of README.md and docs/*.md names a file of the tree, and an anchor in a
/// Markdown file names one of its headings (commands.md's sections moved text to other docs).
#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let path = repo().join(&file);
        let text = std::fs::read_to_string(&path).unwrap();
        let dir = path.parent().unwrap().to_path_buf();
        for (i, l) in text.lines().enumerate() {
            for part in l.split("](").skip(1) {
                let Some(target) = part.split(')').next() else {
                    continue;
                };
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                let (file_part, frag) = target.split_once('#').unwrap_or((target, ""));
                let linked = if file_part.is_empty() {
                    path.clone()
                } else {
                    dir.join(file_part)
                };
                let at = format!("{file}:{}: ({target})", i + 1);
                if !linked.exists() {
                    broken.push(format!("{at}: no such file"));
                    continue;
                }
                if frag.is_empty() || linked.extension().is_none_or(|e| e != "md") {
                    continue;
                }
                let heads = anchors(&std::fs::read_to_string(&linked).unwrap());
                if !heads.iter().any(|h| h == frag) {
                    broken.push(format!("{at}: no heading with the anchor #{frag}"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken link(s):\n{}",
        broken.len(),
        broken.join("\n")
    );
}
