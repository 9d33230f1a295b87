//! `network.mtu:` — the MTU of the interfaces behind the RDMA devices.
//!
//! Persisted as one systemd `.link` file per interface (or per driver), which
//! udev applies when the device appears whatever network manager the
//! distribution uses (NetworkManager, systemd-networkd, ifupdown, netplan,
//! network-scripts); set now on the running system with `ip link`.

use super::files::ManagedFile;
use super::Part;
use crate::error::Result;
use crate::facts::Facts;
use crate::host::CommandSpec;
use crate::plan::inputs::PlanFacts;
use crate::plan::modules::Context;
use crate::profile::{Composed, MtuValue, NetMatch};

pub const MODULE: &str = "network";
pub const LINK_DIR: &str = "/etc/systemd/network";
/// The eRDMA guide: 8500 with jumbo frames, 1400 without; NCCL's LL128
/// protocol is only safe with one of them.
pub const JUMBO_MTU: u32 = 8500;
pub const SMALL_MTU: u32 = 1400;

pub use crate::facts::net::{glob, Iface};

/// What the profile wants for one interface.
#[derive(Debug, Clone)]
pub struct Wanted {
    pub iface: Iface,
    pub mtu: u32,
    /// Why this value (`auto` resolution), for descriptions.
    pub why: String,
}

/// The interfaces a match names, in order, without duplicates.
pub fn resolve(seen: &PlanFacts, facts: &Facts, matches: &[NetMatch]) -> Vec<Iface> {
    crate::facts::net::resolve(&seen.net, &facts.rdma_devices, matches)
        .into_iter()
        .map(|n| {
            seen.net.ifaces.get(&n).cloned().unwrap_or(Iface {
                name: n,
                ..Iface::default()
            })
        })
        .collect()
}

/// `auto`: 8500 when the interface allows it, else 1400.
pub fn auto_mtu(i: &Iface) -> (u32, String) {
    match i.max_mtu {
        Some(m) if m >= JUMBO_MTU => (
            JUMBO_MTU,
            format!("auto: its max MTU {m} allows jumbo frames"),
        ),
        Some(m) => (
            SMALL_MTU,
            format!("auto: its max MTU {m} is below {JUMBO_MTU}, no jumbo frames"),
        ),
        None => match i.mtu {
            Some(m) if m >= JUMBO_MTU => (
                JUMBO_MTU,
                format!("auto: its max MTU is unknown but it runs jumbo frames (MTU {m}) now"),
            ),
            _ => (
                SMALL_MTU,
                "auto: its max MTU is unknown, so the value every NIC accepts".into(),
            ),
        },
    }
}

/// What the profile wants, per interface; warnings for what cannot be known.
pub fn wanted(seen: &PlanFacts, facts: &Facts, desired: &Composed) -> (Vec<Wanted>, Vec<String>) {
    let mut warnings = Vec::new();
    let Some(spec) = &desired.doc.network.mtu else {
        return (Vec::new(), warnings);
    };
    let ifaces = resolve(seen, facts, &spec.devices);
    let mut out = Vec::new();
    for i in ifaces {
        let (mtu, why) = match spec.value {
            MtuValue::Bytes(n) => {
                if let Some(max) = i.max_mtu.filter(|m| n > *m) {
                    warnings.push(format!(
                        "{}: the profile wants MTU {n} but the interface allows at most {max}; the kernel will refuse it",
                        i.name
                    ));
                }
                (n, "set by the profile".to_string())
            }
            MtuValue::Auto => {
                if i.max_mtu.is_none() && i.mtu.is_none_or(|m| m < JUMBO_MTU) {
                    warnings.push(format!(
                        "{}: its max MTU could not be read, so `auto` uses {SMALL_MTU}; give a number to use jumbo frames",
                        i.name
                    ));
                }
                auto_mtu(&i)
            }
        };
        out.push(Wanted { iface: i, mtu, why });
    }
    (out, warnings)
}

pub fn link_path(ifname: &str) -> String {
    format!("{LINK_DIR}/10-gdrprov-{ifname}.link")
}

