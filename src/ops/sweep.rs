//! The pair sweep as operations (`fleet sweep plan|report|simulate`, docs/fleets.md):
//! the host lists and result documents read (`io`), the rounds planned, the results
//! classified into a report, the Slurm script written. The command line
//! (src/commands/sweep.rs) maps its arguments onto these requests and renders what comes
//! back; nothing here prints.

use crate::error::{Error, Result};
use crate::fleet::classify::{classify, Classified, Thresholds};
use crate::fleet::plan::{self as rounds, Round};
use crate::fleet::render::{self, Context};
use crate::fleet::results::Record;
use crate::fleet::{remedy, simulate as sim, slurm, Obs, Sweep};
use crate::names;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

mod io;

use crate::fleet::render::{Report, Unread};
use crate::fleet::simulate::{Model, Outcome};
/// The most nodes a sweep takes (Slurm's host lists are bounded the same).
pub use crate::fleet::slurm::MAX_HOSTS;

/// Where the nodes come from: `--hosts FILE` (one a line), `--nodelist LIST` (a Slurm
/// host list), or both.
#[derive(Debug, Clone, Default)]
pub struct Hosts {
    pub file: Option<PathBuf>,
    pub nodelist: Option<String>,
}

impl Hosts {
    fn given(&self) -> bool {
        self.file.is_some() || self.nodelist.is_some()
    }
}

/// How the first rounds pair the nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A few rounds in which every node meets `partners` different partners.
    Quick,
    /// Every pair once: N-1 rounds (round robin).
    AllPairs,
}

/// The classifier's thresholds as the operator gives them (`--relative`, `--floor`,
/// `--min-partners`, `--min-gbps`), the same for `report` and `plan --retest`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub relative: f64,
    pub floor: f64,
    pub min_partners: usize,
    pub min_gbps: Option<f64>,
}

impl Limits {
    /// The classifier's thresholds, each value checked.
    pub fn thresholds(&self) -> Result<Thresholds> {
        for (name, v) in [("--relative", self.relative), ("--floor", self.floor)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(Error::Usage(format!(
                    "{name} {v}: give a fraction between 0 and 1"
                )));
            }
        }
        if let Some(g) = self.min_gbps {
            if !(g.is_finite() && g > 0.0) {
                return Err(Error::Usage(format!(
                    "--min-gbps {g}: give a speed above 0 Gb/s"
                )));
            }
        }
        Ok(Thresholds {
            relative: self.relative,
            floor: self.floor,
            min_partners: self.min_partners.max(1),
            min_gbps: self.min_gbps,
            ..Thresholds::default()
        })
    }
}

/// `fleet sweep plan`: the first rounds from a host list, or (with `retest`) the next
/// retest round from the results so far.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    pub hosts: Hosts,
    pub rails: Vec<String>,
    pub mode: Mode,
    pub partners: usize,
    pub retest: Vec<PathBuf>,
    pub max_rounds: u32,
    pub limits: Limits,
    /// Draw a progress bar while the results are read (a terminal, text output).
    pub progress: bool,
}

