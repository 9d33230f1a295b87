//! `gdrprov verify`: after the apply and the reboot, is the host what the
//! profile says, and does GPUDirect RDMA actually move data? Each check
//! passes, fails (with the cause) or is skipped (with the reason); the host
//! is ready when none fails.

use crate::bench::{self, LoopbackOptions, LoopbackReport, RunLength};
use crate::error::Result;
use crate::facts::boot::BootFacts;
use crate::host::Host;
use crate::journal::{StateStore, Trial};
use crate::plan::Plan;
use crate::profile::Composed;
use crate::requirements::{ReqResult, Status as ReqStatus};
use serde::Serialize;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Pass,
    Fail,
    Skip,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub profiles: Vec<String>,
    pub root: String,
    pub live: bool,
    pub ready: bool,
    pub checks: Vec<Check>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loopback: Option<LoopbackReport>,
    /// The readiness checks of src/health with evidence and fix, and their measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::health::HealthReport>,
}

/// What the loopback part of verify may do.
#[derive(Debug, Clone, Default)]
pub struct LoopbackChoice {
    pub skip: bool,
    pub device: Option<String>,
    pub seconds: Option<f64>,
    pub min_gbps: Option<f64>,
}

/// Runs every check. `plan` is the plan of the same profiles against this
/// host with nothing allowed to run (`--no-exec`).
pub fn run(
    host: &Host,
    facts: &crate::facts::Facts,
    seen: &crate::facts::planning::PlanFacts,
    desired: &Composed,
    plan: std::result::Result<&Plan, &str>,
    reqs: &[ReqResult],
    loopback: &LoopbackChoice,
) -> Result<Report> {
    let mut checks = Vec::new();
    let state = StateStore::new(host).load_state()?;

    let failed: Vec<&ReqResult> = reqs.iter().filter(|r| r.blocks()).collect();
    let unknown = reqs
        .iter()
        .filter(|r| r.status == ReqStatus::Unknown)
        .count();
    checks.push(if reqs.is_empty() {
        skip("requirements", "the profile has none".into())
    } else if failed.is_empty() {
        pass(
            "requirements",
            &format!(
                "{} met{}",
                reqs.iter().filter(|r| r.status == ReqStatus::Ok).count(),
                if unknown > 0 {
                    format!(", {unknown} could not be determined")
                } else {
                    String::new()
                }
            ),
        )
    } else {
        let list: Vec<&str> = failed.iter().map(|r| r.message.as_str()).collect();
        fail(
            "requirements",
            format!("{}; see `gdrprov doctor`", list.join("; ")),
        )
    });

    // A plan that could not be made (a boot loader file gdrprov refuses to
    // read) fails this check; every other check still runs.
    checks.push(if let Err(why) = &plan {
        fail(
            "configuration",
            format!("cannot compare with the profile: {why}"),
        )
    } else if plan.is_ok_and(|p| p.is_empty()) && state.pending_commands.is_empty() {
        pass("configuration", "the host's files match the profile")
    } else {
        let mut what: Vec<String> = plan
            .iter()
            .flat_map(|p| &p.changes)
            .map(|c| c.description.clone())
            .collect();
        what.extend(
            state
                .pending_commands
                .iter()
                .map(|c| format!("still owed: `{}`", c.shell_line())),
        );
        fail(
            "configuration",
            format!(
                "{} difference(s) from the profile: {}; run `gdrprov apply`",
                what.len(),
                what.join("; ")
            ),
        )
    });

    // Read back from the root: sysfs and config space on the running system,
    // or what an observed root (snapshot, fixture) shows, gathered once
    // (with --cpu-vendor) for the plan and these checks.
    for (name, result, none) in [
        (
            "mtu",
            crate::modules::network::check(seen, facts, desired),
            "the profile sets no MTU",
        ),
        (
            "acs",
            crate::modules::pcie::check(seen, facts, desired),
            "the profile leaves ACS alone",
        ),
    ] {
        checks.push(match result {
            _ if !facts.observed => skip(
                name,
                format!("{} shows no system state", host.root().display()),
            ),
            None => skip(name, none.into()),
            Some(Ok(detail)) => pass(name, &detail),
            Some(Err(why)) => fail(name, why),
        });
    }

    // The kernel command line of a host that does not set it itself.
    if let Some(b) = plan.ok().and_then(|p| p.boot_elsewhere.as_ref()) {
        checks.push(match b.satisfied {
            Some(true) => pass("boot", &b.summary()),
            Some(false) => fail("boot", b.summary()),
            None => skip(
                "boot",
                format!(
                    "{}; the running command line is not known in {}",
                    b.summary(),
                    host.root().display()
                ),
            ),
        });
    }

    // A pending trial boot, judged by what the root shows runs (a snapshot
    // or fixture with /proc/cmdline too).
    if let Some(t) = &state.trial {
        checks.push(match facts.proc_cmdline {
            Some(_) => trial_check(t, &facts.boot),
            None => skip(
                "trial",
                format!("{} shows no running command line", host.root().display()),
            ),
        });
    }

    // PCIe links, copy bandwidth, kernel log, NVML, RDMA ports, affinity.
    let health = crate::health::for_verify(host.is_live(), facts);
    checks.extend(health.checks.iter().map(from_health));

    if !host.is_live() {
        for name in ["reboot", "modules", "loopback"] {
            checks.push(skip(
                name,
                format!("{} is not the running system", host.root().display()),
            ));
        }
        return Ok(finish(host, desired, checks, None, health));
    }

    checks.push(if let Err(why) = &plan {
        skip("reboot", format!("no plan to compare with: {why}"))
    } else if plan.is_ok_and(|p| p.reboot_pending.is_empty()) {
        pass(
            "reboot",
            "the running kernel has the configured command line and modules",
        )
    } else {
        fail(
            "reboot",
            format!(
                "reboot to finish: {}",
                plan.map(|p| p.reboot_pending.join("; "))
                    .unwrap_or_default()
            ),
        )
    });

    let m = &desired.doc.modules;
    let wrongly_loaded: Vec<&String> = m
        .absent
        .iter()
        .filter(|x| facts.modules.is_loaded(x))
        .collect();
    let missing: Vec<&String> = m
        .present
        .iter()
        .filter(|x| !facts.modules.is_loaded(x))
        .collect();
    checks.push(if m.absent.is_empty() && m.present.is_empty() {
        skip("modules", "the profile names no modules".into())
    } else if wrongly_loaded.is_empty() && missing.is_empty() {
        pass(
            "modules",
            &format!(
                "loaded: {}; not loaded: {}",
                list(&m.present),
                list(&m.absent)
            ),
        )
    } else {
        let mut why = Vec::new();
        if !wrongly_loaded.is_empty() {
            why.push(format!(
                "loaded but must be absent: {}",
                list(&wrongly_loaded)
            ));
        }
        if !missing.is_empty() {
            why.push(format!(
                "not loaded but must be present: {}",
                list(&missing)
            ));
        }
        fail("modules", why.join("; "))
    });

    let mut report = None;
    if loopback.skip || desired.doc.verify.loopback == Some(false) {
        checks.push(skip(
            "loopback",
            "turned off (--no-loopback or verify.loopback: false)".into(),
        ));
    } else {
        let (device, port) = match loopback.device.as_deref().map(bench::cli::parse_dev_port) {
            Some(Ok((d, p))) => (Some(d), p),
            Some(Err(e)) => return Err(crate::error::Error::Usage(format!("--device: {e}"))),
            None => (None, None),
        };
        let opts = LoopbackOptions {
            device,
            port,
            length: RunLength::Duration(Duration::from_secs_f64(loopback.seconds.unwrap_or(3.0))),
            min_line_rate_fraction: desired.doc.verify.min_line_rate_fraction,
            min_gbps: loopback.min_gbps,
            ..LoopbackOptions::default()
        };
        let mut notes = Vec::new();
        match bench::run_loopback(&opts, &mut |n: &str| notes.push(n.to_string())) {
            Ok(r) => {
                let detail = loopback_summary(&r, &notes);
                checks.push(if r.passed {
                    pass("loopback", &detail)
                } else {
                    fail("loopback", detail)
                });
                report = Some(r);
            }
            Err(e) => checks.push(fail("loopback", e.to_string())),
        }
    }
    Ok(finish(host, desired, checks, report, health))
}

