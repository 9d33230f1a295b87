//! The sweep at scale, by simulation of the same code: a seeded model of a
//! rail-optimized fleet feeds the real planner and classifier.
//!
//! The model: N nodes with R rails each; rail r of every node hangs off the
//! rail-r switches, so a pair is measured rail against rail. A good pair
//! reaches `nominal` (0.97) of line rate; K bad nodes are slow on every rail
//! and L bad node-rails (a cable, a transceiver, a NIC) on one, each at
//! `slow` (default 0.6) of nominal; P bad paths (one pair on one rail, among
//! the pairs the first rounds measure) too.
//! A pair runs at the slower of its two ends (and its path), times
//! (1 + noise x a standard normal): noise is the relative standard deviation.

use super::classify::{classify, Classified, State, Thresholds};
use super::plan::{self, Pair, RetestInput, Round};
use super::rng::Rng;
use super::{Obs, Sweep};
use serde::Serialize;
use std::collections::HashSet;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct Model {
    pub nodes: usize,
    pub rails: usize,
    pub bad_nodes: usize,
    pub bad_rails: usize,
    pub bad_paths: usize,
    pub noise: f64,
    pub slow: f64,
    pub nominal: f64,
    pub line_rate_gbps: f64,
    pub seed: u64,
    /// Rounds at most, retests included.
    pub max_rounds: u32,
    /// Seconds one pair run takes on one rail (for the wall time).
    pub pair_seconds: f64,
}

impl Default for Model {
    fn default() -> Self {
        Model {
            nodes: 64,
            rails: 8,
            bad_nodes: 1,
            bad_rails: 2,
            bad_paths: 0,
            noise: 0.05,
            slow: 0.6,
            nominal: 0.97,
            line_rate_gbps: 400.0,
            seed: 1,
            max_rounds: 6,
            pair_seconds: 10.0,
        }
    }
}

/// The largest fleet simulated (nodes, rails, rounds): past them the run
/// takes minutes and gigabytes, so they are refused up front (issue 37:
/// `--rails 100000000` panicked, `--nodes 10000000` ran until killed).
pub const MAX_NODES: usize = 16_384;
pub const MAX_RAILS: usize = 64;
pub const MAX_ROUNDS: u32 = 64;

impl Model {
    /// Why this model cannot be simulated (a size out of bounds, a number
    /// not finite); `None` when it can.
    pub fn problem(&self) -> Option<String> {
        let m = self;
        if !(2..=MAX_NODES).contains(&m.nodes) {
            return Some(format!("--nodes must be 2 to {MAX_NODES}, not {}", m.nodes));
        }
        if !(1..=MAX_RAILS).contains(&m.rails) {
            return Some(format!("--rails must be 1 to {MAX_RAILS}, not {}", m.rails));
        }
        if !(1..=MAX_ROUNDS).contains(&m.max_rounds) {
            return Some(format!(
                "--max-rounds must be 1 to {MAX_ROUNDS}, not {}",
                m.max_rounds
            ));
        }
        if m.bad_nodes > m.nodes / 2 {
            return Some(format!(
                "--bad-nodes {} is more than half of {} nodes: the fleet median would be the bad nodes'; give fewer",
                m.bad_nodes, m.nodes
            ));
        }
        let rails = (m.nodes - m.bad_nodes) * m.rails;
        if m.bad_rails > rails {
            return Some(format!(
                "--bad-rails {} is more than the {rails} rails of the good nodes; give fewer",
                m.bad_rails
            ));
        }
        if m.bad_paths > m.nodes {
            return Some(format!(
                "--bad-paths {} is more than the {} nodes; give fewer",
                m.bad_paths, m.nodes
            ));
        }
        let noise_ok = m.noise.is_finite() && (0.0..1.0).contains(&m.noise);
        let slow_ok = m.slow.is_finite() && (0.0..=1.0).contains(&m.slow);
        if !(noise_ok && slow_ok) {
            return Some("--noise must be in [0, 1) and --slow in [0, 1]".into());
        }
        if !(m.pair_seconds.is_finite() && m.pair_seconds > 0.0 && m.pair_seconds <= 86_400.0) {
            return Some(format!(
                "--pair-seconds must be a number of seconds above 0 and at most 86400, not {}",
                m.pair_seconds
            ));
        }
        None
    }
}

/// The faults injected.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    pub bad_node: Vec<bool>,
    pub bad_rail: HashSet<(usize, usize)>,
    pub bad_path: HashSet<(usize, usize, usize)>,
}

impl Truth {
    fn factor(&self, rails: usize, n: usize, r: usize, slow: f64) -> f64 {
        let _ = rails;
        if self.bad_node[n] || self.bad_rail.contains(&(n, r)) {
            slow
        } else {
            1.0
        }
    }

