//! The sweep's report: verdicts with names and evidence, the scheduler's
//! decisions (rendered as text and Prometheus metrics in src/output/sweep.rs).

use super::classify::{low_text, typical_low, Classified, RailStats, State, Thresholds};
use super::remedy::{Fixable, NodeFindings};
use super::slurm::{self, Decisions};
use super::Sweep;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    BadNode,
    BadRail,
    BadPath,
    FleetWide,
}

/// The reason a probation node whose results cannot be read is drained
/// again with: its earlier one, cut so that the note fits Slurm's reason as
/// `slurm::clean_reason` keeps it (200 characters).
fn unreadable_reason(earlier: &str) -> String {
    const NOTE: &str = "; results unreadable";
    let kept: String = earlier.trim().chars().take(200 - NOTE.len()).collect();
    format!("{kept}{NOTE}")
}

/// One low measurement behind a verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Evidence {
    pub round: u32,
    pub partner: String,
    pub rail: String,
    pub gbps: f64,
    pub fraction: Option<f64>,
    /// gbps / the rail's median.
    pub of_median: f64,
    pub data_ok: bool,
    /// Different partners the partner measured well with on this rail.
    pub partner_fine_with: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The other end, for a bad path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    pub rails: Vec<String>,
    pub value: f64,
    /// "of line rate" or "of the fleet median".
    pub of: &'static str,
    pub partners: Vec<String>,
    pub summary: String,
    /// drain, fix (gdrprov apply), check the path, none (fleet-wide).
    pub action: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fixable>,
    pub evidence: Vec<Evidence>,
}

/// One measurement as the report lists it.
#[derive(Debug, Clone, Serialize)]
pub struct PairOut {
    pub round: u32,
    pub a: String,
    pub b: String,
    pub rail: String,
    pub gbps: f64,
    pub fraction: Option<f64>,
    pub data_ok: bool,
    pub low: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SuspectOut {
    pub node: String,
    pub rails: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathRetest {
    pub a: String,
    pub b: String,
    pub rail: String,
}

/// The whole report (`fleet sweep report`).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub nodes: usize,
    pub rounds: u32,
    pub measurements: usize,
    pub thresholds: Thresholds,
    pub rails: Vec<RailStats>,
    pub verdicts: Vec<Verdict>,
    /// Node rails to retest with fresh partners (`fleet sweep plan --retest`).
    pub suspects: Vec<SuspectOut>,
    /// Pairs low once, both ends fine with others: measured again.
    pub path_retests: Vec<PathRetest>,
    pub slurm: Decisions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pairs: Vec<PairOut>,
    /// Nodes whose NCCL_IB_GID_INDEX differs from most nodes', slow or not (from the
    /// verify reports; absent when they agree or none says).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid_index_disagreement: Option<super::remedy::GidDisagreement>,
    /// Files that could not be read, each with the nodes it names: those
    /// nodes are not judged (not drained, not resumed, no lows counted).
    pub unread: Vec<Unread>,
    /// The node x rail map (metrics and the HTML report; not in the JSON).
    #[serde(skip)]
    pub grid: super::grid::Grid,
}

/// A results or verify file that could not be read: the nodes it names
/// are not judged by this report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Unread {
    pub nodes: Vec<String>,
    pub file: String,
    /// The field to blame (`results[0].average_gbps`), when one is.
    pub field: Option<String>,
    pub problem: String,
}

/// What the report needs besides the measurements.
#[derive(Debug, Clone, Default)]
pub struct Context {
    pub findings: HashMap<String, NodeFindings>,
    /// (node, rail) -> the MTU cause, for MTUs unlike the rail's usual one.
    pub odd_mtus: BTreeMap<(String, String), String>,
    /// Nodes whose NCCL_IB_GID_INDEX differs from most nodes' (from --verify-dir).
    pub gid_indexes: Option<super::remedy::GidDisagreement>,
    /// Nodes drained now, with their reasons (`sinfo`).
    pub drained: Vec<(String, String)>,
    /// Nodes an earlier sweep drained, resumed for this one (gdrprov-sweep-submit.sh).
    pub probation: Vec<(String, String)>,
    pub cap: usize,
    pub with_pairs: bool,
    /// Files not read (their nodes are withheld from the classifier already).
    pub unread: Vec<Unread>,
}

fn evidence(
    sweep: &Sweep,
    c: &Classified,
    node: usize,
    rails: &[usize],
) -> (Vec<Evidence>, Vec<usize>) {
    let mut ev = Vec::new();
    let mut obs = Vec::new();
    for &r in rails {
        for &(p, i) in c.lows(node, r) {
            let o = &sweep.obs[i];
            obs.push(i);
            ev.push(Evidence {
                round: o.round,
                partner: sweep.nodes[p].clone(),
                rail: sweep.rails[r].clone(),
                gbps: o.gbps,
                fraction: o.fraction,
                of_median: o.gbps / c.rails[r].median_gbps.max(f64::MIN_POSITIVE),
                data_ok: o.data_ok,
                partner_fine_with: c.highs(p, r),
            });
        }
    }
    (ev, obs)
}

