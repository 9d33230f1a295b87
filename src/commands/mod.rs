//! The commands: the command line's types (src/commands/cli/), one file per
//! command, and the errors. Each command turns its clap arguments into what it acts on (an
//! `ops::Target` or an operations request, src/ops.rs, made from `--root`
//! and its options) and prints through the one output sink
//! (`output::Output`, which knows the format and colour only).

pub mod ansible;
mod apply;
mod ask;
pub mod bench;
pub mod bench_node;
pub mod boot;
pub mod cli;
mod doctor;
mod history;
pub mod inventory;
mod journal;
pub mod manual;
mod plan;
mod profile;
pub mod recheck;
mod recover;
mod rollback;
pub mod sweep;
mod verify;

use crate::commands::cli::{Cli, Command};
use crate::error::exit;
use crate::error::{Error, Result};
use crate::names;
use crate::ops::Target;
use crate::output::{Format, Output};
use clap::Parser;
use std::path::PathBuf;

/// Parses the arguments and runs the command; returns the exit code: the
/// command's, or 1 when its output could not be written (`> /dev/full`).
pub fn main() -> i32 {
    let code = run_main();
    match crate::output::stdout_finish() {
        Some(e) => {
            crate::output::error_line(&e);
            exit::ERROR
        }
        None => code,
    }
}

fn run_main() -> i32 {
    // Ansible runs a binary module as `MODULE ARGS_FILE`.
    if let Some(path) = crate::commands::ansible::args_file_from_argv() {
        return crate::commands::ansible::main(&path);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let out = Output {
        format: cli.format,
        color: cli.color,
    };
    match run(&cli, &out) {
        Ok(code) => code,
        Err(e) => {
            out.error(&cli.command.name(), &cli.root, &e);
            // A refusal for an unfinished generation names it already.
            if let Some(n) = crate::ops::unfinished_notice(&cli.root)
                .filter(|_| !e.to_string().contains("gdrprov recover"))
            {
                out.note(&n);
            }
            exit::ERROR
        }
    }
}

/// A usage error from clap: its message on stderr, and under `--format
/// json` the JSON error object too. Exit 1 like every other error (2 means
/// "changes pending").
fn usage_error(e: &clap::Error) -> i32 {
    crate::output::clap_message(e);
    if !e.use_stderr() {
        return exit::OK; // --help, --version
    }
    // args_os: an argument that is not UTF-8 is what clap refused here.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    if wants_json(&args) {
        let out = Output {
            format: Format::Json,
            color: crate::output::Color::Never,
        };
        let message = if e.kind() == clap::error::ErrorKind::ValueValidation {
            crate::output::value_message(e)
        } else {
            usage_message(&e.render().to_string())
        };
        out.error_document(&command_in(&args), &root_in(&args), "usage", &message);
    }
    exit::ERROR
}

/// clap's message without its usage lines: the error and what it names
/// (`the following required arguments were not provided: <PROFILE>...`).
fn usage_message(rendered: &str) -> String {
    let said: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    if said.is_empty() {
        return "usage error".into();
    }
    said.join(" ").trim_start_matches("error: ").to_string()
}

/// The global options that take a value (`--root DIR`), as clap's tree
/// declares them, for reading an argv clap refused.
fn valued_globals() -> Vec<String> {
    use clap::CommandFactory;
    Cli::command()
        .get_arguments()
        .filter(|a| a.get_action().takes_values())
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// `--format json` (or `--format=json`) somewhere in an argv clap refused.
fn wants_json(args: &[String]) -> bool {
    args.iter().any(|a| a == "--format=json")
        || args
            .windows(2)
            .any(|w| w[0] == "--format" && w[1] == "json")
}

/// `--root DIR` in an argv clap refused (default `/`).
fn root_in(args: &[String]) -> PathBuf {
    for (i, a) in args.iter().enumerate() {
        if let Some(v) = a.strip_prefix("--root=") {
            return PathBuf::from(v);
        }
        if a == "--root" {
            if let Some(v) = args.get(i + 1) {
                return PathBuf::from(v);
            }
        }
    }
    PathBuf::from("/")
}

/// The command words of an argv clap refused (`boot set-default`), as far as
/// they can be told.
fn command_in(args: &[String]) -> String {
    let valued = valued_globals();
    let mut words = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a.starts_with('-') {
            skip = valued.iter().any(|v| v == a);
            continue;
        }
        words.push(a.as_str());
        if !(words.len() == 1 && crate::names::is_group(a)) {
            break;
        }
    }
    words.join(" ")
}

