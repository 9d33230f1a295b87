//! `gdrprov doctor`: which profile fits this host and what stands in the way,
//! as findings with severity, evidence, cause and fix.

pub mod fabric_rules;
pub mod gds_rules;
pub mod health_rules;
pub mod kernlog_rules;
pub mod modes;
pub mod nccl_log;
pub mod nccl_rules;
pub mod pcie_path;
mod roce;
mod rules;
pub mod signing;
pub mod tables;

use crate::checks::requirements::{self, ReqResult, Status};
use crate::error::Result;
use crate::facts::iommu::IommuState;
use crate::facts::nvidia::Flavor;
use crate::facts::ofed::OfedKindFact;
use crate::facts::Facts;
use crate::host::Host;
use crate::names;
use crate::profile::model::{DriverFlavor, IommuMode, ProfileDoc, Severity};
use crate::profile::Composed;
use crate::suggest::{Given, Suggest};
use crate::versions;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sev {
    Error,
    Warn,
    Info,
}

#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub id: String,
    pub severity: Sev,
    pub title: String,
    pub evidence: String,
    pub cause: String,
    pub fix: String,
}

impl Finding {
    pub fn new(
        id: &str,
        severity: Sev,
        title: impl Into<String>,
        evidence: impl Into<String>,
        cause: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            id: id.into(),
            severity,
            title: title.into(),
            evidence: evidence.into(),
            cause: cause.into(),
            fix: fix.into(),
        }
    }
}

/// `gdrprov apply rdma-dmabuf`, between backticks.
fn dmabuf() -> String {
    Suggest::new(names::APPLY)
        .arg("rdma-dmabuf")
        .shown(&Given::none())
}

pub(crate) fn peermem_einval(evidence: String) -> Finding {
    Finding::new(
        "peermem-invalid-argument",
        Sev::Error,
        "nvidia_peermem does not load: `modprobe nvidia_peermem` gives \"Invalid argument\"",
        evidence,
        "the NVIDIA driver was built before MLNX_OFED/DOCA-OFED was installed, so nvidia_peermem lacks OFED's peer-memory symbols (ib_register_peer_memory_client)",
        format!("reinstall the NVIDIA driver (or rebuild its DKMS modules) after OFED, then `modprobe nvidia_peermem`; or use dma-buf instead ({}, open driver, kernel >= 5.12)", dmabuf()),
    )
}

