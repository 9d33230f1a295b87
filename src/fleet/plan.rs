//! The sweep planner: rounds of disjoint pairs.
//!
//! All pairs: the circle method of a round-robin tournament. One node stays
//! put while the others turn around it, so N-1 rounds of N/2 disjoint pairs
//! meet every pair exactly once; an odd N gets a dummy node, and whoever
//! meets it has a bye that round. Quick: the first rounds of the same
//! schedule (three, four for an odd N, so that every node meets at least
//! three different partners), then retest rounds made from the classifier's
//! suspects, each given a fresh partner it has not met, one that is cleared
//! on every rail where there is one.

use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// One pair of a round: A listens, B connects; the rails to run (all of the
/// sweep's when empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    pub rails: Vec<usize>,
}

/// One round of disjoint pairs, and the nodes that sit it out.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Round {
    pub pairs: Vec<Pair>,
    pub bye: Vec<usize>,
}

/// Round K (0-based, K < M-1) of the circle method over N nodes, where M is
/// N rounded up to even; the dummy node N gives a bye.
pub fn circle_round(n: usize, k: usize) -> Round {
    let mut round = Round::default();
    if n < 2 {
        round.bye = (0..n).collect();
        return round;
    }
    let m = n + n % 2; // even
    let turn = m - 1; // the nodes that rotate: 0..m-1; node m-1 stays put
    let mut add = |x: usize, y: usize| {
        if x >= n {
            round.bye.push(y);
        } else if y >= n {
            round.bye.push(x);
        } else {
            round.pairs.push(Pair {
                a: x.min(y),
                b: x.max(y),
                rails: Vec::new(),
            });
        }
    };
    add(m - 1, k % turn);
    for i in 1..m / 2 {
        add((k + i) % turn, (k + turn - i) % turn);
    }
    round
}

/// Every pair once: N-1 rounds (N for an odd N).
pub fn all_pairs(n: usize) -> Vec<Round> {
    let rounds = if n < 2 { 0 } else { n + n % 2 - 1 };
    (0..rounds).map(|k| circle_round(n, k)).collect()
}

/// The quick mode's first rounds: every node meets at least MIN_PARTNERS
/// different partners (or all others, in a fleet smaller than that).
pub fn quick(n: usize, min_partners: usize) -> Vec<Round> {
    let all = if n < 2 { 0 } else { n + n % 2 - 1 };
    // An odd N gives each node at most one bye in the whole schedule.
    let want = min_partners + n % 2;
    (0..want.min(all)).map(|k| circle_round(n, k)).collect()
}

/// What the classifier asks of the next round.
#[derive(Debug, Clone, Default)]
pub struct RetestInput {
    pub nodes: usize,
    /// Suspect nodes with the rails to retest.
    pub suspects: Vec<(usize, Vec<usize>)>,
    /// Pairs low once on a rail, both ends fine elsewhere: measured again as they are.
    pub paths: Vec<(usize, usize, usize)>,
    /// Nodes fine on every rail: the partners of choice.
    pub cleared: Vec<bool>,
    /// Pairs already met (a < b).
    pub met: HashSet<(usize, usize)>,
    /// Spreads the choice of partners (the round number does).
    pub salt: usize,
}