fn distinct(names: impl Iterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = names.collect();
    v.sort();
    v.dedup();
    v
}

/// The verdicts on nodes and their rails, with the reason a drain would give.
pub fn node_verdicts(sweep: &Sweep, c: &Classified) -> Vec<Verdict> {
    let mut out = Vec::new();
    for n in 0..sweep.nodes.len() {
        let bad: Vec<usize> = (0..sweep.rails.len())
            .filter(|r| c.at(n, *r) == State::Bad)
            .collect();
        if bad.is_empty() {
            continue;
        }
        let groups: Vec<Vec<usize>> = if c.bad_node(n) {
            vec![bad]
        } else {
            bad.into_iter().map(|r| vec![r]).collect()
        };
        let whole = c.bad_node(n);
        for rails in groups {
            let (ev, obs) = evidence(sweep, c, n, &rails);
            let (value, of) = typical_low(sweep, c, &obs);
            let partners = distinct(ev.iter().map(|e| e.partner.clone()));
            let names: Vec<String> = rails.iter().map(|r| sweep.rails[*r].clone()).collect();
            let summary = if whole && sweep.rails.len() > 1 {
                format!(
                    "every rail low, {} with {} partners",
                    low_text(value, of),
                    partners.len()
                )
            } else {
                format!(
                    "rail {} {} with {} partners",
                    names.join(","),
                    low_text(value, of),
                    partners.len()
                )
            };
            out.push(Verdict {
                kind: if whole { Kind::BadNode } else { Kind::BadRail },
                node: Some(sweep.nodes[n].clone()),
                peer: None,
                rails: names,
                value,
                of,
                partners,
                summary,
                action: "drain",
                fix: None,
                evidence: ev,
            });
        }
    }
    out
}

fn path_verdicts(sweep: &Sweep, c: &Classified) -> Vec<Verdict> {
    c.paths
        .iter()
        .map(|(a, b, r, lows)| {
            let (value, of) = typical_low(sweep, c, lows);
            let ev = lows
                .iter()
                .map(|i| {
                    let o = &sweep.obs[*i];
                    Evidence {
                        round: o.round,
                        partner: sweep.nodes[*b].clone(),
                        rail: sweep.rails[*r].clone(),
                        gbps: o.gbps,
                        fraction: o.fraction,
                        of_median: o.gbps / c.rails[*r].median_gbps.max(f64::MIN_POSITIVE),
                        data_ok: o.data_ok,
                        partner_fine_with: c.highs(*b, *r),
                    }
                })
                .collect();
            Verdict {
                kind: Kind::BadPath,
                node: Some(sweep.nodes[*a].clone()),
                peer: Some(sweep.nodes[*b].clone()),
                rails: vec![sweep.rails[*r].clone()],
                value,
                of,
                partners: vec![sweep.nodes[*b].clone()],
                summary: format!(
                    "path {} <-> {} on rail {}: {} {} times, both fine with others ({} and {} partners); check the cables and switch ports between them",
                    sweep.nodes[*a], sweep.nodes[*b], sweep.rails[*r], low_text(value, of), lows.len(), c.highs(*a, *r), c.highs(*b, *r)
                ),
                action: "check the path",
                fix: None,
                evidence: ev,
            }
        })
        .collect()
}

fn fleet_verdict(c: &Classified) -> Option<Verdict> {
    let below: Vec<&RailStats> = c.rails.iter().filter(|r| r.below_floor).collect();
    let worst = below
        .iter()
        .filter_map(|r| r.median_fraction)
        .fold(f64::INFINITY, f64::min);
    (!below.is_empty()).then(|| Verdict {
        kind: Kind::FleetWide,
        node: None,
        peer: None,
        rails: below.iter().map(|r| r.rail.clone()).collect(),
        value: worst,
        of: "of line rate",
        partners: Vec::new(),
        summary: format!(
            "{}: the median pair is below the floor of {:.2} of line rate (lowest {worst:.2}): a cause shared by the fleet (switch, fabric setting, firmware); no drain fixes it",
            if below.len() == c.rails.len() { "every rail".to_string() } else { format!("rails {}", below.iter().map(|r| r.rail.as_str()).collect::<Vec<_>>().join(",")) },
            c.thresholds.floor
        ),
        action: "none",
        fix: None,
        evidence: Vec::new(),
    })
}

