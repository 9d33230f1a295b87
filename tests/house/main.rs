//! The rules of the house (CONTRIBUTING.md says why; docs/how-it-works.md
//! draws the folders), checked on the source tree with no tool but Rust, so
//! a regression fails `cargo test`:
//! - no import cycle between the files of `src/` and `crates/*/src`;
//! - no two folders of `src/` (or crates) that import each other, directly or
//!   around a longer loop;
//! - docs/how-it-works.md's folder table is the code's: its folder list and
//!   import column are generated from the folder graph (`map.rs`);
//! - no function over 120 lines, no file over 600 lines (a trailing
//!   `#[cfg(test)] mod` block not counted; test code not checked);
//! - a function over 80 lines, or a file over 540, says why ("Long because":
//!   `spirit.rs`);
//! - the lints that keep the doors (Cargo.toml's `[workspace.lints]` and
//!   clippy.toml: no `unsafe`, no `std::fs` or process outside `src/host`, no
//!   print outside `src/output`) allowed only in the modules they are for;
//! - one reader: no file is opened for reading anywhere but the host
//!   layer's door, `src/host/read.rs` (and its `read/` part).
//!
//! What the compiler can say, it says: prints outside the output layer,
//! `std::fs` outside the host layer and `unsafe` outside the rdma and sys crates fail
//! `cargo clippy -D warnings` (tests/lints.rs shows it); this test keeps only
//! what the compiler cannot.
//!
//! Each test prints every offender, not just the first.
//!
//! The import graph: the files are found by walking `mod` declarations from
//! each crate root (`#[path]` honoured, `#[cfg(test)]` modules left out). An
//! edge runs from a file to the file of every module path it names
//! (`use crate::..`, `crate::a::b` in code, `super::`, `self::`, a name
//! brought in by `use`, a child module's name, `gdrprov::`/`gdrprov_boot::`
//! from another crate), resolved to the deepest file that holds that path. A
//! file naming one of its own ancestors (`super::Context`) is Rust's nesting,
//! not an import, and adds no edge; a parent naming its child does.
// Test code: fixtures are built with std::fs and the binary is run as a
// process; the house's doors (clippy.toml) are for the product's code.
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod clap_types;
mod front_door;
mod progress;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

mod host_layer;
mod map;
mod spirit;
mod troubleshooting;

const MAX_FN_LINES: usize = 120;
const MAX_FILE_LINES: usize = 600;