    /// A node with any fault.
    pub fn faulty(&self, n: usize) -> bool {
        self.bad_node[n] || self.bad_rail.iter().any(|(x, _)| *x == n)
    }
}

/// What the simulation found.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub model: Model,
    pub rounds: u32,
    pub retest_rounds: u32,
    pub measurements: usize,
    pub injected: usize,
    pub found: usize,
    /// Injected faults not found (a bad node, a bad node-rail, a bad path on a
    /// pair the sweep measured).
    pub missed: usize,
    /// Bad paths on pairs the sweep never measured: the quick mode meets a few
    /// partners per node, not every pair (all-pairs does); not counted in `missed`.
    pub paths_not_measured: usize,
    /// Good nodes the sweep would drain.
    pub wrongly_drained: usize,
    /// Verdicts on things that are not faults (a good rail or path called bad).
    pub false_verdicts: usize,
    /// Node rails still suspects when the rounds ran out.
    pub undecided: usize,
    pub drained: usize,
    /// Planner and classifier, every round, in seconds (this machine).
    pub planner_classifier_seconds: f64,
    /// A real sweep's wall time: each round as long as its pairs' rails run one
    /// after another (`--device` per rail), from `pair_seconds`.
    pub wall_seconds: f64,
    /// The same with every rail of a pair at once (`--all-nics`).
    pub wall_seconds_rails_parallel: f64,
}

/// Injects the faults: distinct bad nodes, bad rails on other nodes, paths
/// between good ends.
pub fn inject(m: &Model, rng: &mut Rng) -> Truth {
    let n = m.nodes;
    let mut t = Truth {
        bad_node: vec![false; n],
        ..Truth::default()
    };
    for x in rng.sample(n, m.bad_nodes) {
        t.bad_node[x] = true;
    }
    let good: Vec<usize> = (0..n).filter(|x| !t.bad_node[*x]).collect();
    let slots = good.len() * m.rails;
    for s in rng.sample(slots, m.bad_rails.min(slots)) {
        t.bad_rail.insert((good[s / m.rails], s % m.rails));
    }
    // Paths on pairs the quick rounds measure: a path never measured cannot
    // be found (the all-pairs mode measures every pair).
    let pairs: Vec<(usize, usize)> = plan::quick(n, 3)
        .iter()
        .flat_map(|r| r.pairs.iter().map(|p| (p.a, p.b)))
        .filter(|(a, b)| !t.faulty(*a) && !t.faulty(*b))
        .collect();
    for i in rng.sample(pairs.len(), m.bad_paths) {
        let (a, b) = pairs[i];
        t.bad_path.insert((a, b, rng.below(m.rails.max(1))));
    }
    t
}

fn measure(m: &Model, t: &Truth, rng: &mut Rng, round: u32, r: &Round, sweep: &mut Sweep) {
    for Pair { a, b, rails } in &r.pairs {
        let all: Vec<usize> = (0..m.rails).collect();
        for &rail in if rails.is_empty() { &all } else { rails } {
            let mut f = t
                .factor(m.rails, *a, rail, m.slow)
                .min(t.factor(m.rails, *b, rail, m.slow));
            if t.bad_path.contains(&((*a).min(*b), (*a).max(*b), rail)) {
                f = f.min(m.slow);
            }
            let fraction = (m.nominal * f * (1.0 + m.noise * rng.normal())).max(0.0);
            sweep.obs.push(Obs {
                round,
                a: *a,
                b: *b,
                rail,
                gbps: fraction * m.line_rate_gbps,
                fraction: Some(fraction),
                data_ok: true,
            });
        }
    }
}

fn round_seconds(m: &Model, r: &Round) -> f64 {
    let most = r
        .pairs
        .iter()
        .map(|p| {
            if p.rails.is_empty() {
                m.rails
            } else {
                p.rails.len()
            }
        })
        .max()
        .unwrap_or(0);
    most as f64 * m.pair_seconds
}

/// The retest round the classifier's suspects ask for (empty: nothing to retest).
pub fn next_round(sweep: &Sweep, c: &Classified, salt: usize) -> Round {
    let n = sweep.nodes.len();
    let met: HashSet<(usize, usize)> = sweep
        .obs
        .iter()
        .map(|o| (o.a.min(o.b), o.a.max(o.b)))
        .collect();
    plan::retest(&RetestInput {
        nodes: n,
        suspects: c.suspects(),
        paths: c.path_suspects.clone(),
        cleared: (0..n).map(|x| c.cleared(x)).collect(),
        met,
        salt,
    })
}

