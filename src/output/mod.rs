//! Output: text for people, JSON for machines, from the same data.
//!
//! The only module that prints: Cargo.toml's lints deny `print!`/`eprint!`
//! and clippy.toml the `std::io::stdout`/`stderr` handles everywhere else.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "the output layer is where every line a user sees is printed"
)]

pub mod ansible;
pub mod bench;
pub mod copy;
pub mod doctor;
pub mod escape;
pub mod exposition;
pub mod gds;
pub mod health_metrics;
pub mod inventory;
pub mod inventory_pcie;
pub mod journal;
pub mod metrics;
pub mod node;
pub mod pair;
pub mod pair_metrics;
pub mod progress;
pub mod recover;
pub mod report;
pub mod sweep;
pub mod sweep_html;
pub mod verify;

pub use escape::escape;
pub use report::{report, ChangeOut, Done, OutcomeOut, Report};

use crate::host::{CommandSpec, Host};
use crate::suggest::{keep_given, Given, Suggest};
use serde::Serialize;
use std::io::{IsTerminal, Write};
use std::path::Path;

/// The envelope of every JSON document gdrprov prints (docs/commands.md):
/// `{"gdrprov": VERSION, "command": "boot list", "root": "/",
/// "format_version": "1.0", ...body}`: the format's version (`docs::FORMAT_VERSION`)
/// lets a reader of another gdrprov version take it or refuse it by name.
/// A body that is not an object goes under `value`.
pub fn envelope(command: &str, root: &Path, body: impl Serialize) -> serde_json::Value {
    let mut out = serde_json::Map::new();
    out.insert("gdrprov".into(), env!("CARGO_PKG_VERSION").into());
    out.insert("command".into(), command.into());
    out.insert("root".into(), root.display().to_string().into());
    out.insert(
        crate::docs::VERSION_FIELD.into(),
        crate::docs::FORMAT_VERSION.into(),
    );
    match serde_json::to_value(body) {
        Ok(serde_json::Value::Object(m)) => {
            for (k, v) in m {
                if !matches!(
                    k.as_str(),
                    "gdrprov" | "format_version" | "command" | "root"
                ) {
                    out.insert(k, v);
                }
            }
        }
        Ok(other) => {
            out.insert("value".into(), other);
        }
        Err(e) => {
            out.insert(
                "error".into(),
                serde_json::json!({"kind": "internal", "message": format!("could not serialise the output: {e}")}),
            );
        }
    }
    serde_json::Value::Object(out)
}

/// Prints a JSON document in the envelope on standard output.
pub fn print_json(command: &str, root: &Path, body: impl Serialize) {
    put(&format!(
        "{}\n",
        serde_json::to_string_pretty(&envelope(command, root, body)).unwrap_or_default()
    ));
}

/// The JSON of an error under `--format json`: the envelope with
/// `error: {kind, message}` (the exit code is the usual one).
pub fn error_json(command: &str, root: &Path, kind: &str, message: &str) -> String {
    serde_json::to_string_pretty(&envelope(
        command,
        root,
        serde_json::json!({"error": {"kind": kind, "message": message}}),
    ))
    .unwrap_or_default()
}

/// Every `gdrprov ...` command suggested in TEXT (between backticks) with
/// the options the user gave: `--root DIR` when not `/`, `--format json`
/// under JSON ([`crate::suggest::keep_given`]). A suggestion that names its
/// own --root is left alone.
pub fn keep_options(text: &str, root: &Path, format: Format) -> String {
    keep_given(text, &Given::new(root, format == Format::Json))
}

/// `gdrprov COMMAND ARGS...` between backticks, built by
/// [`crate::suggest`], for the front door (which imports only `output` of
/// the layers that write what users see).
pub fn suggestion(command: &str, args: &[&str]) -> String {
    args.iter()
        .fold(Suggest::new(command), |s, a| s.arg(*a))
        .shown(&Given::none())
}

