//! `services.fabric-manager`: NVIDIA Fabric Manager on NVSwitch boards (HGX). gdrprov installs
//! nothing; on a board whose NVSwitches this root sees it enables `nvidia-persistenced` and
//! `nvidia-fabricmanager` (and starts them on the running system), after checking that Fabric
//! Manager is there and of the driver's version (another version refuses to start, every GPU's
//! fabric then stays unregistered and CUDA answers "system not yet initialized"). A board
//! without NVSwitch plans nothing and says why.

use super::Part;
use crate::error::{Error, Result};
use crate::facts::platform::VirtFact;
use crate::facts::{Facts, OsFamily};
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::inputs::UnitFacts;
use crate::plan::modules::Context;
use crate::profile::FabricManagerMode;

pub const MODULE: &str = "fabric-manager";
pub use crate::plan::change::FabricManagerPlan;
pub use crate::plan::inputs::{FABRIC_UNITS as UNITS, FM_UNIT, PERSISTENCED_UNIT};

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let mode = match ctx.desired.doc.services.fabric_manager {
        None | Some(FabricManagerMode::Off) => return Ok(part),
        Some(m) => m,
    };
    let facts = ctx.facts;
    let topo = &facts.gpu_topology;
    let fm = topo.fabric_manager.as_ref();
    let mut note = FabricManagerPlan {
        setting: mode,
        action: "skip",
        nvswitches: topo.nvswitches.clone(),
        package: fm.map(|(p, v)| format!("{p} {v}")),
        driver: facts.nvidia_driver.version.clone(),
        why: String::new(),
    };
    let board = match board(facts, mode) {
        Ok(b) => b,
        Err(why) => {
            note.why = why;
            part.fabric_manager = Some(note);
            return Ok(part);
        }
    };
    let unit = |u: &str| ctx.seen.units.get(u).copied().unwrap_or_default();
    if let Some(problem) = problem(facts, &board, unit(FM_UNIT)) {
        if mode == FabricManagerMode::Required {
            return Err(Error::Refused(format!(
                "services.fabric-manager: required: {problem} (nothing was changed)"
            )));
        }
        let why = format!("services.fabric-manager: auto: {problem}; nothing is planned for Fabric Manager (`required` refuses here)");
        part.warnings.push(why.clone());
        note.action = "warn";
        note.why = why;
        part.fabric_manager = Some(note);
        return Ok(part);
    }
    let mut done = Vec::new();
    for name in UNITS {
        let u = unit(name);
        if !u.exists {
            part.warnings.push(format!(
                "services.fabric-manager: {name} is not in this root (it comes with the driver's utilities, {}): not enabled",
                utilities_package(facts)
            ));
            continue;
        }
        match step(name, u, ctx.live_changes) {
            Some(spec) => part.commands.push(Change::run(MODULE, spec, None)),
            None => done.push(name),
        }
    }
    let fm_words = fm_words(facts);
    note.action = if part.commands.is_empty() {
        "ready"
    } else {
        "enable"
    };
    let already = if done.is_empty() {
        String::new()
    } else if ctx.live_changes {
        format!("; already enabled and running: {}", done.join(", "))
    } else {
        format!("; already enabled: {}", done.join(", "))
    };
    note.why = format!("{board}; {fm_words}{already}");
    part.fabric_manager = Some(note);
    Ok(part)
}

/// Fabric Manager as found: its package and version against the driver's.
fn fm_words(facts: &Facts) -> String {
    let fm = facts.gpu_topology.fabric_manager.as_ref();
    match (fm, &facts.nvidia_driver.version) {
        (Some((p, v)), Some(_)) => format!("Fabric Manager {p} {v}, the driver's version"),
        (Some((p, v)), None) => {
            format!("Fabric Manager {p} {v} (no NVIDIA driver found here to compare it with)")
        }
        (None, _) => "Fabric Manager's unit (no package: its version is not known)".into(),
    }
}

