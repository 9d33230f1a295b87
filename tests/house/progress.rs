//! Every progress bar goes through the output layer (issue 44): indicatif,
//! which draws them, is named in `src/output/` alone. A stage counts
//! through `output::progress::Bar`, or (bench, which the output layer
//! imports) through `bench::progress::Bar`, made by the output layer and
//! handed down by the command. So `--format json` and a log never get a
//! bar, by the one rule the output layer keeps.

use super::{load_tree, Tok};

/// Where `toks` name indicatif, as lines.
fn indicatif_lines(toks: &[(Tok, usize)]) -> Vec<usize> {
    toks.iter()
        .filter(|(t, _)| *t == Tok::Ident("indicatif".into()))
        .map(|(_, l)| *l)
        .collect()
}

#[test]
fn every_progress_bar_goes_through_the_output_layer() {
    let tree = load_tree();
    let mut offenders = Vec::new();
    let mut in_output = 0;
    for f in &tree.files {
        for line in indicatif_lines(&f.tokens) {
            if f.rel.starts_with("src/output/") {
                in_output += 1;
            } else {
                offenders.push(format!("{}:{line}: indicatif", f.rel));
            }
        }
    }
    assert!(
        in_output > 0,
        "indicatif is named nowhere in src/output/: the scan is broken"
    );
    assert!(
        offenders.is_empty(),
        "{} progress bars drawn outside src/output/: count through output::progress::Bar \
         (bench: through the bench::progress::Bars its caller passes, made by \
         output::progress::bench_bar):\n{}",
        offenders.len(),
        offenders.join("\n")
    );
}

#[test]
fn the_progress_scan_sees_indicatif_in_code_not_in_comments() {
    let src =
        "use indicatif::ProgressBar;\n// indicatif here\nfn f(b: &indicatif::ProgressBar) {}\n";
    let toks = super::tokens(&super::strip(src));
    assert_eq!(indicatif_lines(&toks), vec![1, 3]);
}
