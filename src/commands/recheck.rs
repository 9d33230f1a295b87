//! `gdrprov recheck`: the quick re-check that the packages' triggers run when
//! the kernel-module world changes (a driver, OFED, DKMS build or kernel):
//! `verify` of the profiles last applied, without the loopback, bounded in
//! time, its finding written where operators look (the readiness marker, the
//! metrics textfile, the node-feature file) and one short summary on stdout
//! (the unit's journal). It changes nothing else and never writes the journal.

use crate::checks::verify::{Check, Report, Status};
use crate::commands::cli::RecheckArgs;
use crate::error::{Error, Result};
use crate::exit;
use crate::host::Host;
use crate::journal::StateStore;
use crate::names;
use crate::ops;
use crate::output::{Format, Output};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a profile that is not built in is looked for (relative to the root).
const PROFILE_DIR: &str = "etc/gdrprov";

pub fn run(out: &Output, root: &Path, a: &RecheckArgs) -> Result<i32> {
    if a.timeout == 0 || a.timeout > 3600 {
        return Err(Error::Usage(format!(
            "--timeout {}: give seconds between 1 and 3600",
            a.timeout
        )));
    }
    let reason = a.reason.as_deref().unwrap_or("asked");
    let Some(specs) = profiles(root, &a.profiles)? else {
        out.raw(&format!(
            "gdrprov recheck ({reason}): no profile applied on this host; nothing to re-check\n"
        ));
        return Ok(exit::OK);
    };
    let vars = ops::load_profiles(&specs)?.doc.vars;
    let var = |k: &str| vars.get(k).and_then(|v| v.as_str()).map(PathBuf::from);
    let textfile = a.textfile.clone().or_else(|| var("gdrprov-textfile"));
    let nfd_file = a.nfd_file.clone().or_else(|| var("gdrprov-nfd-file"));
    let req = ops::VerifyRequest {
        snapshot: None,
        root: root.to_path_buf(),
        profiles: specs.clone(),
        no_loopback: true,
        ..ops::VerifyRequest::default()
    };
    let start = std::time::Instant::now();
    let (report, finished) = match bounded(req, Duration::from_secs(a.timeout)) {
        Some(Ok(r)) => (r, true),
        Some(Err(e)) => {
            let _ = crate::host::textfile::write_marker(&a.marker_dir, false, &e.to_string());
            return Err(e);
        }
        None => (timed_out(root, &specs, a.timeout), false),
    };
    let took = start.elapsed().as_secs_f64();
    crate::host::textfile::write_marker(
        &a.marker_dir,
        report.ready,
        &crate::output::metrics::marker_text(&report),
    )?;
    if let Some(path) = &textfile {
        use crate::output::metrics;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let trigger = metrics::trigger(a.reason.as_deref());
        let text =
            metrics::prometheus(&report) + &metrics::recheck(&report, trigger, finished, took, now);
        crate::host::textfile::write_textfile(path, &text)?;
    }
    if let Some(path) = &nfd_file {
        crate::ops::write_nfd(path, Some(&report), &specs, a.nfd_expiry)?;
    }
    match out.format {
        Format::Json => out.document(names::RECHECK, root, &report),
        Format::Text | Format::Prometheus | Format::Html => out.raw(&summary(&report, reason)),
    }
    Ok(if report.ready {
        exit::OK
    } else {
        exit::NOT_READY
    })
}

/// The profile specs to check: those given, else the last apply's (built-in
/// names as they are, others as /etc/gdrprov/NAME.yaml). `None`: nothing applied.
fn profiles(root: &Path, given: &[String]) -> Result<Option<Vec<String>>> {
    if !given.is_empty() {
        return Ok(Some(given.to_vec()));
    }
    let host = Host::open(root, true)?;
    let state = StateStore::new(&host).load_state()?;
    if state.generation == 0 || state.profiles.is_empty() {
        return Ok(None);
    }
    state
        .profiles
        .iter()
        .map(|name| {
            if crate::profile::builtin::profile(name).is_some() {
                return Ok(name.clone());
            }
            let file = root.join(PROFILE_DIR).join(format!("{name}.yaml"));
            if crate::host::is_local_file(&file) {
                return Ok(file.display().to_string());
            }
            Err(Error::Refused(format!(
                "the last apply used profile `{name}`, which is not built in and not at {}; copy the profile there or name the profiles in the re-check's configuration (/etc/default/gdrprov)",
                file.display()
            )))
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// `ops::verify` on a thread, given up after `limit` (a probe that hangs on
/// a wedged GPU must not hold the re-check, or the package transaction).
fn bounded(req: ops::VerifyRequest, limit: Duration) -> Option<Result<Report>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ops::verify(&req));
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
            "run `gdrprov verify` by hand",
        )],
        loopback: None,
        health: None,
    }
}

/// One line for the journal, then the failed checks, one a line.
fn summary(r: &Report, reason: &str) -> String {
    let mut s = format!(
        "gdrprov recheck ({reason}): {} for {}\n",
        if r.ready { "ready" } else { "NOT READY" },
        r.profiles.join(" ")
    );
    for c in r.checks.iter().filter(|c| c.status == Status::Fail) {
        let _ = writeln!(s, "  FAIL {}: {}", c.name, c.detail());
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ready: bool) -> Report {
        Report {
            profiles: vec!["rdma-dmabuf".into(), "/etc/gdrprov/site a.yaml".into()],
            root: "/".into(),
            live: true,
            ready,
            checks: vec![if ready {
                Check::pass("modules", "nvidia_peermem loaded")
            } else {
                Check::fail_with_cause("modules", "nvidia_peermem loaded")
            }],
            loopback: None,
            health: None,
        }
    }

    #[test]
    fn summary_names_the_failed_checks() {
        let s = summary(&report(false), "dpkg trigger");
        assert!(s.starts_with("gdrprov recheck (dpkg trigger): NOT READY for rdma-dmabuf"));
        assert!(s.contains("  FAIL modules: nvidia_peermem loaded\n"), "{s}");
        assert_eq!(summary(&report(true), "x").lines().count(), 1);
    }

    #[test]
    fn nothing_applied_means_nothing_to_check() {
        let t = tempfile::tempdir().unwrap();
        assert_eq!(profiles(t.path(), &[]).unwrap(), None);
        let given = vec!["rdma-dmabuf".to_string()];
        assert_eq!(profiles(t.path(), &given).unwrap(), Some(given));
    }

    #[test]
    fn a_hung_verify_is_given_up() {
        let r = timed_out(Path::new("/"), &["rdma-dmabuf".into()], 5);
        assert!(!r.ready);
        assert!(r.checks[0].detail().contains("within 5 s"));
    }
}
