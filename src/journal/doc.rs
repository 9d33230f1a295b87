//! The journal and the state as strict documents (issue 43): every file
//! gdrprov writes under `var/lib/gdrprov` carries `"format_version": "1.0"`,
//! and every one it reads is parsed here, into types that refuse a wrong
//! type, a missing field or an unknown one, the refusal naming the file and
//! the field. A file without a version was written by an older gdrprov and
//! reads as 1.x; another major version is refused by name; the fields a
//! newer minor version adds are ignored, so two gdrprov versions read each
//! other's journals.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};

/// The format version gdrprov writes: `MAJOR.MINOR`.
pub const FORMAT_VERSION: &str = "1.0";
const MAJOR: u64 = 1;
const MINOR: u64 = 0;
/// The field that carries it, first in the document.
pub const FIELD: &str = "format_version";

/// A document's bytes as gdrprov writes them: `format_version` first, then
/// the document's own fields; pretty, with a final newline.
pub fn to_json<T: Serialize>(v: &T) -> Result<Vec<u8>, String> {
    let body = serde_json::to_value(v).map_err(|e| e.to_string())?;
    let mut out = Map::new();
    out.insert(FIELD.into(), Value::String(FORMAT_VERSION.into()));
    if let Value::Object(m) = body {
        out.extend(m);
    }
    let mut s = serde_json::to_vec_pretty(&Value::Object(out)).map_err(|e| e.to_string())?;
    s.push(b'\n');
    Ok(s)
}

/// Why a document cannot be read: the field (a path like
/// `steps[2].before_meta.mode`; empty for the whole document) and what is
/// wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub field: String,
    pub why: String,
}

impl Refusal {
    fn new(field: impl Into<String>, why: impl Into<String>) -> Refusal {
        Refusal {
            field: field.into(),
            why: why.into(),
        }
    }
}

/// What [`parse`] read: the document, and whether it carried a version (a
/// journal of an older gdrprov has none, and no metadata checksums).
pub struct Parsed<T> {
    pub doc: T,
    pub versioned: bool,
}

/// Parses `text` strictly into `T` (see the module's comment).
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<Parsed<T>, Refusal> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Refusal::new("", format!("it is not JSON ({e})")))?;
    let Value::Object(mut map) = value else {
        return Err(Refusal::new("", "it is not a JSON object"));
    };
    let (versioned, newer_minor) = match map.remove(FIELD) {
        None => (false, false),
        Some(v) => (true, version(&v)? > MINOR),
    };
    let mut value = Value::Object(map);
    // A newer minor version's fields are passed over, one by one; a
    // document of this version or an older one has none to pass over.
    for _ in 0..256 {
        match serde_path_to_error::deserialize::<_, T>(value.clone()) {
            Ok(doc) => return Ok(Parsed { doc, versioned }),
            Err(e) => {
                let field = e.path().to_string();
                let why = e.inner().to_string();
                match unknown_field(&why).filter(|_| newer_minor) {
                    Some(name) if remove_at(&mut value, e.path(), &name) => {}
                    _ => return Err(Refusal::new(shown_field(&field), why)),
                }
            }
        }
    }
    Err(Refusal::new("", "too many fields of a newer version"))
}

/// The minor version of a `format_version` this gdrprov reads; another
/// major version, or one not written `MAJOR.MINOR`, refused.
fn version(v: &Value) -> Result<u64, Refusal> {
    let text = v.as_str().ok_or_else(|| {
        Refusal::new(
            FIELD,
            format!("{v} is not a version (\"{FORMAT_VERSION}\")"),
        )
    })?;
    let parsed = text
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)));
    match parsed {
        Some((MAJOR, minor)) => Ok(minor),
        Some(_) => Err(Refusal::new(
            FIELD,
            format!(
                "it is format version {text}, another major version than this gdrprov ({}) reads ({MAJOR}.x); read it with the gdrprov that wrote it, or one that reads {text}",
                env!("CARGO_PKG_VERSION")
            ),
        )),
        None => Err(Refusal::new(
            FIELD,
            format!("{text:?} is not a version (\"{FORMAT_VERSION}\")"),
        )),
    }
}

/// The name in serde's "unknown field `x`, expected ..." message.
fn unknown_field(why: &str) -> Option<String> {
    let rest = why.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(name, _)| name.to_string())
}

/// A field path for the message: `.` for the document itself.
fn shown_field(path: &str) -> String {
    if path == "." || path.is_empty() {
        String::new()
    } else {
        path.to_string()
    }
}

