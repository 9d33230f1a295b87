//! The options several commands take, `--root`, `--format` and `--color`,
//! each on exactly the commands that take it (issue 45): one table
//! (`names::takes`) says which command takes which, and with which formats; the
//! parser ([`command`]) adds them to those commands alone, so each command's
//! help lists what it takes (and the values it accepts) and clap refuses the
//! rest. Written before the command (`gdrprov --format json plan ...`, as
//! scripts do) they are moved after it ([`hoist`]) and judged there.

use super::values::{self, ColorArg, FormatArg};
use super::Cli;
use crate::names;
use crate::output::{Color, Format};
use clap::builder::{EnumValueParser, PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Arg, CommandFactory, FromArgMatches, ValueEnum};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// The shared options, as they are written.
pub const OPTIONS: [&str; 3] = ["--root", "--format", "--color"];

pub use crate::names::{takes, RootUse as Root, Takes};

/// Why a command takes no `OPTION`, and the fix, for the refusal.
pub fn why_not(option: &str, path: &str) -> String {
    let group = path.split(' ').next().unwrap_or(path);
    let why = match (option, group) {
        ("--root", "bench") => "it measures this machine's own GPUs and RDMA devices: run it on the host itself, without --root",
        ("--root", "fleet") => "it reads the files named on its command line, not a root: drop --root",
        ("--root", "profile") => "profiles are the built-in ones or files named on the command line, not read from a root: drop --root",
        ("--root", "ansible-module") => "the root is the module's `root` argument: drop --root",
        ("--root", _) => "it reads no root: drop --root",
        ("--format", _) => "it writes one fixed output: drop --format",
        ("--color", _) => "it shows no diff (plan, apply, rollback, recover, commit and boot set-default do): drop --color",
        _ => "drop it",
    };
    format!("`gdrprov {path}` takes no {option}: {why}")
}

/// `--format`'s parser for a command: only its formats (their words), each
/// with its help.
#[derive(Clone)]
struct Formats(&'static [&'static str]);

impl Formats {
    fn values(&self) -> Vec<PossibleValue> {
        FormatArg::value_variants()
            .iter()
            .filter_map(|f| f.to_possible_value())
            .filter(|v| self.0.contains(&v.get_name()))
            .collect()
    }
}

impl TypedValueParser for Formats {
    type Value = Format;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&Arg>,
        value: &OsStr,
    ) -> Result<Format, clap::Error> {
        // One of this command's words (clap's own refusal lists them), then its enum.
        let word = PossibleValuesParser::new(self.values()).parse_ref(cmd, arg, value)?;
        let f = EnumValueParser::<FormatArg>::new().parse_ref(cmd, arg, OsStr::new(&word))?;
        Ok(f.into())
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.values().into_iter()))
    }
}

const READ_ROOT: &str = "The root to read: `/` (the running system) or an image or snapshot directory; nothing in it is changed";
const CHANGE_ROOT: &str =
    "The root to read and change: `/` (the running system) or an image or snapshot directory";

/// The shared options COMMAND (at PATH) takes, added to it.
fn with_shared(mut c: clap::Command, path: &str) -> clap::Command {
    let Some(t) = takes(path) else {
        return c;
    };
    let root = |help: &'static str| {
        Arg::new("root")
            .long("root")
            .value_name("DIR")
            .default_value("/")
            .value_parser(clap::value_parser!(PathBuf))
            .help(help)
    };
    match t.root {
        Root::None => {}
        Root::Read => c = c.arg(root(READ_ROOT)),
        Root::Change => c = c.arg(root(CHANGE_ROOT)),
    }
    if !t.formats.is_empty() {
        c = c.arg(
            Arg::new("format")
                .long("format")
                .value_name("FORMAT")
                .default_value("text")
                .value_parser(Formats(t.formats))
                .help("Output for people or for machines"),
        );
    }
    if t.color {
        c = c.arg(
            Arg::new("color")
                .long("color")
                .value_name("WHEN")
                .default_value("auto")
                .value_parser(values::parser::<ColorArg, Color>())
                .help("Colour in diffs"),
        );
    }
    c
}

