//! A snapshot of a host gives the same plan as the host: every read planning
//! makes goes through the host layer's logged reads (`facts::planning`), so a
//! snapshot taken while planning carries all of them. Checked for every
//! built-in profile on every example root, errors included.

use gdrprov::facts::Facts;
use gdrprov::host::Host;
use gdrprov::journal::StateStore;
use gdrprov::plan::Plan;
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The plan as people and machines see it: its JSON and every diff.
fn shown(root: &Path, r: gdrprov::error::Result<Plan>) -> String {
    let text = match r {
        Ok(p) => {
            let diffs: Vec<String> = p.changes.iter().filter_map(|c| c.diff()).collect();
            format!(
                "{}\n{}",
                serde_json::to_string_pretty(&p).unwrap(),
                diffs.join("\n")
            )
        }
        Err(e) => format!("error: {e}"),
    };
    text.replace(&root.display().to_string(), "ROOT")
}

fn plan_on(host: &Host, profile: &str) -> gdrprov::error::Result<Plan> {
    let desired = gdrprov::profile::compose(&[gdrprov::profile::load(profile)?])?;
    let facts = Facts::gather(host, None);
    let state = StateStore::new(host).load_state()?;
    let opts = gdrprov::plan::prepare::Options::default();
    gdrprov::plan::prepare::plan(host, &facts, &desired, &state, &opts).map(|(p, _)| p)
}

#[test]
fn a_snapshot_taken_while_planning_plans_the_same() {
    let mut compared = 0;
    for host_dir in ["ubuntu-22.04-h100", "rocky-9-a100", "alinux3-erdma"] {
        let root = repo().join("examples/hosts").join(host_dir);
        for profile in gdrprov::profile::builtin::names() {
            let host = Host::open(&root, true).unwrap().recording();
            let original = shown(&root, plan_on(&host, profile));
            let rec = host.recorded().unwrap_or_default();
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("snap");
            gdrprov::facts::snapshot::write(&host, &rec, &dir).unwrap();
            let dir = dir.canonicalize().unwrap();
            let snap = Host::open(&dir, true).unwrap();
            let again = shown(&dir, plan_on(&snap, profile));
            assert_eq!(again, original, "{host_dir} with {profile}");
            assert!(
                original.len() > 100 || original.starts_with("error"),
                "{original}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, 15);
}
