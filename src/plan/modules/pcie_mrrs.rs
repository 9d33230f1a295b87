//! `pcie.max-read-request: N` (issue 46): MaxReadReq of each RDMA NIC's PCI function
//! (a soft-RoCE device: its netdev's function), written at every boot by
//! `gdrprov-pcie.service` (the register is set again by firmware at each enumeration),
//! which then reads it back into `/run/gdrprov/pcie-readback`: a write the device does
//! not keep (a hypervisor that owns the register) is named there and fails verify's
//! `pcie-path`. Whether a write is kept cannot be known before it is made, so planning
//! does not guess. The running system gets `setpci` now. A sibling of the ACS unit, as
//! it also runs in a VM (the ACS unit never does). NICs of a cloud's own RDMA (EFA,
//! eRDMA) are left alone: their VMs do not own the register.

use super::files::ManagedFile;
use super::Part;
use crate::error::Result;
use crate::facts::pcicfg::{size_encoding, DEVCTL_MRRS_MASK};
use crate::facts::pcie_dev::READBACK;
use crate::facts::Facts;
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::modules::Context;

pub const MODULE: &str = "pcie";
pub const UNIT: &str = "gdrprov-pcie.service";
pub const UNIT_PATH: &str = "/etc/systemd/system/gdrprov-pcie.service";
pub const UNIT_WANTS: &str = "/etc/systemd/system/multi-user.target.wants/gdrprov-pcie.service";

/// The RDMA NIC functions gdrprov may set, with their MaxReadReq now (`None`: unreadable).
pub fn nic_functions(facts: &Facts) -> Vec<(String, Option<u32>)> {
    let cloud = |nic: &str| {
        facts
            .rdma_devices
            .iter()
            .any(|d| d.name == nic && (d.is_erdma() || d.driver.as_deref() == Some("efa")))
    };
    let mut out: Vec<(String, Option<u32>)> = Vec::new();
    for n in facts.pcie_devices.nics.iter().filter(|n| !cloud(&n.nic)) {
        if out.iter().any(|(p, _)| *p == n.pci) {
            continue;
        }
        let now = facts
            .pcie_devices
            .device(&n.pci)
            .and_then(|d| d.config.as_ref()?.pcie.as_ref().map(|p| p.max_read_request));
        out.push((n.pci.clone(), now));
    }
    out.sort();
    out
}

