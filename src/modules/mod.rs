//! Desired-state modules: each turns (facts, its part of the profile, what
//! gdrprov already owns) into changes, without side effects.

pub mod bootcfg;
pub mod bootcfg_arch;
pub mod bootcfg_elsewhere;
pub mod files;
pub mod kmod;
pub mod nccl;
pub mod network;
pub mod pcie;
pub mod services;

pub use crate::change::Part;

use crate::facts::planning::PlanFacts;
use crate::facts::Facts;
use crate::journal::State;
use crate::profile::Composed;

/// Everything a module may look at while planning: facts gathered before,
/// never the host. Nothing in it can write.
pub struct Context<'a> {
    pub facts: &'a Facts,
    /// What planning reads beyond `facts` (GRUB files, module indexes, the
    /// files it would write), gathered by `crate::prepare`.
    pub seen: &'a PlanFacts,
    pub desired: &'a Composed,
    pub state: &'a State,
    /// Whether the running kernel may be changed now (live root, not
    /// `--no-reboot`); otherwise only persistent state is planned.
    pub live_changes: bool,
    /// Whether nothing may run (`--no-exec`): commands are then owed.
    pub no_exec: bool,
    /// `apply --trial`: the profiles as given (for `commit`); the boot
    /// arguments go to a one-shot entry and the default entry is left alone.
    pub trial: Option<Vec<String>>,
}
