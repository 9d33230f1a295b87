//! No clap type outside the command line's folder (issue 44): the domain's
//! enums (output's format, the facts' architecture, bench's operation, the
//! RDMA crate's memory kind) carry no `ValueEnum`; `src/commands/cli/`
//! has a value enum for each option and maps it to the domain's type. So
//! the stages, the output layer and the crates build and read without the
//! command line's parser, and an option's words live in one folder.

use super::{load_tree, repo, Tok};

/// Where clap may be named: the command line's types, and the binary's root.
fn may_name_clap(rel: &str) -> bool {
    rel.starts_with("src/commands/cli/") || rel == "src/main.rs"
}

/// Where `toks` name clap: the crates (`clap::`, `clap_complete`,
/// `clap_mangen`), its derive (`ValueEnum`, `Parser`, `Args`,
/// `Subcommand` after `derive(`) and its attributes (`#[arg(`,
/// `#[value(`, `#[command(`, `#[clap(`), as (line, what).
fn clap_names(toks: &[(Tok, usize)]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, (tok, line)) in toks.iter().enumerate() {
        let Tok::Ident(id) = tok else { continue };
        let attr = i >= 2
            && toks[i - 2].0 == Tok::Punct('#')
            && toks[i - 1].0 == Tok::Punct('[')
            && ["arg", "value", "command", "clap"].contains(&id.as_str());
        if attr {
            out.push((*line, format!("#[{id}(...)]: a clap attribute")));
        } else if ["clap", "clap_complete", "clap_mangen", "ValueEnum"].contains(&id.as_str()) {
            out.push((*line, format!("`{id}`")));
        }
    }
    out
}

/// A crate's manifest that depends on clap or has a `clap` feature.
fn manifests_naming_clap() -> Vec<String> {
    let dir = repo().join("crates");
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let manifest = e.path().join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_default();
        for (n, l) in text.lines().enumerate() {
            if !l.trim_start().starts_with('#') && l.contains("clap") {
                out.push(format!(
                    "crates/{}/Cargo.toml:{}: {}",
                    e.file_name().to_string_lossy(),
                    n + 1,
                    l.trim()
                ));
            }
        }
    }
    out
}

#[test]
fn no_clap_type_outside_the_command_line() {
    let tree = load_tree();
    let mut offenders = manifests_naming_clap();
    for f in tree.files.iter().filter(|f| !may_name_clap(&f.rel)) {
        for (line, what) in clap_names(&f.tokens) {
            offenders.push(format!("{}:{line}: {what}", f.rel));
        }
    }
    for o in &offenders {
        println!("{o}");
    }
    assert!(
        offenders.is_empty(),
        "{} places name clap outside src/commands/cli/: give the option a value enum in \
         src/commands/cli/values.rs mapped to the domain's type by `From` \
         (`value_parser = values::parser::<Arg, Domain>()`), and keep clap's calls (parsing, \
         completions, the manual page) in src/commands/cli/:\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_clap_scan_sees_derives_attributes_and_paths() {
    let src = "#[derive(Debug, clap::ValueEnum)]\nenum A { #[value(name = \"x\")] X }\n\
               use clap::Parser;\n// clap in a comment\nfn f() { let s = \"clap::\"; }\n\
               #[command(flatten)]\nfn g() { clap_mangen::Man::new(c); }\n";
    let toks = super::tokens(&super::strip(src));
    let lines: Vec<usize> = clap_names(&toks).iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, vec![1, 1, 2, 3, 6, 7]);
}