/// Runs the command: each handler gets the output sink and what it acts
/// on (a target, or a request, made here from the command line).
pub fn run(cli: &Cli, out: &Output) -> Result<i32> {
    if cli.format == Format::Prometheus
        && !matches!(cli.command, Command::Verify(_) | Command::Fleet(_))
    {
        return Err(Error::Usage(
            "--format prometheus is only for `gdrprov verify` (metrics of its checks); use text or json here".into(),
        ));
    }
    if cli.format == Format::Html && !matches!(cli.command, Command::Fleet(_)) {
        return Err(Error::Usage(
            "--format html is only for `gdrprov fleet sweep report` and `simulate` (the sweep as a map); use text or json here".into(),
        ));
    }
    let root = &cli.root;
    match &cli.command {
        Command::Plan(a) => plan::run(
            out,
            &a.target.to_target(root),
            &a.profiles,
            a.detailed_exitcode,
            false,
        ),
        Command::Apply(a) if a.dry_run => plan::run(
            out,
            &a.target.to_target(root),
            &a.profiles,
            a.detailed_exitcode,
            a.trial,
        ),
        Command::Apply(a) => apply::run(out, &a.request(root), a.yes.yes),
        Command::Rollback(a) => rollback::run(out, &a.request(root), a.yes.yes),
        Command::Recover(a) => recover::run(out, &a.request(root), a.yes.yes),
        Command::Verify(a) => verify::run(out, &a.request(root), a),
        Command::History => history::run(out, &Target::read_only(root.clone(), None)),
        Command::Journal(cli::JournalCommand::Check) => {
            journal::check(out, &Target::read_only(root.clone(), None))
        }
        Command::Profile(p) => profile::run(out, root, p),
        Command::Bench(b) => {
            crate::ops::refuse_other_root(
                root,
                names::BENCH,
                "run it on the host itself without --root",
            )?;
            Ok(bench::run_bench(b, out)?)
        }
        Command::Fleet(f) => sweep::run(out, f),
        Command::Inventory(a) => inventory::run(
            out,
            &Target::probing(root.clone(), a.cpu.cpu_vendor),
            a.snapshot.as_deref(),
        ),
        Command::Doctor(a) => doctor::run(
            out,
            &Target::probing(root.clone(), a.cpu.cpu_vendor),
            &a.profiles,
            a.nccl_log.as_deref(),
        ),
        Command::Boot(b) => boot::boot(out, &b.target(root), b),
        Command::Commit(a) => boot::commit(out, &a.target.to_target(root)),
        Command::AnsibleModule { args_file } => Ok(ansible::main(args_file)),
        Command::Completions { shell } => manual::completions(out, *shell),
        Command::Man => manual::man(out),
        Command::Recheck(a) => recheck::run(out, &Target::read_only(root.clone(), None), a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clap_error(args: &[&str]) -> String {
        match Cli::try_parse_from(args) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => e.render().to_string(),
        }
    }

    #[test]
    fn a_usage_message_keeps_what_clap_names() {
        assert_eq!(
            usage_message(&clap_error(&["gdrprov", "plan"])),
            "the following required arguments were not provided: <PROFILE>..."
        );
        assert_eq!(
            usage_message(&clap_error(&["gdrprov", "boot", "once"])),
            "the following required arguments were not provided: <ENTRY>"
        );
        let m = usage_message(&clap_error(&["gdrprov", "history", "--bogus"]));
        assert!(m.starts_with("unexpected argument '--bogus' found"), "{m}");
        assert!(!m.contains("Usage:") && !m.contains('\n'), "{m}");
        assert_eq!(usage_message(""), "usage error");
    }

    #[test]
    fn argv_words_clap_refused() {
        let args: Vec<String> = ["--root", "/r", "boot", "once", "--format=json"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(command_in(&args), "boot once");
        assert_eq!(root_in(&args), PathBuf::from("/r"));
        assert!(wants_json(&args));
    }

    #[test]
    fn every_global_value_is_skipped_not_taken_for_a_command() {
        // From clap's tree: a global option added later is skipped too.
        let valued = valued_globals();
        for o in ["--root", "--format", "--color"] {
            assert!(valued.iter().any(|v| v == o), "{o} in {valued:?}");
        }
        for v in &valued {
            let args: Vec<String> = [v.as_str(), "json", "journal", "check"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            assert_eq!(command_in(&args), "journal check", "{v}");
        }
    }
}
