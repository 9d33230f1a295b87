use super::*;
use crate::fleet::plan;

/// A sweep of N nodes on R rails over ROUNDS quick rounds, each pair at
/// VALUE(a, b, rail) fraction of a 100 Gb/s line rate.
fn sweep(n: usize, r: usize, value: &dyn Fn(usize, usize, usize) -> f64) -> Sweep {
    let mut s = Sweep::new(
        (0..n).map(|i| format!("n{i}")).collect(),
        (0..r).map(|i| format!("mlx5_{i}")).collect(),
    );
    for (k, round) in plan::quick(n, 3).iter().enumerate() {
        for p in &round.pairs {
            for rail in 0..r {
                let f = value(p.a, p.b, rail);
                s.obs.push(Obs {
                    round: k as u32 + 1,
                    a: p.a,
                    b: p.b,
                    rail,
                    gbps: f * 100.0,
                    fraction: Some(f),
                    data_ok: true,
                });
            }
        }
    }
    s
}

/// A little deterministic jitter so that the spread is not zero.
fn jitter(a: usize, b: usize, rail: usize) -> f64 {
    0.97 + 0.002 * (((a * 7 + b * 13 + rail * 3) % 5) as f64 - 2.0)
}

#[test]
fn a_node_slow_on_every_rail_is_a_bad_node_with_its_evidence() {
    let s = sweep(8, 2, &|a, b, r| {
        if a == 3 || b == 3 {
            0.55
        } else {
            jitter(a, b, r)
        }
    });
    let c = classify(&s, &Thresholds::default());
    assert!(c.bad_node(3));
    for n in (0..8).filter(|n| *n != 3) {
        assert!(c.cleared(n), "n{n}: {:?}", c.node_states(n));
    }
    let v = crate::fleet::render::node_verdicts(&s, &c);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].node.as_deref(), Some("n3"));
    assert_eq!(v[0].partners.len(), 3);
    assert_eq!(v[0].evidence.len(), 6, "3 partners x 2 rails");
    assert_eq!(
        v[0].summary,
        "every rail low, 0.55 of line rate with 3 partners"
    );
    assert!(v[0].evidence.iter().all(|e| e.partner_fine_with >= 2));
}

#[test]
fn one_slow_rail_is_a_bad_rail() {
    let s = sweep(8, 4, &|a, b, r| {
        if (a == 5 || b == 5) && r == 2 {
            0.41
        } else {
            jitter(a, b, r)
        }
    });
    let c = classify(&s, &Thresholds::default());
    assert_eq!(c.at(5, 2), State::Bad);
    assert!(!c.bad_node(5));
    let v = crate::fleet::render::node_verdicts(&s, &c);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].summary,
        "rail mlx5_2 0.41 of line rate with 3 partners"
    );
}

#[test]
fn a_pair_low_twice_is_a_bad_path_and_once_a_path_to_retest() {
    let mut s = sweep(8, 1, &|a, b, r| {
        if (a, b) == (0, 7) {
            0.5
        } else {
            jitter(a, b, r)
        }
    });
    let c = classify(&s, &Thresholds::default());
    assert!(
        c.cleared(0) && c.cleared(7),
        "one low of three is not the node"
    );
    assert!(c.paths.is_empty());
    assert_eq!(c.path_suspects, vec![(0, 7, 0)]);
    s.obs.push(Obs {
        round: 4,
        a: 0,
        b: 7,
        rail: 0,
        gbps: 50.0,
        fraction: Some(0.5),
        data_ok: true,
    });
    let c = classify(&s, &Thresholds::default());
    assert_eq!(c.paths.len(), 1);
    assert_eq!((c.paths[0].0, c.paths[0].1), (0, 7));
    assert!(c.path_suspects.is_empty());
}

#[test]
fn everything_below_the_floor_is_fleet_wide() {
    let s = sweep(8, 2, &|a, b, r| jitter(a, b, r) * 0.7);
    let c = classify(&s, &Thresholds::default());
    assert!(c.rails.iter().all(|r| r.below_floor));
    assert!(
        (0..8).all(|n| c.cleared(n)),
        "relative to each other they are fine"
    );
    let r = crate::fleet::render::report(
        &s,
        &c,
        &crate::fleet::render::Context {
            cap: 1,
            ..Default::default()
        },
    );
    assert_eq!(r.verdicts.len(), 1);
    assert_eq!(r.verdicts[0].kind, crate::fleet::render::Kind::FleetWide);
    assert!(
        r.verdicts[0].summary.starts_with("every rail"),
        "{}",
        r.verdicts[0].summary
    );
    assert!(r.slurm.drain.is_empty());
}