/// The functions the unit names already.
pub fn functions_in_unit(unit: &str) -> Vec<String> {
    unit.lines()
        .filter(|l| l.starts_with("ExecStart=") && l.contains("CAP_EXP+0x8.w="))
        .filter_map(|l| l.split_once(" -s ").map(|(_, r)| r))
        .filter_map(|r| r.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// `setpci -s PCI CAP_EXP+0x8.w=V:7000`: only MaxReadReq's bits of Device Control.
pub fn setpci_value(bytes: u32) -> String {
    let enc = size_encoding(bytes).unwrap_or(5);
    format!("CAP_EXP+0x8.w={:04x}:{:04x}", enc << 12, DEVCTL_MRRS_MASK)
}

pub fn unit(header: &str, setpci: &str, bytes: u32, functions: &[String]) -> String {
    let mut s = format!(
        "{header}\n# MaxReadReq of the RDMA NICs is set by firmware at every enumeration; gdrprov sets it\n# again at every boot, then reads it back into {READBACK} (`verify` fails on a\n# write the device did not keep).\n[Unit]\nDescription=gdrprov: set PCIe MaxReadReq on the RDMA NICs and read it back\nDefaultDependencies=no\nAfter=sysinit.target\nBefore=network-pre.target\nWants=network-pre.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStartPre=/bin/sh -c 'mkdir -p /run/gdrprov && : > {READBACK}'\n"
    );
    let set = setpci_value(bytes);
    for f in functions {
        s.push_str(&format!("ExecStart={setpci} -s {f} {set}\n"));
        s.push_str(&format!(
            "ExecStart=/bin/sh -c 'echo \"{f} max-read-request {bytes} devctl $$({setpci} -s {f} CAP_EXP+0x8.w)\" >> {READBACK}'\n"
        ));
    }
    s.push_str("\n[Install]\nWantedBy=multi-user.target\n");
    s
}

/// The functions the unit sets: those below the wish, and those it names already while
/// they are still there (a soft-RoCE device is gone after a reboot until it is added
/// again; its netdev's function stays, and the unit's read-back names it).
fn unit_functions(ctx: &Context, nics: &[(String, Option<u32>)], bytes: u32) -> Vec<String> {
    let d = &ctx.facts.pcie_devices;
    let mut v: Vec<String> = ctx
        .seen
        .file_fact(UNIT_PATH)
        .map(functions_in_unit)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| d.device(p).is_some() || d.readback.iter().any(|r| r.pci == *p))
        .collect();
    for (p, now) in nics {
        if now.is_some_and(|n| n != bytes) && !v.contains(p) {
            v.push(p.clone());
        }
    }
    v.sort();
    v
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let Some(bytes) = ctx.desired.doc.pcie.max_read_request else {
        return Ok(part);
    };
    let nics = nic_functions(ctx.facts);
    let functions = unit_functions(ctx, &nics, bytes);
    if functions.is_empty() {
        return Ok(part);
    }
    let pf = &ctx.seen.pcie;
    if pf.setpci.is_none() {
        part.warnings.push(format!(
            "pcie.max-read-request: setpci is not installed in {}: install pciutils, or {UNIT} fails at boot",
            ctx.seen.display("/usr")
        ));
    }
    let setpci = pf.setpci.unwrap_or("setpci");
    let text = unit(&super::files::header(ctx), setpci, bytes, &functions);
    let changed = ctx.seen.file_fact(UNIT_PATH) != Some(text.as_str());
    part.files.push(ManagedFile {
        path: UNIT_PATH.into(),
        content: text,
        mode: 0o644,
        module: MODULE,
        reboot: None,
    });
    if !pf.mrrs_unit_enabled {
        let spec = CommandSpec::new(
            &["systemctl", "enable", UNIT],
            format!("Enable {UNIT} so MaxReadReq is set at every boot"),
        )
        .undone_by(&["systemctl", "disable", UNIT]);
        part.commands.push(Change::run(MODULE, spec, None));
    } else if changed && ctx.facts.live {
        let spec = CommandSpec::new(
            &["systemctl", "daemon-reload"],
            format!("Make systemd read {UNIT} again"),
        );
        part.commands.push(Change::run(MODULE, spec, None));
    }
    now(ctx, &mut part, &nics, &functions, bytes);
    Ok(part)
}

/// The running system: each function below the wish set now (undone by its old size),
/// then the unit run once so that what the device kept is read back as at boot. A
/// function the unit already read back as not kept is not written again.
fn now(
    ctx: &Context,
    part: &mut Part,
    nics: &[(String, Option<u32>)],
    functions: &[String],
    bytes: u32,
) {
    let mut any = false;
    for (p, now) in nics.iter().filter(|(p, _)| functions.contains(p)) {
        let Some(now) = now.filter(|n| *n != bytes) else {
            continue;
        };
        let d = &ctx.facts.pcie_devices;
        if d.readback.iter().any(|r| r.pci == *p && !r.kept()) {
            continue;
        }
        let set = setpci_value(bytes);
        let spec = CommandSpec::new(
            &["setpci", "-s", p, &set],
            format!("Set MaxReadReq of RDMA NIC {p} to {bytes} now (it is {now})"),
        )
        .undone_by(&["setpci", "-s", p, &setpci_value(now)]);
        ctx.now_or_next_boot(part, MODULE, spec, || {
            format!("MaxReadReq of {p} is {now}; --no-reboot leaves it until the next boot, where {UNIT} sets {bytes}")
        });
        any = true;
    }
    if any && ctx.live_changes {
        let spec = CommandSpec::new(
            &["systemctl", "restart", UNIT],
            format!(
                "Run {UNIT} now: it writes MaxReadReq again and reads back what the devices kept"
            ),
        );
        part.commands.push(Change::run(MODULE, spec, None));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::pcicfg;
    use crate::facts::pcie_dev::{NicFunction, PcieDevice};
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{commands, desired, written, World};

    const MRRS: &str = "pcie: { max-read-request: 4096 }";

    fn nic(w: &mut World, pci: &str, mrrs_enc: u16) {
        let cfg = pcicfg::parse(&pcicfg::testkit::config(0, 2, 1, mrrs_enc, true));
        w.facts.pcie_devices.nics.push(NicFunction {
            nic: "mlx5_0".into(),
            pci: pci.into(),
            sysfs_path: String::new(),
            via_netdev: None,
            upstream: Vec::new(),
        });
        w.facts.pcie_devices.devices.push(PcieDevice {
            pci: pci.into(),
            roles: vec!["nic mlx5_0".into()],
            config: Some(cfg),
        });
    }

    #[test]
    fn a_nic_at_512_gets_the_unit_and_setpci_now() {
        let mut w = World::live(OsFamily::Debian);
        nic(&mut w, "0000:3c:00.0", 2);
        w.seen.pcie.setpci = Some("/usr/bin/setpci");
        let p = w.plan(&desired(MRRS)).0.unwrap();
        let u = written(&p, UNIT_PATH).unwrap();
        assert!(u.contains("ExecStart=/usr/bin/setpci -s 0000:3c:00.0 CAP_EXP+0x8.w=5000:7000"));
        assert!(u.contains("echo \"0000:3c:00.0 max-read-request 4096 devctl $$(/usr/bin/setpci -s 0000:3c:00.0 CAP_EXP+0x8.w)\" >> /run/gdrprov/pcie-readback"));
        assert_eq!(
            commands(&p),
            [
                "systemctl enable gdrprov-pcie.service",
                "setpci -s 0000:3c:00.0 CAP_EXP+0x8.w=5000:7000",
                "systemctl restart gdrprov-pcie.service"
            ]
        );
        assert_eq!(functions_in_unit(u), ["0000:3c:00.0"]);
    }

    #[test]
    fn at_the_wish_nothing_unless_the_unit_names_it() {
        let mut w = World::live(OsFamily::Debian);
        nic(&mut w, "0000:3c:00.0", 5);
        w.seen.pcie.setpci = Some("/usr/bin/setpci");
        assert!(w.plan(&desired(MRRS)).0.unwrap().changes.is_empty());
        w.seen.pcie.mrrs_unit_enabled = true;
        let d = desired(MRRS);
        let old = unit(
            &crate::plan::modules::files::header(&w.ctx(&d)),
            "/usr/bin/setpci",
            4096,
            &["0000:3c:00.0".into()],
        );
        w.file(UNIT_PATH, &old);
        let p = w.plan(&d).0.unwrap();
        assert!(p.changes.is_empty(), "{:?}", p.changes);
        // Read back as not kept at this boot: the unit stays, nothing is written again now.
        let mut w = World::live(OsFamily::Debian);
        nic(&mut w, "0000:3c:00.0", 0);
        w.seen.pcie.setpci = Some("/usr/bin/setpci");
        w.seen.pcie.mrrs_unit_enabled = true;
        w.facts.pcie_devices.readback = crate::facts::pcie_dev::parse_readback(
            "0000:3c:00.0 max-read-request 4096 devctl 0030\n",
        );
        w.file(UNIT_PATH, &old);
        let p = w.plan(&d).0.unwrap();
        assert!(p.changes.is_empty(), "{:?}", p.changes);
        // Without the profile's wish: nothing at all.
        assert!(w
            .plan(&desired("modules: {}"))
            .0
            .unwrap()
            .changes
            .is_empty());
    }
}
