//! The classifier: pair results in, verdicts with their evidence out.
//!
//! A measurement is *low* when its data check failed or it is below the
//! rail's cut: `relative` (0.93) x the median of that rail over the whole
//! sweep. 0.93 is ClusterKit's rule (a pair is bad below 93% of the best);
//! we take the median rather than the best because the best of thousands of
//! noisy pairs is an outlier, and the median is what the fabric does, robust
//! to the few bad nodes. Where the rail's measurements spread wider than
//! 0.93 allows (noise), the cut moves down to `1 - sigmas x spread` (spread:
//! the robust standard deviation, 1.4826 x the median absolute deviation, of
//! value / median), so that a good pair falls below it by chance about
//! once in 30 000 (4 sigma). The absolute floor (a fraction of line rate,
//! default 0.90 as ngc_multinode_perf uses) judges the fleet: a rail whose
//! median is below it is a fleet-wide problem (a switch, a setting shared
//! by all, the firmware), which no drain fixes. An absolute cut in Gb/s
//! (`min_gbps`, none by default) makes a measurement low whatever the
//! median: for a fleet so small that a bad node is in most of its pairs
//! (three nodes: two of the three pairs, so the median is the bad node's)
//! and for ports whose line rate says nothing (soft-RoCE).
//!
//! A node's rail is *bad* when it is low with `min_partners` (2) or more
//! different partners that are fine elsewhere on that rail (a measurement
//! with a partner that is low everywhere says nothing of this node) and its
//! lows outnumber its good measurements two to one; *good* when its good
//! measurements outnumber its lows; a *suspect* otherwise, retested with
//! fresh partners. A node bad on every rail is a bad node. A pair low twice
//! on a rail whose two ends are good with others is a bad fabric path; low
//! once, it is measured again.

use super::{median, Obs, Sweep};
use serde::Serialize;

/// The thresholds (see the module's documentation for why these).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Thresholds {
    /// Low below this fraction of the rail's median (ClusterKit: 0.93).
    pub relative: f64,
    /// The cut stays this many robust standard deviations below the median.
    pub sigmas: f64,
    /// A rail whose median is below this fraction of line rate is a fleet-wide problem.
    pub floor: f64,
    /// Different partners, fine elsewhere, that a bad verdict needs.
    pub min_partners: usize,
    /// Low below this many Gb/s whatever the median (an absolute cut; none by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_gbps: Option<f64>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            relative: 0.93,
            sigmas: 4.0,
            floor: 0.90,
            min_partners: 2,
            min_gbps: None,
        }
    }
}

/// What one rail did across the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct RailStats {
    pub rail: String,
    pub measurements: usize,
    pub median_gbps: f64,
    /// The median fraction of line rate, when the ports report one.
    pub median_fraction: Option<f64>,
    /// Robust relative standard deviation of value / median.
    pub spread: f64,
    /// The cut used: low below `cut x median_gbps`.
    pub cut: f64,
    pub below_floor: bool,
}

/// A node's state on one rail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum State {
    Unmeasured,
    Good,
    Suspect,
    Bad,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct NodeRail {
    /// Informative lows: (partner, obs index), partners fine elsewhere.
    pub lows: Vec<(usize, usize)>,
    /// Distinct partners of the good measurements.
    pub high_partners: Vec<usize>,
    /// Lows with partners that are low everywhere too.
    pub ambiguous: usize,
}

impl NodeRail {
    fn low_partners(&self) -> usize {
        let mut p: Vec<usize> = self.lows.iter().map(|(p, _)| *p).collect();
        p.sort_unstable();
        p.dedup();
        p.len()
    }

    fn state(&self, min_partners: usize) -> State {
        let l = self.low_partners();
        let h = self.high_partners.len();
        if l == 0 && h == 0 {
            if self.ambiguous > 0 {
                State::Suspect
            } else {
                State::Unmeasured
            }
        } else if l >= min_partners && l > 2 * h {
            State::Bad
        } else if h > l {
            State::Good
        } else {
            State::Suspect
        }
    }
}

/// Everything the classifier found, by index (see [`super::render`] for names).
#[derive(Debug, Clone)]
pub struct Classified {
    pub thresholds: Thresholds,
    pub rails: Vec<RailStats>,
    /// Per observation: low or not.
    pub low: Vec<bool>,
    /// node x rail.
    pub state: Vec<State>,
    pub(crate) detail: Vec<NodeRail>,
    pub rail_count: usize,
    /// Bad fabric paths: (a, b, rail, obs indices of the lows).
    pub paths: Vec<(usize, usize, usize, Vec<usize>)>,
    /// Pairs low once on a rail with both ends good: to measure again.
    pub path_suspects: Vec<(usize, usize, usize)>,
}

impl Classified {
    pub fn at(&self, node: usize, rail: usize) -> State {
        self.state[node * self.rail_count + rail]
    }

