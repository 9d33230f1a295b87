//! `doctor`'s report for people: the host in one line, the profile's
//! requirements (or how each built-in profile fits), the findings.

use crate::checks::doctor::{Finding, Report, Sev};
use crate::checks::requirements::Status;
use crate::facts::nvidia::Flavor;
use crate::facts::Facts;
use crate::names;
use crate::suggest::{Given, Suggest};
use std::fmt::Write as _;

pub fn text(facts: &Facts, r: &Report) -> String {
    let mut o = host_line(facts);
    match &r.profile {
        Some(p) => requirements(&mut o, p, r),
        None => fits(&mut o, r),
    }
    let undetermined = r
        .requirements
        .iter()
        .filter(|q| q.status == Status::Unknown)
        .count();
    if r.findings.is_empty() {
        let blocked = r.fits.iter().filter(|f| !f.fits).count();
        if blocked == 0 && undetermined > 0 {
            let _ = writeln!(
                o,
                "\nNo findings; {undetermined} requirement(s) not determined on this root (??): nothing known stands in the way."
            );
        } else if blocked == 0 {
            let _ = writeln!(o, "\nNo findings: nothing stands in the way.");
        } else {
            let _ = writeln!(
                o,
                "\nNo findings about the host in general; the findings that block {blocked} profile(s) are named above."
            );
        }
    }
    for f in &r.findings {
        finding(&mut o, f);
    }
    let blockers: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.severity == Sev::Error)
        .map(|f| f.id.as_str())
        .collect();
    match (&r.best_fit, blockers.is_empty()) {
        (_, true) => {}
        // Without a profile, one fits: these stand in the way of the others.
        (Some(best), false) if r.profile.is_none() => {
            let _ = writeln!(
                o,
                "\nIn the way of GPUDirect RDMA in general: {}; {best} fits all the same",
                blockers.join(", ")
            );
        }
        _ => {
            let _ = writeln!(o, "\nBlocked by: {}", blockers.join(", "));
        }
    }
    o
}

fn arch_name(a: &crate::facts::arch::Arch) -> String {
    serde_json::to_value(a)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// The host in one line. On a root that shows no system state (an image:
/// no /sys, no /proc/modules) a driver, GPU or NIC not found is not
/// determined, as the requirements say, rather than absent.
fn host_line(facts: &Facts) -> String {
    let unknown = !facts.observed;
    let gpu = match facts.gpus.first() {
        Some(g) => format!(
            "{} x {} ({})",
            facts.gpus.len(),
            g.name.as_deref().unwrap_or("GPU"),
            g.arch.name()
        ),
        None if unknown => "GPUs not determined".into(),
        None => "no GPU".into(),
    };
    let rdma = match facts.rdma_devices.len() {
        0 if unknown => "RDMA devices not determined".to_string(),
        n => format!("{n} RDMA device(s)"),
    };
    let note = if unknown {
        "  (this root shows no system state, no /sys or /proc/modules: what it cannot show is not determined, and a profile fits only as far as it shows)\n"
    } else {
        ""
    };
    let arch = match (&facts.arch.arch, &facts.arch.cpu) {
        (crate::facts::arch::Arch::Unknown, _) => String::new(),
        (a, Some(cpu)) => format!(" ({}, {cpu})", arch_name(a)),
        (a, None) => format!(" ({})", arch_name(a)),
    };
    format!(
        "Host: {}{arch}; kernel {}; NVIDIA {}{}; {gpu}; {rdma}\n{note}",
        facts.os.pretty_name.as_deref().unwrap_or("unknown OS"),
        facts.kernel.effective().unwrap_or("unknown"),
        facts
            .nvidia_driver
            .version
            .as_deref()
            .unwrap_or(if unknown {
                "driver not determined"
            } else {
                "driver absent"
            }),
        match facts.nvidia_driver.flavor {
            Flavor::Open => " (open)",
            Flavor::Proprietary => " (proprietary)",
            Flavor::Unknown => "",
        },
    )
}

fn requirements(o: &mut String, profile: &str, r: &Report) {
    let _ = writeln!(o, "Profile: {profile}");
    for q in &r.requirements {
        let mark = match q.status {
            Status::Ok => "ok  ",
            Status::Failed => "FAIL",
            Status::Unknown => "??  ",
        };
        let _ = writeln!(o, "  [{mark}] {}", q.message);
    }
}

fn fits(o: &mut String, r: &Report) {
    let _ = writeln!(o, "Profiles:");
    for f in &r.fits {
        let _ = writeln!(
            o,
            "  {:<16} {}",
            f.profile,
            if f.fits && f.undetermined > 0 {
                format!(
                    "fits as far as this root shows ({} warning(s); {} requirement(s) not determined)",
                    f.warnings, f.undetermined
                )
            } else if f.fits {
                format!("fits ({} warning(s))", f.warnings)
            } else {
                format!(
                    "blocked by {} finding(s) ({}); {} says more",
                    f.blockers,
                    f.blocked_by.join(", "),
                    Suggest::new(names::DOCTOR)
                        .arg(f.profile.as_str())
                        .shown(&Given::none())
                )
            }
        );
    }
    let best = r
        .best_fit
        .as_ref()
        .and_then(|b| r.fits.iter().find(|f| &f.profile == b));
    let _ = match best {
        // `--root /` written out: the output door adds the user's --root to
        // a suggestion that names none, and this one is for the host itself.
        Some(b) if b.undetermined > 0 => writeln!(
            o,
            "Best fit: {}, as far as this root shows ({} of its requirements not determined here: {} run on the host itself says more)",
            b.profile,
            b.undetermined,
            Suggest::new(names::DOCTOR)
                .arg(b.profile.as_str())
                .arg("--root")
                .arg("/")
                .shown(&Given::none())
        ),
        Some(b) => writeln!(o, "Best fit: {}", b.profile),
        None => writeln!(o, "Best fit: none; every profile is blocked"),
    };
}

fn finding(o: &mut String, f: &Finding) {
    let sev = match f.severity {
        Sev::Error => "ERROR",
        Sev::Warn => "WARN",
        Sev::Info => "info",
    };
    let _ = writeln!(o, "\n{sev} [{}] {}", f.id, f.title);
    let _ = writeln!(o, "  evidence: {}", f.evidence);
    if !f.cause.is_empty() {
        let _ = writeln!(o, "  cause:    {}", f.cause);
    }
    if !f.fix.is_empty() {
        let _ = writeln!(o, "  fix:      {}", f.fix);
    }
}
