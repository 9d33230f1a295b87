//! The node-feature-discovery file verify and recheck leave for Kubernetes:
//! the labels are composed in `fleet::nfd` (pure); reading the profiles and
//! writing the file happen here.

use crate::fleet::nfd;

/// Writes the feature file for a verify REPORT (None: verify failed before
/// it had one: not ready) atomically, expiring after EXPIRY.
pub fn write_nfd(
    path: &crate::host::textfile::Dest,
    report: Option<&crate::checks::verify::Report>,
    profiles: &[String],
    expiry: std::time::Duration,
) -> crate::error::Result<()> {
    let memory = report
        .and_then(|r| r.loopback.as_ref())
        .and_then(|l| serde_json::to_value(l.memory).ok())
        .and_then(|v| v.as_str().map(str::to_string));
    let (present, absent) = match crate::profile::load_profiles(profiles) {
        Ok(p) => (p.doc.modules.present.clone(), p.doc.modules.absent.clone()),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let text = nfd::features(
        report.is_some_and(|r| r.ready),
        profiles,
        nfd::rdma_path(memory.as_deref(), &present, &absent),
        std::time::SystemTime::now() + expiry,
    );
    path.write(&text)
}
