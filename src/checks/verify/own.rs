//! The functions of the verify table's own entries (`Run::Own` in `table.rs`): each reads
//! the context gathered once and gives its check, or nothing where it does not apply.

use super::cx::Cx;
use super::efa;
use crate::bench::{LoopbackOptions, RunLength};
use crate::checks::requirements::ReqResult;
use crate::checks::{Check, Status};
use crate::facts::boot::BootFacts;
use crate::journal::Trial;
use crate::names;
use crate::suggest::{Given, Suggest};
use std::time::Duration;

/// Every requirement as a check: failed hard ones fail the host, failed soft
/// ones warn, unknown ones are counted.
pub(super) fn requirements(cx: &Cx) -> Option<Check> {
    const NAME: &str = "requirements";
    if cx.reqs.is_empty() {
        return Some(Check::skip(NAME, "the profile has none"));
    }
    let checks: Vec<Check> = cx.reqs.iter().map(ReqResult::check).collect();
    let evidence = |s: Status| -> Vec<&str> {
        checks
            .iter()
            .filter(|c| c.status == s)
            .map(|c| c.evidence.as_str())
            .collect()
    };
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let failed = evidence(Status::Fail);
    if !failed.is_empty() {
        return Some(Check::fail_with_cause(
            NAME,
            format!("{}; see {}", failed.join("; "), doctor(cx)),
        ));
    }
    let mut met = format!("{} met", count(Status::Pass));
    if count(Status::Skip) > 0 {
        met.push_str(&format!(
            ", {} could not be determined",
            count(Status::Skip)
        ));
    }
    let soft = evidence(Status::Warn);
    Some(if soft.is_empty() {
        Check::pass(NAME, met)
    } else {
        Check::warn(
            NAME,
            format!("{met}; not met: {}", soft.join("; ")),
            format!("see {}", doctor(cx)),
        )
    })
}

/// A plan that could not be made (a boot loader file gdrprov refuses to
/// read) fails this check; every other check still runs.
pub(super) fn configuration(cx: &Cx) -> Option<Check> {
    const NAME: &str = "configuration";
    let plan = match cx.plan {
        Err(why) => {
            return Some(Check::fail_with_cause(
                NAME,
                format!("cannot compare with the profile: {why}"),
            ))
        }
        Ok(p) => p,
    };
    if plan.is_empty() && cx.state.pending_commands.is_empty() {
        return Some(Check::pass(NAME, "the host's files match the profile"));
    }
    let mut what: Vec<String> = plan.changes.iter().map(|c| c.description.clone()).collect();
    what.extend(
        cx.state
            .pending_commands
            .iter()
            .map(|c| format!("still owed: `{}`", c.shell_line())),
    );
    Some(Check::fail_with_cause(
        NAME,
        format!(
            "{} difference(s) from the profile: {}; run {}",
            what.len(),
            what.join("; "),
            Suggest::new(names::APPLY)
                .profiles(cx.profiles)
                .shown(&Given::none())
        ),
    ))
}

/// `gdrprov doctor PROFILE...` for the profiles verified.
fn doctor(cx: &Cx) -> String {
    Suggest::new(names::DOCTOR)
        .profiles(cx.profiles)
        .shown(&Given::none())
}

/// Read back from the root: sysfs and config space on the running system,
/// or what an observed root (snapshot, fixture) shows.
fn read_back(
    cx: &Cx,
    name: &'static str,
    result: Option<Result<String, String>>,
    none: &str,
) -> Option<Check> {
    Some(match result {
        _ if !cx.facts.observed => Check::skip(
            name,
            format!("{} shows no system state", cx.host.root().display()),
        ),
        None => Check::skip(name, none),
        Some(Ok(detail)) => Check::pass(name, detail),
        Some(Err(why)) => Check::fail_with_cause(name, why),
    })
}

pub(super) fn mtu(cx: &Cx) -> Option<Check> {
    let r = crate::plan::modules::network::check(cx.seen, cx.facts, cx.desired);
    read_back(cx, "mtu", r, "the profile sets no MTU")
}