#[test]
fn a_low_with_a_bad_partner_says_nothing_of_the_node() {
    // Two bad nodes that meet: their low with each other is ambiguous (each
    // is low everywhere), their lows with the others still count.
    let first = &plan::quick(16, 3)[0].pairs[1];
    let (x, y) = (first.a, first.b);
    let s = sweep(16, 1, &|a, b, r| {
        if [a, b].iter().any(|n| *n == x || *n == y) {
            0.5
        } else {
            jitter(a, b, r)
        }
    });
    let c = classify(&s, &Thresholds::default());
    assert!(c.bad_node(x) && c.bad_node(y));
    assert_eq!(c.ambiguous(x, 0), 1);
    assert_eq!(c.lows(x, 0).len(), 2);
    for n in (0..16).filter(|n| *n != x && *n != y) {
        assert!(!c.bad_node(n));
    }
}

#[test]
fn a_failed_data_check_is_low_whatever_the_speed() {
    let mut s = sweep(8, 1, &jitter);
    for o in s.obs.iter_mut().filter(|o| o.a == 4 || o.b == 4) {
        o.data_ok = false;
    }
    let c = classify(&s, &Thresholds::default());
    assert!(c.bad_node(4));
}

#[test]
fn noise_moves_the_cut_down() {
    let s = sweep(64, 1, &|a, b, _| {
        0.9 + 0.1 * (((a * 31 + b * 17) % 11) as f64 / 10.0 - 0.5)
    });
    let c = classify(&s, &Thresholds::default());
    assert!(c.rails[0].spread > 0.02, "{:?}", c.rails[0]);
    assert!(c.rails[0].cut < 0.93);
    let quiet = sweep(64, 1, &jitter);
    assert_eq!(classify(&quiet, &Thresholds::default()).rails[0].cut, 0.93);
}

#[test]
fn three_nodes_one_bad_needs_the_absolute_cut() {
    // Three nodes: the bad one is in two of the three pairs, so the rail's
    // median is its own speed and the relative cut sees nothing.
    let mut s = sweep(3, 1, &|a, b, _| if a == 2 || b == 2 { 0.02 } else { 0.9 });
    for o in &mut s.obs {
        o.fraction = None; // soft-RoCE: no line rate worth the name
    }
    let c = classify(&s, &Thresholds::default());
    assert!(!c.bad_node(2), "{:?}", c.node_states(2));
    let t = Thresholds {
        min_gbps: Some(10.0),
        ..Thresholds::default()
    };
    let c = classify(&s, &t);
    assert!(c.bad_node(2), "{:?}", c.node_states(2));
    assert!(c.cleared(0) && c.cleared(1));
    let v = crate::fleet::render::node_verdicts(&s, &c);
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0].summary,
        "rail mlx5_0 2.00 Gb/s, below --min-gbps with 2 partners"
    );
}

#[test]
fn a_node_whose_every_run_failed_says_so_not_zero_gbps() {
    // Three nodes, node 2's runs all failed (no result: gbps 0, no data check).
    let mut s = sweep(3, 1, &|_, _, _| 0.9);
    for o in &mut s.obs {
        o.fraction = None;
        if o.a == 2 || o.b == 2 {
            o.gbps = 0.0;
            o.data_ok = false;
        }
    }
    let t = Thresholds {
        min_gbps: Some(10.0),
        ..Thresholds::default()
    };
    let c = classify(&s, &t);
    assert!(c.bad_node(2), "{:?}", c.node_states(2));
    let v = crate::fleet::render::node_verdicts(&s, &c);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].summary, "rail mlx5_0 every run failed with 2 partners");
    assert_eq!(v[0].of, "every run failed");
}

#[test]
fn a_tiny_rate_keeps_its_digits() {
    use crate::fleet::classify::low_text;
    assert_eq!(
        low_text(0.000325, "Gb/s, below --min-gbps"),
        "0.0003 Gb/s, below --min-gbps"
    );
    assert_eq!(low_text(0.41, "of line rate"), "0.41 of line rate");
    assert_eq!(
        low_text(0.0, "of the fleet median"),
        "0.00 of the fleet median"
    );
}
