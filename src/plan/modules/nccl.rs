//! `/etc/nccl.conf` (NCCL reads it when it starts), owned key by key: gdrprov
//! sets the profile's `nccl:` keys (plus, for eRDMA, the device list and,
//! when the MTU is unsafe for it, a protocol list without LL128), updates
//! them in place, removes the ones it set that are no longer wanted, and
//! keeps every other line byte for byte. A key the user set by hand is only
//! touched when the profile needs it, and the change says so.

use super::Part;
use crate::error::{Error, Result};
use crate::plan::change::{Action, Change};
use crate::plan::modules::Context;
use std::collections::BTreeMap;

pub const MODULE: &str = "nccl";
pub const PATH: &str = "/etc/nccl.conf";
/// Comment lines gdrprov writes start with this; one directly above a key
/// gdrprov owns goes with that key.
const MARK: &str = "# gdrprov:";
/// The top of an nccl.conf gdrprov creates.
const HEADER: &str = "# NCCL reads this file when it starts. gdrprov owns only the keys it set here\n# (listed in /var/lib/gdrprov/state.json); every other line is kept as it is.\n";

/// A wanted key: its value and, optionally, why (written as a comment).
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub value: String,
    pub why: Option<String>,
}

fn scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The key of a `KEY=VALUE` line.
pub fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') {
        return None;
    }
    let (k, _) = t.split_once('=')?;
    let k = k.trim();
    (!k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')).then_some(k)
}

fn value_of(line: &str) -> &str {
    line.split_once('=').map_or("", |(_, v)| v.trim())
}

/// Everything gdrprov wants in nccl.conf.
pub fn wanted(ctx: &Context) -> BTreeMap<String, Setting> {
    let doc = &ctx.desired.doc;
    let mut out: BTreeMap<String, Setting> = doc
        .nccl
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                Setting {
                    value: scalar(v),
                    why: None,
                },
            )
        })
        .collect();
    let erdma = doc.modules.present.iter().any(|m| m == "erdma");
    if !erdma {
        return out;
    }
    let devices: Vec<&str> = ctx
        .facts
        .rdma_devices
        .iter()
        .filter(|d| d.is_erdma())
        .map(|d| d.name.as_str())
        .collect();
    if !out.contains_key("NCCL_IB_HCA") {
        let (value, why) = if devices.is_empty() {
            (
                "erdma".to_string(),
                "no eRDMA device is visible here: every device whose name starts with `erdma`"
                    .to_string(),
            )
        } else {
            (
                devices.join(","),
                "the eRDMA devices of this host".to_string(),
            )
        };
        out.insert(
            "NCCL_IB_HCA".into(),
            Setting {
                value,
                why: Some(why),
            },
        );
    }
    let unsafe_mtu = erdma_unsafe_mtus(ctx);
    if !unsafe_mtu.is_empty() && !out.contains_key("NCCL_PROTO") {
        out.insert(
            "NCCL_PROTO".into(),
            Setting {
                value: "Simple,LL".into(),
                why: Some(format!(
                    "LL128 left out: the eRDMA MTU of {} is neither 8500 nor 1400, and LL128 corrupts data then",
                    unsafe_mtu.join(", ")
                )),
            },
        );
    }
    out
}

/// The eRDMA netdevs whose MTU (what network.mtu sets, else what they have now) is neither the
/// jumbo nor the small one LL128 is safe with, as "NETDEV (MTU)".
fn erdma_unsafe_mtus(ctx: &Context) -> Vec<String> {
    // The MTU the eRDMA netdevs will have: what network.mtu sets, else what
    // they have now.
    let (planned, _) = super::network::wanted(ctx.seen, ctx.facts, ctx.desired);
    let mut unsafe_mtu: Vec<String> = Vec::new();
    for d in ctx.facts.rdma_devices.iter().filter(|d| d.is_erdma()) {
        for p in &d.ports {
            let Some(nd) = &p.netdev else { continue };
            let mtu = planned
                .iter()
                .find(|w| &w.iface.name == nd)
                .map(|w| w.mtu)
                .or(p.mtu);
            if let Some(m) =
                mtu.filter(|m| *m != super::network::JUMBO_MTU && *m != super::network::SMALL_MTU)
            {
                let s = format!("{nd} ({m})");
                if !unsafe_mtu.contains(&s) {
                    unsafe_mtu.push(s);
                }
            }
        }
    }
    unsafe_mtu
}

/// gdrprov's comment above a key it sets, saying why, when there is a why.
fn comment(k: &str, s: &Setting) -> Option<String> {
    s.why.as_ref().map(|w| format!("{MARK} {k}: {w}\n"))
}

