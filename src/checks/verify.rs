//! `gdrprov verify`: after the apply and the reboot, is the host what the
//! profile says, and does GPUDirect RDMA actually move data? Each check
//! passes, fails (with the cause) or is skipped (with the reason); the host
//! is ready when none fails.

use crate::apply::journal::{StateStore, Trial};
use crate::bench::{self, LoopbackOptions, LoopbackReport, RunLength};
use crate::checks::requirements::{ReqResult, Status as ReqStatus};
use crate::error::Result;
use crate::facts::boot::BootFacts;
use crate::host::Host;
use crate::plan::Plan;
use crate::profile::Composed;
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
    /// The readiness checks of src/checks/health with evidence and fix, and their measurements.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<crate::checks::health::HealthReport>,
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
    seen: &crate::plan::inputs::PlanFacts,
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
            crate::plan::modules::network::check(seen, facts, desired),
            "the profile sets no MTU",
        ),
        (
            "acs",
            crate::plan::modules::pcie::check(seen, facts, desired),
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
    let health = crate::checks::health::for_verify(host.is_live(), facts);
    checks.extend(health.checks.iter().map(from_health));

    // EFA: its devices stand in for the loopback, which needs RC queue pairs.
    let efa: Vec<&crate::facts::rdma::RdmaDevice> = facts
        .rdma_devices
        .iter()
        .filter(|d| d.driver.as_deref() == Some("efa"))
        .collect();
    let efa_only = !efa.is_empty() && efa.len() == facts.rdma_devices.len();
    if !efa.is_empty() && facts.observed {
        checks.push(efa_devices_check(&efa));
    }

    if !host.is_live() {
        if !efa.is_empty() {
            checks.push(skip(
                "efa-fi-info",
                format!("{} is not the running system", host.root().display()),
            ));
        }
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

    if !efa.is_empty() {
        let tool = FI_INFO.iter().find(|p| host.exists(p));
        let out = tool.map(|t| {
            host.query(&[t, "-p", "efa", "-c", "FI_HMEM"])
                .map(|o| o.stdout)
                .unwrap_or_default()
        });
        checks.push(efa_fi_info_check(tool.copied(), out.as_deref()));
    }

    let mut report = None;
    if efa_only {
        checks.push(skip("loopback", EFA_NO_LOOPBACK.into()));
        // What EFA needs of the GPU: its memory exported as dma-buf.
        checks.push(if facts.gpus.is_empty() {
            skip("dmabuf-export", "no GPU".into())
        } else {
            match bench::loopback::export_only(0, 8 << 20) {
                Ok(r) if r.passed => pass(
                    "dmabuf-export",
                    &format!(
                        "GPU 0: {} bytes exported as dma-buf and read back",
                        r.allocated_bytes
                    ),
                ),
                Ok(r) => fail(
                    "dmabuf-export",
                    format!(
                        "GPU 0: the dma-buf export failed (fd valid: {}); EFA cannot register GPU memory: check the open driver and kernel >= 5.12 (`gdrprov doctor efa`)",
                        r.dmabuf_fd_valid
                    ),
                ),
                Err(e) => fail("dmabuf-export", format!("GPU 0: {e}")),
            }
        });
    } else if loopback.skip || desired.doc.verify.loopback == Some(false) {
        checks.push(skip(
            "loopback",
            "turned off (--no-loopback or verify.loopback: false)".into(),
        ));
    } else {
        let (device, port) = match loopback
            .device
            .as_deref()
            .map(crate::commands::bench::parse_dev_port)
        {
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
                "the trial entry {} did not boot: {} used its one-shot boot and this boot runs another entry (the trial kernel failed to start, or another entry was chosen); nothing was committed and the default entry is unchanged. Fix the profile and `gdrprov apply --trial` again, or `gdrprov boot once {}` and reboot to try it again",
                t.entry,
                match boot.cmdline_home {
                    crate::facts::boot_shape::CmdlineHome::SystemdBoot(_) => "systemd-boot",
                    _ => "GRUB",
                },
                t.entry
            ),
        )
    }
}

