//! Where planning meets the host: gathers what a plan reads, then builds the
//! plan from it (pure, `plan::build`). Planning asks for the current content
//! of the files it would write and for initramfs listings as it goes; what
//! was not gathered yet is read here and the plan is built again, until it
//! asked for nothing new. Initramfs listings (seconds each) are only made
//! once every file is known, so only when the block list or the module
//! options really change. `when:` is resolved here, once, on the facts:
//! what is gathered and planned is the profile as it holds on this host.

use crate::error::Result;
use crate::facts::Facts;
use crate::host::Host;
use crate::journal::{State, StateStore};
use crate::plan::inputs::PlanFacts;
use crate::plan::modules::{self, Context};
use crate::plan::{self, Plan};
use crate::profile::when;
use crate::profile::Composed;

/// How the plan may change the host.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Whether the running kernel may be changed now (live root, not `--no-reboot`).
    pub live_changes: bool,
    /// `apply --trial`: the profiles as given.
    pub trial: Option<Vec<String>>,
}

/// Files most plans read; reading them up front saves a round.
const USUAL_FILES: &[&str] = &[
    modules::kmod::LOAD_CONF,
    modules::kmod::BLOCK_CONF,
    modules::kmod::OPTIONS_CONF,
    modules::nccl::PATH,
    modules::services::VERIFY_UNIT,
    modules::services::VERIFY_WANTS,
    modules::pcie::UNIT_PATH,
    modules::pcie_mrrs::UNIT_PATH,
];

/// Gathers what planning reads and builds the plan. Gives the facts read
/// too (verify checks against them).
pub fn plan(
    host: &Host,
    facts: &Facts,
    desired: &Composed,
    state: &State,
    opts: &Options,
) -> Result<(Plan, PlanFacts)> {
    let store = StateStore::new(host);
    let (resolved, skipped) = when::resolve(desired, facts);
    let mut seen = PlanFacts::gather(host, facts, &resolved, state, opts.live_changes);
    let usual: Vec<String> = USUAL_FILES.iter().map(|s| s.to_string()).collect();
    seen.read_files(host, &usual);
    // Each round reads at least one thing not read before; the bound is a
    // guard, not a limit any plan reaches.
    for _ in 0..64 {
        let built = plan::build(&Context {
            facts,
            seen: &seen,
            desired: &resolved,
            skipped: &skipped,
            state,
            live_changes: opts.live_changes,
            no_exec: host.no_exec(),
            trial: opts.trial.clone(),
        });
        let missed = seen.take_missed();
        if missed.is_empty() {
            return built.map(|p| (p, seen));
        }
        if missed.files.is_empty() && missed.backups.is_empty() {
            let kernels: Vec<String> = missed.initramfs.into_iter().collect();
            seen.list_initramfs(host, facts.os.family, &kernels);
        } else {
            let files: Vec<String> = missed.files.into_iter().collect();
            let backups: Vec<String> = missed.backups.into_iter().collect();
            seen.read_files(host, &files);
            seen.read_backups(&store, &backups);
        }
    }
    Err(crate::error::Error::Refused(
        "planning kept asking for new files; this is a bug in gdrprov, please report it".into(),
    ))
}

/// What planning reads, without a plan: for a caller whose plan could not be
/// made (verify still checks against the files and modules it reads).
pub fn inputs(host: &Host, facts: &Facts, desired: &Composed, state: &State) -> PlanFacts {
    let (resolved, _) = when::resolve(desired, facts);
    PlanFacts::gather(host, facts, &resolved, state, false)
}