/// A command as every JSON document shows it: what runs (with `chroot ROOT`
/// in front on an image root) and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandOut {
    pub argv: Vec<String>,
    pub why: String,
    /// Variables the command runs with.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub env: std::collections::BTreeMap<String, String>,
    /// Boot files held on the initramfs they load while it is rebuilt.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hold: Vec<crate::host::Hold>,
}

impl CommandOut {
    pub fn of(host: &Host, spec: &CommandSpec) -> Self {
        CommandOut {
            argv: host.effective_argv(spec),
            why: spec.why.clone(),
            env: spec.env.clone(),
            hold: spec.hold.clone(),
        }
    }

    /// The command as a shell line, for text output.
    pub fn shell_line(&self) -> String {
        CommandSpec {
            argv: self.argv.clone(),
            env: self.env.clone(),
            ..CommandSpec::new(&[], "")
        }
        .shell_line()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// Prometheus text exposition (node-exporter textfile): `verify`, `fleet sweep report`.
    Prometheus,
    /// One self-contained HTML page: `fleet sweep report`, `fleet sweep simulate`.
    Html,
}

/// `--color`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Color {
    Auto,
    Always,
    Never,
}

/// ANSI colour for diffs, only when asked or on a terminal.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    /// Every diff in full (`--full-diff`); otherwise a long one is a summary line.
    pub full_diff: bool,
}

/// The one output sink of the commands: the options that shape output
/// (format, colour), and every way gdrprov prints. The root a document
/// names, and that suggested commands keep, is passed in by the command
/// that opened it: the sink does not carry it.
#[derive(Debug, Clone)]
pub struct Output {
    pub format: Format,
    pub color: Color,
    /// `--full-diff`: text shows every file's whole diff (JSON always has it).
    pub full_diff: bool,
}

impl Output {
    pub fn style(&self) -> Style {
        Style {
            color: match self.color {
                Color::Always => true,
                Color::Never => false,
                Color::Auto => {
                    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
                }
            },
            full_diff: self.full_diff,
        }
    }

    pub fn json(&self) -> bool {
        self.format == Format::Json
    }

    /// A plan/apply/rollback report, as text or JSON, its suggested
    /// commands keeping the user's options.
    pub fn report(&self, mut r: Report) {
        r.keep_given(&Given::new(Path::new(&r.root), self.json()));
        match self.format {
            Format::Json => put(&format!("{}\n", report::json(&r))),
            Format::Text | Format::Prometheus | Format::Html => {
                put(&report::text(&r, self.style()))
            }
        }
    }

    /// A plan shown as text before a question (whatever the format).
    pub fn report_text(&self, mut r: Report) {
        r.keep_given(&Given::new(Path::new(&r.root), false));
        put(&report::text(&r, self.style()));
    }

    /// The options of the user's ROOT and this output's format that every
    /// suggested command keeps.
    pub fn given(&self, root: &Path) -> Given {
        Given::new(root, self.json())
    }

    /// A JSON document in the envelope (`--format json`), naming ROOT.
    pub fn document(&self, command: &str, root: &Path, body: impl Serialize) {
        print_json(command, root, body);
    }

    /// Text for people, its suggested commands keeping the user's options
    /// (ROOT: the user's `--root`).
    pub fn text(&self, root: &Path, text: &str) {
        put(&escape(&keep_options(text, root, self.format)));
    }

    /// Text as given (a schema, YAML, metrics, completions), any terminal
    /// control in it escaped ([`escape`]: none in what gdrprov writes).
    pub fn raw(&self, text: &str) {
        put(&escape(text));
    }

    /// Prometheus's text exposition format, exactly as made: its label
    /// values are escaped as the format defines (`exposition::escape_label`:
    /// `\\`, `\"`, `\n`; every other character raw UTF-8), so the
    /// terminal escaper's `\r` or `\x1b`, invalid escapes there, which make
    /// the collector reject the whole file, are never added.
    pub fn exposition(&self, text: &str) {
        put(text);
    }

