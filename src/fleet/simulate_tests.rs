use super::*;

#[test]
fn the_goal_4096_nodes_8_rails_1_percent_bad_nodes_half_percent_bad_rails() {
    // The goal: every injected fault found, no good node drained, at
    // most 6 rounds with the retests. (The time is measured in release mode
    // by bench/sweep-simulate.sh; a debug build is slower.)
    for seed in [1, 2, 3] {
        let o = run(&Model {
            nodes: 4096,
            rails: 8,
            bad_nodes: 41,
            bad_rails: 164,
            noise: 0.05,
            seed,
            ..Model::default()
        });
        assert_eq!(o.injected, 41 + 164);
        assert_eq!(o.missed, 0, "seed {seed}: {o:?}");
        assert_eq!(o.wrongly_drained, 0, "seed {seed}: {o:?}");
        assert_eq!(o.false_verdicts, 0, "seed {seed}: {o:?}");
        assert!(o.rounds <= 6, "seed {seed}: {o:?}");
    }
}

#[test]
fn small_fleets_and_paths() {
    let o = run(&Model {
        nodes: 16,
        rails: 2,
        bad_nodes: 1,
        bad_rails: 1,
        bad_paths: 1,
        noise: 0.01,
        seed: 9,
        ..Model::default()
    });
    assert_eq!(o.missed, 0, "{o:?}");
    assert_eq!(o.wrongly_drained, 0, "{o:?}");
    // Paths: the quick mode meets only a few partners; those it measured
    // low once are measured again to be told from noise.
    let paths = run(&Model {
        nodes: 32,
        rails: 2,
        bad_nodes: 0,
        bad_rails: 0,
        bad_paths: 4,
        noise: 0.01,
        seed: 9,
        ..Model::default()
    });
    assert!(paths.injected >= 1, "{paths:?}");
    assert_eq!(paths.missed, 0, "{paths:?}");
    assert_eq!(paths.drained, 0, "{paths:?}");
    assert!(paths.retest_rounds >= 1, "{paths:?}");
}

#[test]
fn same_seed_same_result() {
    let m = Model {
        nodes: 128,
        seed: 42,
        ..Model::default()
    };
    let (a, b) = (run(&m), run(&m));
    assert_eq!(
        (a.rounds, a.found, a.measurements),
        (b.rounds, b.found, b.measurements)
    );
}

#[test]
fn the_wall_time_follows_the_pair_duration() {
    let o = run(&Model {
        nodes: 8,
        rails: 4,
        bad_nodes: 0,
        bad_rails: 0,
        noise: 0.0,
        pair_seconds: 5.0,
        ..Model::default()
    });
    assert_eq!(o.rounds, 3);
    assert_eq!(o.wall_seconds, 3.0 * 4.0 * 5.0);
    assert_eq!(o.wall_seconds_rails_parallel, 15.0);
    assert_eq!(o.injected, 0);
}
