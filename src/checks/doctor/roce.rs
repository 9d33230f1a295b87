//! The RoCE fabric's checks ([`crate::checks::roce`]) as doctor findings: a failed check is
//! an error, a warning a warning, each with its cause; passes and skips add nothing.

use super::{fabric_rules, Finding, Sev};
use crate::checks::roce;
use crate::checks::Status;
use crate::facts::Facts;
use crate::profile::Network;

/// Every RoCE finding for the facts and the profile's `network` (`mtu`, `lossless`; none
/// without a profile).
pub fn findings(facts: &Facts, net: Option<&Network>) -> Vec<Finding> {
    [
        roce::mtu(facts, net.and_then(|n| n.mtu.as_ref())),
        roce::gid(facts),
        roce::lossless(
            facts,
            net.and_then(|n| n.lossless),
            net.and_then(|n| n.pfc_priority),
        ),
    ]
    .into_iter()
    .flatten()
    .filter_map(|c| {
        let sev = match c.status {
            Status::Fail => Sev::Error,
            Status::Warn => Sev::Warn,
            Status::Pass | Status::Skip => return None,
        };
        // A port's MTU or lossless setting unlike the profile's is its own row (an error).
        let id = match (c.name.as_ref(), sev) {
            (roce::MTU, Sev::Error) => "roce-mtu-profile",
            (roce::LOSSLESS, Sev::Error) => "roce-lossless-profile",
            (name, _) => name,
        };
        let row = fabric_rules::rule(id)?;
        Some(Finding::new(
            id,
            sev,
            row.title,
            c.evidence.clone(),
            row.cause,
            c.fix.clone().unwrap_or_default(),
        ))
    })
    .collect()
}
