//! A profile's `requires:` checked against the facts. Each requirement gives
//! one result: ok, failed, or unknown (the fact could not be read here, e.g.
//! the CUDA version in an image). A failed `error` requirement blocks `plan`
//! and `apply` unless `--force`; a failed `warn` requirement and every
//! unknown one are reported as warnings and never block: an image root or a
//! host without the tools cannot prove a version, and refusing there would
//! make gdrprov useless for image builds.

use crate::facts::gpu::Arch;
use crate::facts::nvidia::Flavor;
use crate::facts::ofed::OfedKindFact;
use crate::facts::Facts;
use crate::host::Host;
use crate::profile::model::{
    DriverFlavor, DriverReq, OfedKind, OfedReq, Requires, Severity, VersionReq,
};
use crate::profile::Composed;
use crate::versions;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Ok,
    Failed,
    Unknown,
}

#[derive(Debug, Clone, Serialize)]
pub struct ReqResult {
    /// `kernel`, `nvidia-driver`, `cuda`, `ofed`, `perftest`, `nccl`, `gpu`, `erdma`, `efa`, `gdrcopy`.
    pub what: String,
    /// What the profile asks, e.g. `>= 5.12`, `flavor open`.
    pub wanted: String,
    /// What the host has.
    pub actual: Option<String>,
    pub status: Status,
    pub severity: Severity,
    pub reason: Option<String>,
    /// One line for people.
    pub message: String,
}

impl ReqResult {
    /// Blocks plan/apply: a failed hard requirement.
    pub fn blocks(&self) -> bool {
        self.status == Status::Failed && self.severity == Severity::Error
    }

    /// As the one result of every check: met passes, a failed hard
    /// requirement fails, a failed soft one warns, one that cannot be
    /// determined here is skipped. The message is the evidence; this result
    /// keeps what was wanted and found.
    pub fn check(&self) -> crate::checks::Check {
        use crate::checks::Status as S;
        let status = match self.status {
            Status::Ok => S::Pass,
            Status::Failed if self.blocks() => S::Fail,
            Status::Failed => S::Warn,
            Status::Unknown => S::Skip,
        };
        crate::checks::Check::new(self.what.clone(), status, self.message.clone(), None)
    }
}

fn result(
    what: &str,
    wanted: String,
    actual: Option<String>,
    ok: Option<bool>,
    severity: Severity,
    reason: Option<String>,
) -> ReqResult {
    let status = match ok {
        Some(true) => Status::Ok,
        Some(false) => Status::Failed,
        None => Status::Unknown,
    };
    let message = match status {
        Status::Ok => format!(
            "{what} {}: wanted {wanted}",
            actual.as_deref().unwrap_or("?")
        ),
        Status::Failed => format!(
            "{what} is {}, the profile requires {wanted}{}",
            actual.as_deref().unwrap_or("absent"),
            reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
        ),
        Status::Unknown => format!("{what}: could not be determined on this root, the profile requires {wanted}; not checked"),
    };
    ReqResult {
        what: what.into(),
        wanted,
        actual,
        status,
        severity,
        reason,
        message,
    }
}

/// A version requirement against a fact that may be absent. `absent_known`:
/// the probe is sure the thing is not installed (then the requirement fails
/// rather than being unknown).
fn version_req(
    what: &str,
    req: &VersionReq,
    actual: Option<&str>,
    absent_known: bool,
) -> ReqResult {
    let (sev, reason) = match req {
        VersionReq::Short(_) => (Severity::Error, None),
        VersionReq::Full(f) => (f.severity, f.reason.clone()),
    };
    let spec = req.version();
    // `>= 0` asks only that the thing is there.
    let wanted = if spec.split_whitespace().collect::<String>() == ">=0" {
        "present".to_string()
    } else {
        spec.to_string()
    };
    let ok = match actual {
        Some(v) => match versions::satisfies(v, spec) {
            Ok(b) => Some(b),
            Err(e) => {
                let mut r = result(what, wanted, Some(v.into()), Some(false), sev, reason);
                r.message = format!("{what}: the profile's constraint is invalid: {e}");
                return r;
            }
        },
        None if absent_known => Some(false),
        None => None,
    };
    result(what, wanted, actual.map(String::from), ok, sev, reason)
}

