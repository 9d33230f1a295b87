//! `inventory`: every fact of a root, read with the read-only probes; with
//! `--snapshot DIR`, a copy of everything the probes read, and proof that
//! the copy answers the same.

use super::Target;
use crate::error::Result;
use crate::facts::{Depth, Facts};
use crate::host::snapshot::Summary;
use crate::host::Host;
use std::path::Path;

/// What inventory read, and the snapshot it wrote.
pub struct Inventory {
    pub host: Host,
    pub facts: Facts,
    pub snapshot: Option<Snapshotted>,
}

/// A snapshot written: what it holds, and the facts that read back differently.
pub struct Snapshotted {
    pub summary: Summary,
    pub differs: Vec<String>,
}

/// `inventory [--snapshot DIR]` on a probing target.
pub fn inventory(target: &Target, snapshot: Option<&Path>) -> Result<Inventory> {
    let cpu = target.cpu_vendor;
    let mut host = target.open()?;
    if snapshot.is_some() {
        host = host.recording();
    }
    let facts = Facts::gather_with(&host, cpu, Depth::WithCuda);
    host.refuse_special_files()?;
    let snapshot = match snapshot {
        Some(dir) => {
            // doctor's requirements also read the target kernels' module indexes
            // (does each module a profile loads exist?): record them too, so a
            // replay (`doctor --root SNAPSHOT`) answers as the host did.
            let _ = crate::plan::inputs::target_kernel_modules(&host);
            Some(write_snapshot(target, &host, &facts, dir)?)
        }
        None => None,
    };
    Ok(Inventory {
        host,
        facts,
        snapshot,
    })
}

/// `--snapshot DIR`: the copy, and proof that it answers the same.
fn write_snapshot(target: &Target, host: &Host, facts: &Facts, dir: &Path) -> Result<Snapshotted> {
    let rec = host.recorded().unwrap_or_default();
    let summary = crate::host::snapshot::write(host, &rec, dir)?;
    let again = Host::open(dir, true)
        .map(|h| Facts::gather_with(&h, target.cpu_vendor, Depth::WithCuda))
        .ok();
    let differs = again.map(|a| differing(facts, &a)).unwrap_or_default();
    Ok(Snapshotted { summary, differs })
}

/// Top-level facts whose JSON differs (ignoring where they were read from).
pub fn differing(a: &Facts, b: &Facts) -> Vec<String> {
    let (Ok(serde_json::Value::Object(x)), Ok(serde_json::Value::Object(y))) =
        (serde_json::to_value(a), serde_json::to_value(b))
    else {
        return vec!["(could not compare)".into()];
    };
    x.iter()
        .filter(|(k, v)| {
            !matches!(k.as_str(), "live" | "snapshot" | "observed") && y.get(*k) != Some(*v)
        })
        .map(|(k, _)| k.clone())
        .collect()
}
