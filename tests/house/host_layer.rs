//! The host layer touches the machine and decides nothing (issue 44): the
//! files under `src/host` import, of gdrprov's own code, only `error` and
//! each other. What to flush how, which boot entry to hold on which copy, and
//! which command rebuilds an initramfs are decided in `plan` and `apply` and
//! handed down as data; so the host layer needs none of gdrprov's domain
//! crates (`gdrprov_rdma`, `gdrprov_boot`) nor any other gdrprov module.
//!
//! Outside crates are free (std, nix, libc, duct, serde, ...). The reading of
//! the "no other gdrprov module or crate" kept here: `gdrprov_sys`
//! counts as an outside crate. It is a leaf of raw system calls (freeze/thaw,
//! ext4 checkpoint, fork, SIGPIPE) on libc alone, with no gdrprov knowledge,
//! as nix is; it exists only so that `unsafe` stays out of the gdrprov crate.
//! A gdrprov crate that knows the domain (boot loaders, RDMA) is refused.

use super::{folder, graph, load_tree};

/// The folders (top-level modules of the gdrprov crate, or workspace crates)
/// that the host layer may import.
const HOST_MAY_IMPORT: &[&str] = &["host", "error", "gdrprov_sys"];

#[test]
fn the_host_layer_imports_only_error_and_outside_crates() {
    let tree = load_tree();
    let mut seen = 0;
    let mut offenders = Vec::new();
    for (i, to) in graph(&tree) {
        let from = &tree.files[i];
        if from.krate != "gdrprov" || folder(from) != "host" {
            continue;
        }
        seen += 1;
        for j in to {
            let target = folder(&tree.files[j]);
            if !HOST_MAY_IMPORT.contains(&target.as_str()) {
                offenders.push(format!("{} -> {}", from.rel, tree.files[j].rel));
            }
        }
    }
    assert!(
        seen >= 10,
        "found only {seen} files under src/host; the walk is broken"
    );
    assert!(
        offenders.is_empty(),
        "{} imports from the host layer of gdrprov code other than `error` (the host layer touches the \
         machine and decides nothing: decide in plan/apply and hand the host layer data; raw system calls \
         go in crates/gdrprov-sys):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}
