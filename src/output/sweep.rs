//! The fleet sweep's report for people (text) and for node-exporter
//! (Prometheus exposition).

use crate::names;
use crate::suggest::{Given, Suggest};
use std::fmt::Write as _;

use crate::fleet::render::*;

fn frac(f: Option<f64>) -> String {
    f.map(|f| format!("{f:.2}")).unwrap_or_else(|| "n/a".into())
}

/// One verdict: what is bad and what is done, its fix when it has one, the evidence.
fn verdict(s: &mut String, v: &Verdict) {
    let what = match v.kind {
        Kind::BadNode => "bad node",
        Kind::BadRail => "bad rail",
        Kind::BadPath => "bad path",
        Kind::FleetWide => "fleet-wide",
    };
    let _ = writeln!(
        s,
        "{what} {}: {} -> {}",
        v.node.as_deref().unwrap_or("*"),
        v.summary,
        v.action
    );
    if let Some(f) = &v.fix {
        let _ = writeln!(
            s,
            "  fixable: {}; run `{}` on it",
            f.causes.join("; "),
            f.command
        );
    }
    for e in &v.evidence {
        let _ = writeln!(
            s,
            "  round {} with {} on {}: {:.2} Gb/s ({} of line rate, {:.2} of the median){}; {} fine with {} others",
            e.round,
            e.partner,
            e.rail,
            e.gbps,
            frac(e.fraction),
            e.of_median,
            if e.data_ok { "" } else { ", data check FAILED or no result" },
            e.partner,
            e.partner_fine_with
        );
    }
}

/// The report for people.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sweep: {} nodes, {} rails, {} rounds, {} measurements",
        r.nodes,
        r.rails.len(),
        r.rounds,
        r.measurements
    );
    let _ = writeln!(
        s,
        "{:<12} {:>12} {:>13} {:>8} {:>6}",
        "rail", "median Gb/s", "of line rate", "spread", "cut"
    );
    for x in &r.rails {
        let _ = writeln!(
            s,
            "{:<12} {:>12.2} {:>13} {:>8.3} {:>6.2}{}",
            x.rail,
            x.median_gbps,
            frac(x.median_fraction),
            x.spread,
            x.cut,
            if x.below_floor {
                "  BELOW THE FLOOR"
            } else {
                ""
            }
        );
    }
    if r.verdicts.is_empty() {
        let _ = writeln!(s, "no bad node, rail or path found");
    }
    for v in &r.verdicts {
        verdict(&mut s, v);
    }
    if !r.suspects.is_empty() || !r.path_retests.is_empty() {
        let _ = writeln!(
            s,
            "to retest ({} nodes, {} paths): {} (RESULTS: the results so far)",
            r.suspects.len(),
            r.path_retests.len(),
            Suggest::new(names::FLEET_SWEEP_PLAN)
                .arg("--retest")
                .arg("RESULTS")
                .shown(&Given::none())
        );
        for x in &r.suspects {
            let _ = writeln!(s, "  {} on {}", x.node, x.rails.join(","));
        }
    }
    gid_indexes(&mut s, r);
    if !r.unread.is_empty() {
        let _ = writeln!(
            s,
            "not judged ({} file(s) could not be read; their nodes are neither drained nor resumed):",
            r.unread.len()
        );
        for u in &r.unread {
            let _ = writeln!(s, "  {}: {}", u.nodes.join(", "), u.problem);
        }
    }
    let d = &r.slurm;
    let _ = writeln!(
        s,
        "slurm: drain {}, resume {} (cap {})",
        d.drain.len(),
        d.resume.len(),
        d.cap
    );
    if let Some(why) = &d.held_because {
        let _ = writeln!(s, "  held: {why}");
    }
    for line in d.script().lines() {
        let _ = writeln!(s, "  {line}");
    }
    s
}

/// The nodes whose NCCL_IB_GID_INDEX differs from most nodes', when some do.
fn gid_indexes(s: &mut String, r: &Report) {
    let Some(g) = &r.gid_index_disagreement else {
        return;
    };
    let odd: Vec<String> = g
        .odd
        .iter()
        .map(|o| format!("{} ({})", o.node, o.gid_index))
        .collect();
    let _ = writeln!(
        s,
        "NCCL_IB_GID_INDEX differs from most nodes' ({} on {}): {}; NCCL between nodes with different GID indexes fails with completion error 12: give every node the same (roce-gid in their verify)",
        g.usual,
        g.nodes_with_usual,
        odd.join(", ")
    );
}

fn header(s: &mut String, name: &str, help: &str) {
    let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
}