/// Every command under COMMAND (at PREFIX) with the shared options it takes.
fn add_shared(mut c: clap::Command, prefix: &str) -> clap::Command {
    let subs: Vec<String> = c
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in subs {
        let path = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix} {name}")
        };
        c = c.mut_subcommand(&name, |s| {
            if s.has_subcommands() {
                add_shared(s, &path)
            } else {
                with_shared(s, &path)
            }
        });
    }
    c
}

/// Which commands take the shared options, for `gdrprov --help` and the
/// manual page (written from the table, so they cannot drift from it).
fn summary() -> String {
    let of = |f: &dyn Fn(&Takes) -> bool| -> String {
        names::ALL
            .iter()
            .filter(|p| takes(p).is_some_and(|t| f(&t)))
            .copied()
            .collect::<Vec<_>>()
            .join(", ")
    };
    let formats = |set: &[&str]| set.join("|");
    let mut by_set: Vec<(&[&str], Vec<&str>)> = Vec::new();
    for p in names::ALL {
        let Some(t) = takes(p).filter(|t| !t.formats.is_empty()) else {
            continue;
        };
        match by_set.iter_mut().find(|(s, _)| *s == t.formats) {
            Some((_, v)) => v.push(p),
            None => by_set.push((t.formats, vec![p])),
        }
    }
    let format_lines: Vec<String> = by_set
        .iter()
        .map(|(s, v)| format!("  --format {}: {}", formats(s), v.join(", ")))
        .collect();
    format!(
        "Options of several commands, each listed in the help of the commands that take it (`gdrprov COMMAND --help`) and refused by the others:\n  --root DIR, the root to read: {}\n  --root DIR, the root to read and change: {}\n{}\n  --color auto|always|never: {}\nThey may also come before the command: `gdrprov --format json plan rdma-dmabuf`.",
        of(&|t| t.root == Root::Read),
        of(&|t| t.root == Root::Change),
        format_lines.join("\n"),
        of(&|t| t.color),
    )
}

/// clap's tree of the command line, each command with the shared options it takes.
pub fn command() -> clap::Command {
    add_shared(Cli::command(), "").after_long_help(summary())
}

/// The shared options written before the command moved after its words
/// (`gdrprov --root R boot once E` is `gdrprov boot once --root R E`); an
/// argv without them, or whose words name no command, is left as it is.
pub fn hoist(args: Vec<OsString>) -> Vec<OsString> {
    let shared = |a: &OsStr| -> Option<bool> {
        let a = a.to_str()?;
        OPTIONS.iter().find_map(|o| {
            if a == *o {
                Some(true) // its value is the next argument
            } else {
                a.strip_prefix(o)
                    .filter(|r| r.starts_with('='))
                    .map(|_| false)
            }
        })
    };
    let mut i = 1;
    while let Some(takes_next) = args.get(i).and_then(|a| shared(a)) {
        i += if takes_next { 2 } else { 1 };
    }
    let i = i.min(args.len());
    if i == 1 {
        return args;
    }
    let mut c = Cli::command();
    let mut j = i;
    while let Some(sub) = args
        .get(j)
        .and_then(|w| w.to_str())
        .and_then(|w| c.find_subcommand(w))
    {
        c = sub.clone();
        j += 1;
    }
    if j == i {
        return args;
    }
    let mut out: Vec<OsString> = args[..1].to_vec();
    out.extend_from_slice(&args[i..j]);
    out.extend_from_slice(&args[1..i]);
    out.extend_from_slice(&args[j..]);
    out
}

/// The command line parsed: the shared options before the command hoisted,
/// then clap's tree with each command's own; their values read from the
/// command that took them (`/`, text and auto where it takes none).
pub fn try_parse_from<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let argv = hoist(argv.into_iter().map(Into::into).collect());
    let m = command().try_get_matches_from(argv)?;
    let mut cli = Cli::from_arg_matches(&m)?;
    let mut leaf = &m;
    while let Some((_, sub)) = leaf.subcommand() {
        leaf = sub;
    }
    if let Ok(Some(r)) = leaf.try_get_one::<PathBuf>("root") {
        cli.root = r.clone();
    }
    if let Ok(Some(f)) = leaf.try_get_one::<Format>("format") {
        cli.format = *f;
    }
    if let Ok(Some(c)) = leaf.try_get_one::<Color>("color") {
        cli.color = *c;
    }
    Ok(cli)
}