/// Every requirement of a profile against this host, as `plan`, `apply`,
/// `verify` and `doctor` all evaluate them: its `requires:` (with the `when:`
/// parts that hold here) and the modules it wants present, which must exist
/// for every kernel they will boot with.
pub fn for_profile(host: &Host, facts: &Facts, desired: &Composed) -> Vec<ReqResult> {
    let (resolved, _) = crate::profile::when::resolve(desired, facts);
    let doc = &resolved.doc;
    let mut out = evaluate(&doc.requires, facts);
    if !doc.modules.present.is_empty() {
        let kernels = crate::plan::inputs::target_kernel_modules(host);
        out.extend(modules_exist(
            &kernels,
            facts.nvidia_driver.major(),
            &doc.modules.present,
            &host.display("/lib/modules"),
        ));
    }
    out
}

/// A failed hard requirement per module of `present` missing for a kernel.
pub fn modules_exist(
    kernels: &[crate::plan::inputs::KernelModules],
    driver_major: Option<u32>,
    present: &[String],
    modules_dir: &str,
) -> Vec<ReqResult> {
    crate::plan::modules::kmod::missing(kernels, driver_major, present)
        .into_iter()
        .map(|m| {
            let mut r = result(
                &format!("kernel module {}", m.module),
                format!("present for kernel {}", m.release),
                None,
                Some(false),
                Severity::Error,
                Some(m.hint.clone()),
            );
            r.message = m.message(modules_dir);
            r
        })
        .collect()
}

/// Checks every requirement of `requires:`.
pub fn evaluate(req: &Requires, facts: &Facts) -> Vec<ReqResult> {
    let mut out = Vec::new();
    if let Some(r) = &req.kernel {
        out.push(version_req("kernel", r, facts.kernel.effective(), false));
    }
    if let Some(d) = &req.nvidia_driver {
        driver(d, facts, &mut out);
    }
    if let Some(r) = &req.cuda {
        out.push(version_req(
            "cuda",
            r,
            facts.cuda.driver_api.as_deref(),
            false,
        ));
    }
    if let Some(o) = &req.ofed {
        ofed(o, facts, &mut out);
    }
    if let Some(r) = &req.perftest {
        out.push(version_req(
            "perftest",
            r,
            facts.perftest.version.as_deref(),
            false,
        ));
    }
    if let Some(r) = &req.nccl {
        out.push(version_req("nccl", r, facts.nccl.version.as_deref(), false));
    }
    if let Some(r) = &req.erdma {
        out.push(version_req(
            "erdma",
            r,
            facts.erdma.version.as_deref(),
            facts.observed && !facts.erdma.present(),
        ));
    }
    if let Some(r) = &req.efa {
        // A device without its driver loaded yet is there: the version is
        // then unknown, not absent (the profile loads the driver).
        out.push(version_req(
            "efa",
            r,
            facts.efa.module_version.as_deref(),
            facts.observed && !facts.efa.present(),
        ));
    }
    if let Some(r) = &req.gdrcopy {
        out.push(version_req(
            "gdrcopy",
            r,
            facts.gdrcopy.version.as_deref(),
            facts.observed && facts.gdrcopy.installed.is_some() && !facts.gdrcopy.present(),
        ));
    }
    if let Some(g) = &req.gpu {
        if let Some(min) = &g.min_arch {
            out.push(gpu(min, g.severity, g.reason.clone(), facts));
        }
    }
    out
}

fn driver(d: &DriverReq, facts: &Facts, out: &mut Vec<ReqResult>) {
    let drv = &facts.nvidia_driver;
    // Absent is sure on a running system (no /proc/driver/nvidia).
    let known_absent = facts.observed;
    if let Some(v) = &d.version {
        let vr = VersionReq::Full(crate::profile::model::VersionReqFull {
            version: v.clone(),
            severity: d.severity,
            reason: d.reason.clone(),
        });
        out.push(version_req(
            "nvidia-driver",
            &vr,
            drv.version.as_deref(),
            known_absent,
        ));
    }
    let Some(f) = d.flavor.filter(|f| *f != DriverFlavor::Any) else {
        return;
    };
    let want = if f == DriverFlavor::Open {
        Flavor::Open
    } else {
        Flavor::Proprietary
    };
    let actual = match drv.flavor {
        Flavor::Open => Some("open".to_string()),
        Flavor::Proprietary => Some("proprietary".to_string()),
        Flavor::Unknown => None,
    };
    let ok = if drv.flavor == Flavor::Unknown {
        (!drv.present() && known_absent).then_some(false)
    } else {
        Some(drv.flavor == want)
    };
    let reason = d.reason.clone().or_else(|| {
        (f == DriverFlavor::Open)
            .then(|| "dma-buf export of GPU memory needs the open kernel modules".to_string())
    });
    out.push(result(
        "nvidia-driver flavor",
        format!("{:?}", f).to_lowercase(),
        actual,
        ok,
        d.severity,
        reason,
    ));
}