fn link_file(header: &str, match_line: &str, what: &str, mtu: u32, why: &str) -> String {
    // A .link file replaces 99-default.link for the devices it matches, so
    // it carries the default naming and MAC policies too: names stay as they are.
    format!(
        "{header}\n# MTU of {what} ({why}), applied by udev when the device appears.\n[Match]\n{match_line}\n\n[Link]\nNamePolicy=kernel database onboard slot path\nMACAddressPolicy=persistent\nMTUBytes={mtu}\n"
    )
}

/// The .link file for every interface of a driver, so that interfaces that appear later (or in
/// an image) get the MTU too.
fn driver_file(header: &str, drv: &str, n: u32) -> ManagedFile {
    let safe: String = drv
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    ManagedFile {
        path: format!("{LINK_DIR}/10-gdrprov-driver-{safe}.link"),
        content: link_file(
            header,
            &format!("Driver={drv}"),
            &format!("interfaces of driver {drv}"),
            n,
            "set by the profile",
        ),
        mode: 0o644,
        module: MODULE,
        reboot: None,
    }
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let Some(spec) = &ctx.desired.doc.network.mtu else {
        return Ok(part);
    };
    let header = super::files::header(ctx);
    let (wanted, warnings) = wanted(ctx.seen, ctx.facts, ctx.desired);
    part.warnings.extend(warnings);
    // Matching by driver with a fixed value: one file for the driver, so
    // interfaces that appear later (or in an image) get it too.
    let by_driver: Vec<&String> = spec
        .devices
        .iter()
        .filter_map(|d| d.driver.as_ref())
        .collect();
    if let (MtuValue::Bytes(n), true) = (spec.value, by_driver.len() == spec.devices.len()) {
        for drv in &by_driver {
            part.files.push(driver_file(&header, drv, n));
        }
    } else {
        for w in &wanted {
            let m = match &w.iface.address {
                Some(a) => format!("MACAddress={a}"),
                None => {
                    part.warnings.push(format!(
                        "{}: no MAC address to match on; the .link file matches its current name, which is only stable if the name is",
                        w.iface.name
                    ));
                    format!("OriginalName={}", w.iface.name)
                }
            };
            part.files.push(ManagedFile {
                path: link_path(&w.iface.name),
                content: link_file(&header, &m, &w.iface.name, w.mtu, &w.why),
                mode: 0o644,
                module: MODULE,
                reboot: None,
            });
        }
    }
    if wanted.is_empty() {
        let devs: Vec<String> = spec.devices.iter().map(|d| d.to_string()).collect();
        part.warnings.push(format!(
            "network.mtu: no interface matches [{}]; no MTU is set",
            devs.join(", ")
        ));
    }
    for w in &wanted {
        if w.iface.mtu == Some(w.mtu) {
            continue;
        }
        let (n, was) = (
            w.mtu.to_string(),
            w.iface.mtu.map_or("unknown".into(), |m| m.to_string()),
        );
        let spec = CommandSpec::new(
            &["ip", "link", "set", "dev", &w.iface.name, "mtu", &n],
            format!(
                "Set the MTU of {} to {n} now (was {was}; {})",
                w.iface.name, w.why
            ),
        );
        ctx.now_or_next_boot(&mut part, MODULE, spec, || {
            format!(
                "{} has MTU {was}; --no-reboot leaves it until the next boot, which sets {n}",
                w.iface.name
            )
        });
    }
    Ok(part)
}