/// A peer-memory module (`nvidia_peermem`, EFA's `efa_nv_peermem`) refused
/// by the kernel because it was built against another `ib_core` than the one
/// loaded: "disagrees about version of symbol ib_register_peer_memory_client"
/// or "Unknown symbol ... (err -22)".
pub(crate) fn peermem_symbol_mismatch(kernel_log: &[String]) -> Option<Finding> {
    let rule = kernlog_rules::RULES
        .iter()
        .find(|m| m.id == "peermem-symbol-mismatch")?;
    let (module, line) = kernel_log.iter().find_map(|l| {
        let module = kernlog_rules::PEERMEM_MODULES
            .iter()
            .find(|m| l.contains(&format!("{m}: ")))?;
        // `Unknown symbol` alone is a mismatch at err -22 (the symbol is
        // there with another version) or from nv_peer_mem; nvidia_peermem's
        // other errors are the driver built before OFED (`peermem_einval`).
        let mismatch = l.contains("disagrees about version")
            || l.contains("err -22")
            || *module == "nv_peer_mem";
        (rule.matches(l) && mismatch).then_some((*module, l))
    })?;
    let symbol = line
        .split("symbol ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("ib_register_peer_memory_client");
    let stack = if symbol.starts_with("nvidia_p2p") {
        "NVIDIA driver"
    } else {
        "ib_core"
    };
    let rebuild = if module == "nv_peer_mem" {
        "reinstall the nvidia-peer-memory package (or `dkms autoinstall` where DKMS builds it), then `modprobe nv_peer_mem`; with driver 470 or newer nvidia_peermem replaces it (`gdrprov apply legacy-peermem`)".to_string()
    } else {
        format!("reinstall the driver, or where DKMS builds it `dkms autoinstall` (or `dkms install nvidia/VERSION -k $(uname -r)`), then `modprobe {module}`")
    };
    let mut f = rule.finding(format!("kernel log: {}", line.trim()));
    f.title =
        format!("{module} was built against another {stack} than the one loaded (symbol {symbol})");
    f.cause = format!("{module} was compiled against the RDMA stack and NVIDIA driver present when it was built; MLNX_OFED/DOCA-OFED (or an inbox rdma-core kernel update, or a new driver) installed since replaced the {stack}, whose {symbol} no longer matches, so the kernel refuses the module");
    f.fix = format!("rebuild the module after OFED: {rebuild}; or move to dma-buf, which needs no peer-memory module ({}: open driver, kernel >= 5.12)", dmabuf());
    Some(f)
}

/// What a profile is after, read from its settings.
#[derive(Debug, Clone, Default)]
pub struct Intent {
    /// The GDS mode wanted (`gds.mode`) and the mounts to check (`gds.mounts`).
    pub gds: Option<crate::profile::gds::GdsWant>,
    pub gds_mounts: Vec<String>,
    pub dmabuf: bool,
    pub peermem: bool,
    pub erdma: bool,
    pub rdma: bool,
    pub iommu: Option<IommuMode>,
    /// What the profile's `pcie:` wishes of the path (`pcie_path`).
    pub pcie: pcie_path::Wish,
}

impl Intent {
    pub fn of(doc: &ProfileDoc) -> Intent {
        let present = |m: &str| doc.modules.present.iter().any(|x| x == m);
        let dmabuf = doc.requires.nvidia_driver.as_ref().and_then(|d| d.flavor)
            == Some(DriverFlavor::Open)
            || doc
                .vars
                .get("nccl-dmabuf-enable")
                .is_some_and(|v| v == 1 || v == "1");
        let peermem = present("nvidia_peermem") || present("nv_peer_mem");
        let erdma = present("erdma") || doc.requires.erdma.is_some();
        Intent {
            gds: doc.gds.mode,
            gds_mounts: doc.gds.mounts.clone(),
            dmabuf,
            peermem,
            erdma,
            rdma: dmabuf || peermem || erdma || doc.requires.ofed.is_some(),
            iommu: doc.boot.iommu,
            pcie: pcie_path::Wish::of(
                &doc.pcie,
                dmabuf || peermem || erdma || doc.requires.ofed.is_some(),
            ),
        }
    }

    /// Without a profile: a GPUDirect RDMA host in general.
    pub fn general() -> Intent {
        Intent {
            rdma: true,
            pcie: pcie_path::Wish::of(&crate::profile::Pcie::default(), true),
            ..Intent::default()
        }
    }
}

fn req_finding(r: &ReqResult, facts: &Facts) -> Finding {
    let sev = if r.severity == Severity::Error {
        Sev::Error
    } else {
        Sev::Warn
    };
    if let Some(m) = r.what.strip_prefix("kernel module ") {
        return Finding::new(
            &format!("requirement-module-{m}"),
            sev,
            format!("kernel module {m} is missing: the profile loads it"),
            r.message.clone(),
            format!("the profile's `modules.present` loads `{m}`, and the module is not installed for the kernel it will boot ({}); `plan` and `apply` refuse", r.wanted.trim_start_matches("present for ")),
            r.reason.clone().unwrap_or_default(),
        );
    }
    let (cause, fix): (String, String) = match r.what.as_str() {
        "kernel" => (
            "the kernel is older than the profile needs".into(),
            format!("install and boot a kernel {} (Ubuntu 20.04: the HWE kernel; RHEL 8: move to RHEL 9); for dma-buf the alternative is the legacy-peermem profile", r.wanted),
        ),
        "nvidia-driver flavor" => (
            "the proprietary NVIDIA kernel module cannot export GPU memory as dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0); only the open kernel modules can".into(),
            format!(
                "install the open kernel modules of the same branch (Ubuntu: `apt install nvidia-driver-{0}-open` or `nvidia-dkms-{0}-open`; RHEL: `dnf module install nvidia-driver:{0}-open`) and reboot; or use legacy-peermem",
                facts.nvidia_driver.major().map(|m| m.to_string()).unwrap_or("<branch>".into())
            ),
        ),
        "nvidia-driver" => (
            "the driver branch is older than the profile needs".into(),
            "install a newer NVIDIA driver branch (the open kernel modules for dma-buf)".into(),
        ),
        "cuda" => (
            "the CUDA driver API this driver provides is too old: cuMemGetHandleForAddressRange with CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD needs CUDA 11.7 (driver 515)".into(),
            "upgrade the NVIDIA driver to a branch that provides the CUDA version required".into(),
        ),
        "gpu" => (
            "GPUs older than Turing cannot export memory as dma-buf".into(),
            "use legacy-peermem on this GPU".into(),
        ),
        "ofed kind" | "ofed" => (
            "nvidia_peermem is built against MLNX_OFED/DOCA-OFED's peer-memory API; the inbox rdma-core has none".into(),
            "install DOCA-OFED, then reinstall the NVIDIA driver so nvidia_peermem is built against it; or use rdma-dmabuf, which needs no OFED".into(),
        ),
        "nccl" => (
            "NCCL older than 2.23.4 detects peer memory only through /sys/kernel/mm/memory_peers/nv_mem/version, not /sys/module/nvidia_peermem, and silently disables GPUDirect RDMA".into(),
            "upgrade NCCL to 2.23.4 or newer (or use dma-buf: NCCL >= 2.13 with NCCL_DMABUF_ENABLE=1)".into(),
        ),
        "perftest" => (
            "perftest older than 6.26 (or built without CUDA) has no --use_cuda_dmabuf".into(),
            "install perftest >= 6.26 built with CUDA (DOCA-OFED's, or build from github.com/linux-rdma/perftest with CUDA_H_PATH)".into(),
        ),
        "gdrcopy" => (
            "gdrcopy's kernel module gdrdrv (which UCX and NVSHMEM use to map GPU memory to the CPU) is not installed for this kernel, or older than the profile needs".into(),
            "build and install gdrcopy (github.com/NVIDIA/gdrcopy: its packages or `make && sudo ./insmod.sh`, or the DKMS package gdrdrv-dkms), then `modprobe gdrdrv`; under Secure Boot sign it (see the signing findings)".into(),
        ),
        "erdma" => (
            "the eRDMA driver package is missing".into(),
            "install the eRDMA driver (Alibaba Cloud: the erdma-installer; check with `eadm ver`)".into(),
        ),
        _ => (String::new(), String::new()),
    };
    let cause = match &r.reason {
        Some(reason) if !cause.is_empty() => format!("{reason}; {cause}"),
        Some(reason) => reason.clone(),
        None => cause,
    };
    Finding::new(
        &format!("requirement-{}", r.what.replace(' ', "-")),
        sev,
        format!("requirement not met: {} {}", r.what, r.wanted),
        format!("{} is {}", r.what, r.actual.as_deref().unwrap_or("absent")),
        cause,
        fix,
    )
}

/// Every finding for the facts and a profile's intent (and requirements).
/// PROFILES: what its fixes name, as the user named them.
pub fn diagnose(
    facts: &Facts,
    intent: Intent,
    reqs: &[ReqResult],
    profiles: &[String],
) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let sure = facts.observed;
    // Without any GPU, `no-gpu` says it all: driver, CUDA and GPU requirements add nothing.
    let no_gpu = sure && facts.gpus.is_empty();
    for r in reqs.iter().filter(|r| r.status == Status::Failed) {
        if no_gpu && (r.what.starts_with("nvidia-driver") || r.what == "gpu" || r.what == "cuda") {
            continue;
        }
        out.push(req_finding(r, facts));
    }
    let cx = rules::Cx {
        facts,
        intent: &intent,
        reqs,
        sure,
        no_gpu,
        profiles,
    };
    // In this order: findings of one severity keep it.
    for rule in [
        rules::driver_and_kernel,
        rules::cuda,
        rules::peer_memory,
        rules::iommu,
        rules::rdma_devices,
        rules::erdma,
        rules::pcie,
        rules::gpu_pair_acs,
        rules::perftest,
        rules::memlock,
        rules::rdma_userspace,
        gds_rules::gds,
    ] {
        rule(&cx, &mut out);
    }
    out.extend(kernlog_rules::findings(facts));
    out.sort_by_key(|f| f.severity);
    out
}

