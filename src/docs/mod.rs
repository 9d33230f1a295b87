//! The documents gdrprov reads as data from outside (issue 43): a sweep's
//! pair results (`bench pair --format json`, [`pair`]) and `verify --format
//! json` reports ([`verify`]). One home: each document is a type here, and
//! [`read`] is the one way to read one — through the host layer's door
//! (`host::read_local`, the document's [`ReadLimit`]), parsed as JSON, its
//! format version checked, decoded with serde into types that refuse a wrong
//! type, a missing field or `null` where a value is needed, then its numbers
//! checked for range. A refusal names the FILE and the FIELD (a path such as
//! `results[0].average_gbps`, from serde_path_to_error, which already keeps
//! the profile loader's paths), and what to do.
//!
//! Versions. Every document gdrprov writes under `--format json` carries
//! [`FORMAT_VERSION`] (`"format_version": "MAJOR.MINOR"`, in the envelope
//! that `output::envelope` writes). A reader takes its own MAJOR with any
//! MINOR: fields a newer minor adds are ignored (no reader denies unknown
//! fields); another MAJOR is refused by name. A document without the field
//! was written before versions existed and reads as 1.0, so a fleet running
//! two gdrprov versions still reads.
//!
//! To add a document: its type here (serde, no `deny_unknown_fields`), a
//! [`Document`] impl (what it is, its `ReadLimit`, the fix, `check` for
//! ranges), a `ReadLimit` kind in the host layer if none fits, and a row in
//! `tests/it/hostile_suite/documents.rs`'s table of readers.

pub mod pair;
pub mod verify;

use crate::error::Error;
use crate::host::{read_local, ReadLimit};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::Path;

/// The format of every document gdrprov writes (`format_version`).
pub const FORMAT_VERSION: &str = "1.0";
/// The major version this gdrprov reads; any minor of it is read.
pub const FORMAT_MAJOR: u64 = 1;
/// The field that carries the version.
pub const VERSION_FIELD: &str = "format_version";

/// A field of a document that is wrong: where (a path like
/// `rails[1].results[0].average_gbps`; empty: the whole document) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Bad {
    pub field: String,
    pub why: String,
}

impl Bad {
    pub fn new(field: impl Into<String>, why: impl Into<String>) -> Self {
        Bad {
            field: field.into(),
            why: why.into(),
        }
    }
}

/// Why a document was not read: its file, the field (when one is to
/// blame), what is wrong and what to do.
#[derive(Debug, Clone, PartialEq)]
pub struct DocError {
    pub file: String,
    pub field: Option<String>,
    pub why: String,
    pub fix: String,
}

impl std::fmt::Display for DocError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.field {
            Some(field) => write!(
                f,
                "{}: field `{field}`: {}; {}",
                self.file, self.why, self.fix
            ),
            None => write!(f, "{}: {}; {}", self.file, self.why, self.fix),
        }
    }
}

impl From<DocError> for Error {
    fn from(e: DocError) -> Self {
        Error::Usage(e.to_string())
    }
}

/// A document gdrprov reads as data.
pub trait Document: DeserializeOwned {
    /// What it is, for messages ("a pair result").
    const WHAT: &'static str;
    /// How much of it is read at most.
    const LIMIT: ReadLimit;
    /// What to do when it cannot be read.
    const FIX: &'static str;

    /// The typed document from its JSON (the version already checked).
    /// Strict by default: serde's types, with the failing field's path.
    fn decode(v: &Value) -> Result<Self, Bad> {
        typed(v, "")
    }

    /// Ranges serde's types cannot say (finite, at least, at most).
    fn check(&self) -> Result<(), Bad>;
}

/// `v` as a `T`, a failing field named by its path under `prefix`.
pub fn typed<T: DeserializeOwned>(v: &Value, prefix: &str) -> Result<T, Bad> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        let field = match (prefix.is_empty(), path.as_str()) {
            (_, ".") => prefix.to_string(),
            (true, p) => p.to_string(),
            (false, p) if p.starts_with('[') => format!("{prefix}{p}"),
            (false, p) => format!("{prefix}.{p}"),
        };
        Bad::new(field, e.into_inner().to_string())
    })
}

