//! `boot:` on a host whose kernel command line is set outside it (a VM booted
//! directly by its hypervisor, PXE, a container): nothing on the host can be
//! edited, so the boot part becomes a report of what is wanted and where it
//! must be set, checked against the running command line when it is known.
//! Pure: a function of the facts and the profile's boot wants.

use crate::facts::boot_shape::{CmdlineHome, Starter};
use crate::facts::Facts;
use gdrprov_boot::desired::{self, BootWants, IommuIntent};
use gdrprov_boot::line::BootLine;
use serde::Serialize;

/// The boot part of the profiles on such a host (plan JSON: `boot`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BootElsewhere {
    /// Always false: gdrprov cannot set this host's kernel command line.
    pub manageable: bool,
    /// What starts the kernel.
    pub starter: Starter,
    /// Where the arguments must be set instead.
    pub set_in: &'static str,
    /// Why gdrprov thinks so.
    pub evidence: Vec<String>,
    /// Every argument the profiles want on the command line.
    pub wanted: Vec<String>,
    /// Wanted arguments the running command line lacks (`None`: the running
    /// command line is not known, as in an image root).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missing: Option<Vec<String>>,
    /// Arguments on the running command line that the profiles forbid.
    pub unwanted: Vec<String>,
    /// The running command line already is as wanted (`None`: not known).
    pub satisfied: Option<bool>,
}

impl BootElsewhere {
    /// One line for people: what to set, and where.
    pub fn summary(&self) -> String {
        let mut what = Vec::new();
        match &self.missing {
            Some(m) if !m.is_empty() => what.push(format!("add {}", m.join(" "))),
            None if !self.wanted.is_empty() => {
                what.push(format!("make sure of {}", self.wanted.join(" ")))
            }
            _ => {}
        }
        if !self.unwanted.is_empty() {
            what.push(format!("remove {}", self.unwanted.join(" ")));
        }
        if what.is_empty() {
            return format!(
                "the kernel command line is set outside this host and already has what the profile wants ({})",
                list_or_none(&self.wanted)
            );
        }
        format!(
            "the kernel command line is not manageable on this host: {} in {}",
            what.join(" and "),
            self.set_in
        )
    }
}

fn list_or_none(v: &[String]) -> String {
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(" ")
    }
}

/// The boot part on a host whose command line is set elsewhere: `Ok(None)`
/// when the command line is on the host (the boot loader modules plan it)
/// or the profiles want nothing of it. Refuses what needs a boot loader on
/// the host: extra boot entries and the trial boot.
pub fn plan(
    facts: &Facts,
    wants: &BootWants,
    entries: &[String],
    trial: bool,
) -> Result<Option<BootElsewhere>, String> {
    let CmdlineHome::Elsewhere {
        starter, evidence, ..
    } = &facts.boot.cmdline_home
    else {
        return Ok(None);
    };
    let why = format!(
        "this host's kernel command line is set outside it ({}), so gdrprov has no boot loader to add an entry to",
        evidence.join("; ")
    );
    if trial {
        return Err(format!(
            "--trial boots a one-shot boot loader entry, but {why}; set the arguments in {} and apply without --trial",
            starter.where_to_set()
        ));
    }
    if !entries.is_empty() {
        return Err(format!(
            "boot.entry ({}): {why}; drop boot.entry from the profile on this host",
            entries.join(", ")
        ));
    }
    if wants.iommu == IommuIntent::Unmanaged && wants.present.is_empty() && wants.absent.is_empty()
    {
        return Ok(None);
    }
    // Judged only (gdrprov writes nothing here): on its kernel's part, as
    // every boot line (`gdrprov_boot::line`).
    let running = facts.proc_cmdline.as_deref().map(BootLine::parse);
    let current = running.clone().unwrap_or_default();
    let args =
        desired::plan_args(&current, wants, &[], running.as_ref()).map_err(|e| e.to_string())?;
    let (missing, unwanted, satisfied) = match running {
        Some(_) => (
            Some(args.add.clone()),
            args.remove.clone(),
            Some(args.is_noop()),
        ),
        None => (None, Vec::new(), None),
    };
    Ok(Some(BootElsewhere {
        manageable: false,
        starter: *starter,
        set_in: starter.where_to_set(),
        evidence: evidence.clone(),
        wanted: args.wanted,
        missing,
        unwanted,
        satisfied,
    }))
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use crate::host::Host;
    use gdrprov_boot::desired::CpuVendor;

    fn facts(cmdline: Option<&str>) -> (tempfile::TempDir, Facts) {
        let dir = tempfile::tempdir().unwrap();
        if let Some(c) = cmdline {
            std::fs::create_dir_all(dir.path().join("proc")).unwrap();
            std::fs::write(dir.path().join("proc/cmdline"), format!("{c}\n")).unwrap();
        }
        let host = Host::open(dir.path(), true).unwrap();
        let f = Facts::gather(&host, None);
        (dir, f)
    }

    fn pt() -> BootWants {
        BootWants {
            iommu: IommuIntent::Passthrough,
            vendor: CpuVendor::Amd,
            present: Vec::new(),
            absent: Vec::new(),
        }
    }

    #[test]
    fn running_command_line_decides_what_is_missing() {
        let (_d, f) = facts(Some("console=ttyS0 iommu=off"));
        let b = plan(&f, &pt(), &[], false).unwrap().unwrap();
        assert!(!b.manageable);
        assert_eq!(b.wanted, vec!["iommu=pt"]);
        assert_eq!(b.missing, Some(vec!["iommu=pt".to_string()]));
        assert_eq!(b.unwanted, vec!["iommu=off"]);
        assert_eq!(b.satisfied, Some(false));
        assert!(b.summary().contains("add iommu=pt and remove iommu=off"));

        let (_d, f) = facts(Some("console=ttyS0 iommu=pt"));
        let b = plan(&f, &pt(), &[], false).unwrap().unwrap();
        assert_eq!(b.satisfied, Some(true));
        assert!(b.summary().contains("already has"));
    }

    #[test]
    fn image_root_does_not_know_the_running_line() {
        let (_d, f) = facts(None);
        let b = plan(&f, &pt(), &[], false).unwrap().unwrap();
        assert_eq!((b.missing, b.satisfied), (None, None));
    }

    #[test]
    fn entries_and_trial_are_refused() {
        let (_d, f) = facts(Some("console=ttyS0"));
        let e = plan(&f, &pt(), &["gds".into()], false).unwrap_err();
        assert!(e.contains("boot.entry (gds)"), "{e}");
        let e = plan(&f, &pt(), &[], true).unwrap_err();
        assert!(e.contains("--trial"), "{e}");
    }

    #[test]
    fn host_with_grub_is_not_this_modules_business() {
        let (d, _) = facts(None);
        std::fs::create_dir_all(d.path().join("etc/default")).unwrap();
        std::fs::write(
            d.path().join("etc/default/grub"),
            "GRUB_CMDLINE_LINUX=\"\"\n",
        )
        .unwrap();
        let f = Facts::gather(&Host::open(d.path(), true).unwrap(), None);
        assert_eq!(plan(&f, &pt(), &[], false).unwrap(), None);
    }
}
