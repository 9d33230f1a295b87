//! `gdrprov bench pair --all-nics`: one session per rail (rails.rs), one after the other on the
//! same TCP address, each with this end's NIC and GPU of the rail; a rail that fails is reported
//! and the next one runs. Result per rail.

use std::path::Path;

use serde::Serialize;

use super::rails::{self, Rail, RailTag};
use super::report::PairReport;
use super::{auth, run_client, run_listener, Notes, PairError, PairOptions};
use crate::host::Host;

/// One rail's outcome at this end.
#[derive(Debug, Clone, Serialize)]
pub struct RailResult {
    /// The rail's name: this end's NIC (what the fleet sweep reads, src/fleet/results.rs).
    #[serde(rename = "rail")]
    pub name: String,
    #[serde(flatten)]
    pub rail: Rail,
    /// The session's report (the client builds it and sends it to the listener), its fields
    /// inline, so that each entry of `rails[]` reads as a one-NIC pair document.
    #[serde(flatten)]
    pub report: Option<PairReport>,
    /// Why the rail did not run to its end.
    pub error: Option<String>,
}

/// Every rail of a `--all-nics` run.
#[derive(Debug, Clone, Serialize)]
pub struct RailsOutcome {
    /// "client" or "listener".
    pub role: &'static str,
    pub rails: Vec<RailResult>,
    /// Every rail ran and passed.
    pub passed: bool,
}

/// The CUDA index of the GPU at PCI address `pci` (CUDA numbers GPUs its own way).
pub fn cuda_index(pci: &str) -> Result<u32, PairError> {
    let want = rails::pci_key(pci);
    let count = gdrprov_rdma::cuda::gpu_count()?;
    for i in 0..u32::try_from(count).unwrap_or(0) {
        let gpu = gdrprov_rdma::cuda::Gpu::open(i)?;
        if rails::pci_key(&gpu.pci_bus_id) == want {
            return Ok(i);
        }
    }
    Err(PairError::Usage(format!(
        "the rail's GPU {pci} is not among the {count} CUDA device(s) visible (check CUDA_VISIBLE_DEVICES)"
    )))
}

/// The options of one rail's session.
fn rail_options(opts: &PairOptions, rail: &Rail, count: usize) -> PairOptions {
    let mut o = opts.clone();
    o.all_nics = false;
    o.device = Some(rail.nic.clone());
    o.dev_port = None;
    o.gpu_pci = rail.gpu_pci.clone();
    o.rail_note = rail.note.clone();
    o.rail = Some(RailTag {
        index: rail.index,
        count,
        nic: rail.nic.clone(),
    });
    o
}

#[cfg(test)]
pub(crate) fn rail_options_for_test(opts: &PairOptions, rail: &Rail, count: usize) -> PairOptions {
    rail_options(opts, rail, count)
}

/// Run every rail of this host against the peer's; `rails` is this host's plan (rails::discover).
pub fn run_rails(
    opts: &PairOptions,
    rails: Vec<Rail>,
    notes: Notes<'_>,
) -> Result<RailsOutcome, PairError> {
    if rails.is_empty() {
        return Err(PairError::Usage(
            "--all-nics: no RDMA NIC with an ACTIVE port on this host (`rdma link`, `ibstat`)"
                .into(),
        ));
    }
    let listener = opts.listen.is_some();
    let mut opts = opts.clone();
    let missing = |p: &std::path::PathBuf| !crate::host::local_exists(p);
    let make = match &opts.token_file {
        None => auth::load_secret(None)?.is_none(),
        Some(p) => missing(p),
    };
    if listener && make {
        // One secret for every rail's session, where --token-file says (else
        // a new name in $TMPDIR). The first rail whose listener is bound
        // makes it and says where, the others read it: when no rail can
        // listen, no token file is left behind.
        let path = match &opts.token_file {
            Some(p) => p.clone(),
            None => auth::new_secret_path(&std::env::temp_dir())?,
        };
        opts.token_file = Some(path);
    }
    let count = rails.len();
    let mut out = Vec::new();
    for rail in rails {
        notes(&describe(&rail, count));
        let o = rail_options(&opts, &rail, count);
        let run = if listener {
            run_listener(&o, notes)
        } else {
            run_client(&o, notes)
        };
        let (report, error) = match run {
            Ok(r) => (Some(r.report), None),
            Err(e) => {
                notes(&format!("rail {}: {e}", rail.index));
                (None, Some(e.to_string()))
            }
        };
        out.push(RailResult {
            name: rail.nic.clone(),
            rail,
            report,
            error,
        });
    }
    let passed = out
        .iter()
        .all(|r| r.error.is_none() && r.report.as_ref().is_some_and(|p| p.passed));
    Ok(RailsOutcome {
        role: if listener { "listener" } else { "client" },
        rails: out,
        passed,
    })
}

/// `rail 0 of 4: mlx5_0 <-> GPU 0000:1b:00.0 (PIX)`, or the rail's note.
pub fn describe(rail: &Rail, count: usize) -> String {
    let gpu = match (&rail.gpu_pci, &rail.note) {
        (Some(g), _) => format!(
            "GPU {g} ({})",
            rail.distance.map(|d| format!("{d:?}")).unwrap_or_default()
        ),
        (None, Some(n)) => format!("no GPU: {n}"),
        (None, None) => "no GPU".into(),
    };
    format!("rail {} of {count}: {} <-> {gpu}", rail.index, rail.nic)
}

/// `--all-nics` on the running system.
pub fn run_live(opts: &PairOptions, notes: Notes<'_>) -> Result<RailsOutcome, PairError> {
    let host = Host::open(Path::new("/"), true)
        .map_err(|e| PairError::Usage(format!("reading this host's NICs and GPUs: {e}")))?;
    run_rails(opts, rails::discover(&host), notes)
}
