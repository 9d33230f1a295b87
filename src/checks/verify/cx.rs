//! What the checks of `verify` read: the context gathered once for them all.

use super::LoopbackChoice;
use crate::bench::LoopbackReport;
use crate::checks::health::HealthReport;
use crate::checks::requirements::ReqResult;
use crate::checks::Check;
use crate::facts::rdma::RdmaDevice;
use crate::facts::Facts;
use crate::host::Host;
use crate::journal::State;
use crate::plan::inputs::PlanFacts;
use crate::plan::Plan;
use crate::profile::Composed;
use std::cell::RefCell;

/// Everything a check may read, gathered once.
pub struct Cx<'a> {
    pub host: &'a Host,
    pub facts: &'a Facts,
    pub seen: &'a PlanFacts,
    pub desired: &'a Composed,
    /// The profiles as the user named them, for the commands the checks
    /// suggest (`crate::suggest`).
    pub profiles: &'a [String],
    /// The plan of the same profiles with nothing allowed to run, or why
    /// there is none.
    pub plan: Result<&'a Plan, &'a str>,
    pub reqs: &'a [ReqResult],
    pub state: &'a State,
    /// The health checks, with their measurements.
    pub health: &'a HealthReport,
    pub loopback: &'a LoopbackChoice,
    /// `--device DEV[:PORT]`, parsed.
    pub device: (Option<String>, Option<u8>),
    /// What the loopback measured, for the report.
    pub measured: RefCell<Option<LoopbackReport>>,
}

impl Cx<'_> {
    pub(super) fn efa(&self) -> Vec<&RdmaDevice> {
        self.facts
            .rdma_devices
            .iter()
            .filter(|d| d.driver.as_deref() == Some("efa"))
            .collect()
    }

    /// Every RDMA device is EFA: its checks stand in for the loopback.
    pub fn efa_only(&self) -> bool {
        let efa = self.efa().len();
        efa > 0 && efa == self.facts.rdma_devices.len()
    }

    pub(super) fn not_running(&self, name: &'static str) -> Check {
        Check::skip(
            name,
            format!("{} is not the running system", self.host.root().display()),
        )
    }
}
