//! `/etc/cufile.json`, cuFile's configuration: JSON with `//` (and `/* */`)
//! comments, another program's file. One small reader keeps the byte span of
//! every value, so gdrprov reads the few keys it needs strictly (a wrong type
//! is named, never taken for "absent") and can change one value in place with
//! every other byte, comments included, left as it was (`set_bool`). Nothing
//! else of the file is interpreted. Fuzzed (`fuzz/fuzz_targets/cufile_json.rs`).

use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::Range;

/// Deeper nesting than this is refused (cufile.json is three levels deep).
const MAX_DEPTH: usize = 32;

/// One JSON value with its byte span in the text.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Object {
        span: Range<usize>,
        /// Key, the key's span, the value.
        members: Vec<(String, Range<usize>, Node)>,
    },
    Array {
        span: Range<usize>,
        items: Vec<Node>,
    },
    /// A string, number, `true`, `false` or `null`, as written.
    Scalar { span: Range<usize>, text: String },
}

impl Node {
    pub fn span(&self) -> Range<usize> {
        match self {
            Node::Object { span, .. } | Node::Array { span, .. } | Node::Scalar { span, .. } => {
                span.clone()
            }
        }
    }

    /// The member `key` of an object (the last one, as most readers take it).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Object { members, .. } => members
                .iter()
                .rev()
                .find(|(k, _, _)| k == key)
                .map(|m| &m.2),
            _ => None,
        }
    }

    pub fn path(&self, keys: &[&str]) -> Option<&Node> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    fn what(&self) -> &'static str {
        match self {
            Node::Object { .. } => "an object",
            Node::Array { .. } => "a list",
            Node::Scalar { text, .. } if text.starts_with('"') => "a string",
            Node::Scalar { text, .. } if text == "null" => "null",
            Node::Scalar { .. } => "a number",
        }
    }
}

/// Parses the whole text; the error names the byte offset and what was wrong.
pub fn parse(text: &str) -> Result<Node, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    p.skip();
    let v = p.value(0)?;
    p.skip();
    if p.i != p.s.len() {
        return Err(format!(
            "unexpected text at byte {} after the document",
            p.i
        ));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    /// Skips white space and comments; an unclosed `/*` runs to the end (and
    /// the value after it is then missing).
    fn skip(&mut self) {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            match (self.s.get(self.i), self.s.get(self.i + 1)) {
                (Some(b'/'), Some(b'/')) => {
                    while self.i < self.s.len() && self.s[self.i] != b'\n' {
                        self.i += 1;
                    }
                }
                (Some(b'/'), Some(b'*')) => {
                    self.i += 2;
                    while self.i < self.s.len() && !self.s[self.i..].starts_with(b"*/") {
                        self.i += 1;
                    }
                    self.i = (self.i + 2).min(self.s.len());
                }
                _ => return,
            }
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "nesting deeper than {MAX_DEPTH} at byte {}",
                self.i
            ));
        }
        match self.s.get(self.i) {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let start = self.i;
                self.string()?;
                Ok(self.scalar(start))
            }
            Some(c) if c.is_ascii_alphanumeric() || *c == b'-' || *c == b'+' || *c == b'.' => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || b"-+.".contains(&self.s[self.i]))
                {
                    self.i += 1;
                }
                Ok(self.scalar(start))
            }
            Some(_) => Err(format!("unexpected character at byte {}", self.i)),
            None => Err("the text ends where a value should be".into()),
        }
    }

    fn scalar(&self, start: usize) -> Node {
        Node::Scalar {
            span: start..self.i,
            text: String::from_utf8_lossy(&self.s[start..self.i]).into_owned(),
        }
    }

    /// Moves past a string; returns its content (escapes kept as written).
    fn string(&mut self) -> Result<String, String> {
        let start = self.i;
        self.i += 1;
        while let Some(&c) = self.s.get(self.i) {
            match c {
                b'\\' => self.i += 2,
                b'"' => {
                    self.i += 1;
                    return Ok(String::from_utf8_lossy(&self.s[start + 1..self.i - 1]).into_owned());
                }
                b'\n' => break,
                _ => self.i += 1,
            }
        }
        Err(format!("a string opened at byte {start} is not closed"))
    }

    fn object(&mut self, depth: usize) -> Result<Node, String> {
        let start = self.i;
        self.i += 1;
        let mut members = Vec::new();
        loop {
            self.skip();
            match self.s.get(self.i) {
                Some(b'}') => break,
                Some(b'"') => {}
                _ => return Err(format!("expected a key or '}}' at byte {}", self.i)),
            }
            let kstart = self.i;
            let key = self.string()?;
            let kspan = kstart..self.i;
            self.skip();
            if self.s.get(self.i) != Some(&b':') {
                return Err(format!(
                    "expected ':' after key \"{key}\" at byte {}",
                    self.i
                ));
            }
            self.i += 1;
            self.skip();
            let v = self.value(depth + 1)?;
            members.push((key, kspan, v));
            self.skip();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => break,
                _ => return Err(format!("expected ',' or '}}' at byte {}", self.i)),
            }
        }
        self.i += 1;
        Ok(Node::Object {
            span: start..self.i,
            members,
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, String> {
        let start = self.i;
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.skip();
            if self.s.get(self.i) == Some(&b']') {
                break;
            }
            items.push(self.value(depth + 1)?);
            self.skip();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => break,
                _ => return Err(format!("expected ',' or ']' at byte {}", self.i)),
            }
        }
        self.i += 1;
        Ok(Node::Array {
            span: start..self.i,
            items,
        })
    }
}

