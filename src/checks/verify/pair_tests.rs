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

#[test]
fn the_session_limit_leaves_room_for_the_data_check() {
    let mut choice = super::super::LoopbackChoice {
        peer: Some("10.0.0.2".into()),
        ..Default::default()
    };
    let device = (None, None);
    let input = |c: &super::super::LoopbackChoice| {
        options(
            &PairInput {
                choice: c,
                device: &device,
                min_fraction: None,
            },
            "10.0.0.2",
        )
        .timeout
    };
    // 3 s of WRITEs: the limit is bench pair's default, not 63 s (a 62-s limit ended a soft-RoCE
    // guest's data check of 8 MiB in VM scenario 21).
    assert_eq!(input(&choice), Duration::from_secs(300));
    choice.seconds = Some(600.0);
    assert_eq!(input(&choice), Duration::from_secs(660));
}