/// The tree checked: this repository, or `HOUSE_ROOT` (to try the rules on
/// another checkout, e.g. an old commit unpacked with `git archive`).
fn repo() -> PathBuf {
    std::env::var_os("HOUSE_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

// ---------------------------------------------------------------- lexing

/// The source with comments, strings and char literals blanked out (same
/// length in lines, so line numbers hold).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        let next = c.get(i + 1).copied().unwrap_or('\0');
        if ch == '/' && next == '/' {
            while i < c.len() && c[i] != '\n' {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if ch == '/' && next == '*' {
            let mut depth = 0;
            loop {
                if i >= c.len() {
                    break;
                }
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (ch == 'r' || (ch == 'b' && next == 'r'))
            && !prev_is_ident(&c, i)
            && raw_string_hashes(&c, i + if ch == 'b' { 2 } else { 1 }).is_some()
        {
            let start = i + if ch == 'b' { 2 } else { 1 };
            let hashes = raw_string_hashes(&c, start).unwrap_or(0);
            let mut j = start + hashes + 1;
            while j < c.len() {
                if c[j] == '"' && (0..hashes).all(|k| c.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &x in &c[i..j.min(c.len())] {
                blank(&mut out, x);
            }
            i = j;
        } else if ch == '"' {
            blank(&mut out, ch);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                blank(&mut out, c[i]);
                i += 1;
            }
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            let end = if next == '\\' {
                match c.get(i + 2) {
                    Some('u' | 'x') => (i + 3..c.len()).find(|&j| c[j] == '\''),
                    _ => (c.get(i + 3) == Some(&'\'')).then_some(i + 3),
                }
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    for &x in &c[i..=e] {
                        blank(&mut out, x);
                    }
                    i = e + 1;
                }
                None => {
                    out.push(ch);
                    i += 1;
                }
            }
        } else {
            out.push(ch);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(c: &[char], i: usize) -> bool {
    i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_')
}

/// At `c[at]`: `#*"` opens a raw string; gives the number of `#`.
fn raw_string_hashes(c: &[char], at: usize) -> Option<usize> {
    let n = c[at.min(c.len())..]
        .iter()
        .take_while(|&&x| x == '#')
        .count();
    (c.get(at + n) == Some(&'"')).then_some(n)
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
}

/// Tokens with their 1-based line: identifiers and single punctuation chars
/// (`::` is two `:`). Numbers come out as identifiers; nothing here minds.
fn tokens(stripped: &str) -> Vec<(Tok, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut cur = String::new();
    for ch in stripped.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            cur.push(ch);
            continue;
        }
        if !cur.is_empty() {
            out.push((Tok::Ident(std::mem::take(&mut cur)), line));
        }
        if ch == '\n' {
            line += 1;
        } else if !ch.is_whitespace() {
            out.push((Tok::Punct(ch), line));
        }
    }
    if !cur.is_empty() {
        out.push((Tok::Ident(cur), line));
    }
    out
}

fn is_ident(t: Option<&(Tok, usize)>, s: &str) -> bool {
    matches!(t, Some((Tok::Ident(x), _)) if x == s)
}

fn is_punct(t: Option<&(Tok, usize)>, p: char) -> bool {
    matches!(t, Some((Tok::Punct(x), _)) if *x == p)
}

fn ident_at(t: &[(Tok, usize)], i: usize) -> Option<&str> {
    match t.get(i) {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

/// Index just past the `}` that closes the `{` at `open`.
fn close_of(t: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (j, (tok, _)) in t.iter().enumerate().skip(open) {
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// The `#` of the attribute (`#[...]`, on one line or many) that ends just
/// before token `i`, if one does.
fn attr_before(t: &[(Tok, usize)], i: usize) -> Option<usize> {
    if i == 0 || !is_punct(t.get(i - 1), ']') {
        return None;
    }
    let mut depth = 0;
    let mut j = i - 1;
    loop {
        match &t[j].0 {
            Tok::Punct(']') => depth += 1,
            Tok::Punct('[') => depth -= 1,
            _ => {}
        }
        if depth == 0 || j == 0 {
            break;
        }
        j -= 1;
    }
    (depth == 0 && j > 0 && is_punct(t.get(j - 1), '#')).then(|| j - 1)
}

/// The index just past the attributes (`#[...]`, on one line or many) that
/// start at token `i`.
fn past_attrs(t: &[(Tok, usize)], mut i: usize) -> usize {
    while is_punct(t.get(i), '#') && is_punct(t.get(i + 1), '[') {
        let mut depth = 0;
        let mut j = i + 1;
        while j < t.len() {
            match &t[j].0 {
                Tok::Punct('[') => depth += 1,
                Tok::Punct(']') => depth -= 1,
                _ => {}
            }
            j += 1;
            if depth == 0 {
                break;
            }
        }
        i = j;
    }
    i
}

/// The attributes (`#[...]`) just before token `i`, as text without spaces.
fn attrs_before(t: &[(Tok, usize)], mut i: usize) -> Vec<String> {
    let mut out = Vec::new();
    // Skip visibility: `pub`, `pub(crate)`, `pub(super)`, `pub(in a::b)`.
    if i > 0 && is_punct(t.get(i - 1), ')') {
        if let Some(open) = (0..i).rev().find(|&j| is_punct(t.get(j), '(')) {
            if open > 0 && is_ident(t.get(open - 1), "pub") {
                i = open - 1;
            }
        }
    } else if i > 0 && is_ident(t.get(i - 1), "pub") {
        i -= 1;
    }
    while let Some(hash) = attr_before(t, i) {
        let text: String = t[hash + 2..i - 1]
            .iter()
            .map(|(tok, _)| match tok {
                Tok::Punct(p) => p.to_string(),
                Tok::Ident(s) => s.clone(),
            })
            .collect();
        out.push(text);
        i = hash;
    }
    out
}

fn is_cfg_test(attrs: &[String]) -> bool {
    attrs.iter().any(|a| a == "cfg(test)")
}

// ---------------------------------------------------------------- the tree

/// One source file of the tree.
struct File {
    /// Relative to the repository, for messages.
    rel: String,
    /// Crate name as used in paths (`gdrprov`, `gdrprov_boot`).
    krate: String,
    /// Module path of the file within its crate.
    module: Vec<String>,
    /// Whether the file is test code (a `#[cfg(test)]` module).
    test: bool,
    tokens: Vec<(Tok, usize)>,
    stripped: String,
}

struct Tree {
    files: Vec<File>,
    /// (crate, module path) -> index of the file that holds it.
    modules: HashMap<(String, Vec<String>), usize>,
}

fn crate_roots() -> Vec<(String, PathBuf)> {
    let r = repo();
    let mut roots = vec![
        ("gdrprov".to_string(), r.join("src/lib.rs")),
        ("gdrprov_main".to_string(), r.join("src/main.rs")),
    ];
    let mut crates: Vec<PathBuf> = std::fs::read_dir(r.join("crates"))
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    crates.sort();
    for c in crates {
        let name = c.file_name().unwrap().to_string_lossy().replace('-', "_");
        for root in ["src/lib.rs", "src/main.rs"] {
            if c.join(root).exists() {
                let n = if root.ends_with("main.rs") {
                    format!("{name}_main")
                } else {
                    name.clone()
                };
                roots.push((n, c.join(root)));
            }
        }
    }
    roots
}

fn load_tree() -> Tree {
    let mut tree = Tree {
        files: Vec::new(),
        modules: HashMap::new(),
    };
    for (krate, root) in crate_roots() {
        add_file(&mut tree, &krate, &root, Vec::new(), false, true);
    }
    tree
}

/// Adds `path` as module `module`, then the modules it declares.
fn add_file(
    tree: &mut Tree,
    krate: &str,
    path: &Path,
    module: Vec<String>,
    test: bool,
    dir_owner: bool,
) {
    let Ok(src) = std::fs::read_to_string(path) else {
        return;
    };
    let stripped = strip(&src);
    let toks = tokens(&stripped);
    let rel = path
        .strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string();
    let idx = tree.files.len();
    tree.modules
        .insert((krate.to_string(), module.clone()), idx);
    tree.files.push(File {
        rel,
        krate: krate.to_string(),
        module: module.clone(),
        test,
        tokens: toks.clone(),
        stripped,
    });
    // Directory where this file's child modules live.
    let here = path.parent().unwrap_or(Path::new("."));
    let child_dir = if dir_owner {
        here.to_path_buf()
    } else {
        here.join(path.file_stem().unwrap())
    };
    declare_modules(
        tree,
        krate,
        &toks,
        0,
        toks.len(),
        &module,
        test,
        here,
        &child_dir,
        idx,
    );
}

/// Walks `mod` items in `t[from..to]`: inline ones map to file `idx`; `mod x;`
/// loads the file.
#[allow(clippy::too_many_arguments)]
fn declare_modules(
    tree: &mut Tree,
    krate: &str,
    t: &[(Tok, usize)],
    from: usize,
    to: usize,
    module: &[String],
    test: bool,
    here: &Path,
    child_dir: &Path,
    idx: usize,
) {
    let mut i = from;
    while i < to {
        let is_mod = is_ident(t.get(i), "mod")
            && ident_at(t, i + 1).is_some()
            && (i == 0 || !matches!(t.get(i - 1), Some((Tok::Punct(':'), _))));
        if !is_mod {
            i += 1;
            continue;
        }
        let name = ident_at(t, i + 1).unwrap_or_default().to_string();
        let attrs = attrs_before(t, i);
        let child_test = test || is_cfg_test(&attrs);
        let mut child = module.to_vec();
        child.push(name.clone());
        if is_punct(t.get(i + 2), '{') {
            let end = close_of(t, i + 2);
            tree.modules.insert((krate.to_string(), child.clone()), idx);
            let sub_dir = child_dir.join(&name);
            declare_modules(
                tree,
                krate,
                t,
                i + 3,
                end - 1,
                &child,
                child_test,
                here,
                &sub_dir,
                idx,
            );
            i = end;
            continue;
        }
        // `#[path]` strings were blanked; the literal is read from the raw source.
        let path_attr = attrs.iter().any(|a| a.starts_with("path="));
        let flat = child_dir.join(format!("{name}.rs"));
        let (file, owner) = match path_attr.then(|| raw_path_attr(&tree.files[idx].rel, t[i].1)) {
            Some(Some(p)) => (here.join(p), false),
            _ if flat.exists() => (flat, false),
            _ => (child_dir.join(&name).join("mod.rs"), true),
        };
        add_file(tree, krate, &file, child, child_test, owner);
        i += 3;
    }
}

/// The `#[path = "..."]` literal on the lines just above `line` of `rel`.
fn raw_path_attr(rel: &str, line: usize) -> Option<String> {
    let src = std::fs::read_to_string(repo().join(rel)).ok()?;
    let lines: Vec<&str> = src.lines().collect();
    for l in lines[line.saturating_sub(4)..line.min(lines.len())]
        .iter()
        .rev()
    {
        if let Some(rest) = l.split("#[path").nth(1) {
            let q: Vec<&str> = rest.split('"').collect();
            if q.len() >= 2 {
                return Some(q[1].to_string());
            }
        }
    }
    None
}

// ---------------------------------------------------------------- imports

/// Expands a `use` tree starting at `t[i]` (just after `use`) into full
/// paths (segments as written, `self` leaves merged). Gives them and the
/// index after the `;`.
fn use_paths(t: &[(Tok, usize)], mut i: usize) -> (Vec<Vec<String>>, usize) {
    fn tree(t: &[(Tok, usize)], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
        let mut path = prefix;
        loop {
            match t.get(*i) {
                Some((Tok::Ident(s), _)) if s == "as" => {
                    *i += 2;
                }
                Some((Tok::Ident(s), _)) => {
                    if s != "self" {
                        path.push(s.clone());
                    }
                    *i += 1;
                }
                Some((Tok::Punct(':'), _)) => *i += 1,
                Some((Tok::Punct('*'), _)) => *i += 1,
                Some((Tok::Punct('{'), _)) => {
                    *i += 1;
                    loop {
                        tree(t, i, path.clone(), out);
                        match t.get(*i) {
                            Some((Tok::Punct(','), _)) => *i += 1,
                            Some((Tok::Punct('}'), _)) => {
                                *i += 1;
                                return;
                            }
                            _ => return,
                        }
                        if is_punct(t.get(*i), '}') {
                            *i += 1;
                            return;
                        }
                    }
                }
                _ => {
                    out.push(path);
                    return;
                }
            }
        }
    }
    let mut out = Vec::new();
    if is_punct(t.get(i), ':') {
        i += 2;
    }
    tree(t, &mut i, Vec::new(), &mut out);
    while i < t.len() && !is_punct(t.get(i), ';') {
        i += 1;
    }
    (out, i + 1)
}

/// Every path the file names, as (crate, absolute module path), before
/// resolving to files.
type Aliases = HashMap<String, (String, Vec<String>)>;

/// Every path the file names, as (crate, absolute module path), before
/// resolving to files; and the names its `use` items bring in.
fn named_paths(tree: &Tree, f: &File) -> (Vec<(String, Vec<String>)>, Aliases) {
    let t = &f.tokens;
    let mut aliases: HashMap<String, (String, Vec<String>)> = HashMap::new();
    let mut raw: Vec<Vec<String>> = Vec::new();
    let mut i = 0;
    while i < t.len() {
        if is_ident(t.get(i), "use") && !is_punct(t.get(i + 1), '<') {
            let (paths, next) = use_paths(t, i + 1);
            for p in paths {
                if let Some(abs) = absolute(tree, f, &p, &HashMap::new()) {
                    if let Some(last) = p.last() {
                        aliases.insert(last.clone(), abs);
                    }
                }
                raw.push(p);
            }
            i = next;
            continue;
        }
        // A path in code: ident (:: ident)+ not preceded by `::`.
        let starts = ident_at(t, i).is_some()
            && is_punct(t.get(i + 1), ':')
            && is_punct(t.get(i + 2), ':')
            && !(i > 0 && is_punct(t.get(i - 1), ':'));
        if starts {
            let mut p = Vec::new();
            let mut j = i;
            while let Some(s) = ident_at(t, j) {
                p.push(s.to_string());
                if is_punct(t.get(j + 1), ':') && is_punct(t.get(j + 2), ':') {
                    j += 3;
                } else {
                    j += 1;
                    break;
                }
            }
            raw.push(p);
            i = j;
            continue;
        }
        i += 1;
    }
    let paths = raw
        .iter()
        .filter_map(|p| absolute(tree, f, p, &aliases))
        .collect();
    (paths, aliases)
}

/// The absolute (crate, module path) that `p`, written in file `f`, names.
fn absolute(
    tree: &Tree,
    f: &File,
    p: &[String],
    aliases: &HashMap<String, (String, Vec<String>)>,
) -> Option<(String, Vec<String>)> {
    let first = p.first()?;
    match first.as_str() {
        "crate" => Some((f.krate.clone(), p[1..].to_vec())),
        "self" => Some((
            f.krate.clone(),
            [f.module.clone(), p[1..].to_vec()].concat(),
        )),
        "super" => {
            let mut m = f.module.clone();
            let mut k = 0;
            while p.get(k).map(String::as_str) == Some("super") {
                m.pop();
                k += 1;
            }
            Some((f.krate.clone(), [m, p[k..].to_vec()].concat()))
        }
        name if tree.modules.contains_key(&(name.to_string(), Vec::new())) && name != f.krate => {
            Some((name.to_string(), p[1..].to_vec()))
        }
        name => {
            let mut child = f.module.clone();
            child.push(name.to_string());
            if tree.modules.contains_key(&(f.krate.clone(), child.clone())) {
                return Some((f.krate.clone(), [child, p[1..].to_vec()].concat()));
            }
            let (k, base) = aliases.get(name)?;
            Some((k.clone(), [base.clone(), p[1..].to_vec()].concat()))
        }
    }
}

/// The file holding the deepest module that prefixes `path`; a name that
/// module brings in with `use` (a re-export) is followed to its own file.
fn resolve(
    tree: &Tree,
    aliases: &HashMap<(String, Vec<String>), Aliases>,
    krate: &str,
    path: &[String],
    hops: usize,
) -> Option<usize> {
    let n = (0..=path.len()).rev().find(|&n| {
        tree.modules
            .contains_key(&(krate.to_string(), path[..n].to_vec()))
    })?;
    let here = tree.modules[&(krate.to_string(), path[..n].to_vec())];
    let via = path.get(n).and_then(|name| {
        let (k, base) = aliases
            .get(&(krate.to_string(), path[..n].to_vec()))?
            .get(name)?;
        let target = [base.clone(), path[n + 1..].to_vec()].concat();
        (hops < 8 && (k.as_str(), &target[..]) != (krate, path)).then(|| (k.clone(), target))
    });
    match via {
        Some((k, target)) => resolve(tree, aliases, &k, &target, hops + 1).or(Some(here)),
        None => Some(here),
    }
}

fn is_ancestor(a: &File, b: &File) -> bool {
    a.krate == b.krate && b.module.len() < a.module.len() && a.module.starts_with(&b.module)
}

/// The import graph: edges between files of production code.
fn graph(tree: &Tree) -> BTreeMap<usize, BTreeSet<usize>> {
    let mut named = Vec::new();
    let mut aliases = HashMap::new();
    for f in &tree.files {
        let view = File {
            tokens: production_tokens(f),
            ..shallow(f)
        };
        let (paths, a) = named_paths(tree, &view);
        if !f.test {
            aliases.insert((f.krate.clone(), f.module.clone()), a);
        }
        named.push(paths);
    }
    let mut g: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (i, f) in tree.files.iter().enumerate() {
        if f.test {
            continue;
        }
        let edges = g.entry(i).or_default();
        for (k, p) in &named[i] {
            let Some(j) = resolve(tree, &aliases, k, p, 0) else {
                continue;
            };
            let to = &tree.files[j];
            if j != i && !to.test && !is_ancestor(f, to) {
                edges.insert(j);
            }
        }
    }
    g
}

fn shallow(f: &File) -> File {
    File {
        rel: f.rel.clone(),
        krate: f.krate.clone(),
        module: f.module.clone(),
        test: f.test,
        tokens: Vec::new(),
        stripped: String::new(),
    }
}

/// The file's tokens without `#[cfg(test)]` items (inline test modules,
/// test-only functions and `use`s).
fn production_tokens(f: &File) -> Vec<(Tok, usize)> {
    test_spans(&f.tokens)
        .into_iter()
        .rev()
        .fold(f.tokens.clone(), |mut t, (a, b)| {
            t.drain(a..b);
            t
        })
}

/// Token spans `[a, b)` of items under `#[cfg(test)]`, in order: each from
/// its first attribute (those before `#[cfg(test)]` too) to its end, past
/// any attributes after it, on one line or many.
fn test_spans(t: &[(Tok, usize)]) -> Vec<(usize, usize)> {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i + 6 < t.len() {
        let at_cfg_test = is_punct(t.get(i), '#')
            && is_punct(t.get(i + 1), '[')
            && is_ident(t.get(i + 2), "cfg")
            && is_punct(t.get(i + 3), '(')
            && is_ident(t.get(i + 4), "test")
            && is_punct(t.get(i + 5), ')')
            && is_punct(t.get(i + 6), ']');
        if !at_cfg_test {
            i += 1;
            continue;
        }
        let done = spans.last().map_or(0, |s| s.1);
        let mut start = i;
        while let Some(hash) = attr_before(t, start).filter(|&h| h >= done) {
            start = hash;
        }
        let end = item_end(t, past_attrs(t, i));
        spans.push((start, end));
        i = end;
    }
    spans
}

/// The index just past the item that starts at token `j` (after its
/// attributes): its `;` (outside brackets) or its body's closing `}`; a
/// `use` ends at its `;` whatever braces it holds.
fn item_end(t: &[(Tok, usize)], j: usize) -> usize {
    let is_use = ident_at(t, skip_visibility(t, j)) == Some("use");
    let mut depth = 0i32;
    for k in j..t.len() {
        match &t[k].0 {
            Tok::Punct('(' | '[') => depth += 1,
            Tok::Punct(')' | ']') => depth -= 1,
            Tok::Punct(';') if depth <= 0 => return k + 1,
            Tok::Punct('{') if depth <= 0 && !is_use => return close_of(t, k),
            _ => {}
        }
    }
    t.len()
}

/// The index past `pub`, `pub(crate)`, `pub(in a::b)` at token `j`, if any.
fn skip_visibility(t: &[(Tok, usize)], j: usize) -> usize {
    if !is_ident(t.get(j), "pub") {
        return j;
    }
    if !is_punct(t.get(j + 1), '(') {
        return j + 1;
    }
    (j + 2..t.len())
        .find(|&k| is_punct(t.get(k), ')'))
        .map_or(t.len(), |k| k + 1)
}

// ---------------------------------------------------------------- cycles

/// Strongly connected components with more than one file (Tarjan).
fn cycles(g: &BTreeMap<usize, BTreeSet<usize>>) -> Vec<Vec<usize>> {
    struct St<'a> {
        g: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: HashMap<usize, usize>,
        low: HashMap<usize, usize>,
        on: BTreeSet<usize>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut St, v: usize) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on.insert(v);
        let succ: Vec<usize> =
            s.g.get(&v)
                .map(|e| e.iter().copied().collect())
                .unwrap_or_default();
        for w in succ {
            if !s.index.contains_key(&w) {
                visit(s, w);
                let lw = s.low[&w];
                let lv = s.low.get_mut(&v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(&w) {
                let iw = s.index[&w];
                let lv = s.low.get_mut(&v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[&v] == s.index[&v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(&w);
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = St {
        g,
        index: HashMap::new(),
        low: HashMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for &v in g.keys() {
        if !s.index.contains_key(&v) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// One concrete cycle through `comp` (a shortest path back to its start).
fn one_cycle(g: &BTreeMap<usize, BTreeSet<usize>>, comp: &[usize]) -> Vec<usize> {
    let inside: BTreeSet<usize> = comp.iter().copied().collect();
    let start = *comp.iter().min().unwrap();
    let mut prev: HashMap<usize, usize> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in g.get(&v).into_iter().flatten() {
            if !inside.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut cur = v;
                while cur != start {
                    cur = prev[&cur];
                    path.push(cur);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = prev.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    comp.to_vec()
}

// ---------------------------------------------------------------- sizes

/// Functions of production code: (name, first line, last line).
fn functions(f: &File) -> Vec<(String, usize, usize)> {
    let t = production_tokens(f);
    let mut out = Vec::new();
    for i in 0..t.len() {
        if !is_ident(t.get(i), "fn") {
            continue;
        }
        let Some(name) = ident_at(&t, i + 1) else {
            continue;
        };
        // The body: the first `{` before any `;` (a declaration has none).
        let mut depth = 0i32;
        let mut j = i + 2;
        let open = loop {
            match t.get(j) {
                None => break None,
                Some((Tok::Punct('(' | '<' | '['), _)) => depth += 1,
                Some((Tok::Punct(')' | '>' | ']'), _)) => depth -= 1,
                Some((Tok::Punct(';'), _)) if depth <= 0 => break None,
                Some((Tok::Punct('{'), _)) if depth <= 0 => break Some(j),
                _ => {}
            }
            // `->` is not a closing angle bracket.
            if is_punct(t.get(j), '>') && j > 0 && is_punct(t.get(j - 1), '-') {
                depth += 1;
            }
            j += 1;
        };
        let Some(open) = open else { continue };
        let close = close_of(&t, open);
        let last = t.get(close.saturating_sub(1)).map_or(t[i].1, |x| x.1);
        out.push((name.to_string(), t[i].1, last));
    }
    out
}

/// Lines of the file without a trailing `#[cfg(test)] mod` block (its
/// attributes, before and after `#[cfg(test)]`, included).
fn production_lines(f: &File) -> usize {
    let total = f.stripped.lines().count();
    let t = &f.tokens;
    let Some(&(a, b)) = test_spans(t).last() else {
        return total;
    };
    let is_mod = ident_at(t, skip_visibility(t, past_attrs(t, a))) == Some("mod");
    if b >= t.len() && is_mod {
        t[a].1 - 1
    } else {
        total
    }
}

// ---------------------------------------------------------------- allows

/// Whether a file (its path in the repository) may allow a lint.
type MayAllow = fn(&str) -> bool;

/// The lints whose `allow` only some places may use: the compiler keeps the
/// rules (Cargo.toml's `[workspace.lints]`, clippy.toml), this test keeps the
/// exceptions where the rules say, so a rule cannot be switched off quietly.
/// (lint, may a file at this path allow it?)
const GUARDED: &[(&str, MayAllow)] = &[
    // unsafe code lives in the RDMA/GPU crate and in crates/gdrprov-sys
    // (the host layer's raw system calls: freeze/thaw, checkpoint, fork).
    ("unsafe_code", |rel| {
        rel.starts_with("crates/gdrprov-rdma/src/") || rel.starts_with("crates/gdrprov-sys/src/")
    }),
    // The filesystem and processes: the host layer. std::io::stdout/stderr
    // are disallowed methods too: the output layer.
    ("disallowed_methods", |rel| {
        rel.starts_with("src/host/") || rel.starts_with("src/output/")
    }),
    ("disallowed_types", |rel| rel.starts_with("src/host/")),
    ("disallowed_macros", |rel| rel.starts_with("src/host/")),
    // Prints: the output layer.
    ("print_stdout", |rel| rel.starts_with("src/output/")),
    ("print_stderr", |rel| rel.starts_with("src/output/")),
];

/// Every `allow(..)`/`expect(..)` of a guarded lint in production code
/// (test code may do what it likes): (line, lint).
fn guarded_allows(f: &File) -> Vec<(usize, String)> {
    let t = production_tokens(f);
    let mut out = Vec::new();
    for i in 0..t.len() {
        let is_allow =
            matches!(ident_at(&t, i), Some("allow" | "expect")) && is_punct(t.get(i + 1), '(');
        if !is_allow {
            continue;
        }
        let mut depth = 0;
        for (tok, line) in &t[i + 1..] {
            match tok {
                Tok::Punct('(') => depth += 1,
                Tok::Punct(')') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Tok::Ident(name) if GUARDED.iter().any(|(g, _)| g == name) => {
                    out.push((*line, name.clone()));
                }
                _ => {}
            }
        }
    }
    out
}

// ---------------------------------------------------------------- the door

/// The one door for reading (issue 37): `src/host/read.rs` and the part of
/// it in `src/host/read/`.
fn is_the_door(rel: &str) -> bool {
    // The write door opens files too (to write them, and directories to
    // walk): both doors, no other module.
    rel == "src/host/read.rs" || rel.starts_with("src/host/read/") || is_the_write_door(rel)
}

/// Every place production code opens a file to read it, by itself:
/// `File::open`, `std::fs::read`, `std::fs::read_to_string`, an
/// `OpenOptions` with `.read(true)`, nix's `fcntl::open`, `openat`,
/// `openat2`. (line, what). Writing opens (`File::create`, `OpenOptions`
/// with `.write(true)` alone), listing a directory and reading a symlink
/// are not reads of a file's bytes.
fn file_reads(f: &File) -> Vec<(usize, String)> {
    let t = production_tokens(f);
    let path_sep = |i: usize| is_punct(t.get(i), ':') && is_punct(t.get(i + 1), ':');
    let mut out = Vec::new();
    for (i, (_, line)) in t.iter().enumerate() {
        let what = match ident_at(&t, i) {
            Some(first @ ("File" | "fs" | "fcntl")) if path_sep(i + 1) => {
                match (first, ident_at(&t, i + 3)) {
                    ("File", Some("open")) => Some("File::open"),
                    ("fs", Some("read")) => Some("std::fs::read"),
                    ("fs", Some("read_to_string")) => Some("std::fs::read_to_string"),
                    ("fcntl", Some("open")) => Some("nix::fcntl::open"),
                    _ => None,
                }
            }
            Some(name @ ("openat" | "openat2")) => Some(name),
            Some("read")
                if i > 0
                    && is_punct(t.get(i - 1), '.')
                    && is_punct(t.get(i + 1), '(')
                    && is_ident(t.get(i + 2), "true") =>
            {
                Some("OpenOptions with .read(true)")
            }
            _ => None,
        };
        if let Some(w) = what {
            out.push((*line, w.to_string()));
        }
    }
    out
}

/// The one door for writing: `src/host/door.rs` and `src/host/door/`.
fn is_the_write_door(rel: &str) -> bool {
    rel == "src/host/door.rs" || rel.starts_with("src/host/door/")
}

/// Every place production code writes, creates, renames or removes a file
/// or directory, or changes its mode or owner, by itself: std's
/// `fs::write`, `File::create`, an `OpenOptions` with `.write(true)`,
/// `.create(true)`, `.append(true)` or `.truncate(true)`, `fs::rename`,
/// `remove_file`, `remove_dir*`, `create_dir*`, `DirBuilder`,
/// `set_permissions`, `symlink`, `hard_link`, `fs::copy`, `chown`; nix's
/// `unlink*`, `mkdir*`, `rename*`, `fchmod*`, `fchown*`, `symlinkat`,
/// `linkat`, `mkfifo*`, `mknod*`, `*truncate`, `*fallocate`; and a write-mode
/// open (`O_WRONLY`, `O_RDWR`, `O_CREAT`, `O_TRUNC`). (line, what).
fn file_writes(f: &File) -> Vec<(usize, String)> {
    let t = production_tokens(f);
    let path_sep = |i: usize| is_punct(t.get(i), ':') && is_punct(t.get(i + 1), ':');
    let method = |i: usize| i > 0 && is_punct(t.get(i - 1), '.') && is_punct(t.get(i + 1), '(');
    // `fs::NAME`, already counted by the first arm.
    let after_fs = |i: usize| i >= 3 && path_sep(i - 2) && is_ident(t.get(i - 3), "fs");
    let mut out = Vec::new();
    for (i, (_, line)) in t.iter().enumerate() {
        let Some(name) = ident_at(&t, i) else {
            continue;
        };
        let what = match name {
            "fs" | "File" if path_sep(i + 1) => match (name, ident_at(&t, i + 3)) {
                (
                    "fs",
                    Some(
                        w @ ("write" | "rename" | "remove_file" | "remove_dir" | "remove_dir_all"
                        | "create_dir" | "create_dir_all" | "set_permissions" | "symlink"
                        | "hard_link" | "copy" | "chown" | "lchown" | "fchown"),
                    ),
                ) => Some(format!("fs::{w}")),
                ("File", Some(w @ ("create" | "create_new"))) => Some(format!("File::{w}")),
                _ => None,
            },
            "DirBuilder" => Some("DirBuilder".to_string()),
            "unlink" | "unlinkat" | "mkdir" | "mkdirat" | "renameat" | "renameat2" | "fchmod"
            | "fchmodat" | "fchownat" | "symlinkat" | "linkat" | "mkfifo" | "mkfifoat"
            | "mknod" | "mknodat" | "truncate" | "ftruncate" | "fallocate" | "posix_fallocate"
            | "O_WRONLY" | "O_RDWR" | "O_CREAT" | "O_TRUNC"
                if !method(i) && !is_ident(t.get(i.wrapping_sub(1)), "fn") =>
            {
                Some(name.to_string())
            }
            "fchown" | "chown" | "lchown" | "symlink" | "hard_link" | "remove_file"
            | "remove_dir" | "create_dir_all"
                if is_punct(t.get(i + 1), '(')
                    && !method(i)
                    && !after_fs(i)
                    && !is_ident(t.get(i.wrapping_sub(1)), "fn") =>
            {
                Some(name.to_string())
            }
            "set_permissions" | "set_len" if method(i) => Some(format!(".{name}(")),
            "write" | "create" | "create_new" | "append" | "truncate"
                if method(i) && is_ident(t.get(i + 2), "true") =>
            {
                Some(format!("OpenOptions with .{name}(true)"))
            }
            _ => None,
        };
        if let Some(w) = what {
            out.push((*line, w));
        }
    }
    out
}

// ---------------------------------------------------------------- tests

#[test]
fn the_walk_finds_the_tree() {
    let tree = load_tree();
    let names: BTreeSet<&str> = tree.files.iter().map(|f| f.rel.as_str()).collect();
    for must in [
        "src/lib.rs",
        "src/main.rs",
        "src/plan/mod.rs",
        "src/plan/modules/kmod.rs",
    ] {
        assert!(
            names.contains(must),
            "{must} not found by the walk: {names:?}"
        );
    }
    // Every .rs file under the roots is reached (a stray file would escape the rules).
    let mut stray = Vec::new();
    let mut dirs = vec![repo().join("src")];
    if let Ok(rd) = std::fs::read_dir(repo().join("crates")) {
        dirs.extend(rd.filter_map(|e| e.ok()).map(|e| e.path().join("src")));
    }
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(repo()).unwrap().display().to_string();
                if !names.contains(rel.as_str()) {
                    stray.push(rel);
                }
            }
        }
    }
    assert!(
        stray.is_empty(),
        "files no `mod` declaration reaches: {stray:?}"
    );
}

#[test]
fn the_lexer_sees_through_strings_and_comments() {
    let s = strip("let a = \"use crate::x; println!()\"; // println!\nlet c = '\"'; let r = r#\"a\"b\"#; x::<'a>()");
    assert!(!s.contains("println"), "{s}");
    assert!(!s.contains("crate"), "{s}");
    assert!(s.contains("x::<'a>()"), "{s}");
    assert_eq!(s.lines().count(), 2);
    let t = tokens(&strip("use crate::{a::{self, B}, c::D as E};"));
    let (paths, _) = use_paths(&t, 1);
    assert_eq!(
        paths,
        vec![
            vec!["crate".to_string(), "a".into()],
            vec!["crate".to_string(), "a".into(), "B".into()],
            vec!["crate".to_string(), "c".into(), "D".into()],
        ]
    );
}

/// A `File` made of a literal source, for the self-tests.
fn source_file(rel: &str, module: &[&str], src: &str) -> File {
    let stripped = strip(src);
    File {
        rel: rel.into(),
        krate: "gdrprov".into(),
        module: module.iter().map(|m| m.to_string()).collect(),
        test: false,
        tokens: tokens(&stripped),
        stripped,
    }
}

/// A test module is found whatever attributes stand before or after its
/// `#[cfg(test)]`, on one line or many (`facts/boot_shape.rs` has a
/// multi-line `#[allow(..)]` after it, and was counted as 600 lines).
#[test]
fn the_test_module_finder_sees_past_any_attributes() {
    let after = "fn a() {}\n\n#[cfg(test)]\n#[allow(\n    clippy::disallowed_methods,\n    \
                 clippy::disallowed_types,\n    reason = \"test fixtures\"\n)]\nmod tests {\n    \
                 fn t() {}\n}\n";
    let f = source_file("src/x.rs", &["x"], after);
    assert_eq!(
        production_lines(&f),
        2,
        "a multi-line attribute after #[cfg(test)]"
    );
    let one_line =
        "fn a() {}\n#[cfg(test)]\n#[allow(clippy::disallowed_methods, clippy::disallowed_types)]\n\
                    mod tests {\n    fn t() {}\n}\n";
    let f = source_file("src/x.rs", &["x"], one_line);
    assert_eq!(
        production_lines(&f),
        1,
        "a long one-line attribute after #[cfg(test)]"
    );
    let before =
        "fn a() {}\n#[allow(\n    unused\n)]\n#[cfg(test)]\n#[path = \"x_tests.rs\"]\nmod tests;\n";
    let f = source_file("src/x.rs", &["x"], before);
    assert_eq!(
        production_lines(&f),
        1,
        "attributes before #[cfg(test)] are the test module's"
    );
    // A test-only item: its attributes and its whole body are left out of
    // production code, a `;` inside its signature's brackets included.
    let item =
        "#[cfg(test)]\n#[allow(\n    dead_code\n)]\nfn f() -> [u8; 2] { [0; 2] }\nfn g() {}\n";
    let f = source_file("src/x.rs", &["x"], item);
    let names: Vec<String> = functions(&f).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, vec!["g".to_string()]);
    // The walk of `mod` declarations sees `cfg(test)` among other attributes.
    let t = tokens(&strip(before));
    let m = (0..t.len())
        .find(|&i| is_ident(t.get(i), "mod"))
        .unwrap_or(0);
    assert!(
        is_cfg_test(&attrs_before(&t, m)),
        "{:?}",
        attrs_before(&t, m)
    );
}

#[test]
fn no_import_cycles() {
    let tree = load_tree();
    let g = graph(&tree);
    let found = cycles(&g);
    let mut report = Vec::new();
    for comp in &found {
        let mut files: Vec<&str> = comp.iter().map(|&i| tree.files[i].rel.as_str()).collect();
        files.sort();
        let path: Vec<&str> = one_cycle(&g, comp)
            .iter()
            .map(|&i| tree.files[i].rel.as_str())
            .collect();
        report.push(format!(
            "cycle of {} files: {}\n  e.g. {}",
            files.len(),
            files.join(", "),
            path.join(" -> ")
        ));
    }
    let edges: usize = g.values().map(BTreeSet::len).sum();
    println!(
        "import graph: {} files, {edges} edges, {} cycles",
        g.len(),
        found.len()
    );
    for r in &report {
        println!("{r}");
    }
    assert!(
        edges > 50,
        "the import graph is implausibly small ({edges} edges); the walk is broken"
    );
    assert!(report.is_empty(), "import cycles:\n{}", report.join("\n"));
}

/// The folder (or top file) of `src/`, or the crate, that a file belongs to:
/// `src/plan/modules/kmod.rs` -> `plan`, `src/ops.rs` and `src/ops/recover.rs`
/// -> `ops`, `crates/gdrprov-boot/src/x.rs` -> `gdrprov_boot`.
fn folder(f: &File) -> String {
    match f.krate.as_str() {
        "gdrprov" => f.module.first().cloned().unwrap_or_else(|| "lib".into()),
        "gdrprov_main" => "main".into(),
        k => k.to_string(),
    }
}

/// The import graph between folders: an arrow wherever one file of a folder
/// imports a file of another, with the files and names that make it.
fn folder_graph(tree: &Tree) -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (i, to) in graph(tree) {
        let (a, from) = (folder(&tree.files[i]), &tree.files[i].rel);
        for j in to {
            let b = folder(&tree.files[j]);
            if a != b {
                let why = format!("{from} -> {}", tree.files[j].rel);
                out.entry(a.clone())
                    .or_default()
                    .entry(b)
                    .or_default()
                    .insert(why);
            }
        }
    }
    out
}

/// One way for every arrow between folders: no two folders import each
/// other, directly or around a longer loop (a loop between folders means one
/// of them is not the layer it says it is).
#[test]
fn no_folders_that_import_each_other() {
    let tree = load_tree();
    let fg = folder_graph(&tree);
    let names: Vec<&String> = fg
        .keys()
        .chain(fg.values().flat_map(|m| m.keys()))
        .collect();
    let index: BTreeMap<&String, usize> = names
        .iter()
        .copied()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, i))
        .collect();
    let by_index: BTreeMap<usize, &String> = index.iter().map(|(n, i)| (*i, *n)).collect();
    let mut g: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (a, to) in &fg {
        for b in to.keys() {
            g.entry(index[a]).or_default().insert(index[b]);
        }
    }
    let mut report = Vec::new();
    let arrow = |a: &String, b: &String| fg.get(a).and_then(|m| m.get(b));
    for comp in cycles(&g) {
        let mut members: Vec<&String> = comp.iter().map(|i| by_index[i]).collect();
        members.sort();
        let path = one_cycle(&g, &comp);
        let mut lines = vec![format!(
            "folders in a loop: {} (e.g. {})",
            members
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            path.iter()
                .map(|i| by_index[i].as_str())
                .collect::<Vec<_>>()
                .join(" -> ")
        )];
        // Each arrow inside the loop: a two-way pair's lighter side with all
        // its files (the side to remove), any other arrow with its count.
        for a in &members {
            for b in &members {
                let Some(why) = arrow(a, b) else { continue };
                let back = arrow(b, a).map_or(0, BTreeSet::len);
                if back > 0 && why.len() <= back {
                    lines.push(format!("  {a} <-> {b}, {a} -> {b}:"));
                    lines.extend(why.iter().map(|w| format!("    {w}")));
                } else {
                    let first = why.iter().next().map_or("", String::as_str);
                    lines.push(format!("  {a} -> {b}: {} imports, e.g. {first}", why.len()));
                }
            }
        }
        report.push(lines.join("\n"));
    }
    for (a, to) in &fg {
        println!(
            "{a} -> {}",
            to.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let arrows: usize = fg.values().map(BTreeMap::len).sum();
    println!(
        "folder graph: {} folders, {arrows} arrows, {} loops",
        index.len(),
        report.len()
    );
    assert!(
        index.len() > 10 && arrows > 30,
        "the folder graph is implausibly small ({} folders, {arrows} arrows); the walk is broken",
        index.len()
    );
    assert!(report.is_empty(), "{}", report.join("\n"));
}

#[test]
fn no_long_functions_or_files() {
    let tree = load_tree();
    let mut offenders = Vec::new();
    for f in tree.files.iter().filter(|f| !f.test) {
        let lines = production_lines(f);
        if lines > MAX_FILE_LINES {
            offenders.push(format!(
                "{}: {lines} lines without tests (max {MAX_FILE_LINES})",
                f.rel
            ));
        }
        for (name, a, b) in functions(f) {
            let n = b + 1 - a;
            if n > MAX_FN_LINES {
                offenders.push(format!(
                    "{}:{a}: fn {name} is {n} lines (max {MAX_FN_LINES})",
                    f.rel
                ));
            }
        }
    }
    for o in &offenders {
        println!("{o}");
    }
    assert!(
        offenders.is_empty(),
        "{} over the size limits:\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_lints_are_allowed_only_where_the_rules_say() {
    let tree = load_tree();
    let mut offenders = Vec::new();
    let mut seen = 0;
    for f in tree.files.iter().filter(|f| !f.test) {
        for (line, lint) in guarded_allows(f) {
            seen += 1;
            let may = GUARDED
                .iter()
                .find(|(g, _)| *g == lint)
                .is_some_and(|(_, may)| may(&f.rel));
            if !may {
                offenders.push(format!("{}:{line}: allows {lint}", f.rel));
            }
        }
    }
    for o in &offenders {
        println!("{o}");
    }
    // The host layer, the output layer and the rdma crate do allow them: a
    // scan that finds none is broken.
    assert!(
        seen >= 3,
        "found only {seen} allows of guarded lints; the scan is broken"
    );
    assert!(
        offenders.is_empty(),
        "{} allows of a house lint outside the module it is for (Cargo.toml's [workspace.lints], clippy.toml; \
         move the code behind its door instead: src/host for files and processes, src/output for prints, \
         crates/gdrprov-rdma or crates/gdrprov-sys for unsafe code):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_allow_scan_sees_a_stray_allow() {
    let src = "#![allow(clippy::print_stdout)]\nfn f() {}\n#[cfg(test)]\n#[allow(unsafe_code)]\nmod tests {}\n#[allow(unsafe_code, reason = \"x\")]\nfn g() {}\n";
    let stripped = strip(src);
    let f = File {
        rel: "src/plan/x.rs".into(),
        krate: "gdrprov".into(),
        module: vec!["plan".into(), "x".into()],
        test: false,
        tokens: tokens(&stripped),
        stripped,
    };
    assert_eq!(
        guarded_allows(&f),
        vec![
            (1, "print_stdout".to_string()),
            (6, "unsafe_code".to_string())
        ]
    );
}

/// The calls `scan` finds in the product's code: how many stand in a door
/// (`is_door`), and every other one as `FILE:LINE: what` (also printed).
fn door_scan(
    scan: fn(&File) -> Vec<(usize, String)>,
    is_door: fn(&str) -> bool,
) -> (usize, Vec<String>) {
    let tree = load_tree();
    let mut offenders = Vec::new();
    let mut at_the_door = 0;
    for f in tree.files.iter().filter(|f| !f.test) {
        for (line, what) in scan(f) {
            if is_door(&f.rel) {
                at_the_door += 1;
            } else {
                offenders.push(format!("{}:{line}: {what}", f.rel));
            }
        }
    }
    for o in &offenders {
        println!("{o}");
    }
    (at_the_door, offenders)
}

/// One reader: every file gdrprov reads is opened by the host layer's door,
/// `src/host/read.rs`, which refuses what is not a regular file, never
/// blocks and reads at most a stated size (`ReadLimit`). clippy keeps
/// `std::fs` out of everything but `src/host`; this keeps the rest of
/// `src/host` (and anything allowed `std::fs` anywhere) from opening a
/// file to read it by itself: it asks the door.
#[test]
fn every_file_read_goes_through_the_one_door() {
    let (at_the_door, offenders) = door_scan(file_reads, is_the_door);
    // The door itself opens files (a root's, one named by the user, the
    // lock, a directory to sync): a scan that finds none there is broken.
    assert!(
        at_the_door >= 5,
        "found only {at_the_door} file opens in src/host/read*; the scan is broken"
    );
    assert!(
        offenders.is_empty(),
        "{} files opened for reading outside the door (src/host/read.rs): read through it instead \
         (Host::read*, host::read_local / open_local with a ReadLimit, or a function of the door \
         for a new kind of open):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_door_scan_sees_every_way_to_open_a_file_for_reading() {
    let src = "use std::fs::read_to_string;\nfn a() { let _ = std::fs::File::open(p); }\n\
               fn b() { std::fs::read(p); std::fs::read_dir(p); std::fs::read_link(p); }\n\
               fn c() { OpenOptions::new()\n.read(true).open(p); OpenOptions::new().write(true); }\n\
               fn d() { nix::fcntl::open(p); openat2(r, p, h); File::create(p); }\n\
               #[cfg(test)]\nmod tests { fn t() { std::fs::read(p); } }\n";
    let f = source_file("src/host/fs.rs", &["host", "fs"], src);
    let found = file_reads(&f);
    let found: Vec<(usize, &str)> = found.iter().map(|(l, w)| (*l, w.as_str())).collect();
    assert_eq!(
        found,
        vec![
            (1, "std::fs::read_to_string"),
            (2, "File::open"),
            (3, "std::fs::read"),
            (5, "OpenOptions with .read(true)"),
            (6, "nix::fcntl::open"),
            (6, "openat2"),
        ]
    );
    assert!(is_the_door("src/host/read.rs") && is_the_door("src/host/read/in_root.rs"));
    assert!(!is_the_door("src/host/fs.rs") && !is_the_door("src/host/reader.rs"));
}

#[test]
fn every_file_write_goes_through_the_one_door() {
    let (at_the_door, offenders) = door_scan(file_writes, is_the_write_door);
    // The door itself writes, renames, removes and makes directories: a
    // scan that finds few there is broken.
    assert!(
        at_the_door >= 10,
        "found only {at_the_door} writes in src/host/door*; the scan is broken"
    );
    assert!(
        offenders.is_empty(),
        "{} file-system writes outside the write door (src/host/door.rs): write through it instead \
         (Host::write_atomic, copy_atomic, create_dir_all, remove, rename_dir, remove_dir_all, \
         host::write_local for a file named by the user, or a function of the door for a new kind \
         of write), so that no write ever follows a symlink:\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_write_scan_sees_every_way_to_write_a_file() {
    let src = "fn a() { std::fs::write(p, b); File::create(p); }\n\
               fn b() { OpenOptions::new().write(true).create(true); std::fs::rename(a, b); }\n\
               fn c() { unlinkat(d, n, f); nix::sys::stat::mkdirat(d, n, m); f.set_permissions(p); }\n\
               fn d() { std::os::unix::fs::symlink(a, b); DirBuilder::new(); OFlag::O_CREAT; }\n\
               fn e() { host.remove_dir_all(p); host.create_dir_all(p, m); host.write_atomic(p); }\n\
               fn f() { OpenOptions::new().read(true).write(false); std::fs::read(p); }\n\
               #[cfg(test)]\nmod tests { fn t() { std::fs::write(p, b); } }\n";
    let f = source_file("src/host/fs.rs", &["host", "fs"], src);
    let found = file_writes(&f);
    let found: Vec<(usize, &str)> = found.iter().map(|(l, w)| (*l, w.as_str())).collect();
    assert_eq!(
        found,
        vec![
            (1, "fs::write"),
            (1, "File::create"),
            (2, "OpenOptions with .write(true)"),
            (2, "OpenOptions with .create(true)"),
            (2, "fs::rename"),
            (3, "unlinkat"),
            (3, "mkdirat"),
            (3, ".set_permissions("),
            (4, "fs::symlink"),
            (4, "DirBuilder"),
            (4, "O_CREAT"),
        ]
    );
    assert!(is_the_write_door("src/host/door.rs") && is_the_write_door("src/host/door/ops.rs"));
    assert!(!is_the_write_door("src/host/fs.rs") && !is_the_write_door("src/host/doors.rs"));
}
