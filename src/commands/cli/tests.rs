//! The command line checked as a whole: clap's own consistency checks, help
//! on every option, and one spelling of every command's name.

use super::Cli;
use crate::names;
use clap::{CommandFactory, Parser};

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
    let mut cmd = Cli::command();
    cmd.build();
    let mut out = Vec::new();
    leaves(&cmd, "", &mut out);
    out
}

#[test]
fn clap_finds_nothing_wrong() {
    Cli::command().debug_assert();
}

/// Every argument of every command, the global ones included, says what it is for.
#[test]
fn every_option_has_help() {
    let mut cmd = Cli::command();
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
        let cli = match Cli::try_parse_from(&argv) {
            Ok(cli) => cli,
            Err(e) => panic!("{argv:?}: {e}"),
        };
        assert_eq!(&cli.command.name(), path, "{argv:?}");
    }
    let cli = Cli::try_parse_from(["gdrprov", "apply", "--dry-run", "p"]).map(|c| c.command.name());
    assert_eq!(cli.ok().as_deref(), Some(names::PLAN));
}