/// Whether this is an NVSwitch board Fabric Manager runs on (its words), or why not.
fn board(facts: &Facts, mode: FabricManagerMode) -> std::result::Result<String, String> {
    let topo = &facts.gpu_topology;
    if !topo.nvswitches.is_empty() {
        return Ok(format!(
            "NVSwitch board: {} NVSwitch(es) ({})",
            topo.nvswitches.len(),
            topo.nvswitches.join(", ")
        ));
    }
    if topo.nvswitch() {
        if facts.platform.virtualization == VirtFact::None {
            return Ok("NVSwitch board: the GPUs' NVLinks end at NVSwitches (NVML)".into());
        }
        return Err(format!(
            "no NVSwitch here: the GPUs' NVLinks end at NVSwitches (NVML) that are not PCI devices of this {}; Fabric Manager runs where the switches are, on the host",
            match facts.platform.virtualization {
                VirtFact::Container => "container",
                _ => "virtual machine",
            }
        ));
    }
    if !topo.pci_listed {
        return match mode {
            FabricManagerMode::Required => Ok(
                "an image root (no PCI devices to tell the board by): enabled for the NVSwitch board the profile requires it on".into(),
            ),
            _ => Err("an image root: no PCI devices to tell an NVSwitch board by; `fabric-manager: required` enables it in an image".into()),
        };
    }
    match facts.platform.virtualization {
        // `plan` on the running system reads no NVML: a guest's GPUs may still
        // link to NVSwitches that only the hypervisor host sees (the lent
        // H200s do); say so rather than "no NVSwitch on this board". With the
        // links known (a snapshot) and none at a switch, the board has none.
        _ if topo.nvml().is_some() => Err(
            "no NVSwitch on this board: no NVIDIA switch among its PCI devices and no NVLink ends at one, so Fabric Manager is not needed"
                .into(),
        ),
        VirtFact::None | VirtFact::Unknown => Err(
            "no NVSwitch on this board: no NVIDIA switch among its PCI devices, so Fabric Manager is not needed"
                .into(),
        ),
        v => Err(format!(
            "no NVSwitch among the PCI devices of this {}, so Fabric Manager is not needed here (where GPUs' NVLinks end at NVSwitches outside it, it runs on the host; verify's `gpu-fabric` check reads each GPU's fabric state)",
            if v == VirtFact::Container { "container" } else { "virtual machine" }
        )),
    }
}

/// Why Fabric Manager cannot run here as it is: missing, or not the driver's version.
fn problem(facts: &Facts, board: &str, unit: UnitFacts) -> Option<String> {
    let driver = facts.nvidia_driver.version.as_deref();
    let pkg = fm_package(facts);
    let of_driver = driver.map_or(String::new(), |d| format!(" {d} (the driver's version)"));
    match (&facts.gpu_topology.fabric_manager, unit.exists) {
        (None, false) => Some(format!(
            "{board}, and no Fabric Manager in this root; gdrprov installs nothing: install {pkg}{of_driver}, then run again"
        )),
        (Some((p, v)), false) => Some(format!(
            "{board}; {p} {v} is installed but its unit {FM_UNIT} is not in this root: reinstall {p}, then run again"
        )),
        (Some((p, v)), true) => {
            let d = driver?;
            (!crate::facts::gpu_topo::fabric_manager_matches(v, d)).then(|| format!(
                "{board}; Fabric Manager {p} {v} is not the driver's version {d}: it refuses to start and CUDA answers \"system not yet initialized\"; install {p} {d} (or the driver of {v}), then run again"
            ))
        }
        (None, true) => None,
    }
}

/// The command that brings one unit to enabled (and running, with live changes), and its
/// undo; `None` when it is already there.
fn step(unit: &str, u: UnitFacts, live_changes: bool) -> Option<CommandSpec> {
    let start = live_changes && !u.active;
    let (verb, undo, why): (&[&str], &[&str], String) = match (u.enabled, start) {
        (true, false) => return None,
        (false, true) => (
            &["enable", "--now"],
            &["disable", "--now"],
            format!("Enable and start {unit} (Fabric Manager on an NVSwitch board)"),
        ),
        (false, false) => (
            &["enable"],
            &["disable"],
            format!("Enable {unit} (Fabric Manager on an NVSwitch board; it starts at boot)"),
        ),
        (true, true) => (
            &["start"],
            &["stop"],
            format!("Start {unit} (enabled, not running)"),
        ),
    };
    let argv: Vec<&str> = ["systemctl"]
        .iter()
        .chain(verb)
        .copied()
        .chain([unit])
        .collect();
    let undo: Vec<&str> = ["systemctl"]
        .iter()
        .chain(undo)
        .copied()
        .chain([unit])
        .collect();
    Some(CommandSpec::new(&argv, why).undone_by(&undo))
}