/// The wanted keys not in the file yet, at its end (under the header in a new file).
fn append_missing(
    out: &mut Vec<String>,
    what: &mut Vec<String>,
    wanted: &BTreeMap<String, Setting>,
    done: &[String],
) {
    let missing: Vec<(&String, &Setting)> = wanted
        .iter()
        .filter(|(k, _)| !done.iter().any(|d| d == *k))
        .collect();
    if !missing.is_empty() {
        if out.is_empty() {
            out.push(HEADER.to_string());
        } else if out.last().is_some_and(|l| !l.ends_with('\n')) {
            if let Some(l) = out.last_mut() {
                l.push('\n');
            }
        }
        for (k, s) in missing {
            if let Some(c) = comment(k, s) {
                out.push(c);
            }
            out.push(format!("{k}={}\n", s.value));
            what.push(format!("set {k}={}", s.value));
        }
    }
}

/// The new text of nccl.conf, and what changed in words.
pub fn merge(
    before: Option<&str>,
    owned: &[String],
    wanted: &BTreeMap<String, Setting>,
) -> (Option<String>, Vec<String>) {
    let mut what = Vec::new();
    let lines: Vec<&str> = before.map_or(Vec::new(), |b| b.split_inclusive('\n').collect());
    let mut out: Vec<String> = Vec::new();
    let mut done: Vec<String> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        // A gdrprov comment goes with the key line below it.
        if line.starts_with(MARK) {
            if let Some(k) = lines.get(i).and_then(|l| key_of(l)) {
                if owned.iter().any(|o| o == k) || wanted.contains_key(k) {
                    continue;
                }
            }
        }
        let Some(k) = key_of(line) else {
            out.push(line.to_string());
            continue;
        };
        let mine = owned.iter().any(|o| o == k);
        match wanted.get(k) {
            Some(s) if !done.iter().any(|d| d == k) => {
                done.push(k.to_string());
                if let Some(c) = comment(k, s) {
                    out.push(c);
                }
                let new = format!("{k}={}\n", s.value);
                if !mine {
                    what.push(format!(
                        "take over {k} (set by hand to `{}`; the profile needs {})",
                        value_of(line),
                        s.value
                    ));
                } else if value_of(line) != s.value {
                    what.push(format!("set {k}={}", s.value));
                }
                out.push(new);
            }
            // A later duplicate of a key gdrprov sets would override it.
            Some(_) => what.push(format!("drop a second {k} line")),
            None if mine => what.push(format!("remove {k} (no profile sets it any more)")),
            None => out.push(line.to_string()),
        }
    }
    append_missing(&mut out, &mut what, wanted, &done);
    let text: String = out.concat();
    // Nothing left but gdrprov's own comments: the file goes.
    let empty = text
        .replacen(HEADER, "", 1)
        .lines()
        .all(|l| l.trim().is_empty() || l.starts_with(MARK));
    let new = if empty && before.is_some() && wanted.is_empty() {
        None
    } else {
        Some(text)
    };
    (new, what)
}

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let wanted = wanted(ctx);
    let owned = &ctx.state.nccl_keys;
    if wanted.is_empty() && owned.is_empty() {
        return Ok(part);
    }
    if !wanted.is_empty() && ctx.desired.doc.files.iter().any(|f| f.path == PATH) {
        return Err(Error::Refused(format!(
            "{PATH}: the profile sets `nccl:` keys and also lists the whole file under `files:`; keep one (nothing was changed)"
        )));
    }
    let before = ctx.seen.file(PATH)?.map(String::from);
    // A file an older gdrprov (or a `files:` entry) owned as a whole: start
    // from what was there before gdrprov, the whole-file ownership ends.
    let base = match ctx.state.files.get(PATH) {
        Some(o) if !wanted.is_empty() => match &o.original {
            Some(b) => Some(ctx.seen.backup(b)?),
            None => None,
        },
        _ => before.clone(),
    };
    let (after, what) = merge(base.as_deref(), owned, &wanted);
    part.nccl_keys = Some(wanted.keys().cloned().collect());
    if after == before {
        return Ok(part);
    }
    let detail = if what.is_empty() {
        String::new()
    } else {
        format!(": {}", what.join(", "))
    };
    let change = match (after, before) {
        (Some(after), before) => Change {
            module: MODULE.into(),
            description: format!(
                "{} {PATH}{detail}",
                if before.is_some() { "Update" } else { "Create" }
            ),
            action: Action::WriteFile {
                path: PATH.into(),
                before,
                after,
                new_mode: 0o644,
                meta: None,
            },
            reboot: None,
        },
        (None, Some(before)) => Change {
            module: MODULE.into(),
            description: format!("Remove {PATH} (only gdrprov's settings were in it){detail}"),
            action: Action::RemoveFile {
                path: PATH.into(),
                before,
            },
            reboot: None,
        },
        (None, None) => return Ok(part),
    };
    part.edits.push(change);
    Ok(part)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(pairs: &[(&str, &str)]) -> BTreeMap<String, Setting> {
        pairs
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    Setting {
                        value: v.to_string(),
                        why: None,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn user_lines_survive_and_owned_keys_move() {
        let before = "# mine\nNCCL_DEBUG=INFO\nNCCL_NET_GDR_LEVEL=SYS\n";
        let (after, what) = merge(
            Some(before),
            &[],
            &w(&[("NCCL_NET_GDR_LEVEL", "PHB"), ("NCCL_DMABUF_ENABLE", "1")]),
        );
        let after = after.unwrap();
        assert_eq!(
            after,
            "# mine\nNCCL_DEBUG=INFO\nNCCL_NET_GDR_LEVEL=PHB\nNCCL_DMABUF_ENABLE=1\n"
        );
        assert!(
            what[0].starts_with("take over NCCL_NET_GDR_LEVEL"),
            "{what:?}"
        );
        // Owned keys no longer wanted go; the user's stay.
        let owned = vec!["NCCL_NET_GDR_LEVEL".into(), "NCCL_DMABUF_ENABLE".into()];
        let (after2, _) = merge(Some(&after), &owned, &w(&[("NCCL_DMABUF_ENABLE", "0")]));
        assert_eq!(
            after2.unwrap(),
            "# mine\nNCCL_DEBUG=INFO\nNCCL_DMABUF_ENABLE=0\n"
        );
    }

    #[test]
    fn a_file_gdrprov_made_goes_when_nothing_is_wanted() {
        let (after, _) = merge(None, &[], &w(&[("NCCL_DMABUF_ENABLE", "1")]));
        let after = after.unwrap();
        let (gone, _) = merge(Some(&after), &["NCCL_DMABUF_ENABLE".into()], &w(&[]));
        assert_eq!(gone, None);
    }
}

#[cfg(test)]
mod planning_tests {
    use super::*;
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{desired, written, World};

    const KEYS: &str = "nccl: { NCCL_DMABUF_ENABLE: 1 }";

    #[test]
    fn keys_are_added_to_the_users_file_and_owned() {
        let mut w = World::image(OsFamily::Debian);
        w.file(PATH, "NCCL_DEBUG=INFO\n");
        let p = w.plan(&desired(KEYS)).0.unwrap();
        let after = written(&p, PATH).unwrap();
        assert!(
            after.starts_with("NCCL_DEBUG=INFO\n") && after.contains("NCCL_DMABUF_ENABLE=1"),
            "{after}"
        );
        assert_eq!(p.state_after.nccl_keys, ["NCCL_DMABUF_ENABLE"]);
        // Applied: nothing more to do.
        w.file(PATH, after);
        w.state.nccl_keys = vec!["NCCL_DMABUF_ENABLE".into()];
        assert!(w.plan(&desired(KEYS)).0.unwrap().changes.is_empty());
        // No longer wanted: gdrprov's key goes, the user's stays.
        let p = w.plan(&desired("modules: {}")).0.unwrap();
        assert_eq!(written(&p, PATH), Some("NCCL_DEBUG=INFO\n"));
    }

    #[test]
    fn an_erdma_mtu_unsafe_for_ll128_drops_it() {
        let mut w = World::image(OsFamily::Debian);
        w.facts.rdma_devices = vec![crate::facts::rdma::RdmaDevice {
            name: "erdma_0".into(),
            driver: Some("erdma".into()),
            pci: None,
            sysfs_path: None,
            numa_node: None,
            ports: vec![crate::facts::rdma::RdmaPort {
                port: 1,
                state: Some("ACTIVE".into()),
                phys_state: None,
                link_layer: None,
                rate: None,
                rate_gbps: None,
                netdev: Some("eth0".into()),
                mtu: Some(1500),
            }],
        }];
        let d = desired("modules: { present: [erdma] }\nnccl: { NCCL_DEBUG: WARN }");
        let p = w.plan(&d).0.unwrap();
        let after = written(&p, PATH).unwrap();
        assert!(after.contains("NCCL_IB_HCA=erdma_0"), "{after}");
        assert!(after.contains("NCCL_PROTO=Simple,LL"), "{after}");
        // With the MTU the profile sets (auto: 1400 without a max MTU), LL128 is safe.
        let d = desired("modules: { present: [erdma] }\nnetwork: { mtu: { devices: { rdma: \"erdma_*\" }, value: auto } }");
        let p = w.plan(&d).0.unwrap();
        assert!(!written(&p, PATH).unwrap().contains("NCCL_PROTO"));
    }
}
