//! `verify`: the host against profiles, down to the RDMA loopback, as a
//! report; and the files the command leaves beside it (the readiness
//! marker, the metrics textfile, the node-feature file).

use super::{load_profiles, plan_with_facts, refuse_other_root, Target, VerifyRequest};
use crate::checks::verify::{LoopbackChoice, Report};
use crate::error::{Error, Result};
use crate::facts::Facts;
use crate::host::textfile::{write_marker, write_textfile, Dest};
use crate::host::Host;
use crate::journal::StateStore;
use crate::output::metrics::{marker_text, prometheus};
use std::path::PathBuf;
use std::time::Duration;

/// `verify`: verify's checks (and the loopback) as a report.
pub fn verify(req: &VerifyRequest) -> Result<Report> {
    check_options(req)?;
    let desired = match &req.composed {
        Some(c) => c.clone(),
        None => load_profiles(&req.profiles)?,
    };
    // Verify changes nothing and runs nothing but read-only probes.
    let mut host = Host::open(&req.root, true)?;
    if req.snapshot.is_some() {
        host = host.recording();
    }
    // Requirements are a check of their own here, not a gate.
    let target = Target::read_only(req.root.clone(), req.cpu_vendor);
    // During a trial boot the configuration to compare with is the trial's.
    let trial = StateStore::new(&host)
        .load_state()?
        .trial
        .map(|t| t.profiles);
    let facts = gather(&host, req)?;
    // A plan that cannot be made is one failed check, not the end of verify.
    let (plan, seen) = match plan_with_facts(&host, &desired, &target, trial.as_deref(), &facts) {
        Ok((p, seen)) => (Ok(p), seen),
        Err(e @ (Error::Refused(_) | Error::Io { .. })) => {
            let state = StateStore::new(&host).load_state()?;
            let seen = crate::plan::prepare::inputs(&host, &facts, &desired, &state);
            (Err(e.to_string()), seen)
        }
        Err(e) => return Err(e),
    };
    let reqs = crate::checks::requirements::for_profile(&host, &facts, &desired);
    let choice = LoopbackChoice {
        skip: req.no_loopback,
        device: req.device.clone(),
        seconds: req.duration,
        min_gbps: req.min_gbps,
        peer: req.peer.clone(),
        token_file: req.token_file.clone(),
    };
    let plan = plan.as_ref().map_err(String::as_str);
    let profiles = if req.profiles.is_empty() {
        &desired.named
    } else {
        &req.profiles
    };
    let wanted = crate::checks::verify::Wanted {
        composed: &desired,
        named: profiles,
    };
    let report = crate::checks::verify::run(&host, &facts, &seen, wanted, plan, &reqs, &choice)?;
    if let Some(dir) = &req.snapshot {
        let rec = host.recorded().unwrap_or_default();
        crate::host::snapshot::write(&host, &rec, dir)?;
    }
    Ok(report)
}

/// `verify --in-job`: the checks a job needs, judged from inside the job's own process
/// (its limits, capabilities, device files and root); ROOT must be the running system.
pub fn verify_in_job(root: &std::path::Path) -> Result<Report> {
    super::refuse_other_root(
        root,
        "verify --in-job",
        "run it inside the job (srun, mpirun, a Slurm prolog, the container) without --root",
    )?;
    let host = Host::open(root, true)?;
    let job = crate::facts::job::probe(&host);
    let checks = crate::checks::injob::checks(&job);
    Ok(Report {
        profiles: vec!["in-job".into()],
        root: host.root().display().to_string(),
        live: host.is_live(),
        ready: checks
            .iter()
            .all(|c| c.status != crate::checks::Status::Fail),
        checks,
        loopback: None,
        health: None,
    })
}

/// The loopback's options, refused when out of range or when verify would
/// skip the loopback they are for (another root).
fn check_options(req: &VerifyRequest) -> Result<()> {
    for (flag, v) in [("--duration", req.duration), ("--min-gbps", req.min_gbps)] {
        if let Some(x) = v.filter(|x| !(x.is_finite() && *x > 0.0 && *x < 86_400.0)) {
            return Err(Error::Usage(format!(
                "{flag} {x}: give a positive number (seconds below one day, Gb/s)"
            )));
        }
    }
    if let Some(d) = &req.device {
        crate::bench::parse::parse_dev_port(d)
            .map_err(|e| Error::Usage(format!("--device: {e}")))?;
    }
    // The loopback runs on this machine's devices; on another root verify
    // skips it, so options for it would be silently ignored.
    let loopback_opts = [
        ("--device", req.device.is_some()),
        ("--duration", req.duration.is_some()),
        ("--min-gbps", req.min_gbps.is_some()),
    ];
    if let Some((flag, _)) = loopback_opts.iter().find(|(_, given)| *given) {
        refuse_other_root(
            &req.root,
            &format!("verify's loopback ({flag})"),
            &format!("drop {flag} (verify skips the loopback on another root), or run verify on the host itself"),
        )?;
    }
    Ok(())
}

/// One gathering of the facts serves the plan and the requirements check.
fn gather(host: &Host, req: &VerifyRequest) -> Result<Facts> {
    let mut facts = Facts::gather(host, req.cpu_vendor);
    host.refuse_special_files()?;
    facts.arch.override_with(req.arch);
    // The GPUs together (NVLink, fabric, pairs): verify asks NVML and CUDA on the running system.
    if host.is_live() && facts.gpu_topology.live.is_none() && !facts.gpus.is_empty() {
        facts.gpu_topology.live = crate::facts::gpu_topo::recorded(host);
    }
    Ok(facts)
}

/// The files `gdrprov verify` leaves beside its report, each a file the
/// user named (`--marker-dir`, `--nfd-file`, `--textfile`).
#[derive(Debug, Clone, Default)]
pub struct VerifyFiles {
    pub marker_dir: Option<PathBuf>,
    pub nfd_file: Option<PathBuf>,
    pub nfd_expiry: Duration,
    pub textfile: Option<PathBuf>,
}

/// `verify`, its finding also written to FILES: on a failure, the marker
/// and the feature file say "not ready" (so a unit's failure is visible
/// without the journal) and the error is returned.
pub fn verify_writing(req: &VerifyRequest, files: &VerifyFiles) -> Result<Report> {
    let marker = files.marker_dir.clone().map(Dest::Local);
    let nfd = files.nfd_file.clone().map(Dest::Local);
    let report = match verify(req) {
        Ok(r) => r,
        Err(e) => {
            if let Some(dir) = &marker {
                let _ = write_marker(dir, false, &e.to_string());
            }
            if let Some(path) = &nfd {
                let _ = super::write_nfd(path, None, &req.profiles, files.nfd_expiry);
            }
            return Err(e);
        }
    };
    if let Some(dir) = &marker {
        write_marker(dir, report.ready, &marker_text(&report))?;
    }
    if let Some(path) = &nfd {
        super::write_nfd(path, Some(&report), &req.profiles, files.nfd_expiry)?;
    }
    if let Some(path) = &files.textfile {
        write_textfile(path, &prometheus(&report))?;
    }
    Ok(report)
}