/// A pending trial boot (`apply --trial`): is it what runs, still to come,
/// or did its one boot not happen (GRUB used the one-shot `next_entry` and the
/// default entry runs: the trial kernel failed, or another entry was chosen)?
fn trial_check(t: &Trial, boot: &BootFacts) -> Check {
    if boot.trial_running {
        pass(
            "trial",
            &format!(
                "the running kernel was started from the trial entry {}; `gdrprov commit` makes its arguments the default",
                t.entry
            ),
        )
    } else if boot.next_entry.as_deref() == Some(t.entry.as_str()) {
        skip(
            "trial",
            format!("the trial entry {} boots at the next boot (once)", t.entry),
        )
    } else {
        fail(
            "trial",
            format!(
                "the trial entry {} did not boot: GRUB used its one-shot boot and this boot runs another entry (the trial kernel failed to start, or another entry was chosen); nothing was committed and the default entry is unchanged. Fix the profile and `gdrprov apply --trial` again, or `gdrprov boot once {}` and reboot to try it again",
                t.entry, t.entry
            ),
        )
    }
}

fn finish(
    host: &Host,
    desired: &Composed,
    checks: Vec<Check>,
    loopback: Option<LoopbackReport>,
    health: crate::health::HealthReport,
) -> Report {
    Report {
        profiles: desired.names.clone(),
        root: host.root().display().to_string(),
        live: host.is_live(),
        ready: checks.iter().all(|c| c.status != Status::Fail),
        checks,
        loopback,
        health: Some(health),
    }
}

