use super::*;

#[test]
fn the_entry_is_in_the_table_and_absent_without_a_peer() {
    let e = super::super::table::TABLE
        .iter()
        .find(|e| e.name == "pair")
        .expect("a pair entry");
    assert!(e.description.contains("--peer"));
    // Without --peer the choice carries no peer: `check` returns None before it reads anything.
    let choice = super::super::LoopbackChoice::default();
    assert!(choice.peer.is_none());
}

#[test]
fn client_defaults_match_bench_pair() {
    let o = PairOptions::client("10.0.0.2");
    assert_eq!(o.peer.as_deref(), Some("10.0.0.2"));
    assert_eq!(o.sizes, vec![8 << 20]);
    assert!(o.listen.is_none() && !o.all_nics);
}