fn ofed(o: &OfedReq, facts: &Facts, out: &mut Vec<ReqResult>) {
    let ofed = &facts.ofed;
    let sure = facts.observed;
    if let Some(k) = o.kind.filter(|k| *k != OfedKind::Any) {
        let actual = match ofed.kind {
            OfedKindFact::Mlnx => Some("mlnx".to_string()),
            OfedKindFact::Inbox => Some("inbox".to_string()),
            OfedKindFact::Absent => None,
        };
        let ok = match (ofed.kind, k) {
            (OfedKindFact::Absent, _) => sure.then_some(false),
            (OfedKindFact::Mlnx, OfedKind::Mlnx) | (OfedKindFact::Inbox, OfedKind::Inbox) => {
                Some(true)
            }
            // MLNX_OFED replaces rdma-core: it serves an `inbox` requirement too.
            (OfedKindFact::Mlnx, OfedKind::Inbox) => Some(true),
            _ => Some(false),
        };
        out.push(result(
            "ofed kind",
            format!("{k:?}").to_lowercase(),
            actual,
            ok,
            o.severity,
            o.reason.clone(),
        ));
    }
    if let Some(v) = &o.version {
        let vr = VersionReq::Full(crate::profile::model::VersionReqFull {
            version: v.clone(),
            severity: o.severity,
            reason: o.reason.clone(),
        });
        out.push(version_req(
            "ofed",
            &vr,
            ofed.version.as_deref(),
            sure && ofed.kind == OfedKindFact::Absent,
        ));
    }
}

fn gpu(min: &str, severity: Severity, reason: Option<String>, facts: &Facts) -> ReqResult {
    let wanted = format!("architecture {min} or newer");
    let Some(min_arch) = Arch::parse(min) else {
        let mut r = result("gpu", wanted, None, Some(false), severity, reason);
        r.message = format!("gpu: unknown architecture {min:?} in the profile (turing, ampere, ada, hopper, blackwell, ...)");
        return r;
    };
    let known: Vec<_> = facts
        .gpus
        .iter()
        .filter(|x| x.arch != Arch::Unknown)
        .collect();
    let (actual, ok) = if facts.gpus.is_empty() {
        (None, (facts.observed).then_some(false))
    } else if known.is_empty() {
        (None, None)
    } else {
        let oldest = known.iter().map(|x| x.arch).min().unwrap_or(Arch::Unknown);
        (Some(oldest.name().to_string()), Some(oldest >= min_arch))
    };
    result("gpu", wanted, actual, ok, severity, reason)
}

/// The gate before plan/apply: every failed hard requirement at once (as a
/// refusal, unless `force`), and warnings for the rest.
/// PROFILES: as the user named them, for the `doctor` it suggests.
pub fn gate(
    results: &[ReqResult],
    force: bool,
    profiles: &[String],
) -> Result<Vec<String>, String> {
    let blocking: Vec<&ReqResult> = results.iter().filter(|r| r.blocks()).collect();
    let mut warnings: Vec<String> = results
        .iter()
        .filter(|r| r.status == Status::Failed && !r.blocks())
        .map(|r| format!("requirement: {}", r.message))
        .collect();
    // What cannot be read here (an image root has no running driver or
    // tools) is one line, not one warning each.
    let unknown: Vec<String> = results
        .iter()
        .filter(|r| r.status == Status::Unknown)
        .map(|r| format!("{} {}", r.what, r.wanted))
        .collect();
    if !unknown.is_empty() {
        warnings.push(format!(
            "requirements not checked (cannot be determined on this root): {}",
            unknown.join(", ")
        ));
    }
    if !blocking.is_empty() {
        if !force {
            let list: Vec<String> = blocking
                .iter()
                .map(|r| format!("  - {}", r.message))
                .collect();
            return Err(format!(
                "this host does not meet the profile's requirements:\n{}\nrun {} for causes and fixes, or pass --force to go ahead anyway (nothing was changed)",
                list.join("\n"),
                crate::suggest::Suggest::new(crate::names::DOCTOR)
                    .profiles(profiles)
                    .shown(&crate::suggest::Given::none())
            ));
        }
        for r in blocking {
            warnings.push(format!("requirement (forced): {}", r.message));
        }
    }
    Ok(warnings)
}
