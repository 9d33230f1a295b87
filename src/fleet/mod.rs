//! Across a fleet: the pair sweep that finds the bad node, the bad rail and
//! the bad fabric path, and what the scheduler is told (docs/fleets.md).
//!
//! Everything here is pure: the planner ([`plan`]) makes rounds of disjoint
//! pairs, the classifier ([`classify`]) turns pair results into verdicts with
//! their evidence, [`remedy`] tells a configuration fault (fixable by
//! `gdrprov apply`) from a hardware suspect, [`slurm`] decides drains and
//! resumes under a cap, [`simulate`] drives the same planner and classifier
//! with a seeded model of a fleet, [`nfd`] composes Kubernetes feature labels.
//! Reading files is the command's job (src/commands/sweep_io.rs), writing
//! them the host layer's (src/host/textfile.rs, through `ops::write_nfd`);
//! a pair result and a verify report are typed and read in `crate::docs`
//! (strict, versioned: the one home of documents read as data); what the
//! sweep takes of a pair result is in [`results`], in one place.

pub mod classify;
pub mod grid;
pub mod nfd;
pub mod plan;
pub mod remedy;
pub mod render;
pub mod results;
pub mod rng;
pub mod simulate;
pub mod slurm;

use serde::{Deserialize, Serialize};

/// One measurement: a pair of nodes on one rail, as indices into
/// [`Sweep::nodes`] and [`Sweep::rails`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Obs {
    /// The round it was measured in (1-based; 0 when not known).
    pub round: u32,
    pub a: usize,
    pub b: usize,
    pub rail: usize,
    /// Average Gb/s at the size judged (the largest measured); 0 when the run failed.
    pub gbps: f64,
    /// Of the slower port's line rate, when known.
    pub fraction: Option<f64>,
    /// The data check passed (a failed or missing run is not).
    pub data_ok: bool,
}

/// Everything a sweep measured, and what it is judged against.
#[derive(Debug, Clone, Default)]
pub struct Sweep {
    pub nodes: Vec<String>,
    pub rails: Vec<String>,
    pub obs: Vec<Obs>,
    by_name: std::collections::HashMap<String, usize>,
}

impl Sweep {
    pub fn new(nodes: Vec<String>, rails: Vec<String>) -> Self {
        let by_name = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.clone(), i))
            .collect();
        Sweep {
            nodes,
            rails,
            obs: Vec::new(),
            by_name,
        }
    }

    /// The index of a node, added when new.
    pub fn node(&mut self, name: &str) -> usize {
        if let Some(i) = self.by_name.get(name) {
            return *i;
        }
        self.nodes.push(name.to_string());
        self.by_name.insert(name.to_string(), self.nodes.len() - 1);
        self.nodes.len() - 1
    }

    /// The index of a rail, added when new.
    pub fn rail(&mut self, name: &str) -> usize {
        index_of(&mut self.rails, name)
    }

    /// The rounds measured so far (the highest round number).
    pub fn rounds(&self) -> u32 {
        self.obs.iter().map(|o| o.round).max().unwrap_or(0)
    }
}

fn index_of(list: &mut Vec<String>, name: &str) -> usize {
    match list.iter().position(|n| n == name) {
        Some(i) => i,
        None => {
            list.push(name.to_string());
            list.len() - 1
        }
    }
}

/// The median of VALUES (sorted in place); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn names_are_indexed_once() {
        let mut s = Sweep::new(vec!["a".into()], vec![]);
        assert_eq!(s.node("a"), 0);
        assert_eq!(s.node("b"), 1);
        assert_eq!(s.node("b"), 1);
        assert_eq!(s.rail("mlx5_0"), 0);
    }
}
