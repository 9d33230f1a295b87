//! `pcie.acs: disable` — on bare metal, ACS request/completion redirect on a
//! PCIe bridge between a GPU and an RDMA NIC sends every peer-to-peer
//! transfer up to the root complex. The ACS control register is not kept
//! across a reboot, so a boot-time unit clears it on exactly those bridges
//! (by PCI address) at every boot; the running system gets `setpci` now.
//! Never in a VM: a guest needs ACS for device isolation; ATS on the NIC is
//! the way there.

use super::files::ManagedFile;
use super::Part;
use crate::error::Result;
use crate::facts::pcie::AcsBridge;
use crate::facts::Facts;
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::inputs::PlanFacts;
use crate::plan::modules::Context;
use crate::profile::{AcsMode, Composed};

pub const MODULE: &str = "pcie";
pub const UNIT: &str = "gdrprov-acs.service";
pub const UNIT_PATH: &str = "/etc/systemd/system/gdrprov-acs.service";

/// The bridges between a GPU and an RDMA NIC whose ACS blocks peer-to-peer.
pub fn blocking_bridges(facts: &Facts) -> Vec<AcsBridge> {
    let mut out: Vec<AcsBridge> = Vec::new();
    for p in &facts.pcie {
        for b in p.acs_blocking() {
            if !out.iter().any(|o| o.bridge == b.bridge) {
                out.push(b.clone());
            }
        }
    }
    out.sort_by(|a, b| a.bridge.cmp(&b.bridge));
    out
}

/// The bridges the unit clears: those it names already (so a bridge fixed
/// by `setpci` stays in it) plus those blocking now.
fn unit_bridges(ctx: &Context) -> Vec<String> {
    let mut v: Vec<String> = ctx
        .seen
        .file_fact(UNIT_PATH)
        .map(bridges_in_unit)
        .unwrap_or_default()
        .into_iter()
        .filter(|b| {
            ctx.facts
                .pcie
                .iter()
                .any(|p| p.bridges.iter().any(|x| &x.bridge == b))
        })
        .collect();
    for b in blocking_bridges(ctx.facts) {
        if !v.contains(&b.bridge) {
            v.push(b.bridge);
        }
    }
    v.sort();
    v
}