pub(super) fn acs(cx: &Cx) -> Option<Check> {
    let r = crate::plan::modules::pcie::check(cx.seen, cx.facts, cx.desired);
    read_back(cx, "acs", r, "the profile leaves ACS alone")
}

/// The PCIe path's settings (BAR1, MaxReadReq, MaxPayload, relaxed ordering, ATS):
/// `checks::pcie_path`, the same findings doctor gives.
pub(super) fn pcie_path(cx: &Cx) -> Option<Check> {
    let intent = crate::checks::doctor::Intent::of(&cx.desired.doc);
    crate::checks::doctor::pcie_path::check(cx.facts, &intent.pcie)
}

/// The kernel command line of a host that does not set it itself.
pub(super) fn boot(cx: &Cx) -> Option<Check> {
    let b = cx.plan.ok()?.boot_elsewhere.as_ref()?;
    Some(match b.satisfied {
        Some(true) => Check::pass("boot", b.summary()),
        Some(false) => Check::fail_with_cause("boot", b.summary()),
        None => Check::skip(
            "boot",
            format!(
                "{}; the running command line is not known in {}",
                b.summary(),
                cx.host.root().display()
            ),
        ),
    })
}

/// A pending trial boot, judged by what the root shows runs (a snapshot or
/// fixture with /proc/cmdline too).
pub(super) fn trial(cx: &Cx) -> Option<Check> {
    let t = cx.state.trial.as_ref()?;
    Some(match cx.facts.proc_cmdline {
        Some(_) => trial_check(t, &cx.facts.boot),
        None => Check::skip(
            "trial",
            format!("{} shows no running command line", cx.host.root().display()),
        ),
    })
}

/// A pending trial boot (`apply --trial`): is it what runs, still to come,
/// or did its one boot not happen (GRUB used the one-shot `next_entry` and the
/// default entry runs: the trial kernel failed, or another entry was chosen)?
fn trial_check(t: &Trial, boot: &BootFacts) -> Check {
    if boot.trial_running {
        Check::pass(
            "trial",
            format!(
                "the running kernel was started from the trial entry {}; {} makes its arguments the default",
                t.entry,
                Suggest::new(names::COMMIT).shown(&Given::none())
            ),
        )
    } else if boot.next_entry.as_deref() == Some(t.entry.as_str()) {
        Check::skip(
            "trial",
            format!("the trial entry {} boots at the next boot (once)", t.entry),
        )
    } else {
        Check::fail_with_cause(
            "trial",
            format!(
                "the trial entry {} did not boot: {} used its one-shot boot and this boot runs another entry (the trial kernel failed to start, or another entry was chosen); nothing was committed and the default entry is unchanged. Fix the profile and {} again, or {} and reboot to try it again",
                t.entry,
                match boot.cmdline_home {
                    crate::facts::boot_shape::CmdlineHome::SystemdBoot(_) => "systemd-boot",
                    _ => "GRUB",
                },
                Suggest::new(names::APPLY).profiles(&t.profiles).arg("--trial").shown(&Given::none()),
                Suggest::new(names::BOOT_ONCE).arg(t.entry.as_str()).shown(&Given::none()),
            ),
        )
    }
}

/// EFA: its devices stand in for the loopback, which needs RC queue pairs.
pub(super) fn efa_devices(cx: &Cx) -> Option<Check> {
    let efa = cx.efa();
    (!efa.is_empty() && cx.facts.observed).then(|| efa::devices_check(&efa))
}