/// The version a document says it has: (major, minor); 1.0 when it says
/// none (written before versions existed).
pub fn version_of(doc: &Value) -> Result<(u64, u64), Bad> {
    let Some(v) = doc.get(VERSION_FIELD) else {
        return Ok((FORMAT_MAJOR, 0));
    };
    let bad = || {
        Bad::new(
            VERSION_FIELD,
            format!(
                "{v} is not a format version (a string MAJOR.MINOR, such as \"{FORMAT_VERSION}\")"
            ),
        )
    };
    let text = v.as_str().ok_or_else(bad)?;
    let (major, minor) = text.split_once('.').ok_or_else(bad)?;
    let num = |s: &str| {
        s.parse::<u64>()
            .ok()
            .filter(|_| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && s.len() <= 9)
    };
    match (num(major), num(minor)) {
        (Some(a), Some(b)) => Ok((a, b)),
        _ => Err(bad()),
    }
}

/// A document's text as a `T`: JSON, an object, a version this gdrprov
/// reads, the types and the ranges. FILE names it in the refusal.
pub fn parse<T: Document>(file: &str, bytes: &[u8]) -> Result<T, DocError> {
    let fail = |field: Option<String>, why: String| DocError {
        file: file.to_string(),
        field,
        why,
        fix: T::FIX.to_string(),
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(fail(None, format!("empty, not {}", T::WHAT)));
    }
    let doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| fail(None, format!("not JSON ({e}), so not {}", T::WHAT)))?;
    if !doc.is_object() {
        return Err(fail(
            None,
            format!("a JSON {}, not {} (a JSON object)", kind_of(&doc), T::WHAT),
        ));
    }
    let (major, minor) = version_of(&doc).map_err(|b| fail(Some(b.field), b.why))?;
    if major != FORMAT_MAJOR {
        return Err(DocError {
            file: file.to_string(),
            field: Some(VERSION_FIELD.into()),
            why: format!(
                "written by format {major}.x ({major}.{minor}); this gdrprov ({}) reads {FORMAT_MAJOR}.x",
                env!("CARGO_PKG_VERSION")
            ),
            fix: if major > FORMAT_MAJOR {
                "upgrade gdrprov on the host that reads it to one that reads that format".into()
            } else {
                "write it again with this gdrprov".into()
            },
        });
    }
    let t = T::decode(&doc).map_err(|b| fail(Some(b.field).filter(|f| !f.is_empty()), b.why))?;
    t.check().map_err(|b| fail(Some(b.field), b.why))?;
    Ok(t)
}

/// Why a document named on the command line (or found in a directory
/// named there) was not read.
#[derive(Debug)]
pub enum ReadError {
    /// The door refused the file for what it is (not a regular file, too
    /// large): nothing of it was read.
    Door(Error),
    /// Its content is not the document.
    Doc(DocError),
}

impl From<ReadError> for Error {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Door(e) => e,
            ReadError::Doc(d) => d.into(),
        }
    }
}

/// The one reading function: PATH through the host layer's door (a
/// regular file, at most `T::LIMIT`), then [`parse`].
pub fn read<T: Document>(path: &Path) -> Result<T, ReadError> {
    let bytes = read_local(path, T::LIMIT).map_err(ReadError::Door)?;
    parse(&path.display().to_string(), &bytes).map_err(ReadError::Doc)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A number that must be finite and within [lo, hi]; FIELD names it.
pub fn in_range(field: impl Into<String>, x: f64, lo: f64, hi: f64, what: &str) -> Result<(), Bad> {
    if x.is_finite() && (lo..=hi).contains(&x) {
        Ok(())
    } else {
        Err(Bad::new(
            field,
            format!("{x} is not {what} (from {lo} to {hi})"),
        ))
    }
}

#[cfg(test)]
mod tests;