/// A round as the plan gives it.
#[derive(Debug, Serialize)]
pub struct RoundOut {
    pub round: u32,
    pub kind: &'static str,
    pub pairs: Vec<PairOut>,
    pub bye: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct PairOut {
    pub listener: String,
    pub client: String,
    /// Empty: every rail.
    pub rails: Vec<String>,
}

/// The sweep's plan (`fleet sweep plan --format json`'s document).
#[derive(Debug, Serialize)]
pub struct SweepPlan {
    pub mode: Mode,
    pub nodes: Vec<String>,
    pub rails: Vec<String>,
    pub rounds: Vec<RoundOut>,
    /// Why no round is planned, when none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// For people: the result files that could not be read (their nodes are not judged).
    #[serde(skip)]
    pub notes: Vec<String>,
}

fn round_out(sweep: &Sweep, round: &Round, number: u32, kind: &'static str) -> RoundOut {
    RoundOut {
        round: number,
        kind,
        pairs: round
            .pairs
            .iter()
            .map(|p| PairOut {
                listener: sweep.nodes[p.a].clone(),
                client: sweep.nodes[p.b].clone(),
                rails: p.rails.iter().map(|r| sweep.rails[*r].clone()).collect(),
            })
            .collect(),
        bye: round.bye.iter().map(|n| sweep.nodes[*n].clone()).collect(),
    }
}

/// `fleet sweep plan`.
pub fn plan(req: &PlanRequest) -> Result<SweepPlan> {
    let nodes = io::read_hosts(&req.hosts)?;
    let mut plan = SweepPlan {
        mode: req.mode,
        nodes: Vec::new(),
        rails: req.rails.clone(),
        rounds: Vec::new(),
        note: None,
        notes: Vec::new(),
    };
    if req.retest.is_empty() {
        first_rounds(req, nodes, &mut plan)?;
    } else {
        retest_round(req, nodes, &mut plan)?;
    }
    Ok(plan)
}

fn first_rounds(req: &PlanRequest, nodes: Vec<String>, plan: &mut SweepPlan) -> Result<()> {
    if nodes.len() < 2 {
        return Err(Error::Usage(format!(
            "a sweep needs at least two hosts, {} given; list them with --hosts FILE or --nodelist",
            nodes.len()
        )));
    }
    let sweep = Sweep::new(nodes, req.rails.clone());
    let planned = match req.mode {
        Mode::Quick => rounds::quick(sweep.nodes.len(), req.partners),
        Mode::AllPairs => rounds::all_pairs(sweep.nodes.len()),
    };
    for (i, r) in planned.iter().enumerate() {
        plan.rounds
            .push(round_out(&sweep, r, i as u32 + 1, "initial"));
    }
    plan.nodes = sweep.nodes;
    Ok(())
}

fn retest_round(req: &PlanRequest, nodes: Vec<String>, plan: &mut SweepPlan) -> Result<()> {
    let bar = crate::output::progress::Bar::start("reading pair results", req.progress);
    let (sweep, unread) = io::load_results(&req.retest, nodes, &req.rails, &bar)?;
    if sweep.obs.is_empty() {
        return Err(Error::Usage(format!(
            "--retest: no pair results under {}: run the planned rounds first (DIR/round-R/A+B.json){}",
            shown(&req.retest),
            unread_text(&unread)
        )));
    }
    let mut c = classify(&sweep, &req.limits.thresholds()?);
    withhold(&sweep, &mut c, &unread);
    let done = sweep.rounds();
    let next = sim::next_round(&sweep, &c, done as usize);
    if done >= req.max_rounds {
        plan.note = Some(format!(
            "{done} rounds measured, the most --max-rounds allows ({}); what is left is reported as undecided",
            req.max_rounds
        ));
    } else if next.pairs.is_empty() {
        let left = c.suspects().len() + c.path_suspects.len();
        plan.note = Some(if left == 0 {
            "nothing to retest: every node is decided".into()
        } else {
            format!("nothing to retest: {left} suspect(s) left, none with a partner it has not met; the report lists them as undecided")
        });
    } else {
        plan.rounds
            .push(round_out(&sweep, &next, done + 1, "retest"));
    }
    plan.rails = sweep.rails.clone();
    plan.nodes = sweep.nodes;
    plan.notes = unread.iter().map(not_judged).collect();
    Ok(())
}

/// `fleet sweep report`: the results classified, with what the operator adds.
#[derive(Debug, Clone, Default)]
pub struct ReportRequest {
    pub results: Vec<PathBuf>,
    /// The nodes expected (a node with no result is then reported as such).
    pub hosts: Hosts,
    pub verify_dir: Option<PathBuf>,
    pub drained: Option<PathBuf>,
    pub probation: Option<PathBuf>,
    pub max_drain: Option<usize>,
    pub drain_percent: f64,
    /// Write the scheduler's actions to this shell script.
    pub slurm_script: Option<PathBuf>,
    /// Every pair in the report.
    pub pairs: bool,
    pub limits: Limits,
    pub progress: bool,
}

/// A sweep's report, and what to say of it on standard error.
pub struct Reported {
    pub report: Report,
    /// The result files that could not be read (the report names them too).
    pub notes: Vec<String>,
}

/// `fleet sweep report`: the report; writes the Slurm script when asked.
pub fn report(req: &ReportRequest) -> Result<Reported> {
    let thresholds = req.limits.thresholds()?;
    let nodes = if req.hosts.given() {
        io::read_hosts(&req.hosts)?
    } else {
        Vec::new()
    };
    let bar = crate::output::progress::Bar::start("reading pair results", req.progress);
    let (sweep, mtus, mut unread) = io::load_with_mtus(&req.results, nodes, &[], &bar)?;
    if sweep.obs.is_empty() {
        return Err(Error::Usage(format!(
            "no pair results found under {}: the runner writes DIR/round-R/A+B.json (the client's `bench pair --format json` output){}",
            shown(&req.results),
            unread_text(&unread)
        )));
    }
    let mut findings = match &req.verify_dir {
        Some(d) => io::read_verify_dir(d, &mut unread)?,
        None => HashMap::new(),
    };
    let gid_indexes = remedy::mark_odd_gid_indexes(&mut findings);
    let mut c = classify(&sweep, &thresholds);
    withhold(&sweep, &mut c, &unread);
    let ctx = Context {
        findings,
        odd_mtus: remedy::odd_mtus(&mtus),
        gid_indexes,
        drained: node_list(req.drained.as_deref(), "--drained")?,
        probation: node_list(req.probation.as_deref(), "--probation")?,
        cap: slurm::cap(sweep.nodes.len(), req.drain_percent, req.max_drain),
        with_pairs: req.pairs,
        unread,
    };
    let report = render::report(&sweep, &c, &ctx);
    if let Some(path) = &req.slurm_script {
        crate::host::textfile::write_textfile(
            path,
            &format!(
                "#!/bin/sh\n# gdrprov {}: the scheduler's actions\nset -e\n{}",
                names::FLEET_SWEEP_REPORT,
                report.slurm.script()
            ),
        )?;
    }
    let notes = report.unread.iter().map(not_judged).collect();
    Ok(Reported { report, notes })
}

/// Slurm's drained (or probation) nodes and their reasons, from the file FLAG names.
fn node_list(file: Option<&Path>, flag: &str) -> Result<Vec<(String, String)>> {
    match file {
        Some(f) => slurm::parse_drained(&io::read_text(f, crate::host::ReadLimit::NodeList)?, flag),
        None => Ok(Vec::new()),
    }
}

fn shown(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `fleet sweep simulate`: a seeded model of a rail-optimized fleet.
#[derive(Debug, Clone, Default)]
pub struct SimulateRequest {
    pub nodes: usize,
    pub rails: usize,
    pub bad_nodes: usize,
    pub bad_rails: usize,
    pub bad_paths: usize,
    pub noise: f64,
    pub slow: f64,
    pub seed: u64,
    pub max_rounds: u32,
    /// Seconds a pair run takes, for the wall time of a real sweep.
    pub pair_seconds: f64,
}

/// A simulated sweep (`fleet sweep simulate`).
pub struct Simulated {
    pub outcome: Outcome,
    sweep: Sweep,
    classified: Classified,
}

impl Simulated {
    /// The report of the simulated fleet, as `report` makes it from results.
    pub fn report(&self) -> Report {
        let ctx = Context {
            cap: slurm::cap(self.sweep.nodes.len(), 10.0, None),
            ..Context::default()
        };
        render::report(&self.sweep, &self.classified, &ctx)
    }
}

/// `fleet sweep simulate`: the planner and classifier on a seeded model.
pub fn simulate(req: &SimulateRequest) -> Result<Simulated> {
    let model = Model {
        nodes: req.nodes,
        rails: req.rails,
        bad_nodes: req.bad_nodes,
        bad_rails: req.bad_rails,
        bad_paths: req.bad_paths,
        noise: req.noise,
        slow: req.slow,
        seed: req.seed,
        max_rounds: req.max_rounds,
        pair_seconds: req.pair_seconds,
        ..Model::default()
    };
    if let Some(why) = model.problem() {
        return Err(Error::Usage(why));
    }
    let (outcome, sweep, classified) = sim::run_with_sweep(&model);
    Ok(Simulated {
        outcome,
        sweep,
        classified,
    })
}

/// The nodes of files that could not be read are not judged (issue 43).
fn withhold(sweep: &Sweep, c: &mut Classified, unread: &[Unread]) {
    let index: HashMap<&str, usize> = sweep
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    for n in unread.iter().flat_map(|u| &u.nodes) {
        if let Some(i) = index.get(n.as_str()) {
            c.withhold(*i);
        }
    }
}

/// One file not read, for people: the nodes not judged, and why.
fn not_judged(u: &Unread) -> String {
    format!(
        "not judged: {} (a file of theirs could not be read: {})",
        u.nodes.join(", "),
        u.problem
    )
}

/// The files not read, after a refusal that found nothing else.
fn unread_text(unread: &[Unread]) -> String {
    match unread.first() {
        None => String::new(),
        Some(u) => format!(
            "; {} file(s) could not be read, the first: {}",
            unread.len(),
            u.problem
        ),
    }
}

/// Records into a sweep: rails named in the records first, a record without
/// a rail (a run that failed before naming one) on every rail.
fn add_records(sweep: &mut Sweep, records: &[Record], mtus: &mut HashMap<(String, String), u64>) {
    for r in records {
        if let Some(rail) = &r.rail {
            sweep.rail(rail);
        }
    }
    if sweep.rails.is_empty() {
        sweep.rail("all");
    }
    let all: Vec<String> = sweep.rails.clone();
    for r in records {
        let a = sweep.node(&r.a);
        let b = sweep.node(&r.b);
        let rails: Vec<String> = match &r.rail {
            Some(x) => vec![x.clone()],
            None => all.clone(),
        };
        for rail in rails {
            let ri = sweep.rail(&rail);
            sweep.obs.push(Obs {
                round: r.round,
                a,
                b,
                rail: ri,
                gbps: r.gbps,
                fraction: r.fraction,
                data_ok: r.data_ok,
            });
            if let Some(m) = r.mtu_a {
                mtus.insert((r.a.clone(), rail.clone()), m);
            }
            if let Some(m) = r.mtu_b {
                mtus.insert((r.b.clone(), rail.clone()), m);
            }
        }
    }
}