    /// Every measured rail of the node is bad.
    pub fn bad_node(&self, node: usize) -> bool {
        let states = self.node_states(node);
        states.contains(&State::Bad)
            && states
                .iter()
                .all(|s| matches!(s, State::Bad | State::Unmeasured))
    }

    pub fn node_states(&self, node: usize) -> &[State] {
        &self.state[node * self.rail_count..(node + 1) * self.rail_count]
    }

    /// Fine on every rail it was measured on, and measured.
    pub fn cleared(&self, node: usize) -> bool {
        let s = self.node_states(node);
        s.contains(&State::Good)
            && s.iter()
                .all(|x| matches!(x, State::Good | State::Unmeasured))
    }

    /// Suspect rails per node (and nodes never measured, on every rail).
    pub fn suspects(&self) -> Vec<(usize, Vec<usize>)> {
        let nodes = self.state.len() / self.rail_count.max(1);
        (0..nodes)
            .filter_map(|n| {
                let s = self.node_states(n);
                let rails: Vec<usize> = if s.iter().all(|x| *x == State::Unmeasured) {
                    (0..self.rail_count).collect()
                } else {
                    (0..self.rail_count)
                        .filter(|r| s[*r] == State::Suspect)
                        .collect()
                };
                (!rails.is_empty()).then_some((n, rails))
            })
            .collect()
    }

    /// The informative lows of a node's rail (partner, obs index).
    pub fn lows(&self, node: usize, rail: usize) -> &[(usize, usize)] {
        &self.detail[node * self.rail_count + rail].lows
    }

    pub fn highs(&self, node: usize, rail: usize) -> usize {
        self.detail[node * self.rail_count + rail]
            .high_partners
            .len()
    }

    pub fn ambiguous(&self, node: usize, rail: usize) -> usize {
        self.detail[node * self.rail_count + rail].ambiguous
    }

    /// Judges nothing of NODE (its results could not all be read): unmeasured
    /// on every rail (so neither bad nor cleared: not drained, not resumed),
    /// no path verdict with it. Its readable measurements still count for
    /// the rails' medians and for its partners.
    pub fn withhold(&mut self, node: usize) {
        let at = node * self.rail_count;
        if at + self.rail_count > self.state.len() {
            return;
        }
        for r in 0..self.rail_count {
            self.state[at + r] = State::Unmeasured;
            self.detail[at + r] = NodeRail::default();
        }
        self.paths.retain(|(a, b, _, _)| *a != node && *b != node);
        self.path_suspects
            .retain(|(a, b, _)| *a != node && *b != node);
    }
}

/// Per-rail medians, spread and cut.
pub fn rail_stats(sweep: &Sweep, t: &Thresholds) -> Vec<RailStats> {
    let r = sweep.rails.len();
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); r];
    let mut fractions: Vec<Vec<f64>> = vec![Vec::new(); r];
    let mut count = vec![0usize; r];
    for o in &sweep.obs {
        count[o.rail] += 1;
        if o.data_ok && o.gbps > 0.0 {
            values[o.rail].push(o.gbps);
            if let Some(f) = o.fraction {
                fractions[o.rail].push(f);
            }
        }
    }
    (0..r)
        .map(|i| {
            let m = median(&mut values[i]).unwrap_or(0.0);
            let mut dev: Vec<f64> = values[i]
                .iter()
                .map(|v| (v / m - 1.0).abs())
                .filter(|d| d.is_finite())
                .collect();
            let spread = 1.4826 * median(&mut dev).unwrap_or(0.0);
            let median_fraction = median(&mut fractions[i]);
            RailStats {
                rail: sweep.rails[i].clone(),
                measurements: count[i],
                median_gbps: m,
                median_fraction,
                spread,
                cut: t.relative.min(1.0 - t.sigmas * spread),
                below_floor: median_fraction.is_some_and(|f| f < t.floor),
            }
        })
        .collect()
}

