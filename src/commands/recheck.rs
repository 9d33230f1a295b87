//! `gdrprov recheck`: the quick re-check that the packages' triggers run when
//! the kernel-module world changes (a driver, OFED, DKMS build or kernel):
//! `verify` of the profiles last applied, without the loopback, bounded in
//! time, its finding written where operators look (the readiness marker, the
//! metrics textfile, the node-feature file) and one short summary on stdout
//! (the unit's journal). It changes nothing else and never writes the journal.

use crate::checks::verify::{Check, Report, Status};
use crate::commands::cli::RecheckArgs;
use crate::error::exit;
use crate::error::{Error, Result};
use crate::host::textfile::Dest;
use crate::host::Host;
use crate::journal::{ProfileSource, StateStore};
use crate::names;
use crate::ops;
use crate::output::{Format, Output};
use crate::profile::{Composed, Exact, LoadedProfile};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a profile that is not built in is looked for (relative to the root).
const PROFILE_DIR: &str = "etc/gdrprov";

/// The readiness marker's directory inside the root, unless `--marker-dir`.
const MARKER_DIR: &str = "/run/gdrprov";

pub fn run(out: &Output, root: &Path, a: &RecheckArgs) -> Result<i32> {
    if a.timeout == 0 || a.timeout > 3600 {
        return Err(Error::Usage(format!(
            "--timeout {}: give seconds between 1 and 3600",
            a.timeout
        )));
    }
    let reason = a.reason.as_deref().unwrap_or("asked");
    let Some((specs, composed)) = profiles(root, &a.profiles)? else {
        match out.format {
            Format::Json => out.document(
                names::RECHECK,
                root,
                serde_json::json!({"ready": null, "profiles": [], "note": "no profile applied on this host; nothing to re-check"}),
            ),
            _ => out.raw(&format!(
                "gdrprov recheck ({reason}): no profile applied on this host; nothing to re-check\n"
            )),
        }
        return Ok(exit::OK);
    };
    let textfile = match &a.textfile {
        Some(p) => Some(Dest::Local(p.clone())),
        None => var_path(root, &composed, "gdrprov-textfile", "--textfile")?,
    };
    let nfd_file = match &a.nfd_file {
        Some(p) => Some(Dest::Local(p.clone())),
        None => var_path(root, &composed, "gdrprov-nfd-file", "--nfd-file")?,
    };
    // A directory the user named is theirs; the default is the root's own
    // `/run/gdrprov` (of `--root R`, never the machine's).
    let marker_dir = match &a.marker_dir {
        Some(d) => Dest::Local(d.clone()),
        None => Dest::InRoot {
            root: root.to_path_buf(),
            path: MARKER_DIR.into(),
        },
    };
    let req = ops::VerifyRequest {
        snapshot: None,
        root: root.to_path_buf(),
        profiles: specs.clone(),
        composed: Some(composed),
        no_loopback: true,
        ..ops::VerifyRequest::default()
    };
    let start = std::time::Instant::now();
    let (report, finished) = match bounded(req, Duration::from_secs(a.timeout)) {
        Some(Ok(r)) => (r, true),
        Some(Err(e)) => {
            let _ = crate::host::textfile::write_marker(&marker_dir, false, &e.to_string());
            return Err(e);
        }
        None => (timed_out(root, &specs, a.timeout), false),
    };
    let took = start.elapsed().as_secs_f64();
    // A link where any of them goes is refused before the first is written.
    for d in textfile.iter().chain(&nfd_file) {
        d.refuse_links()?;
    }
    crate::host::textfile::write_marker(
        &marker_dir,
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
        path.write(&text)?;
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

/// The profiles to check, named and loaded: those given, else the last
/// apply's, found as it recorded them (`None`: nothing applied).
fn profiles(root: &Path, given: &[String]) -> Result<Option<(Vec<String>, Composed)>> {
    if !given.is_empty() {
        return Ok(Some((given.to_vec(), ops::load_profiles(given)?)));
    }
    let host = Host::open(root, true)?;
    let state = StateStore::new(&host).load_state()?;
    if state.generation == 0 || state.profiles.is_empty() {
        return Ok(None);
    }
    let loaded = state
        .profiles
        .iter()
        .enumerate()
        .map(|(i, name)| recorded(&host, name, state.profile_sources.get(i).copied()))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some((
        state.profiles.clone(),
        crate::profile::compose(&loaded)?,
    )))
}

/// The fix every refusal below ends with.
const NAME_THEM: &str =
    "or name the profiles to re-check in its configuration (/etc/default/gdrprov)";

/// One profile of `state.json`, found the way apply recorded it: a built-in
/// as the built-in (never a file of that name), a file only as
/// `/etc/gdrprov/NAME.yaml` inside the root, whose own name is NAME. A
/// state of an older gdrprov records no source: a name that is both is
/// refused, never guessed.
fn recorded(host: &Host, name: &str, source: Option<ProfileSource>) -> Result<LoadedProfile> {
    let builtin = crate::profile::builtin::profile(name).is_some();
    let shown = format!("{}/{name}.yaml", host.display(&format!("/{PROFILE_DIR}")));
    let file = in_root_file(host, name)?;
    let exact = match (source, builtin, &file) {
        (Some(ProfileSource::BuiltIn), true, _) | (None, true, None) => Exact::Builtin(name),
        (Some(ProfileSource::File), _, Some(f)) | (None, false, Some(f)) => {
            Exact::FileWithin(f.clone(), host.root())
        }
        (Some(ProfileSource::BuiltIn), false, _) => {
            return Err(Error::Refused(format!(
                "the last apply used the built-in profile `{name}`, which this gdrprov does not have (another version?); install the gdrprov that applied it, {NAME_THEM}"
            )))
        }
        (None, true, Some(_)) => {
            return Err(Error::Refused(format!(
                "state.json (written by an older gdrprov) does not say whether the last apply used the built-in profile `{name}` or the file {shown}; apply again to record it, {NAME_THEM}"
            )))
        }
        (_, _, None) => {
            return Err(Error::Refused(format!(
                "the last apply used profile `{name}` from a file, which is not at {shown}; copy the profile there, {NAME_THEM}"
            )))
        }
    };
    let loaded = crate::profile::load_exact(exact)?;
    if loaded.name != name {
        return Err(Error::Refused(format!(
            "{shown} is profile `{}`, not `{name}`, the profile the last apply used; put `{name}` there, {NAME_THEM}",
            loaded.name
        )));
    }
    Ok(loaded)
}

/// `/etc/gdrprov/NAME.yaml` of the root as a real path inside it (every
/// symlink resolved in the root), when NAME is a plain file name and a
/// regular file is there; `None` otherwise.
fn in_root_file(host: &Host, name: &str) -> Result<Option<PathBuf>> {
    // A profile name by its grammar (src/grammar.rs), and no hidden file.
    let plain = crate::grammar::ProfileName::parse(name).is_ok()
        && !name.starts_with('.')
        && !name.contains('\\');
    if !plain {
        return Ok(None);
    }
    let Some(logical) = host.canonical(&format!("/{PROFILE_DIR}/{name}.yaml")) else {
        return Ok(None);
    };
    let real = host.root().join(logical.trim_start_matches('/'));
    Ok(crate::host::is_local_file(&real).then_some(real))
}

/// A file the profile names in `vars` (`gdrprov-textfile`,
/// `gdrprov-nfd-file`) is a file of the host the root is, as the first-boot
/// unit writes it there: a plain absolute path resolved inside the root
/// (symlinks too), never a file of the machine running gdrprov (issue 37).
/// `None` when the profile names none; a value that is not text is not a
/// path and is left alone, as before.
fn var_path(root: &Path, composed: &Composed, key: &str, option: &str) -> Result<Option<Dest>> {
    let Some(value) = composed.doc.vars.get(key).and_then(|v| v.as_str()) else {
        return Ok(None);
    };
    let refuse = |why: String| {
        Error::Refused(format!(
            "the profile's vars.{key} `{value}`: {why}; name a plain absolute path of the host (e.g. /var/lib/node_exporter/gdrprov.prom), or give {option}"
        ))
    };
    let why = |e: Error| match e {
        Error::BadPath { why, .. } => refuse(why),
        other => refuse(other.to_string()),
    };
    crate::host::check_profile_path(value).map_err(why)?;
    // Written through the door inside the root: never through a link there.
    Ok(Some(Dest::InRoot {
        root: root.to_path_buf(),
        path: value.to_string(),
    }))
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
        assert!(profiles(t.path(), &[]).unwrap().is_none());
        let given = vec!["rdma-dmabuf".to_string()];
        let (names, composed) = profiles(t.path(), &given).unwrap().unwrap();
        assert_eq!((names, composed.builtin), (given, vec![true]));
    }

    #[test]
    fn a_hung_verify_is_given_up() {
        let r = timed_out(Path::new("/"), &["rdma-dmabuf".into()], 5);
        assert!(!r.ready);
        assert!(r.checks[0].detail().contains("within 5 s"));
    }
}
