//! Desired kernel arguments: from a profile's IOMMU intent, the CPU vendor and
//! explicit `present`/`absent` lists to the arguments to add and to remove,
//! what gdrprov owns afterwards, and how the running command line differs.
//!
//! Ownership: gdrprov removes an argument it added once no profile wants it
//! any more, and never removes an argument the user set unless the profile
//! forbids it (a conflict, or an `absent` entry).

use std::fmt;

use thiserror::Error;

use super::cmdline::{self, ArgError};
use super::line::BootLine;

/// What a profile says about the IOMMU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IommuIntent {
    /// `iommu=pt`, plus `intel_iommu=on` on Intel (GPUDirect RDMA).
    Passthrough,
    /// `iommu=off` (GPUDirect Storage).
    Off,
    /// IOMMU translating: `intel_iommu=on` on Intel, no off/pt anywhere.
    On,
    /// gdrprov does not touch IOMMU arguments.
    Unmanaged,
}

/// The CPU vendor of the host the command line is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuVendor {
    /// GenuineIntel.
    Intel,
    /// AuthenticAMD.
    Amd,
    /// Another vendor; treated like AMD (no `intel_iommu=`).
    Other,
    /// Not known (an image root): treated like Intel, since `intel_iommu=on`
    /// is harmless elsewhere and needed on Intel.
    Unknown,
    /// An arm64 CPU (NVIDIA Grace): the IOMMU is an SMMU, set with
    /// `iommu.passthrough=` (`iommu=pt`, `intel_iommu`, `amd_iommu` are x86-only).
    Arm,
}

/// The boot part of a profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootWants {
    /// The IOMMU intent.
    pub iommu: IommuIntent,
    /// The CPU vendor.
    pub vendor: CpuVendor,
    /// Arguments that must be present (`key=value` or bare `key`).
    pub present: Vec<String>,
    /// Arguments that must be absent: `key=value` matches that setting only,
    /// a bare `key` matches the key with any value or none.
    pub absent: Vec<String>,
}

/// How the running command line differs from the wanted one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmdlineDiff {
    /// Wanted but not on the running command line.
    Missing(String),
    /// On the running command line but to be removed.
    Unwanted(String),
}

impl fmt::Display for CmdlineDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdlineDiff::Missing(a) => write!(f, "{a} is not on the running kernel command line"),
            CmdlineDiff::Unwanted(a) => {
                write!(f, "{a} is on the running kernel command line but must go")
            }
        }
    }
}

/// The planned change to the kernel arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgPlan {
    /// Every argument the profile wants, in order (IOMMU first).
    pub wanted: Vec<String>,
    /// Arguments to append, in order.
    pub add: Vec<String>,
    /// Arguments to remove: exact current arguments, every occurrence.
    pub remove: Vec<String>,
    /// The command line after the change: the kernel's part changed,
    /// `--` and init's part (if any) as they were.
    pub result: Vec<String>,
    /// The arguments gdrprov owns after the change (record these).
    pub owned: Vec<String>,
    /// How the running command line differs; `None` when not given.
    pub reboot: Option<Vec<CmdlineDiff>>,
}

impl ArgPlan {
    /// Nothing to change in the boot configuration.
    pub fn is_noop(&self) -> bool {
        self.add.is_empty() && self.remove.is_empty()
    }

    /// The running kernel does not have the wanted command line yet.
    pub fn reboot_needed(&self) -> bool {
        self.reboot.as_ref().is_some_and(|d| !d.is_empty())
    }
}

/// A profile that cannot be satisfied or names a bad argument.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DesiredError {
    /// An argument gdrprov will not write.
    #[error("boot profile: {0}")]
    BadArg(#[from] ArgError),
    /// One wanted argument is forbidden by another rule.
    #[error("boot profile: {wanted} is wanted but {rule}; remove one of the two from the profile")]
    Conflict {
        /// The wanted argument.
        wanted: String,
        /// The rule that forbids it, for people.
        rule: String,
    },
}

