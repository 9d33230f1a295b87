//! The commands: parsing the command line, one file per command, and the
//! errors. Each command turns its clap arguments into an operations request
//! (src/ops.rs) and prints through the one output sink (`output::Output`).

pub mod ansible;
mod apply;
mod ask;
pub mod bench;
pub mod boot;
pub mod cli;
pub mod fleet;
mod history;
pub mod inventory;
mod plan;
mod profile;
mod rollback;
pub mod sweep;
mod verify;

use crate::commands::cli::{Cli, Command};
use crate::error::{Error, Result};
use crate::exit;
use crate::output::{self, Format, Output};
use clap::Parser;
use std::io::Write;
use std::path::PathBuf;

/// Parses the arguments and runs the command; returns the exit code.
pub fn main() -> i32 {
    // Ansible runs a binary module as `MODULE ARGS_FILE`.
    if let Some(path) = crate::commands::ansible::args_file_from_argv() {
        return crate::commands::ansible::main(&path);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let out = Output {
        root: cli.root.clone(),
        format: cli.format,
        color: cli.color,
    };
    match run(&cli, &out) {
        Ok(code) => code,
        Err(e) => {
            let _ = std::io::stdout().flush();
            out.error(&cli.command.name(), &e);
            exit::ERROR
        }
    }
}

/// A usage error from clap: its message on stderr, and under `--format
/// json` the JSON error object too. Exit 1 like every other error (2 means
/// "changes pending").
fn usage_error(e: &clap::Error) -> i32 {
    let _ = e.print();
    if !e.use_stderr() {
        return exit::OK; // --help, --version
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    if wants_json(&args) {
        let rendered = e.render().to_string();
        let message = rendered
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("usage error")
            .trim_start_matches("error: ");
        println!(
            "{}",
            output::error_json(&command_in(&args), &root_in(&args), "usage", message)
        );
    }
    exit::ERROR
}

/// Options that take a value, for reading an argv clap refused.
const VALUED: &[&str] = &["--root", "--format", "--color"];

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
    let mut words = Vec::new();
    let mut skip = false;
    for a in args {
        if skip {
            skip = false;
            continue;
        }
        if a.starts_with('-') {
            skip = VALUED.contains(&a.as_str());
            continue;
        }
        words.push(a.as_str());
        if !(words.len() == 1 && matches!(a.as_str(), "profile" | "boot" | "bench" | "fleet")) {
            break;
        }
    }
    words.join(" ")
}

pub fn run(cli: &Cli, out: &Output) -> Result<i32> {
    if cli.format == Format::Prometheus
        && !matches!(cli.command, Command::Verify(_) | Command::Fleet(_))
    {
        return Err(Error::Usage(
            "--format prometheus is only for `gdrprov verify` (metrics of its checks); use text or json here".into(),
        ));
    }
    match &cli.command {
        Command::Plan(a) => plan::run(out, &a.profiles, &a.target, a.detailed_exitcode, false),
        Command::Apply(a) if a.dry_run => {
            plan::run(out, &a.profiles, &a.target, a.detailed_exitcode, a.trial)
        }
        Command::Apply(a) => apply::run(out, a),
        Command::Rollback(a) => rollback::run(out, a),
        Command::Verify(a) => verify::run(out, a),
        Command::History => history::run(out),
        Command::Profile(p) => profile::run(out, p),
        Command::Bench(b) => {
            crate::ops::refuse_other_root(
                &cli.root,
                "bench",
                "run it on the host itself without --root",
            )?;
            let format = if cli.format == Format::Json {
                crate::commands::bench::BenchFormat::Json
            } else {
                crate::commands::bench::BenchFormat::Text
            };
            Ok(crate::commands::bench::run_bench(b, format)?)
        }
        Command::Fleet(f) => crate::commands::sweep::run(out, f),
        Command::Inventory(a) => {
            crate::commands::inventory::run(out, a.snapshot.as_deref(), a.cpu_vendor)
        }
        Command::Doctor(a) => {
            crate::checks::doctor::run(out, &a.profiles, a.nccl_log.as_deref(), a.cpu_vendor)
        }
        Command::Boot(b) => crate::commands::boot::boot(out, b),
        Command::Commit(a) => crate::commands::boot::commit(out, &a.target.to_target(&cli.root)),
        Command::AnsibleModule { args_file } => Ok(crate::commands::ansible::main(args_file)),
        Command::Completions { shell } => crate::commands::fleet::completions(*shell),
        Command::Man => crate::commands::fleet::man(),
    }
}