/// Removes the field `name` of the object at `path` (serde_path_to_error's
/// segments, walked one by one: a map key may hold dots, as a file's path
/// does); true when it was there.
fn remove_at(value: &mut Value, path: &serde_path_to_error::Path, name: &str) -> bool {
    use serde_path_to_error::Segment;
    let segs: Vec<&Segment> = path.iter().collect();
    // The path ends with the unknown field's own name.
    let segs = match segs.split_last() {
        Some((Segment::Map { key }, rest)) if key == name => rest,
        _ => &segs[..],
    };
    let mut at = value;
    for seg in segs {
        let next = match seg {
            Segment::Seq { index } => at.get_mut(*index),
            Segment::Map { key } => at.get_mut(key.as_str()),
            Segment::Enum { variant } => at.get_mut(variant.as_str()),
            Segment::Unknown => None,
        };
        let Some(next) = next else {
            return false;
        };
        at = next;
    }
    at.as_object_mut().is_some_and(|o| o.remove(name).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        mode: u32,
    }

    #[derive(Debug, serde::Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Doc {
        n: u64,
        steps: Vec<Inner>,
    }

    #[test]
    fn versions_types_and_fields() {
        let ok = r#"{"n": 1, "steps": [{"mode": 420}]}"#;
        let p = parse::<Doc>(ok).unwrap();
        assert!(!p.versioned);
        let v = r#"{"format_version": "1.0", "n": 1, "steps": [{"mode": 420}]}"#;
        assert!(parse::<Doc>(v).unwrap().versioned);
        // A newer minor: its fields, at any depth, are passed over.
        let newer =
            r#"{"format_version": "1.7", "x": true, "n": 1, "steps": [{"mode": 420, "y": [1]}]}"#;
        assert_eq!(parse::<Doc>(newer).unwrap().doc, p.doc);
        // This version: an unknown field is refused, by name.
        let e =
            parse::<Doc>(r#"{"format_version": "1.0", "n": 1, "steps": [{"mode": 1, "y": 2}]}"#)
                .err()
                .unwrap();
        assert_eq!(e.field, "steps[0].y");
        assert!(e.why.contains("`y`"), "{e:?}");
        let cases = [
            (
                r#"{"format_version": "2.0", "n": 1, "steps": []}"#,
                "format_version",
                "another major",
            ),
            (
                r#"{"format_version": 1, "n": 1, "steps": []}"#,
                "format_version",
                "not a version",
            ),
            (r#"{"n": "1", "steps": []}"#, "n", "invalid type"),
            (r#"{"n": 1}"#, "", "missing field `steps`"),
            (
                r#"{"n": 1, "steps": [{"mode": -1}]}"#,
                "steps[0].mode",
                "invalid value",
            ),
            (
                r#"{"n": 1, "steps": [{"mode": 5000000000}]}"#,
                "steps[0].mode",
                "invalid value",
            ),
            (r#"[]"#, "", "not a JSON object"),
        ];
        for (text, field, why) in cases {
            let e = parse::<Doc>(text).err().unwrap();
            assert_eq!(e.field, field, "{text}: {e:?}");
            assert!(e.why.contains(why), "{text}: {e:?}");
        }
    }

    #[test]
    fn a_newer_minor_field_under_a_file_path_key_is_passed_over() {
        // A map key with dots (a file's path) is one segment, never split.
        let text = r#"{"format_version": "1.1", "generation": 1, "profiles": [],
            "files": {"/etc/nccl.conf": {"original": null, "newfield": 1},
                      "/etc/a.b/c.d": {"original": "generations/1/0.before", "x.y": {"z": 2}}},
            "newtop": 3}"#;
        let st = parse::<crate::journal::State>(text).unwrap().doc;
        assert_eq!(st.files.len(), 2);
        assert_eq!(
            st.files["/etc/a.b/c.d"].original.as_deref(),
            Some("generations/1/0.before")
        );
        // The same at this version: refused, naming the field.
        let now = text.replace("1.1", "1.0");
        let e = parse::<crate::journal::State>(&now).err().unwrap();
        assert!(
            e.why.contains("newfield") || e.why.contains("newtop") || e.why.contains("x.y"),
            "{e:?}"
        );
    }

    #[test]
    fn written_documents_carry_the_version_first() {
        #[derive(Serialize)]
        struct W {
            n: u64,
        }
        let text = String::from_utf8(to_json(&W { n: 3 }).unwrap()).unwrap();
        assert!(
            text.starts_with("{\n  \"format_version\": \"1.0\",\n  \"n\": 3"),
            "{text}"
        );
    }
}