/// The report as Prometheus text exposition (node-exporter's textfile collector).
pub fn prometheus(r: &Report) -> String {
    use crate::output::exposition::escape_label as esc;
    let mut s = String::new();
    let m = "gdrprov_sweep_rail_median_gbps";
    header(
        &mut s,
        m,
        "Median pair bandwidth of the rail over the sweep, Gb/s.",
    );
    for x in &r.rails {
        let _ = writeln!(s, "{m}{{rail=\"{}\"}} {}", esc(&x.rail), x.median_gbps);
    }
    let m = "gdrprov_sweep_bad";
    header(
        &mut s,
        m,
        "1 for each bad node, rail or path the sweep found (kind, node, rail).",
    );
    verdict_samples(&mut s, m, r.verdicts.iter());
    map_metrics(&mut s, r);
    for (name, help, value) in [
        (
            "gdrprov_sweep_suspects",
            "Nodes left to retest.",
            r.suspects.len(),
        ),
        (
            "gdrprov_sweep_drain",
            "Nodes the sweep drains.",
            r.slurm.drain.len(),
        ),
        (
            "gdrprov_sweep_held",
            "Nodes not drained because of the cap.",
            r.slurm.held.len(),
        ),
        (
            "gdrprov_sweep_rounds",
            "Rounds measured.",
            r.rounds as usize,
        ),
        (
            "gdrprov_sweep_unread_files",
            "Result or verify files that could not be read (their nodes not judged).",
            r.unread.len(),
        ),
    ] {
        header(&mut s, name, help);
        let _ = writeln!(s, "{name} {value}");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let m = "gdrprov_sweep_timestamp_seconds";
    header(&mut s, m, "When this report was made (Unix time).");
    let _ = writeln!(s, "{m} {now}");
    s
}

/// The node x rail map: each node's fraction of the rail median, the
/// verdicts `gdrprov apply` fixes, the suspects left to retest, and the
/// nodes drained once the sweep's decisions ran. Labels: node, rail, kind.
fn map_metrics(s: &mut String, r: &Report) {
    use crate::output::exposition::escape_label as esc;
    let g = &r.grid;
    let m = "gdrprov_sweep_of_rail_median";
    header(
        s,
        m,
        "The median of the node's pair bandwidth on the rail over the rail's median (1 = typical; a failed run counts 0).",
    );
    for (n, node) in g.nodes.iter().enumerate() {
        for (i, rail) in g.rails.iter().enumerate() {
            if let Some(v) = g.of_median[g.cell(n, i)] {
                let _ = writeln!(
                    s,
                    "{m}{{node=\"{}\",rail=\"{}\"}} {v:.4}",
                    esc(node),
                    esc(rail)
                );
            }
        }
    }
    let m = "gdrprov_sweep_fixable";
    header(
        s,
        m,
        "1 for each bad node or rail whose cause is configuration: an apply of the node's profiles fixes it (kind, node, rail).",
    );
    verdict_samples(s, m, r.verdicts.iter().filter(|v| v.fix.is_some()));
    let m = "gdrprov_sweep_suspect";
    header(
        s,
        m,
        "1 for each node rail left undecided, to retest with fresh partners (fleet sweep plan --retest).",
    );
    for x in &r.suspects {
        for rail in &x.rails {
            let _ = writeln!(
                s,
                "{m}{{node=\"{}\",rail=\"{}\"}} 1",
                esc(&x.node),
                esc(rail)
            );
        }
    }
    let m = "gdrprov_slurm_drained";
    header(
        s,
        m,
        "1 for each node drained in Slurm once the sweep's decisions ran (drained before and not resumed, or drained by it).",
    );
    for node in &g.drained {
        let _ = writeln!(s, "{m}{{node=\"{}\"}} 1", esc(node));
    }
}

/// One sample `M{kind,node,rail} 1` for each rail of each verdict.
fn verdict_samples<'a>(s: &mut String, m: &str, verdicts: impl Iterator<Item = &'a Verdict>) {
    use crate::output::exposition::escape_label as esc;
    for v in verdicts {
        let kind = kind_name(v.kind);
        for rail in &v.rails {
            let _ = writeln!(
                s,
                "{m}{{kind=\"{kind}\",node=\"{}\",rail=\"{}\"}} 1",
                esc(v.node.as_deref().unwrap_or("")),
                esc(rail)
            );
        }
    }
}

/// A verdict's kind as the JSON and the metrics name it (`bad-rail`).
pub fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::BadNode => "bad-node",
        Kind::BadRail => "bad-rail",
        Kind::BadPath => "bad-path",
        Kind::FleetWide => "fleet-wide",
    }
}