    /// Bytes exactly as given on standard output (the manual page).
    /// A failed write is reported once, by `commands::main`'s
    /// [`stdout_finish`], as for every other output.
    pub fn bytes(&self, bytes: &[u8]) {
        put_bytes(bytes);
    }

    /// A line on standard error beside the output: `gdrprov: NOTE`.
    pub fn note(&self, note: &str) {
        note_line(note);
    }

    /// A question on the terminal (standard error), answered on the same line.
    pub fn prompt(&self, question: &str) {
        eprint!("{} [y/N] ", escape(question));
        let _ = std::io::stderr().flush();
    }

    /// The JSON error object on stdout (`--format json`), naming ROOT.
    pub fn error_document(&self, command: &str, root: &Path, kind: &str, message: &str) {
        put(&format!("{}\n", error_json(command, root, kind, message)));
    }

    /// An error: one line on stderr and, under JSON, the error object on
    /// stdout naming ROOT (the user's `--root`).
    pub fn error(&self, command: &str, root: &Path, e: &crate::error::Error) {
        let _ = std::io::stdout().flush();
        let message = keep_options(&e.to_string(), root, self.format);
        error_line(&message);
        if self.json() {
            self.error_document(command, root, e.kind(), &message);
        }
    }
}

/// The first failed write to standard output, when one failed.
static STDOUT_FAILED: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The one door to standard output: everything above prints through it. A
/// failed write (a full disk, `plan > /dev/full`) is kept, never a panic
/// (as `print!` would), and nothing more is written after it;
/// `commands::main` ends with [`stdout_finish`], which makes it an error
/// (exit 1). A closed pipe still ends the process quietly (SIGPIPE, main.rs).
fn put(s: &str) {
    put_bytes(s.as_bytes());
}

fn put_bytes(b: &[u8]) {
    if STDOUT_FAILED.get().is_some() {
        return;
    }
    if let Err(e) = std::io::stdout().lock().write_all(b) {
        let _ = STDOUT_FAILED.set(e.to_string());
    }
}

/// Flushes standard output; the message of the first write that failed
/// (this flush included), naming standard output and the fix.
pub fn stdout_finish() -> Option<String> {
    if STDOUT_FAILED.get().is_none() {
        if let Err(e) = std::io::stdout().lock().flush() {
            let _ = STDOUT_FAILED.set(e.to_string());
        }
    }
    STDOUT_FAILED.get().map(|e| {
        format!("could not write to standard output ({e}); send the output where it can be written (a file on a disk with room, a pipe)")
    })
}

/// `gdrprov: NOTE` on standard error (progress notes, recovered runs).
pub fn note_line(note: &str) {
    eprintln!("{}", prefixed("gdrprov: ", note));
}

/// `text` escaped, its first line after `first` and every further line
/// after `gdrprov:   `: a newline inside a value the message quotes (a
/// file's name, a profile's) never begins a line of its own, and a list the
/// message makes stays a list.
fn prefixed(first: &str, text: &str) -> String {
    let text = escape(text.trim_end_matches('\n'));
    let mut out = String::new();
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push_str("\ngdrprov:   ");
        } else {
            out.push_str(first);
        }
        out.push_str(line);
    }
    out
}

/// A line on standard error (a bench's notes), escaped.
pub fn stderr_line(line: &str) {
    eprintln!("{}", escape(line));
}

/// `gdrprov: error: MESSAGE` on standard error, always one whole line,
/// escaped ([`escape`]: an error may quote a file, a log or a peer).
pub fn error_line(message: &str) {
    eprintln!("{}", prefixed("gdrprov: error: ", message));
}

/// Whether standard error is a terminal (progress bars only draw there).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// One JSON value on one line of standard output (the Ansible module's answer).
pub fn json_line(v: &serde_json::Value) {
    put(&format!(
        "{}\n",
        serde_json::to_string(v).unwrap_or_else(|_| {
            r#"{"failed": true, "msg": "gdrprov could not serialise its result"}"#.into()
        })
    ));
}

impl Style {
    pub fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }
}
