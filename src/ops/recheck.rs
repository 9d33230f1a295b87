//! `recheck`: the quick re-check that the packages' triggers run when the
//! kernel-module world changes (a driver, OFED, DKMS build or kernel):
//! `verify` of the profiles last applied, without the loopback, bounded in
//! time, its finding written where operators look (the readiness marker,
//! the metrics textfile, the node-feature file). It changes nothing else and
//! never writes the journal. Where the profiles are found: recheck/found.rs.

mod found;

use super::{Target, VerifyRequest};
use crate::checks::verify::{Check, Report};
use crate::error::{Error, Result};
use crate::host::textfile::{write_marker, Dest};
use crate::suggest::{Given, Suggest};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The readiness marker's directory inside the root, unless `--marker-dir`.
const MARKER_DIR: &str = "/run/gdrprov";

/// `recheck` on ONE target (read-only): what to check and where to write it.
#[derive(Debug, Clone)]
pub struct RecheckRequest {
    pub target: Target,
    /// Profiles to check (default: those of the last apply in effect).
    pub profiles: Vec<String>,
    /// Seconds before the re-check is given up (1 to 3600).
    pub timeout: u64,
    /// Why it runs (`dpkg trigger`...), for the metrics.
    pub reason: Option<String>,
    /// The readiness marker's directory (default: the root's `/run/gdrprov`).
    pub marker_dir: Option<PathBuf>,
    /// The metrics textfile (default: the profile's `vars.gdrprov-textfile`).
    pub textfile: Option<PathBuf>,
    /// The node-feature file (default: the profile's `vars.gdrprov-nfd-file`).
    pub nfd_file: Option<PathBuf>,
    pub nfd_expiry: Duration,
}

/// What a re-check came to.
pub enum Rechecked {
    /// No profile applied on this host: nothing to re-check.
    NothingApplied,
    /// The report (a timed-out re-check is one failed check), its files written.
    Checked(Box<Report>),
}

/// Where the finding goes, each resolved before anything is written.
struct Sinks {
    marker: Dest,
    textfile: Option<Dest>,
    nfd: Option<Dest>,
}

/// `recheck`: verify of the profiles, bounded, its finding written.
pub fn recheck(req: &RecheckRequest) -> Result<Rechecked> {
    if req.timeout == 0 || req.timeout > 3600 {
        return Err(Error::Usage(format!(
            "--timeout {}: give seconds between 1 and 3600",
            req.timeout
        )));
    }
    let root = req.target.root.as_path();
    let Some((specs, composed)) = found::profiles(&req.target, &req.profiles)? else {
        return Ok(Rechecked::NothingApplied);
    };
    let sinks = sinks(req, &composed)?;
    let verify = VerifyRequest {
        root: root.to_path_buf(),
        cpu_vendor: req.target.cpu_vendor,
        profiles: specs.clone(),
        composed: Some(composed),
        no_loopback: true,
        ..VerifyRequest::default()
    };
    let start = Instant::now();
    let (report, finished) = match bounded(verify, Duration::from_secs(req.timeout)) {
        Some(Ok(r)) => (r, true),
        Some(Err(e)) => {
            let _ = write_marker(&sinks.marker, false, &e.to_string());
            return Err(e);
        }
        None => (timed_out(root, &specs, req.timeout), false),
    };
    let took = start.elapsed().as_secs_f64();
    write(req, &sinks, &report, &specs, (finished, took))?;
    Ok(Rechecked::Checked(Box::new(report)))
}

/// The marker, the textfile and the feature file: given, or the profile's.
fn sinks(req: &RecheckRequest, composed: &crate::profile::Composed) -> Result<Sinks> {
    let root = req.target.root.as_path();
    let textfile = match &req.textfile {
        Some(p) => Some(Dest::Local(p.clone())),
        None => found::var_path(root, composed, "gdrprov-textfile", "--textfile")?,
    };
    let nfd = match &req.nfd_file {
        Some(p) => Some(Dest::Local(p.clone())),
        None => found::var_path(root, composed, "gdrprov-nfd-file", "--nfd-file")?,
    };
    // A directory the user named is theirs; the default is the root's own
    // `/run/gdrprov` (of `--root R`, never the machine's).
    let marker = match &req.marker_dir {
        Some(d) => Dest::Local(d.clone()),
        None => Dest::InRoot {
            root: root.to_path_buf(),
            path: MARKER_DIR.into(),
        },
    };
    Ok(Sinks {
        marker,
        textfile,
        nfd,
    })
}

/// The finding written: a link where any of them goes is refused before
/// the first is written. `run` is (finished, seconds taken).
fn write(
    req: &RecheckRequest,
    sinks: &Sinks,
    report: &Report,
    specs: &[String],
    run: (bool, f64),
) -> Result<()> {
    use crate::output::metrics;
    for d in sinks.textfile.iter().chain(&sinks.nfd) {
        d.refuse_links()?;
    }
    write_marker(&sinks.marker, report.ready, &metrics::marker_text(report))?;
    if let Some(path) = &sinks.textfile {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let trigger = metrics::trigger(req.reason.as_deref());
        let text =
            metrics::prometheus(report) + &metrics::recheck(report, trigger, run.0, run.1, now);
        path.write(&text)?;
    }
    if let Some(path) = &sinks.nfd {
        super::write_nfd(path, Some(report), specs, req.nfd_expiry)?;
    }
    Ok(())
}

/// `ops::verify` on a thread, given up after `limit` (a probe that hangs on
/// a wedged GPU must not hold the re-check, or the package transaction).
fn bounded(req: VerifyRequest, limit: Duration) -> Option<Result<Report>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(super::verify(&req));
    });
    rx.recv_timeout(limit).ok()
}

/// The report of a re-check that did not finish: one failed check.
fn timed_out(root: &Path, specs: &[String], secs: u64) -> Report {
    Report {
        profiles: specs.to_vec(),
        root: root.display().to_string(),
        live: root == Path::new("/"),
        ready: false,
        checks: vec![Check::fail(
            "recheck",
            format!("the re-check did not finish within {secs} s (a probe hung?)"),
            format!(
                "run {} by hand",
                Suggest::new(crate::names::VERIFY)
                    .profiles(specs)
                    .shown(&Given::new(root, false))
            ),
        )],
        loopback: None,
        health: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_verify_is_given_up() {
        let r = timed_out(Path::new("/"), &["rdma-dmabuf".into()], 5);
        assert!(!r.ready);
        assert!(r.checks[0].detail().contains("within 5 s"));
    }
}
