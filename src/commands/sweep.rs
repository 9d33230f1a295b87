//! `gdrprov fleet sweep plan|report|simulate`: the pair sweep's command
//! line over the pure core in src/fleet (docs/fleets.md).

use super::cli::fleet::{
    FleetArgs, FleetCommand, HostsArgs, Mode, PlanArgs, ReportArgs, SimulateArgs, SweepCommand,
    ThresholdArgs,
};
use crate::error::Result;
use crate::names;
use crate::ops::sweep::{self as op, SweepPlan};
use crate::output::{Format, Output};

impl ThresholdArgs {
    /// The classifier's thresholds as given, the same for `report` and `plan --retest`
    /// (checked by the operation).
    pub fn limits(&self) -> op::Limits {
        op::Limits {
            relative: self.relative,
            floor: self.floor,
            min_partners: self.min_partners,
            min_gbps: self.min_gbps,
        }
    }
}

impl HostsArgs {
    pub fn hosts(&self) -> op::Hosts {
        op::Hosts {
            file: self.hosts.clone(),
            nodelist: self.nodelist.clone(),
        }
    }
}

pub fn run(out: &Output, a: &FleetArgs) -> Result<i32> {
    let FleetCommand::Sweep(c) = &a.command;
    // The formats each takes are the parser's (src/commands/cli/shared.rs).
    match c {
        SweepCommand::Plan(p) => plan_cmd(out, p),
        SweepCommand::Report(r) => report_cmd(out, r),
        SweepCommand::Simulate(s) => simulate_cmd(out, s),
    }
    .map(|()| crate::error::exit::OK)
}

fn plan_cmd(out: &Output, a: &PlanArgs) -> Result<()> {
    let plan = op::plan(&op::PlanRequest {
        hosts: a.hosts.hosts(),
        rails: a.rails.iter().map(|r| r.to_string()).collect(),
        mode: match a.mode {
            Mode::Quick => op::Mode::Quick,
            Mode::AllPairs => op::Mode::AllPairs,
        },
        partners: a.partners,
        retest: a.retest.clone(),
        max_rounds: a.max_rounds,
        limits: a.thresholds.limits(),
        progress: !out.json(),
    })?;
    for n in &plan.notes {
        out.note(n);
    }
    if out.json() {
        out.document(names::FLEET_SWEEP_PLAN, std::path::Path::new("/"), &plan);
    } else {
        if let Some(n) = &plan.note {
            out.note(n);
        }
        out.raw(&plan_lines(&plan));
    }
    Ok(())
}

/// One line a pair, for shell runners: ROUND LISTENER CLIENT RAILS (`all` for every rail).
fn plan_lines(plan: &SweepPlan) -> String {
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
    s
}

fn report_cmd(out: &Output, a: &ReportArgs) -> Result<()> {
    let op::Reported { report, notes } = op::report(&op::ReportRequest {
        results: a.results.clone(),
        hosts: a.hosts.hosts(),
        verify_dir: a.verify_dir.clone(),
        drained: a.drained.clone(),
        probation: a.probation.clone(),
        max_drain: a.max_drain,
        drain_percent: a.drain_percent,
        slurm_script: a.slurm_script.clone(),
        pairs: a.pairs,
        limits: a.thresholds.limits(),
        progress: !out.json(),
    })?;
    // Text says them in the report; other formats on standard error too.
    if out.format != Format::Text {
        for n in &notes {
            out.note(n);
        }
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
    Ok(())
}

fn simulate_cmd(out: &Output, a: &SimulateArgs) -> Result<()> {
    let simulated = op::simulate(&op::SimulateRequest {
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
    })?;
    let o = &simulated.outcome;
    if out.format == Format::Html {
        out.raw(&crate::output::sweep_html::render(&simulated.report())?);
    } else if out.json() {
        out.document(names::FLEET_SWEEP_SIMULATE, std::path::Path::new("/"), o);
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
    Ok(())
}