/// Classifies every node's rails, and the paths.
pub fn classify(sweep: &Sweep, t: &Thresholds) -> Classified {
    let rails = rail_stats(sweep, t);
    let rc = sweep.rails.len();
    let n = sweep.nodes.len();
    let low: Vec<bool> = sweep
        .obs
        .iter()
        .map(|o| {
            !o.data_ok
                || o.gbps < rails[o.rail].cut * rails[o.rail].median_gbps
                || t.min_gbps.is_some_and(|m| o.gbps < m)
        })
        .collect();
    let mut detail = vec![NodeRail::default(); n * rc];
    for (o, is_low) in sweep.obs.iter().zip(&low) {
        if !is_low {
            for (x, y) in [(o.a, o.b), (o.b, o.a)] {
                let d = &mut detail[x * rc + o.rail];
                if !d.high_partners.contains(&y) {
                    d.high_partners.push(y);
                }
            }
        }
    }
    // A partner is fine elsewhere when it measured well with someone else.
    let fine_elsewhere = |p: usize, rail: usize, not: usize| {
        detail[p * rc + rail]
            .high_partners
            .iter()
            .any(|h| *h != not)
    };
    let mut lows: Vec<(usize, usize, usize, bool)> = Vec::new(); // (node, partner, obs, informative)
    for (i, o) in sweep.obs.iter().enumerate() {
        if low[i] {
            for (x, y) in [(o.a, o.b), (o.b, o.a)] {
                lows.push((x, y, i, fine_elsewhere(y, o.rail, x)));
            }
        }
    }
    for (x, y, i, informative) in lows {
        let d = &mut detail[x * rc + sweep.obs[i].rail];
        if informative {
            d.lows.push((y, i));
        } else {
            d.ambiguous += 1;
        }
    }
    let state: Vec<State> = detail.iter().map(|d| d.state(t.min_partners)).collect();
    let (paths, path_suspects) = find_paths(sweep, &low, &state, rc);
    Classified {
        thresholds: *t,
        rails,
        low,
        state,
        detail,
        rail_count: rc,
        paths,
        path_suspects,
    }
}

type Paths = (
    Vec<(usize, usize, usize, Vec<usize>)>,
    Vec<(usize, usize, usize)>,
);

/// Pairs low on a rail whose two ends are good there: bad after two lows
/// (and no good measurement of the same pair), a suspect after one.
fn find_paths(sweep: &Sweep, low: &[bool], state: &[State], rc: usize) -> Paths {
    use std::collections::BTreeMap;
    let mut by_pair: BTreeMap<(usize, usize, usize), (Vec<usize>, usize)> = BTreeMap::new();
    for (i, o) in sweep.obs.iter().enumerate() {
        let good = |x: usize| state[x * rc + o.rail] == State::Good;
        if low[i] && good(o.a) && good(o.b) {
            by_pair
                .entry((o.a.min(o.b), o.a.max(o.b), o.rail))
                .or_default()
                .0
                .push(i);
        }
    }
    for (i, o) in sweep.obs.iter().enumerate() {
        if !low[i] {
            if let Some(e) = by_pair.get_mut(&(o.a.min(o.b), o.a.max(o.b), o.rail)) {
                e.1 += 1;
            }
        }
    }
    let mut paths = Vec::new();
    let mut suspects = Vec::new();
    for ((a, b, r), (lows, highs)) in by_pair {
        if lows.len() >= 2 && highs == 0 {
            paths.push((a, b, r, lows));
        } else if lows.len() > highs {
            suspects.push((a, b, r));
        }
    }
    (paths, suspects)
}

/// What `typical_low` says when every low was a run that failed (no rate at all).
pub const EVERY_RUN_FAILED: &str = "every run failed";

/// "0.41 of line rate", "2.00 Gb/s, below --min-gbps", or "every run failed";
/// a value under 0.01 keeps four places ("0.0003 Gb/s", not a "0.00" that
/// reads as nothing measured).
pub fn low_text(value: f64, of: &str) -> String {
    if of == EVERY_RUN_FAILED {
        of.to_string()
    } else if value > 0.0 && value < 0.01 {
        format!("{value:.4} {of}")
    } else {
        format!("{value:.2} {of}")
    }
}

/// The median of the lows' values as a fraction of line rate when every one
/// has it; else in Gb/s when every one is below the absolute cut (the
/// median says little then: it may be the bad node's); else as a fraction
/// of the rails' medians. And which it is.
pub fn typical_low(sweep: &Sweep, c: &Classified, obs: &[usize]) -> (f64, &'static str) {
    // A run that failed has no rate: "0.00 Gb/s" in a drain reason would read as a measured one.
    let failed = |i: &usize| sweep.obs[*i].gbps == 0.0 && !sweep.obs[*i].data_ok;
    if !obs.is_empty() && obs.iter().all(failed) {
        return (0.0, EVERY_RUN_FAILED);
    }
    let all_fraction = obs.iter().all(|i| sweep.obs[*i].fraction.is_some());
    let all_absolute = c
        .thresholds
        .min_gbps
        .is_some_and(|m| obs.iter().all(|i| sweep.obs[*i].gbps < m));
    let mut v: Vec<f64> = obs
        .iter()
        .map(|i| {
            let o: &Obs = &sweep.obs[*i];
            match (all_fraction, o.fraction) {
                (true, Some(f)) => f,
                _ if all_absolute => o.gbps,
                _ => o.gbps / c.rails[o.rail].median_gbps.max(f64::MIN_POSITIVE),
            }
        })
        .collect();
    let m = median(&mut v).unwrap_or(0.0);
    let of = if all_fraction {
        "of line rate"
    } else if all_absolute {
        "Gb/s, below --min-gbps"
    } else {
        "of the fleet median"
    };
    (m, of)
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