/// The keys gdrprov reads, as the file sets them (`None`: not set, cuFile's default).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CufileConfig {
    pub allow_compat_mode: Option<bool>,
    pub use_pci_p2pdma: Option<bool>,
    pub use_poll_mode: Option<bool>,
    pub rdma_dev_addr_list: Vec<String>,
    /// The per-file-system sections under `fs` (`generic`, `lustre`, `nfs`, ...).
    pub fs_sections: Vec<String>,
    /// `logging.level`, when set.
    pub log_level: Option<String>,
}

/// Where each key lives: cuFile reads them under `properties` (and `logging`).
pub const KEYS: &[(&str, &[&str])] = &[
    ("allow_compat_mode", &["properties", "allow_compat_mode"]),
    ("use_pci_p2pdma", &["properties", "use_pci_p2pdma"]),
    ("use_poll_mode", &["properties", "use_poll_mode"]),
];

/// Reads the keys gdrprov needs, strictly: a key that is there with the wrong
/// type is an error naming it (cuFile would refuse the file too).
pub fn read(text: &str) -> Result<CufileConfig, String> {
    let root = parse(text)?;
    if !matches!(root, Node::Object { .. }) {
        return Err(format!("the document is {}, not an object", root.what()));
    }
    let flag = |path: &[&str]| -> Result<Option<bool>, String> {
        match root.path(path) {
            None => Ok(None),
            Some(Node::Scalar { text, .. }) if text == "true" => Ok(Some(true)),
            Some(Node::Scalar { text, .. }) if text == "false" => Ok(Some(false)),
            Some(n) => Err(format!(
                "{} is {}, not true or false",
                path.join("."),
                n.what()
            )),
        }
    };
    let mut c = CufileConfig {
        allow_compat_mode: flag(KEYS[0].1)?,
        use_pci_p2pdma: flag(KEYS[1].1)?,
        use_poll_mode: flag(KEYS[2].1)?,
        ..CufileConfig::default()
    };
    match root.path(&["properties", "rdma_dev_addr_list"]) {
        None => {}
        Some(Node::Array { items, .. }) => {
            for it in items {
                match it {
                    Node::Scalar { text, .. } if text.starts_with('"') => c
                        .rdma_dev_addr_list
                        .push(text.trim_matches('"').to_string()),
                    n => return Err(format!("properties.rdma_dev_addr_list holds {}", n.what())),
                }
            }
        }
        Some(n) => {
            return Err(format!(
                "properties.rdma_dev_addr_list is {}, not a list",
                n.what()
            ))
        }
    }
    if let Some(Node::Object { members, .. }) = root.get("fs") {
        let names: BTreeMap<&str, ()> = members.iter().map(|m| (m.0.as_str(), ())).collect();
        c.fs_sections = names.keys().map(|k| k.to_string()).collect();
    }
    if let Some(Node::Scalar { text, .. }) = root.path(&["logging", "level"]) {
        c.log_level = Some(text.trim_matches('"').to_string());
    }
    Ok(c)
}

