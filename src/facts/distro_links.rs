//! The links a distribution itself ships at a path gdrprov writes
//! (`/etc/kernel/cmdline` → `/usr/lib/kernel/cmdline` on some hosts), that
//! the write door follows (`Host::distro_link`, src/host/door.rs: a regular
//! file of the same name inside the root, not under /proc /sys /dev /run,
//! not gdrprov's own). Read here as a fact so that the plan, pure, can say
//! so beside the change that writes through one.

use crate::host::{Host, DISTRO_LINKS};
use serde::Serialize;

/// A link the door follows: written at `path`, lands on `target`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DistroLink {
    pub path: String,
    pub target: String,
}

impl DistroLink {
    /// What the plan says beside a change of `path`.
    pub fn note(&self) -> String {
        format!(
            "follows the distribution's link {} → {}",
            self.path, self.target
        )
    }
}

/// Every followed link of [`DISTRO_LINKS`] present in the root.
pub fn probe(host: &Host) -> Vec<DistroLink> {
    DISTRO_LINKS
        .iter()
        .filter_map(|p| {
            host.distro_link(p).map(|target| DistroLink {
                path: (*p).to_string(),
                target,
            })
        })
        .collect()
}
