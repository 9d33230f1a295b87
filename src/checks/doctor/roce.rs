//! The RoCE fabric's checks ([`crate::checks::roce`]) as doctor findings: a failed check is
//! an error, a warning a warning, each with its cause; passes and skips add nothing.

use super::{Finding, Sev};
use crate::checks::roce;
use crate::checks::Status;
use crate::facts::Facts;
use crate::profile::MtuSpec;

/// Every RoCE finding for the facts and the profile's `network.mtu` (none without a profile).
pub fn findings(facts: &Facts, mtu: Option<&MtuSpec>) -> Vec<Finding> {
    [roce::mtu(facts, mtu), roce::gid(facts), roce::lossless(facts)]
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let sev = match c.status {
                Status::Fail => Sev::Error,
                Status::Warn => Sev::Warn,
                Status::Pass | Status::Skip => return None,
            };
            let (title, cause) = match (c.name.as_ref(), sev) {
                (roce::MTU, Sev::Error) => ("a RoCE network device's MTU is not the profile's", "the network device's MTU differs from what the profile (and so the rest of the fabric) uses: RoCE peers whose path MTUs differ drop packets or fail with completion error 4 (local length)"),
                (roce::MTU, _) => ("a RoCE port runs below its largest MTU", "a RoCE port's MTU follows its network device's: with MTU 1500 RDMA sends 1024-byte packets, a fraction of a 4096-byte port's bandwidth"),
                (roce::GID, _) => ("NCCL_IB_GID_INDEX does not point at a routable RoCE v2 GID", "NCCL uses the GID at NCCL_IB_GID_INDEX for every connection; a link-local or RoCE v1 GID is not routed between subnets, so queue pairs time out (completion error 12, ibv_modify_qp timing out)"),
                (roce::LOSSLESS, _) => ("a RoCE port has neither PFC nor ECN", "RoCE needs a lossless fabric (PFC) or congestion control (ECN, DCQCN): without either, congestion drops packets and RDMA retransmits"),
                _ => (c.name.as_ref(), ""),
            };
            Some(Finding::new(
                &c.name,
                sev,
                title,
                c.evidence.clone(),
                cause,
                c.fix.clone().unwrap_or_default(),
            ))
        })
        .collect()
}