/// The Fabric Manager package of the driver's branch, as the distribution names it.
fn fm_package(facts: &Facts) -> String {
    match (facts.os.family, facts.nvidia_driver.major()) {
        (OsFamily::Rhel, _) => "nvidia-fabric-manager".into(),
        (_, Some(m)) => format!("nvidia-fabricmanager-{m}"),
        (_, None) => "nvidia-fabricmanager-<driver branch>".into(),
    }
}

/// Where nvidia-persistenced comes from.
fn utilities_package(facts: &Facts) -> String {
    match (facts.os.family, facts.nvidia_driver.major()) {
        (OsFamily::Rhel, _) => "nvidia-persistenced".into(),
        (_, Some(m)) => format!("nvidia-compute-utils-{m}"),
        (_, None) => "nvidia-compute-utils-<driver branch>".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::modules::testkit::{commands, desired, undo, World};

    const REQUIRED: &str = "services: { fabric-manager: required }";
    const AUTO: &str = "services: { fabric-manager: auto }";

    /// A live HGX host: two NVSwitches seen, driver 580.159.04, Fabric Manager of that version.
    fn hgx() -> World {
        let mut w = World::live(OsFamily::Debian);
        w.facts.gpu_topology.pci_listed = true;
        w.facts.gpu_topology.nvswitches = vec!["0000:05:00.0".into(), "0000:06:00.0".into()];
        w.facts.nvidia_driver.version = Some("580.159.04".into());
        w.facts.gpu_topology.fabric_manager =
            Some(("nvidia-fabricmanager-580".into(), "580.159.04-1".into()));
        for u in UNITS {
            w.seen.units.insert(
                u.into(),
                UnitFacts {
                    exists: true,
                    enabled: false,
                    active: false,
                },
            );
        }
        w
    }

    #[test]
    fn an_nvswitch_board_gets_both_units_enabled_and_started_with_their_undo() {
        let w = hgx();
        let p = w.plan(&desired(REQUIRED)).0.unwrap();
        assert_eq!(
            commands(&p),
            [
                "systemctl enable --now nvidia-persistenced.service",
                "systemctl enable --now nvidia-fabricmanager.service"
            ]
        );
        assert_eq!(
            undo(&p),
            [
                Some("systemctl disable --now nvidia-persistenced.service".into()),
                Some("systemctl disable --now nvidia-fabricmanager.service".into())
            ]
        );
        let n = p.fabric_manager.unwrap();
        assert_eq!(n.action, "enable");
        assert!(
            n.why
                .contains("2 NVSwitch(es) (0000:05:00.0, 0000:06:00.0)"),
            "{}",
            n.why
        );
    }

    #[test]
    fn only_what_is_not_there_yet_and_no_start_without_live_changes() {
        let mut w = hgx();
        let on = UnitFacts {
            exists: true,
            enabled: true,
            active: true,
        };
        w.seen.units.insert(PERSISTENCED_UNIT.into(), on);
        // Enabled, not running: started, and rollback stops it again.
        w.seen.units.insert(
            FM_UNIT.into(),
            UnitFacts {
                active: false,
                ..on
            },
        );
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert_eq!(
            commands(&p),
            ["systemctl start nvidia-fabricmanager.service"]
        );
        assert_eq!(
            undo(&p),
            [Some("systemctl stop nvidia-fabricmanager.service".into())]
        );
        w.seen.units.insert(FM_UNIT.into(), on);
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert!(commands(&p).is_empty());
        assert_eq!(p.fabric_manager.unwrap().action, "ready");
        // An image root of an NVSwitch node: enabled, never started.
        let mut img = hgx();
        img.facts.live = false;
        img.live_changes = false;
        let p = img.plan(&desired(AUTO)).0.unwrap();
        assert_eq!(
            commands(&p),
            [
                "systemctl enable nvidia-persistenced.service",
                "systemctl enable nvidia-fabricmanager.service"
            ]
        );
    }

    #[test]
    fn missing_fabric_manager_is_refused_when_required_and_a_warning_when_auto() {
        let mut w = hgx();
        w.facts.gpu_topology.fabric_manager = None;
        w.seen.units.remove(FM_UNIT);
        let e = w.plan(&desired(REQUIRED)).0.unwrap_err().to_string();
        assert!(
            e.contains("gdrprov installs nothing: install nvidia-fabricmanager-580 580.159.04 (the driver's version)"),
            "{e}"
        );
        w.facts.os.family = OsFamily::Rhel;
        let e = w.plan(&desired(REQUIRED)).0.unwrap_err().to_string();
        assert!(
            e.contains("install nvidia-fabric-manager 580.159.04"),
            "{e}"
        );
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert!(commands(&p).is_empty());
        assert_eq!(p.fabric_manager.as_ref().unwrap().action, "warn");
        assert!(
            p.warnings[0].contains("`required` refuses here"),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn another_version_than_the_driver_is_refused_or_warned() {
        let mut w = hgx();
        w.facts.gpu_topology.fabric_manager =
            Some(("nvidia-fabricmanager-580".into(), "580.95.05-1".into()));
        let e = w.plan(&desired(REQUIRED)).0.unwrap_err().to_string();
        assert!(
            e.contains(
                "nvidia-fabricmanager-580 580.95.05-1 is not the driver's version 580.159.04"
            ) && e.contains("install nvidia-fabricmanager-580 580.159.04"),
            "{e}"
        );
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert!(commands(&p).is_empty());
        assert!(p.warnings[0].contains("system not yet initialized"));
    }

    #[test]
    fn no_nvswitch_plans_nothing_and_says_why() {
        let mut w = World::live(OsFamily::Debian);
        w.facts.gpu_topology.pci_listed = true;
        let p = w.plan(&desired(REQUIRED)).0.unwrap();
        assert!(p.changes.is_empty());
        let n = p.fabric_manager.unwrap();
        assert_eq!(n.action, "skip");
        assert!(n.why.contains("no NVSwitch on this board"), "{}", n.why);
        // Unset or off: not a word.
        assert!(w
            .plan(&desired("services: { fabric-manager: off }"))
            .0
            .unwrap()
            .fabric_manager
            .is_none());
        // An image root cannot tell: auto skips, required enables.
        w = hgx();
        w.facts.gpu_topology.nvswitches.clear();
        w.facts.gpu_topology.pci_listed = false;
        w.facts.live = false;
        w.facts.observed = false;
        w.live_changes = false;
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert!(p.changes.is_empty());
        assert!(p.fabric_manager.unwrap().why.contains("an image root"));
        let p = w.plan(&desired(REQUIRED)).0.unwrap();
        assert_eq!(commands(&p).len(), 2);
        // No driver in the image: the version is not judged, and the plan does not claim it.
        w.facts.nvidia_driver.version = None;
        let p = w.plan(&desired(REQUIRED)).0.unwrap();
        let why = p.fabric_manager.unwrap().why;
        assert!(why.contains("no NVIDIA driver found here"), "{why}");
    }

    #[test]
    fn no_nvswitch_in_a_guest_says_the_switches_may_be_the_hosts() {
        // The lent H200s: a container whose GPUs' NVLinks end at NVSwitches
        // only the host sees; plan (no NVML) must not call it a board without.
        let mut w = World::live(OsFamily::Debian);
        w.facts.gpu_topology.pci_listed = true;
        w.facts.platform.virtualization = crate::facts::platform::VirtFact::Container;
        let p = w.plan(&desired(AUTO)).0.unwrap();
        assert!(commands(&p).is_empty());
        let why = p.fabric_manager.unwrap().why;
        assert!(
            why.contains("PCI devices of this container") && why.contains("runs on the host"),
            "{why}"
        );
    }
}