/// Keys whose value is a comma-separated option list, each option applied in
/// turn (`intel_iommu=on,sm_on`).
const OPTION_LIST_KEYS: [&str; 3] = ["iommu", "intel_iommu", "amd_iommu"];

#[derive(Debug, Clone, PartialEq, Eq)]
struct Want {
    arg: String,
    /// Satisfied by any argument of the key whose option list holds the value.
    by_option: bool,
    why: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Forbid {
    /// This exact setting.
    Exact(String),
    /// The key with any value or none.
    Key(String),
    /// The key with this option in its option list.
    Option {
        key: &'static str,
        option: &'static str,
    },
    /// The key of `arg` with any other value (a wanted `key=value`).
    OtherValue(String),
}

impl Forbid {
    fn matches(&self, arg: &str) -> bool {
        match self {
            Forbid::Exact(x) => cmdline::same_arg(arg, x),
            Forbid::Key(k) => cmdline::normalized_key(arg) == *k,
            Forbid::Option { key, option } => has_option(arg, key, option),
            Forbid::OtherValue(x) => cmdline::same_key(arg, x) && !cmdline::same_arg(arg, x),
        }
    }

    fn describe(&self, why: &str) -> String {
        match self {
            Forbid::Exact(x) => format!("{why} forbids {x}"),
            Forbid::Key(k) => format!("{why} forbids {k} with any value"),
            Forbid::Option { key, option } => format!("{why} forbids {key}={option}"),
            Forbid::OtherValue(x) => format!("{why} wants {x}, which replaces other values"),
        }
    }
}

fn has_option(arg: &str, key: &str, option: &str) -> bool {
    cmdline::normalized_key(arg) == key
        && cmdline::value(arg).is_some_and(|v| v.split(',').any(|o| o == option))
}

impl Want {
    fn satisfied_by(&self, args: &[String]) -> bool {
        if self.by_option {
            let key = cmdline::normalized_key(&self.arg);
            let opt = cmdline::value(&self.arg).unwrap_or_default();
            args.iter().any(|a| has_option(a, &key, opt))
        } else {
            args.iter().any(|a| cmdline::same_arg(a, &self.arg))
        }
    }
}

fn opt(key: &'static str, option: &'static str) -> Forbid {
    Forbid::Option { key, option }
}

fn iommu_rules(intent: IommuIntent, vendor: CpuVendor) -> (Vec<&'static str>, Vec<Forbid>) {
    if vendor == CpuVendor::Arm {
        return arm_iommu_rules(intent);
    }
    let intel = matches!(vendor, CpuVendor::Intel | CpuVendor::Unknown);
    match intent {
        IommuIntent::Passthrough => (
            if intel {
                vec!["iommu=pt", "intel_iommu=on"]
            } else {
                vec!["iommu=pt"]
            },
            vec![
                opt("iommu", "off"),
                opt("iommu", "nopt"),
                opt("intel_iommu", "off"),
                opt("amd_iommu", "off"),
                Forbid::Exact("iommu.passthrough=0".into()),
            ],
        ),
        IommuIntent::Off => (
            vec!["iommu=off"],
            vec![
                opt("iommu", "pt"),
                opt("intel_iommu", "on"),
                opt("amd_iommu", "on"),
                Forbid::Exact("iommu.passthrough=1".into()),
            ],
        ),
        IommuIntent::On => (
            if intel {
                vec!["intel_iommu=on"]
            } else {
                Vec::new()
            },
            vec![
                opt("iommu", "off"),
                opt("iommu", "pt"),
                opt("intel_iommu", "off"),
                opt("amd_iommu", "off"),
            ],
        ),
        IommuIntent::Unmanaged => (Vec::new(), Vec::new()),
    }
}

/// arm64 (SMMUv3): `iommu.passthrough=1` bypasses translation; `=0`
/// translates. No command-line switch turns the SMMU off, and NVIDIA's GDS
/// guide wants Grace's IOMMU enabled without passthrough: `off` (GDS) and
/// `on` are both `iommu.passthrough=0` there.
fn arm_iommu_rules(intent: IommuIntent) -> (Vec<&'static str>, Vec<Forbid>) {
    match intent {
        IommuIntent::Passthrough => (
            vec!["iommu.passthrough=1"],
            vec![Forbid::Exact("iommu.passthrough=0".into())],
        ),
        IommuIntent::Off | IommuIntent::On => (
            vec!["iommu.passthrough=0"],
            vec![Forbid::Exact("iommu.passthrough=1".into())],
        ),
        IommuIntent::Unmanaged => (Vec::new(), Vec::new()),
    }
}

/// Wanted arguments, and forbidding rules with the profile part they come from.
type Rules = (Vec<Want>, Vec<(Forbid, String)>);

/// The wants and forbids of a profile, checked against each other.
fn rules(w: &BootWants) -> Result<Rules, DesiredError> {
    cmdline::validate_args(&w.present)?;
    cmdline::validate_args(&w.absent)?;
    let intent = format!("boot.iommu: {:?}", w.iommu).to_lowercase();
    let (iommu_wants, iommu_forbids) = iommu_rules(w.iommu, w.vendor);
    let mut wants: Vec<Want> = iommu_wants
        .into_iter()
        .map(|a| Want {
            arg: a.to_owned(),
            by_option: OPTION_LIST_KEYS.contains(&cmdline::key(a)),
            why: intent.clone(),
        })
        .collect();
    let mut forbids: Vec<(Forbid, String)> = iommu_forbids
        .into_iter()
        .map(|f| (f, intent.clone()))
        .collect();
    for p in &w.present {
        if !wants.iter().any(|x| x.arg == *p) {
            wants.push(Want {
                arg: p.clone(),
                by_option: false,
                why: "boot.cmdline.present".into(),
            });
        }
        if cmdline::value(p).is_some() {
            forbids.push((Forbid::OtherValue(p.clone()), "boot.cmdline.present".into()));
        }
    }
    for a in &w.absent {
        let f = if cmdline::value(a).is_some() {
            Forbid::Exact(a.clone())
        } else {
            Forbid::Key(cmdline::normalized_key(a))
        };
        forbids.push((f, "boot.cmdline.absent".into()));
    }
    for want in &wants {
        if let Some((f, why)) = forbids.iter().find(|(f, _)| f.matches(&want.arg)) {
            return Err(DesiredError::Conflict {
                wanted: format!("{} (from {})", want.arg, want.why),
                rule: f.describe(why),
            });
        }
    }
    Ok((wants, forbids))
}

fn push_unique(v: &mut Vec<String>, s: &str) {
    if !v.iter().any(|x| x == s) {
        v.push(s.to_owned());
    }
}

/// Plan the kernel arguments: `current` is the effective command line of the
/// boot configuration, `owned` what gdrprov recorded as its own, `running`
/// the running command line when the target is the running system. Only
/// the kernel's part of each line (before `--`) is judged, removed from or
/// added to; `result` keeps `--` and init's part after the kernel's.
pub fn plan_args(
    line: &BootLine,
    wants: &BootWants,
    owned: &[String],
    running: Option<&BootLine>,
) -> Result<ArgPlan, DesiredError> {
    let (wants, forbids) = rules(wants)?;
    let current = &line.kernel;
    let is_wanted = |a: &str| wants.iter().any(|w| w.arg == a);
    let forbidden = |a: &str| forbids.iter().any(|(f, _)| f.matches(a));
    // Owned arguments no profile wants any more go, like forbidden ones.
    let released: Vec<&String> = owned.iter().filter(|o| !is_wanted(o)).collect();

    let mut remove = Vec::new();
    for a in current {
        if forbidden(a) || released.contains(&a) {
            push_unique(&mut remove, a);
        }
    }
    let mut kept: Vec<String> = current
        .iter()
        .filter(|a| !remove.contains(a))
        .cloned()
        .collect();
    let mut add = Vec::new();
    for w in &wants {
        if !w.satisfied_by(&kept) {
            push_unique(&mut add, &w.arg);
            kept.push(w.arg.clone());
        }
    }
    let mut owned_after = Vec::new();
    for o in owned.iter().chain(&add) {
        if is_wanted(o) && kept.contains(o) {
            push_unique(&mut owned_after, o);
        }
    }
    let reboot = running.map(|r| running_diff(&r.kernel, &wants, &forbidden, &released));
    let result = BootLine {
        kernel: kept,
        init: line.init.clone(),
    };
    Ok(ArgPlan {
        wanted: wants.into_iter().map(|w| w.arg).collect(),
        add,
        remove,
        result: result.args(),
        owned: owned_after,
        reboot,
    })
}

/// Plan removing everything gdrprov owns (the profile is removed): only the
/// owned arguments go, never one the user set.
pub fn release_args(
    current: &BootLine,
    owned: &[String],
    running: Option<&BootLine>,
) -> Result<ArgPlan, DesiredError> {
    let none = BootWants {
        iommu: IommuIntent::Unmanaged,
        vendor: CpuVendor::Unknown,
        present: Vec::new(),
        absent: Vec::new(),
    };
    plan_args(current, &none, owned, running)
}

fn running_diff(
    running: &[String],
    wants: &[Want],
    forbidden: &dyn Fn(&str) -> bool,
    released: &[&String],
) -> Vec<CmdlineDiff> {
    let mut diffs = Vec::new();
    for w in wants {
        if !w.satisfied_by(running) {
            diffs.push(CmdlineDiff::Missing(w.arg.clone()));
        }
    }
    for r in running {
        let d = CmdlineDiff::Unwanted(r.clone());
        if (forbidden(r) || released.contains(&r)) && !diffs.contains(&d) {
            diffs.push(d);
        }
    }
    diffs
}

/// A change of arguments for people: `add A B; remove C`, or `unchanged`.
pub fn describe_args(add: &[String], remove: &[String]) -> String {
    let mut parts = Vec::new();
    if !add.is_empty() {
        parts.push(format!("add {}", add.join(" ")));
    }
    if !remove.is_empty() {
        parts.push(format!("remove {}", remove.join(" ")));
    }
    if parts.is_empty() {
        "unchanged".into()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        cmdline::split(s)
    }

    fn wants(iommu: IommuIntent, vendor: CpuVendor) -> BootWants {
        BootWants {
            iommu,
            vendor,
            present: Vec::new(),
            absent: Vec::new(),
        }
    }

    fn plan(cur: &str, w: &BootWants, owned: &str, running: Option<&str>) -> ArgPlan {
        let r = running.map(BootLine::parse);
        match plan_args(&BootLine::parse(cur), w, &v(owned), r.as_ref()) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn passthrough_intel_adds_both() {
        let p = plan(
            "quiet splash",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "",
            None,
        );
        assert_eq!(p.add, ["iommu=pt", "intel_iommu=on"]);
        assert!(p.remove.is_empty());
        assert_eq!(p.owned, ["iommu=pt", "intel_iommu=on"]);
        assert_eq!(p.result, v("quiet splash iommu=pt intel_iommu=on"));
    }

    #[test]
    fn passthrough_amd_adds_only_iommu_pt() {
        let p = plan(
            "quiet",
            &wants(IommuIntent::Passthrough, CpuVendor::Amd),
            "",
            None,
        );
        assert_eq!(p.add, ["iommu=pt"]);
        let p = plan(
            "quiet",
            &wants(IommuIntent::Passthrough, CpuVendor::Unknown),
            "",
            None,
        );
        assert_eq!(p.add, ["iommu=pt", "intel_iommu=on"]);
    }

    #[test]
    fn passthrough_removes_conflicts() {
        let p = plan(
            "ro iommu=off intel_iommu=off amd_iommu=off quiet iommu=nopt",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "",
            None,
        );
        assert_eq!(
            p.remove,
            v("iommu=off intel_iommu=off amd_iommu=off iommu=nopt")
        );
        assert_eq!(p.add, ["iommu=pt", "intel_iommu=on"]);
        assert_eq!(p.result, v("ro quiet iommu=pt intel_iommu=on"));
    }

    #[test]
    fn off_removes_passthrough() {
        let p = plan(
            "quiet iommu=pt intel_iommu=on,igfx_off",
            &wants(IommuIntent::Off, CpuVendor::Intel),
            "iommu=pt",
            None,
        );
        assert_eq!(p.remove, v("iommu=pt intel_iommu=on,igfx_off"));
        assert_eq!(p.add, ["iommu=off"]);
        assert_eq!(p.owned, ["iommu=off"]);
    }

    #[test]
    fn on_intel_and_amd() {
        let p = plan(
            "iommu=pt",
            &wants(IommuIntent::On, CpuVendor::Intel),
            "",
            None,
        );
        assert_eq!(p.remove, ["iommu=pt"]);
        assert_eq!(p.add, ["intel_iommu=on"]);
        let p = plan(
            "amd_iommu=off",
            &wants(IommuIntent::On, CpuVendor::Amd),
            "",
            None,
        );
        assert_eq!(p.remove, ["amd_iommu=off"]);
        assert!(p.add.is_empty());
    }

    #[test]
    fn already_compliant_plans_nothing() {
        let p = plan(
            "quiet intel_iommu=on,sm_on iommu=pt",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "",
            Some("BOOT_IMAGE=/vmlinuz ro quiet intel_iommu=on,sm_on iommu=pt"),
        );
        assert!(p.is_noop(), "{p:?}");
        assert!(!p.reboot_needed());
        // The user set them: gdrprov does not own them.
        assert!(p.owned.is_empty());
        let p = plan(
            "",
            &wants(IommuIntent::Unmanaged, CpuVendor::Intel),
            "",
            None,
        );
        assert!(p.is_noop());
    }

    #[test]
    fn dash_and_underscore_are_one_key() {
        let p = plan(
            "intel-iommu=on iommu=pt",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "",
            None,
        );
        assert!(p.is_noop(), "{p:?}");
    }

    #[test]
    fn present_replaces_other_values_and_absent_matches() {
        let w = BootWants {
            iommu: IommuIntent::Unmanaged,
            vendor: CpuVendor::Amd,
            present: v("pci=realloc=off hugepages=64"),
            absent: v("acpi_osi nouveau.modeset=0"),
        };
        let p = plan(
            r#"hugepages=16 acpi_osi=Linux acpi_osi="Windows 2020" nouveau.modeset=1 nouveau.modeset=0 acpi_osi"#,
            &w,
            "",
            None,
        );
        assert_eq!(
            p.remove,
            v(r#"hugepages=16 acpi_osi=Linux acpi_osi="Windows 2020" nouveau.modeset=0 acpi_osi"#)
        );
        assert_eq!(p.add, ["pci=realloc=off", "hugepages=64"]);
        assert_eq!(
            p.result,
            v("nouveau.modeset=1 pci=realloc=off hugepages=64")
        );
    }

    #[test]
    fn ownership_release_removes_only_owned() {
        // gdrprov added iommu=pt; the user set intel_iommu=on themselves.
        let cur = v("quiet intel_iommu=on iommu=pt");
        let owned = v("iommu=pt");
        let p = match release_args(&BootLine::from_args(&cur), &owned, None) {
            Ok(p) => p,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(p.remove, ["iommu=pt"]);
        assert!(p.add.is_empty());
        assert!(p.owned.is_empty());
        assert_eq!(p.result, v("quiet intel_iommu=on"));
    }

    #[test]
    fn owned_stays_owned_while_wanted() {
        let p = plan(
            "quiet iommu=pt intel_iommu=on",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "iommu=pt intel_iommu=on",
            None,
        );
        assert!(p.is_noop());
        assert_eq!(p.owned, ["iommu=pt", "intel_iommu=on"]);
        // Switching to AMD: intel_iommu=on is no longer wanted and was ours.
        let p = plan(
            "quiet iommu=pt intel_iommu=on",
            &wants(IommuIntent::Passthrough, CpuVendor::Amd),
            "iommu=pt intel_iommu=on",
            None,
        );
        assert_eq!(p.remove, ["intel_iommu=on"]);
        assert_eq!(p.owned, ["iommu=pt"]);
    }

    #[test]
    fn reboot_diff_names_arguments() {
        let p = plan(
            "quiet iommu=off",
            &wants(IommuIntent::Passthrough, CpuVendor::Intel),
            "",
            Some("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet iommu=off intel_iommu=on"),
        );
        assert_eq!(
            p.reboot,
            Some(vec![
                CmdlineDiff::Missing("iommu=pt".into()),
                CmdlineDiff::Unwanted("iommu=off".into()),
            ])
        );
        assert!(p.reboot_needed());
        assert!(CmdlineDiff::Missing("iommu=pt".into())
            .to_string()
            .contains("iommu=pt"));
    }

    #[test]
    fn conflicts_in_profile_are_errors() {
        let mut w = wants(IommuIntent::Passthrough, CpuVendor::Intel);
        w.present = v("iommu=off");
        assert!(matches!(
            plan_args(&BootLine::default(), &w, &[], None),
            Err(DesiredError::Conflict { .. })
        ));
        let mut w = wants(IommuIntent::Unmanaged, CpuVendor::Intel);
        w.present = v("foo=1 foo=2");
        assert!(matches!(
            plan_args(&BootLine::default(), &w, &[], None),
            Err(DesiredError::Conflict { .. })
        ));
        let mut w = wants(IommuIntent::Off, CpuVendor::Intel);
        w.absent = v("iommu");
        let e = plan_args(&BootLine::default(), &w, &[], None);
        assert!(matches!(e, Err(DesiredError::Conflict { .. })), "{e:?}");
        let mut w = wants(IommuIntent::Unmanaged, CpuVendor::Intel);
        w.present = vec!["a;b".into()];
        assert!(matches!(
            plan_args(&BootLine::default(), &w, &[], None),
            Err(DesiredError::BadArg(_))
        ));
    }

    #[test]
    fn arguments_after_the_separator_are_inits() {
        let w = wants(IommuIntent::Passthrough, CpuVendor::Intel);
        // Added arguments go before `--`, never to init.
        let p = plan("ro quiet -- single", &w, "", None);
        assert_eq!(p.add, v("iommu=pt intel_iommu=on"));
        assert_eq!(p.result, v("ro quiet iommu=pt intel_iommu=on -- single"));
        let p = plan("--", &w, "", None);
        assert_eq!(p.result, v("iommu=pt intel_iommu=on --"));
        // What follows `--` neither satisfies a want nor is removed.
        let p = plan("ro -- iommu=pt intel_iommu=on", &w, "", None);
        assert_eq!(
            p.result,
            v("ro iommu=pt intel_iommu=on -- iommu=pt intel_iommu=on")
        );
        let p = plan("ro iommu=pt intel_iommu=on -- iommu=off", &w, "", None);
        assert!(p.add.is_empty() && p.remove.is_empty(), "{p:?}");
        assert_eq!(p.result, v("ro iommu=pt intel_iommu=on -- iommu=off"));
        // The running line is judged on its kernel part too.
        let p = plan(
            "ro iommu=pt intel_iommu=on",
            &w,
            "",
            Some("ro -- iommu=pt intel_iommu=on"),
        );
        assert!(p.reboot_needed(), "{p:?}");
    }
}
