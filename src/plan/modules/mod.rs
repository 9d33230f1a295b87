//! Desired-state modules: each turns (facts, its part of the profile, what
//! gdrprov already owns) into changes, without side effects.

pub mod bls_switch;
pub mod boot_entry;
pub mod bootcfg;
pub mod bootcfg_arch;
pub mod bootcfg_elsewhere;
pub mod bootcfg_extra;
pub mod bootcfg_grub;
mod bootcfg_grub_extra;
pub mod bootcfg_sdboot;
mod bootcfg_sdboot_extra;
pub mod bootcfg_trial;
pub mod esp_initrd;
pub mod fabric;
pub mod files;
pub mod gds;
pub mod gds_cufile;
pub mod gds_driver;
pub mod guard;
pub mod kmod;
pub mod loadreq;
pub mod nccl;
pub mod network;
pub mod pcie;
pub mod pcie_mrrs;
pub mod services;

pub use crate::plan::change::Part;

use crate::facts::Facts;
use crate::journal::State;
use crate::plan::inputs::PlanFacts;
use crate::profile::Composed;

/// Everything a module may look at while planning: facts gathered before,
/// never the host. Nothing in it can write.
pub struct Context<'a> {
    pub facts: &'a Facts,
    /// What planning reads beyond `facts` (GRUB files, module indexes, the
    /// files it would write), gathered before planning.
    pub seen: &'a PlanFacts,
    /// The profile resolved for this host (`profile::when::resolve`, done
    /// once in `plan::prepare`): the `when:` parts that hold are in it.
    pub desired: &'a Composed,
    /// The `when:` parts that do not hold here, and why (for the plan).
    pub skipped: &'a [String],
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

impl Context<'_> {
    /// A change to the running system: `spec` runs now when live changes are allowed; else, on
    /// the live system, the next boot owes it (`owed` says what stays until then). An image
    /// gets neither: its persistent state is enough.
    pub fn now_or_next_boot(
        &self,
        part: &mut Part,
        module: &str,
        spec: crate::host::CommandSpec,
        owed: impl FnOnce() -> String,
    ) {
        if self.live_changes {
            part.commands
                .push(crate::plan::change::Change::run(module, spec, None));
        } else if self.facts.live {
            part.reboot_pending.push(owed());
        }
    }
}

/// Planning on literal facts: no host, no file system.
#[cfg(test)]
pub(crate) mod testkit {
    use super::Context;
    use crate::error::Result;
    use crate::facts::{CpuVendor, Facts, OsFamily};
    use crate::journal::State;
    use crate::plan::inputs::{Missed, PlanFacts};
    use crate::plan::Plan;
    use crate::profile::{Composed, LoadedProfile};

    /// A profile given as YAML (no `extends`).
    pub fn desired(yaml: &str) -> Composed {
        let doc = crate::profile::parse(yaml, "test.yaml").expect("test profile parses");
        let doc = crate::profile::when::split(doc, "test.yaml").expect("test conditions parse");
        crate::profile::compose(&[LoadedProfile {
            name: "test".into(),
            source: "test.yaml".into(),
            builtin: false,
            doc,
        }])
        .expect("test profile composes")
    }

    /// A host as planning sees it.
    pub struct World {
        pub facts: Facts,
        pub seen: PlanFacts,
        pub state: State,
        pub live_changes: bool,
        pub no_exec: bool,
        pub trial: Option<Vec<String>>,
    }

    impl World {
        /// An image root of `family` with an Intel CPU, where every file
        /// planning asks about is absent unless set.
        pub fn image(family: OsFamily) -> World {
            let mut facts = Facts::blank(family);
            facts.cpu_vendor = CpuVendor::Intel;
            let mut seen = PlanFacts::default();
            seen.root = Some("/img".into());
            World {
                facts,
                seen,
                state: State::default(),
                live_changes: false,
                no_exec: false,
                trial: None,
            }
        }

        /// The running system, which may be changed now.
        pub fn live(family: OsFamily) -> World {
            let mut w = World::image(family);
            w.facts.live = true;
            w.facts.observed = true;
            w.seen.root = None;
            w.live_changes = true;
            w
        }

        pub fn file(&mut self, path: &str, text: &str) -> &mut World {
            self.seen
                .files
                .insert(path.into(), Ok(Some(text.to_string())));
            self
        }

        pub fn ctx<'a>(&'a self, desired: &'a Composed) -> Context<'a> {
            Context {
                facts: &self.facts,
                seen: &self.seen,
                desired,
                skipped: &[],
                state: &self.state,
                live_changes: self.live_changes,
                no_exec: self.no_exec,
                trial: self.trial.clone(),
            }
        }

        /// The whole plan, and what it asked for that the world lacks:
        /// `when:` resolved on the world's facts first, as `prepare` does.
        pub fn plan(&self, desired: &Composed) -> (Result<Plan>, Missed) {
            let (resolved, skipped) = crate::profile::when::resolve(desired, &self.facts);
            let p = crate::plan::build(&Context {
                desired: &resolved,
                skipped: &skipped,
                ..self.ctx(desired)
            });
            (p, self.seen.take_missed())
        }
    }

    /// The argv of every command of a plan.
    pub fn commands(p: &Plan) -> Vec<String> {
        p.changes
            .iter()
            .filter_map(|c| match &c.action {
                crate::plan::change::Action::Run { command } => Some(command.argv.join(" ")),
                _ => None,
            })
            .collect()
    }

    /// What undoes each command of a plan (rollback runs it).
    pub fn undo(p: &Plan) -> Vec<Option<String>> {
        p.changes
            .iter()
            .filter_map(|c| match &c.action {
                crate::plan::change::Action::Run { command } => {
                    Some(command.undo.as_ref().map(|u| u.join(" ")))
                }
                _ => None,
            })
            .collect()
    }

    /// The content a plan writes to `path`.
    pub fn written<'p>(p: &'p Plan, path: &str) -> Option<&'p str> {
        p.changes.iter().find_map(|c| match &c.action {
            crate::plan::change::Action::WriteFile { path: q, after, .. } if q == path => {
                Some(after.as_str())
            }
            _ => None,
        })
    }
}
