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
pub const CONFIG_CHECKS: &[&str] = &[
    "mtu",
    "acs",
    "modules",
    "configuration",
    "roce-mtu",
    "roce-gid",
];

/// What a node's verify said that apply can fix.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct NodeFindings {
    pub profiles: Vec<String>,
    pub ready: Option<bool>,
    /// `check: detail` of each configuration check that failed.
    pub causes: Vec<String>,
    /// NCCL_IB_GID_INDEX as the node's `roce-gid` check read it (`unset` when not set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<String>,
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
        gid_index: doc
            .checks
            .iter()
            .flatten()
            .find(|c| c.name == "roce-gid")
            .and_then(|c| gid_index_of(c.detail.as_deref()?)),
    }
}

/// The GID index a `roce-gid` detail names: `NCCL_IB_GID_INDEX=3 (...)` gives `3`,
/// `NCCL_IB_GID_INDEX is not set...` gives `unset`.
fn gid_index_of(detail: &str) -> Option<String> {
    let d = detail.trim_start_matches("warning: ");
    if d.starts_with("NCCL_IB_GID_INDEX is not set") {
        return Some("unset".into());
    }
    let v = d.strip_prefix("NCCL_IB_GID_INDEX=")?;
    let end = v.find([' ', ':']).unwrap_or(v.len());
    (end > 0).then(|| v[..end].to_string())
}

/// Nodes whose NCCL_IB_GID_INDEX differs from most nodes' (issue 48): the fleet report lists
/// them whether or not they were slow (`gid_index_disagreement`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GidDisagreement {
    /// The value most nodes have (`unset` when most set none).
    pub usual: String,
    /// How many nodes have it.
    pub nodes_with_usual: usize,
    /// Each node with another value, by name.
    pub odd: Vec<OddGid>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OddGid {
    pub node: String,
    pub gid_index: String,
}

/// The nodes whose NCCL_IB_GID_INDEX (from their verify reports) differs from the most common
/// value; `None` when every node that says agrees.
pub fn gid_disagreement(findings: &HashMap<String, NodeFindings>) -> Option<GidDisagreement> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for g in findings.values().filter_map(|f| f.gid_index.clone()) {
        *counts.entry(g).or_default() += 1;
    }
    if counts.len() < 2 {
        return None;
    }
    let (usual, n) = counts
        .iter()
        .max_by_key(|(g, n)| (**n, std::cmp::Reverse((*g).clone())))
        .map(|(g, n)| (g.clone(), *n))?;
    let mut odd: Vec<OddGid> = findings
        .iter()
        .filter_map(|(node, f)| {
            let g = f.gid_index.clone().filter(|g| *g != usual)?;
            Some(OddGid {
                node: node.clone(),
                gid_index: g,
            })
        })
        .collect();
    odd.sort_by(|a, b| a.node.cmp(&b.node));
    Some(GidDisagreement {
        usual,
        nodes_with_usual: n,
        odd,
    })
}

/// Nodes whose NCCL_IB_GID_INDEX differs from most nodes' (issue 48: NCCL on two nodes
/// with different GID indexes fails with completion error 12): each gets a cause, so a bad
/// node among them is fixable rather than drained. Returns the disagreement for the report.
pub fn mark_odd_gid_indexes(
    findings: &mut HashMap<String, NodeFindings>,
) -> Option<GidDisagreement> {
    let d = gid_disagreement(findings)?;
    for o in &d.odd {
        if let Some(f) = findings.get_mut(&o.node) {
            f.causes.push(format!(
                "roce-gid: NCCL_IB_GID_INDEX is {} here and {} on most nodes",
                o.gid_index, d.usual
            ));
        }
    }
    Some(d)
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
    fn a_gid_index_unlike_most_nodes_is_a_cause() {
        let doc = |detail: &str| {
            from_verify(
                &json!({"profiles": ["rdma-dmabuf"], "ready": true, "checks": [
                {"name": "roce-gid", "status": "pass", "detail": detail}]}),
            )
        };
        let mut all: HashMap<String, NodeFindings> = HashMap::new();
        for n in ["a", "b", "c"] {
            all.insert(n.into(), doc("NCCL_IB_GID_INDEX=3 (/etc/nccl.conf): mlx5_0:1 GID 3 ::ffff:10.0.0.1 (RoCE v2)"));
        }
        all.insert("d".into(), doc("NCCL_IB_GID_INDEX is not set: NCCL picks a RoCE v2 GID itself; mlx5_0:1 routable RoCE v2 GID 3 ::ffff:10.0.0.4"));
        assert_eq!(all["d"].gid_index.as_deref(), Some("unset"));
        let d = mark_odd_gid_indexes(&mut all).unwrap();
        assert_eq!((d.usual.as_str(), d.nodes_with_usual), ("3", 3));
        assert_eq!(
            d.odd,
            [OddGid {
                node: "d".into(),
                gid_index: "unset".into()
            }]
        );
        assert_eq!(
            all["d"].causes,
            ["roce-gid: NCCL_IB_GID_INDEX is unset here and 3 on most nodes"]
        );
        assert!(all["a"].causes.is_empty());
        assert_eq!(
            fixable("d", all.get("d"), &[]).unwrap().command,
            "gdrprov apply rdma-dmabuf"
        );
        // A failed roce-gid is a configuration cause of its own.
        let f = from_verify(&json!({"profiles": ["p"], "ready": false, "checks": [
            {"name": "roce-gid", "status": "fail", "detail": "NCCL_IB_GID_INDEX=1 (environment): mlx5_0:1 GID 1 is fe80::1 (RoCE v2): link-local"}]}));
        assert_eq!(f.gid_index.as_deref(), Some("1"));
        assert!(f.causes[0].starts_with("roce-gid: NCCL_IB_GID_INDEX=1"));
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