/// What a reboot would still change in the running kernel. The command line
/// is this check's only where the host sets it: on a host whose command line
/// is set outside it, `boot` owns that fact, and this check says only what
/// it alone knows (the modules), so the two never pass and fail on one fact.
pub(super) fn reboot(cx: &Cx) -> Option<Check> {
    const NAME: &str = "reboot";
    if !cx.host.is_live() {
        return Some(cx.not_running(NAME));
    }
    Some(match cx.plan {
        Err(why) => Check::skip(NAME, format!("no plan to compare with: {why}")),
        Ok(p) if p.reboot_pending.is_empty() && p.boot_elsewhere.is_some() => Check::pass(
            NAME,
            "the running kernel has the configured modules; its command line is set outside this host (the `boot` check judges it)",
        ),
        Ok(p) if p.reboot_pending.is_empty() => Check::pass(
            NAME,
            "the running kernel has the configured command line and modules",
        ),
        Ok(p) => Check::fail_with_cause(
            NAME,
            format!("reboot to finish: {}", p.reboot_pending.join("; ")),
        ),
    })
}

/// Other files asking to load a blocked module at boot (modules-load.d,
/// /etc/modules, a unit): a warning naming each; none applies when nothing
/// is blocked.
pub(super) fn load_requests(cx: &Cx) -> Option<Check> {
    const NAME: &str = "load-requests";
    if cx.desired.doc.modules.absent.is_empty() {
        return None;
    }
    let reqs = &cx.seen.load_requests;
    if reqs.is_empty() {
        return Some(Check::pass(
            NAME,
            format!(
                "no other file asks to load {}",
                list(&cx.desired.doc.modules.absent)
            ),
        ));
    }
    let found: Vec<String> = reqs
        .iter()
        .map(|r| format!("{}:{} loads {}", cx.seen.display(&r.file), r.line, r.module))
        .collect();
    Some(Check::warn(
        NAME,
        format!("blocked, yet asked to load at boot: {}", found.join("; ")),
        "set `modules.remove-load-requests: true` and apply to comment out those in /etc, or remove the lines (units: disable or override them)",
    ))
}

pub(super) fn modules(cx: &Cx) -> Option<Check> {
    const NAME: &str = "modules";
    if !cx.host.is_live() {
        return Some(cx.not_running(NAME));
    }
    let m = &cx.desired.doc.modules;
    let loaded = |x: &&String| cx.facts.modules.is_loaded(x);
    let wrongly_loaded: Vec<&String> = m.absent.iter().filter(loaded).collect();
    let missing: Vec<&String> = m.present.iter().filter(|x| !loaded(x)).collect();
    if m.absent.is_empty() && m.present.is_empty() {
        return Some(Check::skip(NAME, "the profile names no modules"));
    }
    if wrongly_loaded.is_empty() && missing.is_empty() {
        return Some(Check::pass(
            NAME,
            format!(
                "loaded: {}; not loaded: {}",
                list(&m.present),
                list(&m.absent)
            ),
        ));
    }
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
    Some(Check::fail_with_cause(NAME, why.join("; ")))
}

pub(super) fn efa_fi_info(cx: &Cx) -> Option<Check> {
    if cx.efa().is_empty() {
        return None;
    }
    if !cx.host.is_live() {
        return Some(cx.not_running("efa-fi-info"));
    }
    let tool = efa::FI_INFO.iter().find(|p| cx.host.exists(p));
    let out = tool.map(|t| {
        cx.host
            .query(&[t, "-p", "efa", "-c", "FI_HMEM"])
            .map(|o| o.stdout)
            .unwrap_or_default()
    });
    Some(efa::fi_info_check(tool.copied(), out.as_deref()))
}

pub(super) fn loopback(cx: &Cx) -> Option<Check> {
    const NAME: &str = "loopback";
    if !cx.host.is_live() {
        return Some(cx.not_running(NAME));
    }
    if cx.efa_only() {
        return Some(Check::skip(NAME, efa::NO_LOOPBACK));
    }
    if cx.loopback.skip || cx.desired.doc.verify.loopback == Some(false) {
        return Some(Check::skip(
            NAME,
            "turned off (--no-loopback or verify.loopback: false)",
        ));
    }
    let opts = LoopbackOptions {
        device: cx.device.0.clone(),
        port: cx.device.1,
        length: RunLength::Duration(Duration::from_secs_f64(cx.loopback.seconds.unwrap_or(3.0))),
        min_line_rate_fraction: cx.desired.doc.verify.min_line_rate_fraction,
        min_gbps: cx.loopback.min_gbps,
        ..LoopbackOptions::default()
    };
    let mut notes = Vec::new();
    Some(
        match crate::bench::run_loopback(&opts, &mut |n: &str| notes.push(n.to_string())) {
            Ok(r) => {
                let detail = super::loopback_summary(&r, &notes);
                let c = if r.passed {
                    Check::pass(NAME, detail)
                } else {
                    Check::fail_with_cause(NAME, detail)
                };
                *cx.measured.borrow_mut() = Some(r);
                c
            }
            Err(e) => Check::fail_with_cause(NAME, e.to_string()),
        },
    )
}