fn finish(
    host: &Host,
    desired: &Composed,
    checks: Vec<Check>,
    loopback: Option<LoopbackReport>,
    health: crate::checks::health::HealthReport,
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
fn from_health(h: &crate::checks::health::HealthCheck) -> Check {
    use crate::checks::health::Outcome;
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

const EFA_NO_LOOPBACK: &str = "does not apply on EFA: EFA has SRD queue pairs, no RC, and the RDMA loopback needs RC; the efa checks stand in for it";

/// Where the EFA installer (and distributions) put libfabric's `fi_info`.
const FI_INFO: [&str; 3] = [
    "/opt/amazon/efa/bin/fi_info",
    "/usr/bin/fi_info",
    "/usr/local/bin/fi_info",
];

/// Every EFA device with at least one ACTIVE port.
fn efa_devices_check(devs: &[&crate::facts::rdma::RdmaDevice]) -> Check {
    let mut up = Vec::new();
    let mut down = Vec::new();
    for d in devs {
        match d.ports.iter().find(|p| p.is_active()) {
            Some(p) => up.push(format!("{} port {} ACTIVE", d.name, p.port)),
            None => down.push(format!(
                "{} ({})",
                d.name,
                d.ports
                    .iter()
                    .map(|p| format!(
                        "port {} {}",
                        p.port,
                        p.state.as_deref().unwrap_or("state unknown")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    if down.is_empty() {
        pass("efa-devices", &up.join("; "))
    } else {
        fail(
            "efa-devices",
            format!(
                "EFA device(s) without an ACTIVE port: {}; check the ENI is an EFA interface attached to this instance and `modprobe efa`",
                down.join("; ")
            ),
        )
    }
}

/// `fi_info -p efa -c FI_HMEM` lists the efa provider: libfabric can hand
/// GPU memory to EFA.
fn efa_fi_info_check(tool: Option<&str>, out: Option<&str>) -> Check {
    match (tool, out) {
        (None, _) | (_, None) => skip(
            "efa-fi-info",
            "fi_info not found (the EFA installer puts it in /opt/amazon/efa/bin)".into(),
        ),
        (Some(t), Some(o)) if o.lines().any(|l| l.trim() == "provider: efa") => pass(
            "efa-fi-info",
            &format!("`{t} -p efa -c FI_HMEM` lists the efa provider with FI_HMEM"),
        ),
        (Some(t), Some(_)) => fail(
            "efa-fi-info",
            format!("`{t} -p efa -c FI_HMEM` lists no efa provider with FI_HMEM: libfabric cannot register GPU memory on EFA; reinstall the EFA installer's libfabric (with CUDA support) and check the efa module is loaded"),
        ),
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

#[cfg(test)]
mod efa_tests {
    use super::*;
    use crate::facts::rdma::{RdmaDevice, RdmaPort};

    fn dev(name: &str, state: &str) -> RdmaDevice {
        RdmaDevice {
            name: name.into(),
            driver: Some("efa".into()),
            pci: Some("0000:4f:00.0".into()),
            sysfs_path: None,
            numa_node: Some(0),
            ports: vec![RdmaPort {
                port: 1,
                state: Some(state.into()),
                phys_state: Some("LINK_UP".into()),
                link_layer: Some("Unspecified".into()),
                rate: Some("100 Gb/sec (4X EDR)".into()),
                rate_gbps: Some(100.0),
                netdev: None,
                mtu: None,
            }],
        }
    }

    #[test]
    fn efa_devices_must_have_an_active_port() {
        let (a, b) = (dev("rdmap79s0", "ACTIVE"), dev("rdmap80s0", "ACTIVE"));
        let c = efa_devices_check(&[&a, &b]);
        assert_eq!(c.status, Status::Pass);
        assert_eq!(c.detail, "rdmap79s0 port 1 ACTIVE; rdmap80s0 port 1 ACTIVE");
        let d = dev("rdmap81s0", "DOWN");
        let c = efa_devices_check(&[&a, &d]);
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail.contains("rdmap81s0 (port 1 DOWN)"), "{}", c.detail);
    }

    #[test]
    fn fi_info_must_list_efa_with_hmem() {
        let t = Some("/opt/amazon/efa/bin/fi_info");
        let listed = "provider: efa\n    fabric: efa\n    domain: rdmap79s0-rdm\n    version: 122.0\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n";
        assert_eq!(efa_fi_info_check(t, Some(listed)).status, Status::Pass);
        let none = "fi_getinfo: -61 (No data available)\n";
        let c = efa_fi_info_check(t, Some(none));
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail.contains("FI_HMEM"));
        assert_eq!(efa_fi_info_check(None, None).status, Status::Skip);
    }
}