/// The text with `path` (an object's member, e.g. `properties.use_pci_p2pdma`)
/// set to `value`: its value's bytes replaced when the key is there, else the
/// member added first in its object (the object made when missing, at the
/// top). Every other byte stays. An error when the file does not parse or a
/// key on the way is not an object.
pub fn set_bool(text: &str, path: &[&str], value: bool) -> Result<String, String> {
    if path.is_empty() {
        return Err("no key named".into());
    }
    let root = parse(text)?;
    let lit = if value { "true" } else { "false" };
    let mut node = &root;
    for (depth, key) in path.iter().enumerate() {
        let Node::Object { span, .. } = node else {
            return Err(format!(
                "{} is {}, not an object",
                path[..depth].join("."),
                node.what()
            ));
        };
        match node.get(key) {
            Some(next) => node = next,
            None => {
                let mut add = String::new();
                for k in &path[depth..path.len() - 1] {
                    add.push_str(&format!("\"{k}\": {{ "));
                }
                add.push_str(&format!("\"{}\": {lit}", path[path.len() - 1]));
                add.push_str(&" }".repeat(path.len() - 1 - depth));
                let empty = matches!(node, Node::Object { members, .. } if members.is_empty());
                let at = span.start + 1;
                let sep = if empty { "" } else { "," };
                return Ok(format!("{}\n    {add}{sep}{}", &text[..at], &text[at..]));
            }
        }
    }
    let span = node.span();
    Ok(format!("{}{lit}{}", &text[..span.start], &text[span.end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHIPPED: &str = r#"{
    // NOTE : Application can override custom configuration via export CUFILE_ENV_PATH_JSON=<filepath>
    "logging": {
        // log directory, if not enabled will create log file under current working directory
        //"dir": "/home/<xxxx>",
        "level": "ERROR"
    },
    "profile": { "nvtx": false, "cufile_stats": 0 },
    "properties": {
        "max_direct_io_size_kb" : 16384,
        /* device memory size for reserving bounce buffers */
        "allow_compat_mode": true,
        "use_pci_p2pdma": false,
        "rdma_dev_addr_list": [ ],
        "use_poll_mode" : false
    },
    "fs": {
        "generic": { "posix_unaligned_writes" : false },
        "lustre": { "posix_gds_min_kb" : 0 }
    }
}
"#;

    #[test]
    fn the_shipped_file_is_read() {
        let c = read(SHIPPED).unwrap();
        assert_eq!(c.allow_compat_mode, Some(true));
        assert_eq!(c.use_pci_p2pdma, Some(false));
        assert_eq!(c.use_poll_mode, Some(false));
        assert_eq!(c.fs_sections, ["generic", "lustre"]);
        assert_eq!(c.log_level.as_deref(), Some("ERROR"));
    }

    #[test]
    fn a_wrong_type_is_named_not_taken_for_absent() {
        let t = SHIPPED.replace("\"use_pci_p2pdma\": false", "\"use_pci_p2pdma\": \"no\"");
        assert!(read(&t)
            .unwrap_err()
            .contains("properties.use_pci_p2pdma is a string"));
        assert!(read("{ \"properties\": ").is_err());
        assert!(read("[1]").unwrap_err().contains("not an object"));
    }

    #[test]
    fn set_bool_changes_one_value_and_keeps_every_other_byte() {
        let t = set_bool(SHIPPED, &["properties", "use_pci_p2pdma"], true).unwrap();
        assert_eq!(
            t,
            SHIPPED.replace("\"use_pci_p2pdma\": false", "\"use_pci_p2pdma\": true")
        );
        assert_eq!(read(&t).unwrap().use_pci_p2pdma, Some(true));
        // Absent: added first in its object, the rest untouched.
        let no = SHIPPED.replace("        \"use_poll_mode\" : false\n", "        \"x\": 1\n");
        let t = set_bool(&no, &["properties", "use_poll_mode"], true).unwrap();
        assert_eq!(read(&t).unwrap().use_poll_mode, Some(true));
        assert!(t.contains("// log directory"));
        let t = set_bool("{}", &["properties", "use_pci_p2pdma"], true).unwrap();
        assert_eq!(read(&t).unwrap().use_pci_p2pdma, Some(true));
    }

    #[test]
    fn hostile_text_is_an_error_never_a_panic() {
        for t in [
            "",
            "{",
            "{\"a\"",
            "\"x",
            "{\"a\":}",
            "/*",
            "{\"a\":1,,}",
            "[[[[",
            "{\"\\",
        ] {
            let _ = read(t);
            let _ = set_bool(t, &["properties", "a"], true);
        }
        let deep = "[".repeat(10_000);
        assert!(parse(&deep).unwrap_err().contains("nesting"));
    }
}