/// Runs the model through the planner and the classifier until nothing is
/// left to retest or the rounds run out, and scores the verdicts.
pub fn run(m: &Model) -> Outcome {
    run_with_sweep(m).0
}

/// [`run`], with the sweep it measured and its last classification (for
/// the report of a simulated fleet: `fleet sweep simulate --format html`).
pub fn run_with_sweep(m: &Model) -> (Outcome, Sweep, Classified) {
    let mut rng = Rng::new(m.seed);
    let truth = inject(m, &mut rng);
    let names = (0..m.nodes).map(|i| format!("node{i:05}")).collect();
    let rails = (0..m.rails).map(|i| format!("mlx5_{i}")).collect();
    let mut sweep = Sweep::new(names, rails);
    let t = Thresholds::default();
    let mut spent = 0.0;
    let mut wall = 0.0;
    let started = Instant::now();
    let first = plan::quick(m.nodes, 3);
    spent += started.elapsed().as_secs_f64();
    let mut round = 0u32;
    for r in &first {
        round += 1;
        measure(m, &truth, &mut rng, round, r, &mut sweep);
        wall += round_seconds(m, r);
    }
    let initial = round;
    let started = Instant::now();
    let mut c = classify(&sweep, &t);
    spent += started.elapsed().as_secs_f64();
    while round < m.max_rounds {
        let started = Instant::now();
        let next = next_round(&sweep, &c, round as usize);
        spent += started.elapsed().as_secs_f64();
        if next.pairs.is_empty() {
            break;
        }
        round += 1;
        measure(m, &truth, &mut rng, round, &next, &mut sweep);
        wall += round_seconds(m, &next);
        let started = Instant::now();
        c = classify(&sweep, &t);
        spent += started.elapsed().as_secs_f64();
    }
    let started = Instant::now();
    let verdicts = super::render::node_verdicts(&sweep, &c);
    spent += started.elapsed().as_secs_f64();
    let outcome = score(
        m, &truth, &sweep, &c, &verdicts, round, initial, spent, wall,
    );
    (outcome, sweep, c)
}

#[allow(clippy::too_many_arguments)]
fn score(
    m: &Model,
    truth: &Truth,
    sweep: &Sweep,
    c: &Classified,
    verdicts: &[super::render::Verdict],
    rounds: u32,
    initial: u32,
    spent: f64,
    wall: f64,
) -> Outcome {
    let mut found = 0;
    for n in 0..m.nodes {
        if truth.bad_node[n] && c.bad_node(n) {
            found += 1;
        }
    }
    for &(n, r) in &truth.bad_rail {
        if c.at(n, r) == State::Bad && !c.bad_node(n) {
            found += 1;
        }
    }
    let called: HashSet<(usize, usize, usize)> =
        c.paths.iter().map(|(a, b, r, _)| (*a, *b, *r)).collect();
    found += truth.bad_path.iter().filter(|p| called.contains(p)).count();
    let measured: HashSet<(usize, usize, usize)> = sweep
        .obs
        .iter()
        .map(|o| (o.a.min(o.b), o.a.max(o.b), o.rail))
        .collect();
    let paths_not_measured = truth
        .bad_path
        .iter()
        .filter(|p| !measured.contains(p))
        .count();
    let mut false_verdicts = called
        .iter()
        .filter(|p| !truth.bad_path.contains(p))
        .count();
    for n in 0..m.nodes {
        for r in 0..m.rails {
            let truly = truth.bad_node[n] || truth.bad_rail.contains(&(n, r));
            if c.at(n, r) == State::Bad && !truly {
                false_verdicts += 1;
            }
        }
    }
    let drained: HashSet<&str> = verdicts.iter().filter_map(|v| v.node.as_deref()).collect();
    let wrongly_drained = (0..m.nodes)
        .filter(|n| !truth.faulty(*n) && drained.contains(sweep.nodes[*n].as_str()))
        .count();
    let injected =
        m.bad_nodes.min(m.nodes) + truth.bad_rail.len() + truth.bad_path.len() - paths_not_measured;
    Outcome {
        model: m.clone(),
        rounds,
        retest_rounds: rounds - initial,
        measurements: sweep.obs.len(),
        injected,
        found,
        missed: injected - found.min(injected),
        paths_not_measured,
        wrongly_drained,
        false_verdicts,
        undecided: c.state.iter().filter(|s| **s == State::Suspect).count(),
        drained: drained.len(),
        planner_classifier_seconds: spent,
        wall_seconds: wall,
        wall_seconds_rails_parallel: rounds as f64 * m.pair_seconds,
    }
}

#[cfg(test)]
#[path = "simulate_tests.rs"]
mod tests;