pub(super) fn dmabuf_export(cx: &Cx) -> Option<Check> {
    (cx.host.is_live() && cx.efa_only())
        .then(|| efa::dmabuf_export_check(!cx.facts.gpus.is_empty()))
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

/// The table's names are the names its checks report.
/// The pair check (`--peer`) with what it reads of the context.
pub(super) fn pair(cx: &Cx) -> Option<Check> {
    let input = super::pair::PairInput {
        choice: cx.loopback,
        device: &cx.device,
        min_fraction: cx.desired.doc.verify.min_line_rate_fraction,
    };
    super::pair::check(cx.host, &input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::health::HealthReport;
    use crate::facts::boot_shape::Starter;
    use crate::facts::{Facts, OsFamily};
    use crate::plan::modules::bootcfg_elsewhere::BootElsewhere;
    use crate::plan::Plan;

    /// A running host (`/`) whose kernel command line is set outside it (a
    /// container, as the development machine of issue 45) lacks `iommu=pt`;
    /// nothing else is pending.
    fn verdicts(satisfied: bool) -> (Check, Check) {
        let host = crate::host::Host::open(std::path::Path::new("/"), true).unwrap();
        let facts = Facts::blank(OsFamily::Debian);
        let desired = crate::profile::load_profiles(&["rdma-dmabuf".to_string()]).unwrap();
        let missing: Vec<String> = if satisfied {
            Vec::new()
        } else {
            vec!["iommu=pt".into()]
        };
        let plan = Plan {
            boot_elsewhere: Some(BootElsewhere {
                manageable: false,
                starter: Starter::Container,
                set_in: Starter::Container.where_to_set(),
                evidence: vec!["/.dockerenv".into()],
                wanted: vec!["iommu=pt".into()],
                missing: Some(missing),
                unwanted: Vec::new(),
                satisfied: Some(satisfied),
            }),
            ..Plan::default()
        };
        let (seen, state) = (Default::default(), Default::default());
        let health = HealthReport {
            checks: Vec::new(),
            copy: None,
            nvml: None,
            concurrent: None,
            p2p: None,
            nccl: None,
            node_seconds: None,
            links: Vec::new(),
        };
        let loopback = Default::default();
        let cx = Cx {
            host: &host,
            facts: &facts,
            seen: &seen,
            desired: &desired,
            profiles: &[],
            plan: Ok(&plan),
            reqs: &[],
            state: &state,
            health: &health,
            loopback: &loopback,
            device: (None, None),
            measured: Default::default(),
        };
        (boot(&cx).unwrap(), reboot(&cx).unwrap())
    }

    /// `reboot` and `boot` never pass and fail on the same fact: where the
    /// command line is set outside the host, only `boot` speaks of it.
    #[test]
    fn one_verdict_for_the_boot_line() {
        let (boot, reboot) = verdicts(false);
        assert_eq!(boot.status, Status::Fail, "{boot:?}");
        assert!(boot.evidence.contains("add iommu=pt"), "{boot:?}");
        assert_eq!(reboot.status, Status::Pass, "{reboot:?}");
        assert!(
            !reboot.evidence.contains("configured command line"),
            "reboot passes the command line that boot fails: {reboot:?}"
        );
        assert!(reboot.evidence.contains("`boot` check"), "{reboot:?}");
        let (boot, reboot) = verdicts(true);
        assert_eq!((boot.status, reboot.status), (Status::Pass, Status::Pass));
    }
}