/// A warning passes (shown as such); evidence and fix go into the detail.
fn from_health(h: &crate::health::HealthCheck) -> Check {
    use crate::health::Outcome;
    Check {
        name: h.name,
        status: match h.outcome {
            Outcome::Pass | Outcome::Warn => Status::Pass,
            Outcome::Fail => Status::Fail,
            Outcome::Skip => Status::Skip,
        },
        detail: h.detail(),
    }
}

fn loopback_summary(r: &LoopbackReport, notes: &[String]) -> String {
    let best = r.results.iter().max_by_key(|s| s.bytes);
    let mut s = match best {
        Some(b) => format!(
            "{:.2} Gb/s average at {} bytes over {} ({:?} memory)",
            b.average_gbps, b.bytes, r.from.device, r.memory
        ),
        None => "no result".into(),
    };
    if let (Some(line), Some(b)) = (r.line_rate_gbps, best) {
        if line > 0.0 {
            s.push_str(&format!(
                " = {:.0}% of the {line:.0} Gb/s line rate",
                100.0 * b.average_gbps / line
            ));
        }
    }
    s.push_str(&format!(
        "; data check {}",
        if r.data_check.passed {
            "passed"
        } else {
            "FAILED"
        }
    ));
    if let Some(note) = &r.memory_note {
        s.push_str(&format!("; {note}"));
    }
    if let Some(reason) = r
        .threshold
        .reason
        .as_ref()
        .filter(|_| !r.threshold.applicable)
    {
        s.push_str(&format!("; threshold not applicable: {reason}"));
    }
    for n in notes {
        s.push_str(&format!("; {n}"));
    }
    s
}

fn list<S: AsRef<str>>(v: &[S]) -> String {
    if v.is_empty() {
        "none".into()
    } else {
        v.iter()
            .map(|s| s.as_ref().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn pass(name: &'static str, detail: &str) -> Check {
    Check {
        name,
        status: Status::Pass,
        detail: detail.to_string(),
    }
}

fn fail(name: &'static str, detail: String) -> Check {
    Check {
        name,
        status: Status::Fail,
        detail,
    }
}

fn skip(name: &'static str, detail: String) -> Check {
    Check {
        name,
        status: Status::Skip,
        detail,
    }
}

pub fn text(r: &Report) -> String {
    let mut out = format!(
        "gdrprov verify: {} on {}\n",
        r.profiles.join(" + "),
        if r.live {
            "the running system".to_string()
        } else {
            r.root.clone()
        }
    );
    for c in &r.checks {
        let tag = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        };
        out.push_str(&format!("  {tag}  {:<14} {}\n", c.name, c.detail));
    }
    let failed = r.checks.iter().filter(|c| c.status == Status::Fail).count();
    if r.ready {
        out.push_str("Result: READY — every check passed or does not apply.\n");
    } else {
        out.push_str(&format!("Result: NOT READY — {failed} check(s) failed.\n"));
    }
    out
}
