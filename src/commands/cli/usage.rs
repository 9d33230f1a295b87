//! A usage error from clap: the command line parsed, or refused with one
//! message (escaped like every error) and, under `--format json`, the JSON
//! error document; the argv clap refused read for what it names (the
//! command, `--root`, `--format json`).

use super::{shared, Cli};
use crate::exit;
use crate::output::{self, Format, Output};
use std::path::PathBuf;

/// The command line, or the exit code of its usage error (`--help` and
/// `--version` are exit 0, after clap printed them).
pub fn parse() -> Result<Cli, i32> {
    super::shared::try_parse_from(std::env::args_os()).map_err(|e| usage_error(&e))
}

/// A usage error from clap: its message on stderr, and under `--format
/// json` the JSON error object too. Exit 1 like every other error (2 means
/// "changes pending").
fn usage_error(e: &clap::Error) -> i32 {
    // args_os: an argument that is not UTF-8 is what clap refused here.
    let args: Vec<String> = std::env::args_os()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let not_taken = not_taken(e, &args);
    match &not_taken {
        Some(m) => output::error_line(m),
        None => clap_message(e),
    }
    if !e.use_stderr() {
        return exit::OK; // --help, --version
    }
    if wants_json(&args) {
        let out = Output {
            format: Format::Json,
            color: crate::output::Color::Never,
            full_diff: false,
        };
        let message = if let Some(m) = not_taken {
            m
        } else if e.kind() == clap::error::ErrorKind::ValueValidation {
            value_message(e)
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

/// A shared option (`--root`, `--format`, `--color`) given to a command
/// that does not take it: why, and the fix (`shared::why_not`).
fn not_taken(e: &clap::Error, args: &[String]) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let get = |k| match e.get(k) {
        Some(ContextValue::String(s)) => Some(s.as_str()),
        _ => None,
    };
    let arg = get(ContextKind::InvalidArg)?;
    // A format this command does not write: the ones it does.
    if e.kind() == ErrorKind::InvalidValue && arg.starts_with("--format") {
        let Some(ContextValue::Strings(valid)) = e.get(ContextKind::ValidValue) else {
            return None;
        };
        let value = get(ContextKind::InvalidValue).unwrap_or_default();
        let valid = match valid.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        return Some(format!(
            "`gdrprov {}` writes --format {valid}, not \"{}\"",
            command_in(args),
            crate::grammar::shown(value)
        ));
    }
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let option = shared::OPTIONS
        .iter()
        .find(|o| arg == **o || arg.strip_prefix(**o).is_some_and(|r| r.starts_with('=')))?;
    let command = command_in(args);
    Some(if crate::names::ALL.contains(&command.as_str()) {
        shared::why_not(option, &command)
    } else if command.is_empty() {
        format!("{option} needs a command after it (`gdrprov {option} ... plan PROFILE`): `gdrprov --help` lists them")
    } else {
        format!(
            "`{}` is not a gdrprov command: `gdrprov --help` lists them",
            crate::grammar::shown(&command)
        )
    })
}

/// The options that may come before the command and take a value
/// (`--root DIR`), for reading an argv clap refused.
fn valued_globals() -> Vec<String> {
    shared::OPTIONS.iter().map(|o| o.to_string()).collect()
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
        // `fleet sweep report`: on while the words are a group's.
        if !crate::names::is_group(&words.join(" ")) {
            break;
        }
    }
    words.join(" ")
}

/// clap's own message (usage errors on stderr; `--help`, `--version` on stdout).
/// A value refused by its parser: `invalid value "VALUE" for --OPTION: WHY`,
/// the value shown escaped (`\n`, `\r`, `\u{1b}`).
pub fn value_message(e: &clap::Error) -> String {
    use clap::error::{ContextKind, ContextValue};
    let get = |k| match e.get(k) {
        Some(ContextValue::String(s)) => s.clone(),
        _ => String::new(),
    };
    let why = std::error::Error::source(e)
        .map(|s| s.to_string())
        .unwrap_or_default();
    format!(
        "invalid value \"{}\" for {}: {why}",
        crate::grammar::shown(&get(ContextKind::InvalidValue)),
        get(ContextKind::InvalidArg)
    )
}

/// A usage error's message is escaped like every other: clap quotes the
/// refused value as given (a newline, CR or ESC in `--nodelist`).
fn clap_message(e: &clap::Error) {
    if e.kind() == clap::error::ErrorKind::ValueValidation {
        // A value refused by its parser (a name's grammar, a number's
        // range): one line, as every other error, the value escaped.
        output::error_line(&value_message(e));
    } else if e.use_stderr() {
        // Any other (an unknown subcommand or option, a value not among
        // the possible ones) quotes what was typed too: each of its lines
        // prefixed and escaped as every error's, so a newline in the value
        // never begins a line of its own.
        let text = e.render().to_string();
        output::error_line(text.strip_prefix("error: ").unwrap_or(&text));
    } else {
        let _ = e.print();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clap_error(args: &[&str]) -> String {
        match shared::try_parse_from(args) {
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