#[derive(Debug, Serialize)]
pub struct ProfileFit {
    pub profile: String,
    pub blockers: usize,
    pub warnings: usize,
    pub fits: bool,
    /// The ids of the findings that block it.
    pub blocked_by: Vec<String>,
    /// Its hard requirements this root cannot tell (an image root: no
    /// driver, GPU or NIC to read): it fits only as far as the root shows.
    pub undetermined: usize,
    /// What it is for, which ranks it for the best fit: `cloud` (an
    /// eRDMA or EFA profile whose device is there), `rdma` (GPUDirect
    /// RDMA), `other` (GPUDirect Storage's IOMMU off, ...).
    pub purpose: Purpose,
}

/// What a profile is for, best first: the best fit is the first profile
/// that fits by purpose, then fewest warnings, then the built-in order. A
/// profile that asks less (GPUDirect Storage's IOMMU off) is never best for
/// that alone: on a GPUDirect RDMA host an RDMA profile that fits is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Purpose {
    /// A cloud's own RDMA profile (eRDMA, EFA) on that cloud: its device's requirement is met.
    Cloud,
    /// GPUDirect RDMA (dma-buf, peer memory, an RDMA stack required).
    Rdma,
    /// Anything else (GPUDirect Storage).
    Other,
}

impl Purpose {
    fn of(doc: &ProfileDoc, reqs: &[ReqResult]) -> Purpose {
        let cloud_device = reqs
            .iter()
            .any(|r| matches!(r.what.as_str(), "erdma" | "efa") && r.status == Status::Ok);
        if cloud_device {
            Purpose::Cloud
        } else if Intent::of(doc).rdma || doc.requires.efa.is_some() {
            Purpose::Rdma
        } else {
            Purpose::Other
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub gdrprov: &'static str,
    pub command: &'static str,
    pub root: String,
    pub profile: Option<String>,
    pub requirements: Vec<ReqResult>,
    pub findings: Vec<Finding>,
    /// Without a profile: how each built-in profile fits.
    pub fits: Vec<ProfileFit>,
    pub best_fit: Option<String>,
    pub blocked: bool,
}

/// One profile against the host: its requirements, evaluated as `plan` and
/// `verify` evaluate them (a requirement that makes `plan` refuse is an
/// error finding here), and every finding, the host-wide health findings
/// included.
/// NAMED: the profiles as the user named them (for the fixes).
pub fn evaluate(
    host: &Host,
    facts: &Facts,
    desired: &Composed,
    named: &[String],
) -> (Vec<ReqResult>, Vec<Finding>) {
    let reqs = requirements::for_profile(host, facts, desired);
    let mut findings = diagnose(facts, Intent::of(&desired.doc), &reqs, named);
    findings.extend(health_rules::findings(facts));
    findings.extend(roce::findings(facts, Some(&desired.doc.network)));
    findings.extend(signing::findings(facts, Some(&desired.doc.modules.present)));
    findings.sort_by_key(|f| f.severity);
    (reqs, findings)
}

/// How a profile fits, from its findings and requirements.
fn fit(profile: &str, purpose: Purpose, reqs: &[ReqResult], findings: &[Finding]) -> ProfileFit {
    let blocked_by: Vec<String> = findings
        .iter()
        .filter(|x| x.severity == Sev::Error)
        .map(|x| x.id.clone())
        .collect();
    ProfileFit {
        profile: profile.to_string(),
        blockers: blocked_by.len(),
        warnings: findings.iter().filter(|x| x.severity == Sev::Warn).count(),
        fits: blocked_by.is_empty(),
        blocked_by,
        undetermined: reqs
            .iter()
            .filter(|r| r.status == Status::Unknown && r.severity == Severity::Error)
            .count(),
        purpose,
    }
}

/// The best fit: of the profiles that fit, the first by purpose (a cloud's
/// own on its cloud, then GPUDirect RDMA, then the rest), then fewest
/// warnings, then the built-in order (`rdma-dmabuf`, the recommended path,
/// first).
fn best_fit(fits: &[ProfileFit]) -> Option<&ProfileFit> {
    fits.iter()
        .enumerate()
        .filter(|(_, f)| f.fits)
        .min_by_key(|(i, f)| (f.purpose, f.warnings, *i))
        .map(|(_, f)| f)
}

/// A generation of the journal left unfinished (killed, a power loss, a
/// failed restore): files may be half-changed; `gdrprov recover` is the fix.
fn unfinished_run(host: &Host) -> Option<Finding> {
    let store = crate::journal::StateStore::new(host);
    let notice = crate::apply::notice(host, &store)?;
    Some(Finding::new(
        "journal-unfinished",
        Sev::Error,
        "a gdrprov run was not finished",
        notice,
        "a gdrprov apply, rollback or commit was killed, lost power, or failed and could not put its files back",
        format!("`{}`", crate::apply::recover_command(host)),
    ))
}

/// Other files asking to load a module the profile blocks: each load fails
/// at every boot (modprobe.d's `install NAME /bin/false`).
fn load_requests(host: &Host, c: &Composed) -> Vec<Finding> {
    crate::facts::loadreq::scan(host, &c.doc.modules.absent)
        .into_iter()
        .map(|r| {
            let fix = if r.editable {
                "set `modules.remove-load-requests: true` in the profile and apply (the line is commented out, and rollback puts it back), or remove the line".to_string()
            } else if r.kind == "unit" {
                "disable the unit (`services.disabled`) or override it".to_string()
            } else {
                "hide the package's file with an empty file of the same name in /etc/modules-load.d, or remove the package".to_string()
            };
            Finding::new(
                "load-request-blocked",
                Sev::Warn,
                format!("a file asks to load {}, which the profile blocks", r.module),
                format!("{}:{}: {}", host.display(&r.file), r.line, r.text.trim()),
                format!(
                    "modules.absent blocks {} (modprobe.d `install {} /bin/false`), so this load fails at every boot",
                    r.module, r.module
                ),
                fix,
            )
        })
        .collect()
}

/// The doctor's report on HOST: one profile's requirements and findings
/// (COMPOSED: the profiles given, composed, and as the user named them),
/// or how each built-in profile fits; plus what an NCCL log
/// (its text and name) shows.
pub fn report(
    host: &Host,
    facts: &Facts,
    composed: Option<(&Composed, &[String])>,
    nccl: Option<(&str, &str)>,
) -> Result<Report> {
    let mut fits = Vec::new();
    let (requirements, mut findings) = match composed {
        Some((c, named)) => evaluate(host, facts, c, named),
        None => {
            for name in crate::profile::builtin::names() {
                let p = crate::profile::load_profiles(&[name.to_string()])?;
                let named = [name.to_string()];
                let (reqs, found) = evaluate(host, facts, &p, &named);
                fits.push(fit(name, Purpose::of(&p.doc, &reqs), &reqs, &found));
            }
            // The host-wide findings' fixes name the best fit.
            let best: Vec<String> = best_fit(&fits)
                .map(|f| f.profile.clone())
                .into_iter()
                .collect();
            let mut f = diagnose(facts, Intent::general(), &[], &best);
            f.extend(health_rules::findings(facts));
            f.extend(roce::findings(facts, None));
            f.extend(signing::findings(facts, None));
            (Vec::new(), f)
        }
    };
    if let Some((text, name)) = nccl {
        findings.extend(nccl_log::findings(text, name, facts));
    }
    findings.extend(unfinished_run(host));
    if let Some((c, _)) = composed {
        findings.extend(load_requests(host, c));
    }
    findings.sort_by_key(|f| f.severity);
    let best_fit = best_fit(&fits).map(|f| f.profile.clone());
    // With a profile: a finding of severity error stands in its way. Without:
    // no built-in profile fits (each one's blockers are counted with the
    // host-wide findings), so the verdict agrees with the fits shown.
    let composed = composed.map(|(c, _)| c);
    let blocked = match composed {
        Some(_) => findings.iter().any(|f| f.severity == Sev::Error),
        None => best_fit.is_none(),
    };
    Ok(Report {
        gdrprov: env!("CARGO_PKG_VERSION"),
        command: names::DOCTOR,
        root: host.root().display().to_string(),
        profile: composed.map(|c| c.names.join(" + ")),
        requirements,
        findings,
        fits,
        best_fit,
        blocked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::OsFamily;

    fn findings(log: &[&str]) -> Vec<Finding> {
        let mut facts = Facts::blank(OsFamily::Debian);
        facts.kernel_log = log.iter().map(|l| l.to_string()).collect();
        let intent = Intent {
            peermem: true,
            rdma: true,
            ..Intent::default()
        };
        diagnose(&facts, intent, &[], &[])
    }

    #[test]
    fn the_peermem_symbol_mismatch_is_named_with_the_fix() {
        let f = findings(&[
            "[   65.412027] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client",
            "[   65.412031] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)",
        ]);
        let m = f
            .iter()
            .find(|f| f.id == "peermem-symbol-mismatch")
            .unwrap_or_else(|| panic!("{f:?}"));
        assert_eq!(m.severity, Sev::Error);
        assert!(
            m.title.contains("nvidia_peermem")
                && m.title.contains("ib_register_peer_memory_client")
        );
        assert!(m.evidence.contains("disagrees about version"));
        assert!(m.fix.contains("dkms") && m.fix.contains("dma-buf"));
        assert!(!f.iter().any(|f| f.id == "peermem-invalid-argument"));
    }

    #[test]
    fn err_22_alone_and_efa_peermem_are_recognised() {
        let f = findings(&[
            "[ 9.1] efa_nv_peermem: Unknown symbol ib_register_peer_memory_client (err -22)",
        ]);
        let m = f
            .iter()
            .find(|f| f.id == "peermem-symbol-mismatch")
            .unwrap();
        assert!(m.title.starts_with("efa_nv_peermem"));
        // Another failure of the module is not a symbol mismatch.
        let f = findings(&["[ 9.1] nvidia_peermem: module verification failed: signature and/or required key missing"]);
        assert!(!f.iter().any(|f| f.id == "peermem-symbol-mismatch"));
    }
}
