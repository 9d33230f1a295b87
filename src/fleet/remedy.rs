//! Remediation before drain: a bad node whose own `verify --format json`
//! names a configuration cause (an MTU unlike its peers', the wrong
//! peer-memory path, ACS on, a module that should not load, files that differ
//! from the profile) is fixable by `gdrprov apply` with that profile; a bad
//! node with no such finding is a hardware suspect, drained.

use crate::docs::verify::{Status, VerifyReport};
use crate::grammar::ProfileName;
use crate::names;
use crate::suggest::{Given, Suggest};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// verify's checks whose failure is a configuration cause that apply fixes.
pub const CONFIG_CHECKS: &[&str] = &["mtu", "acs", "modules", "configuration"];

/// What a node's verify said that apply can fix.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeFindings {
    pub profiles: Vec<String>,
    pub ready: Option<bool>,
    /// `check: detail` of each configuration check that failed.
    pub causes: Vec<String>,
}

/// The findings of one `gdrprov verify --format json` document.
/// The most of a report's check detail shown back (the rest is the
/// node's own report to read).
const MAX_DETAIL: usize = 512;

/// At most [`MAX_DETAIL`] bytes of `s`, saying how much was left out.
fn bounded(s: &str) -> String {
    if s.len() <= MAX_DETAIL {
        return s.to_string();
    }
    let mut end = MAX_DETAIL;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… ({} more bytes in the report)",
        &s[..end],
        s.len() - end
    )
}

pub fn from_verify(doc: &VerifyReport) -> NodeFindings {
    let causes = doc
        .checks
        .iter()
        .flatten()
        .filter(|c| c.status == Status::Fail && CONFIG_CHECKS.contains(&c.name.as_str()))
        .map(|c| {
            format!(
                "{}: {}",
                c.name,
                bounded(c.detail.as_deref().unwrap_or("failed"))
            )
        })
        .collect();
    NodeFindings {
        profiles: doc.profiles.clone().unwrap_or_default(),
        ready: doc.ready,
        causes,
    }
}

/// MTUs unlike the rail's most common one: (node, rail) -> cause.
pub fn odd_mtus(mtus: &HashMap<(String, String), u64>) -> BTreeMap<(String, String), String> {
    let mut per_rail: BTreeMap<&str, BTreeMap<u64, usize>> = BTreeMap::new();
    for ((_, rail), mtu) in mtus {
        *per_rail.entry(rail).or_default().entry(*mtu).or_default() += 1;
    }
    let common: BTreeMap<&str, u64> = per_rail
        .iter()
        .filter_map(|(rail, counts)| {
            counts
                .iter()
                .max_by_key(|(mtu, n)| (**n, **mtu))
                .map(|(mtu, _)| (*rail, *mtu))
        })
        .collect();
    mtus.iter()
        .filter_map(|((node, rail), mtu)| {
            let usual = common.get(rail.as_str())?;
            (mtu != usual).then(|| {
                (
                    (node.clone(), rail.clone()),
                    format!("mtu: {rail} has MTU {mtu}, its peers {usual}"),
                )
            })
        })
        .collect()
}

/// A bad node that apply can fix, with the command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fixable {
    pub node: String,
    pub causes: Vec<String>,
    /// `gdrprov apply PROFILE...`, the profiles its verify used (PROFILE when unknown).
    pub command: String,
}

pub fn fixable(
    node: &str,
    findings: Option<&NodeFindings>,
    mtu_causes: &[String],
) -> Option<Fixable> {
    let mut causes: Vec<String> = mtu_causes.to_vec();
    if let Some(f) = findings {
        for c in &f.causes {
            if !causes.contains(c) {
                causes.push(c.clone());
            }
        }
    }
    if causes.is_empty() {
        return None;
    }
    // Each name by its grammar, and quoted (`crate::suggest`): the command
    // is pasted into a shell on the node, whose own root it acts on.
    let mut named: Vec<&str> = findings
        .map(|f| f.profiles.iter().map(String::as_str).collect())
        .unwrap_or_default();
    if named.iter().any(|p| ProfileName::parse(p).is_err()) {
        named.clear();
    }
    Some(Fixable {
        node: node.to_string(),
        causes,
        command: Suggest::new(names::APPLY)
            .profiles(&named)
            .line(&Given::none()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn from_verify(doc: &Value) -> NodeFindings {
        let doc = crate::docs::parse::<VerifyReport>("n.json", doc.to_string().as_bytes()).unwrap();
        super::from_verify(&doc)
    }

    #[test]
    fn configuration_failures_are_causes_others_are_not() {
        let doc = json!({"command": "verify", "profiles": ["rdma-dmabuf"], "ready": false, "checks": [
            {"name": "modules", "status": "fail", "detail": "loaded but must be absent: nvidia_peermem"},
            {"name": "acs", "status": "pass", "detail": "off"},
            {"name": "pcie-links", "status": "fail", "detail": "x8 of x16"}
        ]});
        let f = from_verify(&doc);
        assert_eq!(f.profiles, vec!["rdma-dmabuf"]);
        assert_eq!(
            f.causes,
            vec!["modules: loaded but must be absent: nvidia_peermem"]
        );
        let x = fixable("n1", Some(&f), &[]).unwrap();
        assert_eq!(x.command, "gdrprov apply rdma-dmabuf");
        // A link trained narrow is hardware: nothing to apply.
        let hw = from_verify(
            &json!({"profiles": ["rdma-dmabuf"], "ready": false, "checks": [
            {"name": "pcie-links", "status": "fail", "detail": "x8"}]}),
        );
        assert_eq!(fixable("n2", Some(&hw), &[]), None);
        assert_eq!(fixable("n3", None, &[]), None);
    }

    #[test]
    fn an_mtu_unlike_its_peers_is_a_cause() {
        let mut m = HashMap::new();
        for n in ["a", "b", "c"] {
            m.insert((n.to_string(), "mlx5_0".to_string()), 4096);
        }
        m.insert(("d".to_string(), "mlx5_0".to_string()), 1024);
        let odd = odd_mtus(&m);
        assert_eq!(odd.len(), 1);
        let cause = &odd[&("d".to_string(), "mlx5_0".to_string())];
        assert_eq!(cause, "mtu: mlx5_0 has MTU 1024, its peers 4096");
        let site = NodeFindings {
            profiles: vec!["site (test)".into(), "rdma-dmabuf".into()],
            ..NodeFindings::default()
        };
        assert_eq!(
            fixable("d", Some(&site), std::slice::from_ref(cause))
                .unwrap()
                .command,
            "gdrprov apply 'site (test)' rdma-dmabuf"
        );
        // Not a profile name (a report not from gdrprov): never in the command.
        let forged = NodeFindings {
            profiles: vec!["x; rm -rf /".into(), "../a".into()],
            ..NodeFindings::default()
        };
        assert_eq!(
            fixable("d", Some(&forged), std::slice::from_ref(cause))
                .unwrap()
                .command,
            "gdrprov apply PROFILE"
        );
        assert_eq!(
            fixable("d", None, std::slice::from_ref(cause))
                .unwrap()
                .command,
            "gdrprov apply PROFILE"
        );
    }
}
