//! docs/troubleshooting.md is generated from the rule tables
//! (`gdrprov::checks::doctor::tables`): its part between the markers is the
//! tables' rows (symptom, cause, what gdrprov says, fix, report), so page
//! and code cannot drift. When they differ the test fails;
//! `HOUSE_WRITE_TROUBLESHOOTING=1 cargo test --test house troubleshooting`
//! rewrites that part in place, keeping the hand-written text around it.

use super::repo;
use gdrprov::checks::doctor::tables::{page, BEGIN, END};

const DOC: &str = "docs/troubleshooting.md";
const REGENERATE: &str = "HOUSE_WRITE_TROUBLESHOOTING=1 cargo test --test house troubleshooting";

#[test]
fn the_troubleshooting_page_is_the_rule_tables() {
    let path = repo().join(DOC);
    let doc = std::fs::read_to_string(&path).unwrap_or_default();
    let (Some(b), Some(e)) = (doc.find(BEGIN), doc.find(END)) else {
        panic!("{DOC} lacks its markers {BEGIN} and {END}; regenerate with\n    {REGENERATE}\n(after adding the markers)");
    };
    assert!(
        b < e,
        "{DOC}: the end marker stands before the begin marker"
    );
    let have = &doc[b + BEGIN.len()..e];
    let want = page();
    if have == want {
        return;
    }
    if std::env::var("HOUSE_WRITE_TROUBLESHOOTING").is_ok_and(|v| v == "1") {
        let text = format!("{}{BEGIN}{want}{}", &doc[..b], &doc[e..]);
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("cannot write {DOC}: {e}"));
        println!("rewrote the generated part of {DOC}");
        return;
    }
    let first = have
        .lines()
        .zip(want.lines())
        .find(|(h, w)| h != w)
        .map(|(h, w)| format!("page: {h}\ncode: {w}"))
        .unwrap_or_else(|| "(one has more lines than the other)".to_string());
    panic!("{DOC}'s rule tables are not the code's; first difference:\n{first}\nregenerate it with\n    {REGENERATE}");
}