/// A node whose findings have a fix is fixed rather than drained (remediation before drain).
fn apply_remedies(verdicts: &mut [Verdict], ctx: &Context) {
    for v in verdicts.iter_mut() {
        let Some(node) = v.node.clone() else { continue };
        let mtu: Vec<String> = v
            .rails
            .iter()
            .filter_map(|r| ctx.odd_mtus.get(&(node.clone(), r.clone())).cloned())
            .collect();
        if let Some(f) = super::remedy::fixable(&node, ctx.findings.get(&node), &mtu) {
            v.action = "fix";
            v.fix = Some(f);
        }
    }
}

/// Each node to drain, with its verdicts' summaries as the reason.
fn drain_reasons(verdicts: &[Verdict]) -> Vec<(String, String)> {
    let mut reasons: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for v in verdicts.iter().filter(|v| v.action == "drain") {
        if let Some(n) = &v.node {
            reasons
                .entry(n.clone())
                .or_default()
                .push(v.summary.clone());
        }
    }
    reasons
        .into_iter()
        .map(|(n, r)| (n, r.join("; ")))
        .collect()
}

/// Every measurement, as a row of the report.
fn pair_rows(sweep: &Sweep, c: &Classified) -> Vec<PairOut> {
    sweep
        .obs
        .iter()
        .zip(&c.low)
        .map(|(o, low)| PairOut {
            round: o.round,
            a: sweep.nodes[o.a].clone(),
            b: sweep.nodes[o.b].clone(),
            rail: sweep.rails[o.rail].clone(),
            gbps: o.gbps,
            fraction: o.fraction,
            data_ok: o.data_ok,
            low: *low,
        })
        .collect()
}

/// Every verdict, the suspects, and what the scheduler is told.
pub fn report(sweep: &Sweep, c: &Classified, ctx: &Context) -> Report {
    let mut verdicts = node_verdicts(sweep, c);
    apply_remedies(&mut verdicts, ctx);
    let suspects = drain_reasons(&verdicts);
    let index: HashMap<&str, usize> = sweep
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    // A node not judged keeps its state: a drained one is neither resumed nor
    // drained again; one on probation is never cleared (that would end its
    // reservation without a verdict): it is drained again with its earlier
    // reason and that its results could not be read.
    let unread: std::collections::HashSet<&str> = ctx
        .unread
        .iter()
        .flat_map(|u| u.nodes.iter().map(String::as_str))
        .collect();
    let cleared = |n: &str| !unread.contains(n) && index.get(n).is_some_and(|i| c.cleared(*i));
    let probation: Vec<(String, String)> = ctx
        .probation
        .iter()
        .map(|(n, earlier)| match unread.contains(n.as_str()) {
            true => (n.clone(), unreadable_reason(earlier)),
            false => (n.clone(), earlier.clone()),
        })
        .collect();
    let slurm = slurm::decide(&suspects, &ctx.drained, &probation, &cleared, ctx.cap);
    let drained = drained_after(&ctx.drained, &slurm);
    verdicts.extend(path_verdicts(sweep, c));
    verdicts.extend(fleet_verdict(c));
    let pairs = if ctx.with_pairs {
        pair_rows(sweep, c)
    } else {
        Vec::new()
    };
    Report {
        nodes: sweep.nodes.len(),
        rounds: sweep.rounds(),
        measurements: sweep.obs.len(),
        thresholds: c.thresholds,
        rails: c.rails.clone(),
        verdicts,
        suspects: c
            .suspects()
            .into_iter()
            .map(|(n, rails)| SuspectOut {
                node: sweep.nodes[n].clone(),
                rails: rails.iter().map(|r| sweep.rails[*r].clone()).collect(),
            })
            .collect(),
        path_retests: c
            .path_suspects
            .iter()
            .map(|(a, b, r)| PathRetest {
                a: sweep.nodes[*a].clone(),
                b: sweep.nodes[*b].clone(),
                rail: sweep.rails[*r].clone(),
            })
            .collect(),
        slurm,
        pairs,
        gid_index_disagreement: ctx.gid_indexes.clone(),
        unread: ctx.unread.clone(),
        grid: super::grid::grid(sweep, c, drained),
    }
}

/// The nodes drained once the decisions run: drained before and not
/// resumed, and those drained now.
fn drained_after(before: &[(String, String)], d: &Decisions) -> Vec<String> {
    let resumed: std::collections::HashSet<&str> = d
        .resume
        .iter()
        .filter(|a| !a.argv.is_empty())
        .map(|a| a.node.as_str())
        .collect();
    let resumed = |n: &str| resumed.contains(n);
    distinct(
        before
            .iter()
            .map(|(n, _)| n.clone())
            .filter(|n| !resumed(n))
            .chain(d.drain.iter().map(|a| a.node.clone())),
    )
}