/// One retest round: the suspect paths again, then each suspect with a
/// fresh partner (cleared first, then any other non-suspect, then another
/// suspect). A suspect that finds none is left for the round after (it is
/// returned in `bye`).
pub fn retest(input: &RetestInput) -> Round {
    let n = input.nodes;
    let mut busy = vec![false; n];
    let mut round = Round::default();
    for &(a, b, rail) in &input.paths {
        if a < n && b < n && !busy[a] && !busy[b] {
            busy[a] = true;
            busy[b] = true;
            round.pairs.push(Pair {
                a: a.min(b),
                b: a.max(b),
                rails: vec![rail],
            });
        }
    }
    let mut suspect = vec![false; n];
    for (s, _) in &input.suspects {
        if *s < n {
            suspect[*s] = true;
        }
    }
    let rails_of = |x: usize| -> Vec<usize> {
        input
            .suspects
            .iter()
            .find(|(s, _)| *s == x)
            .map(|(_, r)| r.clone())
            .unwrap_or_default()
    };
    for (s, rails) in &input.suspects {
        let s = *s;
        if s >= n || busy[s] {
            continue;
        }
        let start = s.wrapping_mul(2_654_435_761).wrapping_add(input.salt) % n.max(1);
        let met = |c: usize| input.met.contains(&(s.min(c), s.max(c)));
        // Tier 0: cleared non-suspects; 1: any non-suspect; 2: anyone.
        let fits = |c: usize, tier: u8| match tier {
            0 => !suspect[c] && input.cleared.get(c).copied().unwrap_or(false),
            1 => !suspect[c],
            _ => true,
        };
        let pick = (0..3u8).find_map(|tier| {
            (0..n)
                .map(|i| (start + i) % n)
                .find(|&c| c != s && !busy[c] && !met(c) && fits(c, tier))
        });
        match pick {
            Some(c) => {
                busy[s] = true;
                busy[c] = true;
                let mut r = rails.clone();
                if suspect[c] {
                    for x in rails_of(c) {
                        if !r.contains(&x) {
                            r.push(x);
                        }
                    }
                    r.sort_unstable();
                }
                round.pairs.push(Pair {
                    a: s.min(c),
                    b: s.max(c),
                    rails: r,
                });
            }
            None => round.bye.push(s),
        }
    }
    round
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_round(n: usize, r: &Round) {
        let mut seen = vec![0; n];
        for p in &r.pairs {
            assert_ne!(p.a, p.b);
            seen[p.a] += 1;
            seen[p.b] += 1;
        }
        for b in &r.bye {
            seen[*b] += 1;
        }
        assert!(
            seen.iter().all(|c| *c == 1),
            "every node once per round: {seen:?}"
        );
    }

    #[test]
    fn all_pairs_meets_every_pair_exactly_once() {
        for n in [2, 3, 4, 5, 8, 9, 16, 33] {
            let rounds = all_pairs(n);
            assert_eq!(rounds.len(), if n % 2 == 0 { n - 1 } else { n });
            let mut met = HashSet::new();
            for r in &rounds {
                check_round(n, r);
                assert_eq!(r.pairs.len(), n / 2);
                assert_eq!(r.bye.len(), n % 2);
                for p in &r.pairs {
                    assert!(met.insert((p.a, p.b)), "pair met twice: {p:?}");
                }
            }
            assert_eq!(met.len(), n * (n - 1) / 2);
        }
    }

    #[test]
    fn quick_gives_every_node_three_different_partners() {
        for n in [4, 5, 7, 8, 64, 4096] {
            let rounds = quick(n, 3);
            let mut partners = vec![HashSet::new(); n];
            for r in &rounds {
                check_round(n, r);
                for p in &r.pairs {
                    partners[p.a].insert(p.b);
                    partners[p.b].insert(p.a);
                }
            }
            assert!(partners.iter().all(|p| p.len() >= 3), "n={n}");
            assert_eq!(rounds.len(), 3 + n % 2);
        }
        // Three nodes: each can meet only two.
        assert_eq!(quick(3, 3).len(), 3);
    }

    #[test]
    fn retest_gives_fresh_cleared_partners_and_repeats_paths() {
        let n = 10;
        let mut met = HashSet::new();
        for r in quick(n, 3) {
            for p in r.pairs {
                met.insert((p.a, p.b));
            }
        }
        let mut cleared = vec![true; n];
        cleared[0] = false;
        cleared[5] = false;
        let input = RetestInput {
            nodes: n,
            suspects: vec![(0, vec![2]), (5, vec![1, 3])],
            paths: vec![(3, 4, 7)],
            cleared,
            met: met.clone(),
            salt: 4,
        };
        let r = retest(&input);
        let mut busy = HashSet::new();
        for p in &r.pairs {
            assert!(busy.insert(p.a) && busy.insert(p.b), "disjoint: {r:?}");
        }
        assert!(r.pairs.contains(&Pair {
            a: 3,
            b: 4,
            rails: vec![7]
        }));
        for (s, rails) in [(0, vec![2]), (5, vec![1, 3])] {
            let p = r.pairs.iter().find(|p| p.a == s || p.b == s).unwrap();
            let other = if p.a == s { p.b } else { p.a };
            assert!(
                !met.contains(&(s.min(other), s.max(other))),
                "fresh partner"
            );
            assert!(other != 0 && other != 5, "a cleared partner first");
            assert_eq!(p.rails, rails);
        }
    }

    #[test]
    fn a_suspect_without_a_fresh_partner_waits() {
        // Two nodes that already met: nobody fresh is left.
        let mut met = HashSet::new();
        met.insert((0, 1));
        let r = retest(&RetestInput {
            nodes: 2,
            suspects: vec![(0, vec![0])],
            cleared: vec![false, true],
            met,
            ..RetestInput::default()
        });
        assert!(r.pairs.is_empty());
        assert_eq!(r.bye, vec![0]);
    }
}