/// `verify`: the running MTU of every interface is what the profile wants.
pub fn check(
    seen: &PlanFacts,
    facts: &Facts,
    desired: &Composed,
) -> Option<std::result::Result<String, String>> {
    desired.doc.network.mtu.as_ref()?;
    let (wanted, _) = wanted(seen, facts, desired);
    if wanted.is_empty() {
        return Some(Err("no interface matches network.mtu.devices".into()));
    }
    let mut ok = Vec::new();
    let mut bad = Vec::new();
    for w in &wanted {
        let now = w.iface.mtu;
        if now == Some(w.mtu) {
            ok.push(format!("{} {}", w.iface.name, w.mtu));
        } else {
            bad.push(format!(
                "{} has MTU {} (/sys/class/net/{}/mtu), wanted {}",
                w.iface.name,
                now.map_or("unknown".into(), |m| m.to_string()),
                w.iface.name,
                w.mtu
            ));
        }
    }
    Some(if bad.is_empty() {
        Ok(ok.join(", "))
    } else {
        Err(bad.join("; "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("erdma_*", "erdma_0"));
        assert!(glob("eth?", "eth1"));
        assert!(!glob("eth?", "eth10"));
        assert!(glob("*", ""));
        assert!(!glob("mlx5_*", "erdma_0"));
    }

    #[test]
    fn auto_follows_max_mtu() {
        let mut i = Iface {
            name: "eth0".into(),
            mtu: Some(1500),
            max_mtu: Some(9000),
            address: None,
            driver: None,
        };
        assert_eq!(auto_mtu(&i).0, 8500);
        i.max_mtu = Some(1500);
        assert_eq!(auto_mtu(&i).0, 1400);
        i.max_mtu = None;
        assert_eq!(auto_mtu(&i).0, 1400);
    }
}

#[cfg(test)]
mod planning_tests {
    use super::*;
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{commands, desired, written, World};

    fn with_iface(mut w: World, name: &str, mtu: u32, max: Option<u32>) -> World {
        w.seen.net.names.push(name.into());
        w.seen.net.ifaces.insert(
            name.into(),
            Iface {
                name: name.into(),
                mtu: Some(mtu),
                max_mtu: max,
                address: Some("02:00:00:00:00:01".into()),
                driver: Some("mlx5_core".into()),
            },
        );
        w
    }

    #[test]
    fn auto_picks_jumbo_frames_writes_a_link_file_and_sets_it_now() {
        let w = with_iface(World::live(OsFamily::Debian), "eth1", 1500, Some(9000));
        let d = desired("network: { mtu: { devices: { name: \"eth*\" }, value: auto } }");
        let p = w.plan(&d).0.unwrap();
        let link = written(&p, &link_path("eth1")).unwrap();
        assert!(link.contains("MACAddress=02:00:00:00:00:01") && link.contains("MTUBytes=8500"));
        assert_eq!(commands(&p), ["ip link set dev eth1 mtu 8500"]);
        assert_eq!(
            check(&w.seen, &w.facts, &d).unwrap().unwrap_err(),
            "eth1 has MTU 1500 (/sys/class/net/eth1/mtu), wanted 8500"
        );
    }

    #[test]
    fn by_driver_with_a_number_writes_one_file_for_the_driver() {
        let mut w = with_iface(World::image(OsFamily::Rhel), "ens1", 9000, None);
        w.seen
            .net
            .drivers
            .insert("ens1".into(), Some("mlx5_core".into()));
        let d = desired("network: { mtu: { devices: { driver: mlx5_core }, value: 9000 } }");
        let p = w.plan(&d).0.unwrap();
        let link = written(&p, &format!("{LINK_DIR}/10-gdrprov-driver-mlx5_core.link")).unwrap();
        assert!(link.contains("Driver=mlx5_core") && link.contains("MTUBytes=9000"));
        assert!(commands(&p).is_empty());
    }

    #[test]
    fn no_matching_interface_is_a_warning_and_a_failed_check() {
        let w = with_iface(World::live(OsFamily::Debian), "eth0", 1500, None);
        let d = desired("network: { mtu: { devices: { rdma: \"erdma_*\" }, value: auto } }");
        let p = w.plan(&d).0.unwrap();
        assert!(p.changes.is_empty());
        assert!(
            p.warnings[0].contains("no interface matches [rdma: erdma_*]"),
            "{:?}",
            p.warnings
        );
        assert!(check(&w.seen, &w.facts, &d).unwrap().is_err());
    }
}
