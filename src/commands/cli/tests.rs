//! The command line checked as a whole: clap's own consistency checks, help
//! on every option, and one spelling of every command's name.

use super::shared;
use crate::names;

/// Every command clap knows, as its words, with its clap command.
fn leaves(cmd: &clap::Command, prefix: &str, out: &mut Vec<(String, clap::Command)>) {
    // `help` is clap's own (`gdrprov help plan`), added by `build`.
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let path = if prefix.is_empty() {
            sub.get_name().to_string()
        } else {
            format!("{prefix} {}", sub.get_name())
        };
        if sub.has_subcommands() {
            leaves(sub, &path, out);
        } else {
            out.push((path, sub.clone()));
        }
    }
}

fn all_leaves() -> Vec<(String, clap::Command)> {
    let mut cmd = shared::command();
    cmd.build();
    let mut out = Vec::new();
    leaves(&cmd, "", &mut out);
    out
}

#[test]
fn clap_finds_nothing_wrong() {
    shared::command().debug_assert();
}

/// Every argument of every command, the global ones included, says what it is for.
#[test]
fn every_option_has_help() {
    let mut cmd = shared::command();
    cmd.build();
    let mut missing = Vec::new();
    let mut seen = 0;
    let mut check = |path: &str, c: &clap::Command| {
        for arg in c.get_arguments() {
            if matches!(arg.get_id().as_str(), "help" | "version") {
                continue;
            }
            seen += 1;
            let help = arg
                .get_help()
                .or(arg.get_long_help())
                .map(|h| h.to_string());
            if help.is_none_or(|h| h.trim().is_empty()) {
                missing.push(format!("gdrprov {path}: {}", arg.get_id()));
            }
        }
    };
    check("", &cmd);
    for (path, c) in all_leaves() {
        check(&path, &c);
    }
    assert!(
        seen > 100,
        "only {seen} arguments found: the walk misses some"
    );
    assert!(
        missing.is_empty(),
        "options without help text:\n{}",
        missing.join("\n")
    );
}

/// The walk above sees an argument without help (the test can fail).
#[test]
fn a_missing_help_is_seen() {
    let c = clap::Command::new("t").arg(clap::Arg::new("bare").long("bare"));
    let arg = c.get_arguments().next().map(|a| a.get_help().is_none());
    assert_eq!(arg, Some(true));
}

/// An argv that clap accepts for the command at PATH: every required
/// argument given a value it parses.
fn argv_for(path: &str, c: &clap::Command) -> Vec<String> {
    let mut argv = vec!["gdrprov".to_string()];
    argv.extend(path.split(' ').map(str::to_string));
    for arg in c.get_arguments().filter(|a| a.is_required_set()) {
        let value = arg
            .get_possible_values()
            .first()
            .map(|v| v.get_name().to_string())
            .unwrap_or_else(|| "1".into());
        match arg.get_long() {
            Some(long) => argv.extend([format!("--{long}"), value]),
            None => argv.push(value),
        }
    }
    // `bench pair` needs a peer or --listen; neither is `required`.
    if path == names::BENCH_PAIR {
        argv.push("peer".into());
    }
    // `verify` needs a profile or --in-job; neither is `required`.
    if path == names::VERIFY {
        argv.push("p".into());
    }
    argv
}

/// The names in src/names.rs are clap's commands, and `Command::name` gives
/// each command its own.
#[test]
fn every_command_is_named_once() {
    let leaves = all_leaves();
    let mut clap_names: Vec<&str> = leaves.iter().map(|(p, _)| p.as_str()).collect();
    clap_names.sort_unstable();
    let mut ours: Vec<&str> = names::ALL.to_vec();
    ours.sort_unstable();
    assert_eq!(clap_names, ours, "src/names.rs and the clap types disagree");
    for (path, c) in &leaves {
        let argv = argv_for(path, c);
        let cli = match shared::try_parse_from(&argv) {
            Ok(cli) => cli,
            Err(e) => panic!("{argv:?}: {e}"),
        };
        assert_eq!(&cli.command.name(), path, "{argv:?}");
    }
    let cli =
        shared::try_parse_from(["gdrprov", "apply", "--dry-run", "p"]).map(|c| c.command.name());
    assert_eq!(cli.ok().as_deref(), Some(names::PLAN));
}

