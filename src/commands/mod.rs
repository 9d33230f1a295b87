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
use crate::error::Result;
use crate::ops::Target;
use crate::output::Output;

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
    let cli = match cli::usage::parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let out = Output {
        format: cli.format,
        color: cli.color,
        full_diff: cli.command.full_diff(),
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

/// Runs the command: each handler gets the output sink and what it acts
/// on (a target, or a request, made here from the command line).
pub fn run(cli: &Cli, out: &Output) -> Result<i32> {
    // Each command takes only the formats it writes and `--root` only where
    // it reads one: the parser refuses the rest (src/commands/cli/shared.rs).
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
        Command::Bench(b) => Ok(bench::run_bench(b, out)?),
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
