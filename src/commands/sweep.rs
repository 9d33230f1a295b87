//! `gdrprov fleet sweep plan|report|simulate`: the pair sweep's command
//! line over the pure core in src/fleet (docs/fleets.md).

use super::cli::fleet::{
    FleetArgs, FleetCommand, Mode, PlanArgs, ReportArgs, SimulateArgs, SweepCommand, ThresholdArgs,
};
use crate::error::{Error, Result};
use crate::exit;
use crate::fleet::classify::{classify, Classified, Thresholds};
use crate::fleet::plan::{self, Round};
use crate::fleet::render::{self, Context, Unread};
use crate::fleet::results::Record;
use crate::fleet::{remedy, simulate, slurm, Obs, Sweep};
use crate::names;
use crate::output::{Format, Output};
use serde::Serialize;
use std::collections::HashMap;

impl ThresholdArgs {
    /// The classifier's thresholds, the same for `report` and `plan --retest`.
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

pub fn run(out: &Output, a: &FleetArgs) -> Result<i32> {
    let FleetCommand::Sweep(c) = &a.command;
    if out.format == Format::Prometheus && !matches!(c, SweepCommand::Report(_)) {
        return Err(Error::Usage(
            "--format prometheus is for `fleet sweep report` (and verify); use text or json here"
                .into(),
        ));
    }
    if out.format == Format::Html && matches!(c, SweepCommand::Plan(_)) {
        return Err(Error::Usage(
            "--format html is for `fleet sweep report` and `simulate`; use text or json for the plan"
                .into(),
        ));
    }
    match c {
        SweepCommand::Plan(p) => plan_cmd(out, p),
        SweepCommand::Report(r) => report_cmd(out, r),
        SweepCommand::Simulate(s) => simulate_cmd(out, s),
    }
}

#[path = "sweep_io.rs"]
mod io;
use io::{load_results, read_hosts};

/// A round as the plan prints it.
#[derive(Debug, Serialize)]
struct RoundOut {
    round: u32,
    kind: &'static str,
    pairs: Vec<PairOut>,
    bye: Vec<String>,
}

#[derive(Debug, Serialize)]
struct PairOut {
    listener: String,
    client: String,
    /// Empty: every rail.
    rails: Vec<String>,
}

#[derive(Debug, Serialize)]
struct PlanOut {
    mode: Mode,
    nodes: Vec<String>,
    rails: Vec<String>,
    rounds: Vec<RoundOut>,
    /// Why no round is planned, when none is.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
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

fn plan_cmd(out: &Output, a: &PlanArgs) -> Result<i32> {
    let mut nodes = read_hosts(&a.hosts)?;
    let rails: Vec<String> = a.rails.iter().map(|r| r.to_string()).collect();
    let mut plan = PlanOut {
        mode: a.mode,
        nodes: Vec::new(),
        rails: rails.clone(),
        rounds: Vec::new(),
        note: None,
    };
    if a.retest.is_empty() {
        if nodes.len() < 2 {
            return Err(Error::Usage(format!(
                "a sweep needs at least two hosts, {} given; list them with --hosts FILE or --nodelist",
                nodes.len()
            )));
        }
        let sweep = Sweep::new(nodes, rails);
        let rounds = match a.mode {
            Mode::Quick => plan::quick(sweep.nodes.len(), a.partners),
            Mode::AllPairs => plan::all_pairs(sweep.nodes.len()),
        };
        for (i, r) in rounds.iter().enumerate() {
            plan.rounds
                .push(round_out(&sweep, r, i as u32 + 1, "initial"));
        }
        plan.nodes = sweep.nodes;
    } else {
        let bar = crate::output::progress("reading pair results", !out.json());
        let (sweep, unread) = load_results(&a.retest, std::mem::take(&mut nodes), &rails, &bar)?;
        if sweep.obs.is_empty() {
            return Err(Error::Usage(format!(
                "--retest: no pair results under {}: run the planned rounds first (DIR/round-R/A+B.json){}",
                a.retest.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
                unread_text(&unread)
            )));
        }
        let mut c = classify(&sweep, &a.thresholds.thresholds()?);
        withhold(&sweep, &mut c, &unread);
        for u in &unread {
            out.note(&unread_line(u));
        }
        let done = sweep.rounds();
        let next = simulate::next_round(&sweep, &c, done as usize);
        if done >= a.max_rounds {
            plan.note = Some(format!(
                "{done} rounds measured, the most --max-rounds allows ({}); what is left is reported as undecided",
                a.max_rounds
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
    }
    if out.json() {
        out.document(names::FLEET_SWEEP_PLAN, std::path::Path::new("/"), &plan);
    } else {
        // One line a pair, for shell runners: ROUND LISTENER CLIENT RAILS (`all` for every rail).
        let mut s = String::new();
        for r in &plan.rounds {
            for p in &r.pairs {
                let rails = match (p.rails.is_empty(), plan.rails.is_empty()) {
                    (false, _) => p.rails.join(","),
                    (true, false) => plan.rails.join(","),
                    (true, true) => "all".to_string(),
                };
                s.push_str(&format!(
                    "{} {} {} {rails}\n",
                    r.round, p.listener, p.client
                ));
            }
        }
        if let Some(n) = &plan.note {
            out.note(n);
        }
        out.raw(&s);
    }
    Ok(exit::OK)
}

fn report_cmd(out: &Output, a: &ReportArgs) -> Result<i32> {
    let thresholds = a.thresholds.thresholds()?;
    let nodes = if a.hosts.hosts.is_some() || a.hosts.nodelist.is_some() {
        read_hosts(&a.hosts)?
    } else {
        Vec::new()
    };
    let bar = crate::output::progress("reading pair results", !out.json());
    let (sweep, mtus, mut unread) = io::load_with_mtus(&a.results, nodes, &[], &bar)?;
    if sweep.obs.is_empty() {
        return Err(Error::Usage(format!(
            "no pair results found under {}: the runner writes DIR/round-R/A+B.json (the client's `gdrprov bench pair --format json`){}",
            a.results.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            unread_text(&unread)
        )));
    }
    let findings = match &a.verify_dir {
        Some(d) => io::read_verify_dir(d, &mut unread)?,
        None => HashMap::new(),
    };
    let mut c = classify(&sweep, &thresholds);
    withhold(&sweep, &mut c, &unread);
    // Text says them in the report; other formats on standard error too.
    if out.format != Format::Text {
        for u in &unread {
            out.note(&unread_line(u));
        }
    }
    let drained = match &a.drained {
        Some(f) => slurm::parse_drained(
            &io::read_text(f, crate::host::ReadLimit::NodeList)?,
            "--drained",
        )?,
        None => Vec::new(),
    };
    let probation = match &a.probation {
        Some(f) => slurm::parse_drained(
            &io::read_text(f, crate::host::ReadLimit::NodeList)?,
            "--probation",
        )?,
        None => Vec::new(),
    };
    let ctx = Context {
        findings,
        odd_mtus: remedy::odd_mtus(&mtus),
        drained,
        probation,
        cap: slurm::cap(sweep.nodes.len(), a.drain_percent, a.max_drain),
        with_pairs: a.pairs,
        unread,
    };
    let report = render::report(&sweep, &c, &ctx);
    if let Some(path) = &a.slurm_script {
        crate::host::textfile::write_textfile(
            path,
            &format!(
                "#!/bin/sh\n# gdrprov {}: the scheduler's actions\nset -e\n{}",
                names::FLEET_SWEEP_REPORT,
                report.slurm.script()
            ),
        )?;
    }
    match out.format {
        Format::Json => out.document(
            names::FLEET_SWEEP_REPORT,
            std::path::Path::new("/"),
            &report,
        ),
        Format::Text => out.text(
            std::path::Path::new("/"),
            &crate::output::sweep::text(&report),
        ),
        Format::Prometheus => out.exposition(&crate::output::sweep::prometheus(&report)),
        Format::Html => out.raw(&crate::output::sweep_html::render(&report)?),
    }
    Ok(exit::OK)
}

fn simulate_cmd(out: &Output, a: &SimulateArgs) -> Result<i32> {
    let model = simulate::Model {
        nodes: a.nodes,
        rails: a.rails,
        bad_nodes: a.bad_nodes,
        bad_rails: a.bad_rails,
        bad_paths: a.bad_paths,
        noise: a.noise,
        slow: a.slow,
        seed: a.seed,
        max_rounds: a.max_rounds,
        pair_seconds: a.pair_seconds,
        ..simulate::Model::default()
    };
    if let Some(why) = model.problem() {
        return Err(Error::Usage(why));
    }
    let (o, sweep, c) = simulate::run_with_sweep(&model);
    if out.format == Format::Html {
        // The report of the simulated fleet, as `report` makes it from results.
        let ctx = Context {
            cap: slurm::cap(sweep.nodes.len(), 10.0, None),
            ..Context::default()
        };
        out.raw(&crate::output::sweep_html::render(&render::report(
            &sweep, &c, &ctx,
        ))?);
    } else if out.json() {
        out.document(names::FLEET_SWEEP_SIMULATE, std::path::Path::new("/"), &o);
    } else {
        out.text(std::path::Path::new("/"), &format!(
            "{} nodes x {} rails, {} bad nodes, {} bad rails, {} bad paths, noise {}, slow rails at {} (seed {})\n\
             rounds {} ({} retests), measurements {}\n\
             injected {}, found {}, missed {}, wrongly drained {}, false verdicts {}, undecided {}\n\
             planner + classifier {:.3} s; a real sweep: {:.0} s with rails one after another, {:.0} s with every rail at once ({} s a pair run)\n",
            a.nodes, a.rails, a.bad_nodes, a.bad_rails, a.bad_paths, a.noise, a.slow, a.seed,
            o.rounds, o.retest_rounds, o.measurements,
            o.injected, o.found, o.missed, o.wrongly_drained, o.false_verdicts, o.undecided,
            o.planner_classifier_seconds, o.wall_seconds, o.wall_seconds_rails_parallel, a.pair_seconds
        ));
    }
    Ok(exit::OK)
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
fn unread_line(u: &Unread) -> String {
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