/// The `--format` values a command's rendered help lists (`Possible values:`
/// with their help, or `[possible values: ...]`), none when it has no `--format`.
fn formats_in_help(help: &str) -> Vec<String> {
    let mut lines = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--format"));
    let Some(_) = lines.next() else {
        return Vec::new();
    };
    let section: Vec<&str> = lines
        .take_while(|l| !l.trim_start().starts_with('-') || l.trim_start().starts_with("- "))
        .collect();
    let mut out = Vec::new();
    for l in &section {
        let l = l.trim();
        if let Some(v) = l.strip_prefix("- ") {
            out.push(v.split(':').next().unwrap_or(v).trim().to_string());
        } else if let Some(list) = l.strip_prefix("[possible values: ") {
            out.extend(list.trim_end_matches(']').split(", ").map(str::to_string));
        }
    }
    out
}

/// Whether ARGV parses, the shared option before the command as well as after it.
fn takes(path: &str, c: &clap::Command, opt: &[&str]) -> (bool, bool) {
    let argv = argv_for(path, c);
    let after: Vec<String> = argv
        .iter()
        .cloned()
        .chain(opt.iter().map(|s| s.to_string()))
        .collect();
    let mut before = vec![argv[0].clone()];
    before.extend(opt.iter().map(|s| s.to_string()));
    before.extend(argv[1..].iter().cloned());
    (
        shared::try_parse_from(&after).is_ok(),
        shared::try_parse_from(&before).is_ok(),
    )
}

/// Every command's help lists exactly the shared options it takes and the
/// `--format` values it writes, and the parser takes those and refuses the
/// rest, before the command or after it (issue 45: `--root` was listed on
/// every command and taken by the fleet commands, which ignored it; every
/// help said `--format prometheus` was "`verify` only", and `fleet sweep
/// report` took it). The help is read as rendered, as a person reads it.
#[test]
fn help_says_what_each_command_takes() {
    use clap::ValueEnum;
    let all_formats: Vec<String> = super::values::FormatArg::value_variants()
        .iter()
        .filter_map(|v| v.to_possible_value())
        .map(|v| v.get_name().to_string())
        .collect();
    let mut wrong = Vec::new();
    for (path, mut c) in all_leaves() {
        let help = c.render_long_help().to_string();
        let lists = |o: &str| {
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{o} <")))
        };
        for (opt, value) in [("--root", "/"), ("--color", "never")] {
            let (after, before) = takes(&path, &c, &[opt, value]);
            if (after, before) != (lists(opt), lists(opt)) {
                wrong.push(format!(
                    "gdrprov {path}: help lists {opt}: {}, parsed after/before: {after}/{before}",
                    lists(opt)
                ));
            }
        }
        let listed = formats_in_help(&help);
        for f in &all_formats {
            let (after, before) = takes(&path, &c, &["--format", f]);
            let shown = listed.contains(f);
            if (after, before) != (shown, shown) {
                wrong.push(format!("gdrprov {path}: help lists --format {f}: {shown}, parsed after/before: {after}/{before}"));
            }
        }
        // What the issue names, said outright.
        let root_expected = ![
            "bench ",
            "fleet ",
            "profile ",
            "completions",
            "man",
            "ansible-module",
        ]
        .iter()
        .any(|p| path.starts_with(p));
        if lists("--root") != root_expected {
            wrong.push(format!(
                "gdrprov {path}: --root listed: {}",
                lists("--root")
            ));
        }
        let prometheus = [names::VERIFY, names::FLEET_SWEEP_REPORT].contains(&path.as_str());
        let html =
            [names::FLEET_SWEEP_REPORT, names::FLEET_SWEEP_SIMULATE].contains(&path.as_str());
        if listed.contains(&"prometheus".to_string()) != prometheus
            || listed.contains(&"html".to_string()) != html
        {
            wrong.push(format!("gdrprov {path}: --format {listed:?}"));
        }
        // No help names the commands a value is for: each lists its own.
        if help.contains("` only") {
            wrong.push(format!("gdrprov {path}: help says \"... only\""));
        }
    }
    // The top level lists none of them: each command does.
    let top = shared::command().render_long_help().to_string();
    for o in shared::OPTIONS {
        if top
            .lines()
            .any(|l| l.trim_start().starts_with(&format!("{o} <")))
        {
            wrong.push(format!(
                "gdrprov --help lists {o} as if every command took it"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "help and parser disagree:\n{}",
        wrong.join("\n")
    );
}

/// The walk above reads a rendered `--format` with its values.
#[test]
fn formats_are_read_from_rendered_help() {
    let help = "Options:\n      --format <FORMAT>\n          Output\n\n          Possible values:\n          - text: For people\n          - html: One page\n\n      --x\n          X\n";
    assert_eq!(formats_in_help(help), ["text", "html"]);
    let help = "      --format <FORMAT>\n          Output\n          [possible values: text, json]\n  -h, --help\n";
    assert_eq!(formats_in_help(help), ["text", "json"]);
    assert!(formats_in_help("  -h, --help\n").is_empty());
}
