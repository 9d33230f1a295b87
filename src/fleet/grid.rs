//! The sweep as a node x rail map: each node's measurements on each rail as
//! a fraction of that rail's median, and its state there. The Prometheus
//! metrics and the HTML report draw it (src/output/sweep.rs, sweep_html.rs).

use super::classify::{Classified, State};
use super::{median, Sweep};

/// Node-major cells: `cell(node, rail)` = `node * rails.len() + rail`.
#[derive(Debug, Clone, Default)]
pub struct Grid {
    pub nodes: Vec<String>,
    pub rails: Vec<String>,
    /// The median of the node's measurements on the rail over the rail's
    /// median (a failed run counts as 0); `None`: never measured there.
    pub of_median: Vec<Option<f64>>,
    pub state: Vec<State>,
    /// Nodes drained once the sweep's decisions ran: drained before and not
    /// resumed, and those it drains.
    pub drained: Vec<String>,
}

impl Grid {
    pub fn cell(&self, node: usize, rail: usize) -> usize {
        node * self.rails.len() + rail
    }
}

/// The map of a classified sweep (`drained`: see [`Grid::drained`]).
pub fn grid(sweep: &Sweep, c: &Classified, drained: Vec<String>) -> Grid {
    let rc = sweep.rails.len();
    let mut values: Vec<Vec<f64>> = vec![Vec::new(); sweep.nodes.len() * rc];
    for o in &sweep.obs {
        let m = c.rails[o.rail].median_gbps;
        let v = if m > 0.0 { o.gbps / m } else { 0.0 };
        for n in [o.a, o.b] {
            values[n * rc + o.rail].push(v);
        }
    }
    Grid {
        nodes: sweep.nodes.clone(),
        rails: sweep.rails.clone(),
        of_median: values.iter_mut().map(|v| median(v)).collect(),
        state: c.state.clone(),
        drained,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::classify::{classify, Thresholds};
    use crate::fleet::Obs;

    #[test]
    fn fractions_of_the_rail_median_per_node() {
        let mut s = Sweep::new(
            ["a", "b", "c", "d"].map(String::from).to_vec(),
            vec!["r0".into(), "r1".into()],
        );
        let pairs = [(0, 1, 100.0), (2, 3, 100.0), (0, 2, 50.0), (1, 3, 100.0)];
        for (round, (a, b, g)) in pairs.into_iter().enumerate() {
            s.obs.push(Obs {
                round: round as u32 + 1,
                a,
                b,
                rail: 0,
                gbps: g,
                fraction: None,
                data_ok: true,
            });
        }
        let c = classify(&s, &Thresholds::default());
        let g = grid(&s, &c, vec!["d".into()]);
        assert_eq!(g.of_median[g.cell(0, 0)], Some(0.75), "a: 100 and 50");
        assert_eq!(g.of_median[g.cell(3, 0)], Some(1.0));
        assert_eq!(g.of_median[g.cell(0, 1)], None, "r1 never measured");
        assert_eq!(g.state.len(), 8);
    }
}
