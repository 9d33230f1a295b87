//! `gdrprov fleet ...`: the pair sweep across a fleet (docs/fleets.md).

use crate::grammar::{self, RailName};
use crate::names;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;

/// The highest round a sweep plans or reads (`round-R`).
pub const MAX_ROUND: i64 = 10_000;
/// The most partners a node is asked to meet, or a verdict to need.
const MAX_PARTNERS: u64 = 1024;
/// The most nodes a sweep takes (Slurm's host lists are bounded the same).
const MAX_HOSTS: u64 = crate::fleet::slurm::MAX_HOSTS as u64;

/// A count from `lo` to `hi` (a `usize` option), refused past them.
fn count(lo: u64, hi: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(lo..=hi)
}

/// `gdrprov fleet ...`
#[derive(Debug, Args)]
pub struct FleetArgs {
    #[command(subcommand)]
    pub command: FleetCommand,
}

#[derive(Debug, Subcommand)]
pub enum FleetCommand {
    /// The pair sweep: find the bad node, rail and fabric path across a fleet.
    #[command(subcommand)]
    Sweep(SweepCommand),
}

#[derive(Debug, Subcommand)]
pub enum SweepCommand {
    /// Rounds of disjoint pairs to run (`bench pair`), from a host list; or, with --retest, the
    /// next retest round from the results so far.
    Plan(PlanArgs),
    /// Classify the results: every pair per rail, bad nodes, rails and paths with their
    /// evidence, suspects, and the Slurm drains and resumes (under a cap).
    Report(ReportArgs),
    /// Run the planner and classifier on a seeded model of a rail-optimized fleet.
    Simulate(SimulateArgs),
}

/// Where the nodes come from.
#[derive(Debug, Args)]
pub struct HostsArgs {
    /// A file of host names, one a line (`#` starts a comment).
    #[arg(long, value_name = "FILE")]
    pub hosts: Option<PathBuf>,
    /// A Slurm host list, e.g. "$SLURM_JOB_NODELIST" or gpu[001-064].
    #[arg(long, value_name = "LIST")]
    pub nodelist: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// A few rounds in which every node meets --partners different partners; then retests.
    Quick,
    /// Every pair once: N-1 rounds (round robin).
    AllPairs,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub hosts: HostsArgs,
    /// The rails (RDMA devices) each pair runs, comma-separated; none: the runner's choice (all).
    #[arg(long, value_name = "DEV,...", value_delimiter = ',')]
    pub rails: Vec<RailName>,
    /// How the rounds are chosen.
    #[arg(long, value_enum, default_value_t = Mode::Quick)]
    pub mode: Mode,
    /// Different partners each node meets in the quick rounds.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = count(1, MAX_PARTNERS))]
    pub partners: usize,
    /// The results so far (directories of pair JSON): plan the next retest round.
    #[arg(long, value_name = "DIR")]
    pub retest: Vec<PathBuf>,
    /// No retest round past this many rounds.
    #[arg(long, default_value_t = 6, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_ROUND))]
    pub max_rounds: u32,
    /// The suspects to retest come from the report's classification: give the same thresholds.
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Directories of pair results: DIR/round-R/A+B.json (or A+B+RAIL.json).
    #[arg(required = true, value_name = "DIR")]
    pub results: Vec<PathBuf>,
    /// The sweep's hosts, so that a node with no result is named (optional).
    #[command(flatten)]
    pub hosts: HostsArgs,
    /// Each node's `gdrprov verify --format json` as DIR/NODE.json: configuration causes
    /// make a bad node fixable by `gdrprov apply` instead of drained.
    #[arg(long, value_name = "DIR")]
    pub verify_dir: Option<PathBuf>,
    /// Nodes drained now, `NODE|REASON` a line (`sinfo -h -N -t drain -o '%N|%E'`): the
    /// sweep's own drains that this sweep clears are resumed.
    #[arg(long, value_name = "FILE")]
    pub drained: Option<PathBuf>,
    /// Nodes an earlier sweep drained and resumed for this one (examples/slurm/
    /// gdrprov-sweep-submit.sh), `NODE|REASON` a line: kept in service when this sweep clears
    /// them, drained again otherwise.
    #[arg(long, value_name = "FILE")]
    pub probation: Option<PathBuf>,
    /// Drain at most N nodes (default: --drain-percent of the nodes, at least one).
    #[arg(long, value_name = "N", value_parser = count(0, MAX_HOSTS))]
    pub max_drain: Option<usize>,
    /// Drain at most this share of the nodes (unless --max-drain says otherwise).
    #[arg(long, default_value_t = 10.0, value_name = "PERCENT", value_parser = grammar::percent)]
    pub drain_percent: f64,
    /// Write the scontrol command lines (drain, resume) to FILE, for `sh FILE`.
    #[arg(long, value_name = "FILE")]
    pub slurm_script: Option<PathBuf>,
    /// List every measurement in the JSON.
    #[arg(long)]
    pub pairs: bool,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
}

#[derive(Debug, Args)]
pub struct ThresholdArgs {
    /// A pair is low below this fraction of its rail's median (ClusterKit's 0.93).
    #[arg(long, default_value_t = 0.93, value_name = "FRACTION", value_parser = grammar::fraction)]
    pub relative: f64,
    /// A rail whose median is below this fraction of line rate is a fleet-wide problem.
    #[arg(long, default_value_t = 0.90, value_name = "FRACTION", value_parser = grammar::fraction)]
    pub floor: f64,
    /// Different partners, fine elsewhere, that a bad verdict needs.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = count(1, MAX_PARTNERS))]
    pub min_partners: usize,
    /// Also low below this many Gb/s, whatever the median (an absolute cut: for a fleet of a
    /// few nodes, where a bad node is in most pairs, and for ports with no real line rate).
    #[arg(long, value_name = "GBPS", value_parser = grammar::rate)]
    pub min_gbps: Option<f64>,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Nodes in the model fleet.
    #[arg(long, default_value_t = 4096)]
    pub nodes: usize,
    /// Rails (RDMA NICs) per node.
    #[arg(long, default_value_t = 8)]
    pub rails: usize,
    /// Nodes slow on every rail.
    #[arg(long, default_value_t = 41)]
    pub bad_nodes: usize,
    /// Node rails slow (a cable, a transceiver, a NIC).
    #[arg(long, default_value_t = 164)]
    pub bad_rails: usize,
    /// Pairs slow on one rail (among the pairs the first rounds measure).
    #[arg(long, default_value_t = 0)]
    pub bad_paths: usize,
    /// Relative standard deviation of every measurement.
    #[arg(long, default_value_t = 0.05)]
    pub noise: f64,
    /// A slow rail's speed as a fraction of a good one's.
    #[arg(long, default_value_t = 0.6)]
    pub slow: f64,
    /// Seed of the model's random choices (the same seed, the same fleet and measurements).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// No retest round past this many rounds.
    #[arg(long, default_value_t = 6)]
    pub max_rounds: u32,
    /// Seconds one `bench pair` run takes on one rail (measure it), for the wall time.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub pair_seconds: f64,
}

impl FleetCommand {
    pub fn name(&self) -> &'static str {
        match self {
            FleetCommand::Sweep(SweepCommand::Plan(_)) => names::FLEET_SWEEP_PLAN,
            FleetCommand::Sweep(SweepCommand::Report(_)) => names::FLEET_SWEEP_REPORT,
            FleetCommand::Sweep(SweepCommand::Simulate(_)) => names::FLEET_SWEEP_SIMULATE,
        }
    }
}
