//! The front door (issue 44): `src/commands` parses, asks and renders; every
//! stage is reached through `ops`, the API the Ansible module and any later
//! caller share. So a file of `src/commands` imports only `commands` itself
//! (its `cli` types and its own modules), `ops`, `output`, `names` and
//! `error`. The imports are the house's graph (`use crate::x`, `crate::x::y`
//! in code, a name brought in by `use`), resolved through re-exports: a name
//! `ops` passes through from a stage still counts as that stage.
//!
//! `src/commands/cli/` is the command line's types, the parsing itself: it
//! names the grammar's parsers (issue 43: a name is checked by its type at
//! clap's door) and the domain types its options map to, and is not checked
//! here.

use super::{folder, graph, load_tree};

/// What a file of the front door may import.
const ALLOWED: &[&str] = &["commands", "ops", "output", "names", "error"];

/// Every import of a front-door file that is not allowed, as
/// `FILE -> FILE (FOLDER)`.
fn offenders() -> Vec<String> {
    let tree = load_tree();
    let mut out = Vec::new();
    let mut seen = 0;
    for (i, to) in graph(&tree) {
        let f = &tree.files[i];
        let front = f.rel.starts_with("src/commands/") && !f.rel.starts_with("src/commands/cli/");
        if !front {
            continue;
        }
        seen += 1;
        for j in to {
            let b = folder(&tree.files[j]);
            if !ALLOWED.contains(&b.as_str()) {
                out.push(format!("{} -> {} ({b})", f.rel, tree.files[j].rel));
            }
        }
    }
    // The front door has a dozen files and more: fewer means the walk is broken.
    assert!(
        seen >= 10,
        "only {seen} files of src/commands/ seen: the walk is broken"
    );
    out
}

#[test]
fn commands_imports_only_cli_ops_output_names_and_error() {
    let bad = offenders();
    assert!(
        bad.is_empty(),
        "src/commands parses, asks and renders; reach the stage through src/ops (add the operation there), the exit codes through `error::exit`:\n{}",
        bad.join("\n")
    );
}