pub fn bridges_in_unit(unit: &str) -> Vec<String> {
    unit.lines()
        .filter(|l| l.starts_with("ExecStart="))
        .filter_map(|l| l.split_once("setpci -s ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next())
        .map(String::from)
        .collect()
}

pub fn setpci_args(bridge: &str) -> Vec<String> {
    vec![
        "setpci".into(),
        "-s".into(),
        bridge.into(),
        "ECAP_ACS+0x6.w=0000".into(),
    ]
}

pub fn unit(header: &str, setpci: &str, bridges: &[String]) -> String {
    let mut s = format!(
        "{header}\n# ACS redirects peer-to-peer PCIe traffic (GPUDirect RDMA) to the root complex;\n# the setting does not survive a reboot, so it is cleared at every boot on the\n# bridges between a GPU and an RDMA NIC.\n[Unit]\nDescription=gdrprov: clear PCIe ACS control between GPUs and RDMA NICs\nDefaultDependencies=no\nAfter=sysinit.target\nBefore=network-pre.target nvidia-persistenced.service\nWants=network-pre.target\nConditionVirtualization=no\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
    );
    for b in bridges {
        s.push_str(&format!("ExecStart={setpci} -s {b} ECAP_ACS+0x6.w=0000\n"));
    }
    s.push_str("\n[Install]\nWantedBy=multi-user.target\n");
    s
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    if ctx.desired.doc.pcie.acs != Some(AcsMode::Disable) {
        return Ok(part);
    }
    let blocking = blocking_bridges(ctx.facts);
    let pf = &ctx.seen.pcie;
    if let Some(why) = &pf.hypervisor {
        if !blocking.is_empty() || !ctx.facts.pcie.is_empty() {
            part.warnings.push(format!(
                "pcie.acs: this is a virtual machine ({why}): ACS is left on, a guest needs it for device isolation; enable ATS on the NIC instead (e.g. `mlxconfig -d DEV set ATS_ENABLED=true`) so peer-to-peer traffic is translated on the device"
            ));
        } else {
            part.warnings.push(format!(
                "pcie.acs: this is a virtual machine ({why}): ACS is left on; enable ATS on the NIC instead"
            ));
        }
        return Ok(part);
    }
    let bridges = unit_bridges(ctx);
    if bridges.is_empty() {
        return Ok(part);
    }
    if pf.setpci.is_none() {
        part.warnings.push(format!(
            "pcie.acs: setpci is not installed in {}: install pciutils, or {UNIT} fails at boot",
            ctx.seen.display("/usr")
        ));
    }
    part.files.push(ManagedFile {
        path: UNIT_PATH.into(),
        content: unit(
            &super::files::header(ctx),
            pf.setpci.unwrap_or("setpci"),
            &bridges,
        ),
        mode: 0o644,
        module: MODULE,
        reboot: None,
    });
    if !pf.unit_enabled {
        let spec = CommandSpec::new(
            &["systemctl", "enable", UNIT],
            format!("Enable {UNIT} so ACS is cleared at every boot"),
        );
        part.commands.push(Change::run(MODULE, spec, None));
    }
    for b in &blocking {
        let argv = setpci_args(&b.bridge);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let spec = CommandSpec::new(
            &argv,
            format!(
                "Clear ACS control on bridge {} now (it is {})",
                b.bridge,
                b.bits.clone().unwrap_or_default()
            ),
        );
        ctx.now_or_next_boot(&mut part, MODULE, spec, || {
            format!(
                "ACS is on at bridge {}; --no-reboot leaves it until the next boot, where {UNIT} clears it",
                b.bridge
            )
        });
    }
    Ok(part)
}

/// `verify`: no bridge between a GPU and an RDMA NIC has ACS redirect on.
pub fn check(
    seen: &PlanFacts,
    facts: &Facts,
    desired: &Composed,
) -> Option<std::result::Result<String, String>> {
    if desired.doc.pcie.acs != Some(AcsMode::Disable) {
        return None;
    }
    if let Some(why) = &seen.pcie.hypervisor {
        return Some(Ok(format!(
            "virtual machine ({why}): ACS left on by design; enable ATS on the NIC"
        )));
    }
    let all: Vec<&AcsBridge> = facts.pcie.iter().flat_map(|p| p.bridges.iter()).collect();
    let blocking = blocking_bridges(facts);
    if !blocking.is_empty() {
        let v: Vec<String> = blocking
            .iter()
            .map(|b| format!("{} ({})", b.bridge, b.bits.clone().unwrap_or_default()))
            .collect();
        return Some(Err(format!(
            "ACS redirect still on at {}; run {} or reboot",
            v.join(", "),
            crate::suggest::Suggest::new(crate::names::APPLY)
                .profiles(&desired.named)
                .shown(&crate::suggest::Given::none())
        )));
    }
    if all.iter().any(|b| b.control.is_none()) && all.iter().all(|b| b.control.is_none()) {
        return Some(Ok(
            "no bridge between a GPU and an RDMA NIC has a readable ACS capability".into(),
        ));
    }
    let read: Vec<String> = all
        .iter()
        .filter(|b| b.control.is_some())
        .map(|b| format!("{} ACSCtl {:#06x}", b.bridge, b.control.unwrap_or(0)))
        .collect();
    Some(Ok(if read.is_empty() {
        "no PCIe bridge between a GPU and an RDMA NIC".into()
    } else {
        read.join(", ")
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::pcie::{Distance, PciePath};
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{commands, desired, written, World};

    const ACS: &str = "pcie: { acs: disable }";

    fn path(bridges: &[(&str, bool)]) -> PciePath {
        PciePath {
            gpu: "0000:3b:00.0".into(),
            nic: "mlx5_0".into(),
            nic_pci: "0000:3c:00.0".into(),
            gpu_numa: Some(0),
            nic_numa: Some(0),
            common_bridge: Some("0000:3a:00.0".into()),
            distance: Distance::PXB,
            bridges: bridges
                .iter()
                .map(|(b, blocks)| AcsBridge {
                    bridge: b.to_string(),
                    control: Some(if *blocks { 0x1d } else { 0x01 }),
                    bits: Some(if *blocks {
                        "ReqRedir+".into()
                    } else {
                        "ReqRedir-".into()
                    }),
                    blocks_p2p: *blocks,
                })
                .collect(),
        }
    }

    #[test]
    fn bare_metal_gets_the_unit_enabled_and_setpci_now() {
        let mut w = World::live(OsFamily::Debian);
        w.facts.pcie = vec![path(&[("0000:3a:00.0", true), ("0000:3a:01.0", false)])];
        w.seen.pcie.setpci = Some("/usr/bin/setpci");
        let p = w.plan(&desired(ACS)).0.unwrap();
        let unit = written(&p, UNIT_PATH).unwrap();
        assert!(unit.contains("ExecStart=/usr/bin/setpci -s 0000:3a:00.0 ECAP_ACS+0x6.w=0000"));
        assert!(!unit.contains("3a:01.0"));
        assert_eq!(
            commands(&p),
            [
                "systemctl enable gdrprov-acs.service",
                "setpci -s 0000:3a:00.0 ECAP_ACS+0x6.w=0000"
            ]
        );
        // Enabled already, and an image: the unit only.
        let mut w = World::image(OsFamily::Debian);
        w.facts.pcie = vec![path(&[("0000:3a:00.0", true)])];
        w.seen.pcie.unit_enabled = true;
        let p = w.plan(&desired(ACS)).0.unwrap();
        assert!(commands(&p).is_empty());
        assert!(p.warnings[0].contains("setpci is not installed in /img/usr"));
        assert!(written(&p, UNIT_PATH)
            .unwrap()
            .contains("ExecStart=setpci -s"));
    }

    #[test]
    fn a_bridge_fixed_by_setpci_stays_in_the_unit() {
        let mut w = World::live(OsFamily::Debian);
        w.facts.pcie = vec![path(&[("0000:3a:00.0", false)])];
        w.seen.pcie.setpci = Some("/usr/bin/setpci");
        w.seen.pcie.unit_enabled = true;
        let d = desired(ACS);
        let old = unit(
            &crate::plan::modules::files::header(&w.ctx(&d)),
            "/usr/bin/setpci",
            &["0000:3a:00.0".into()],
        );
        w.file(UNIT_PATH, &old);
        let p = w.plan(&d).0.unwrap();
        assert!(p.changes.is_empty(), "{:?}", p.changes);
    }

    #[test]
    fn a_virtual_machine_keeps_acs_and_gets_advice() {
        let mut w = World::live(OsFamily::Debian);
        w.facts.pcie = vec![path(&[("0000:3a:00.0", true)])];
        w.seen.pcie.hypervisor = Some("DMI sys_vendor is `QEMU`".into());
        let p = w.plan(&desired(ACS)).0.unwrap();
        assert!(p.changes.is_empty());
        assert!(p.warnings[0].contains("virtual machine (DMI sys_vendor is `QEMU`)"));
        assert!(check(&w.seen, &w.facts, &desired(ACS)).unwrap().is_ok());
        // Unmanaged: nothing, and no check.
        assert!(w
            .plan(&desired("modules: {}"))
            .0
            .unwrap()
            .warnings
            .is_empty());
        assert!(check(&w.seen, &w.facts, &desired("modules: {}")).is_none());
    }
}
