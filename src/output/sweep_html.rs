//! The sweep report as one self-contained HTML page (`fleet sweep report
//! --format html`): a node x rail map coloured by each node's fraction of the
//! rail median, with bad, fixable, suspect and drained marked; every verdict
//! with its evidence (the pairs that made it) one click away. No network, no
//! external script: the style and the script are in the page, the map's
//! data is JSON in it. Rendered by handlebars from
//! templates/sweep-report.html.hbs, every value HTML-escaped; the map's JSON
//! has `<`, `>` and `&` as \u escapes, so no value can end its script element.

use crate::error::{Error, Result};
use crate::fleet::classify::State;
use crate::fleet::render::{Report, Verdict};
use serde_json::{json, Value};

const TEMPLATE: &str = include_str!("../../templates/sweep-report.html.hbs");

fn num(v: f64, places: usize) -> String {
    format!("{v:.places$}")
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |f| num(f, 2))
}

fn verdict(i: usize, v: &Verdict) -> Value {
    let kind = super::sweep::kind_name(v.kind);
    json!({
        "id": format!("v{i}"),
        "kind": kind,
        "node": v.node.as_deref().unwrap_or("*"),
        "peer": v.peer,
        "rails": v.rails.join(", "),
        "summary": v.summary,
        "action": if v.fix.is_some() { "fix" } else { v.action },
        "fix": v.fix.as_ref().map(|f| json!({"causes": f.causes.join("; "), "command": f.command})),
        "pairs": v.evidence.len(),
        "evidence": v.evidence.iter().map(|e| json!({
            "round": e.round,
            "partner": e.partner,
            "rail": e.rail,
            "gbps": num(e.gbps, 2),
            "fraction": opt(e.fraction),
            "of_median": num(e.of_median, 2),
            "data_ok": if e.data_ok { "ok" } else { "FAILED" },
            "fine_with": e.partner_fine_with,
        })).collect::<Vec<_>>(),
    })
}

/// The map's data: names, per cell the permille of the rail median (-1:
/// unmeasured) and a state letter (u g s b), fixable cells, drained nodes,
/// and the verdicts (by id) on each node.
fn map_data(r: &Report) -> Value {
    let g = &r.grid;
    let index = |n: &str| g.nodes.iter().position(|x| x == n);
    let rail = |n: &str| g.rails.iter().position(|x| x == n);
    let permille: Vec<i64> = g
        .of_median
        .iter()
        .map(|v| v.map_or(-1, |f| (f * 1000.0).round() as i64))
        .collect();
    let states: String = g
        .state
        .iter()
        .map(|s| match s {
            State::Unmeasured => 'u',
            State::Good => 'g',
            State::Suspect => 's',
            State::Bad => 'b',
        })
        .collect();
    let mut fixable = Vec::new();
    let mut verdicts: Vec<(usize, String)> = Vec::new();
    for (i, v) in r.verdicts.iter().enumerate() {
        for n in [v.node.as_deref(), v.peer.as_deref()].into_iter().flatten() {
            if let Some(n) = index(n) {
                verdicts.push((n, format!("v{i}")));
                if v.fix.is_some() {
                    fixable.extend(v.rails.iter().filter_map(|x| rail(x)).map(|x| g.cell(n, x)));
                }
            }
        }
    }
    json!({
        "nodes": g.nodes,
        "rails": g.rails,
        "f": permille,
        "s": states,
        "fixable": fixable,
        "drained": g.drained.iter().filter_map(|n| index(n)).collect::<Vec<_>>(),
        "verdicts": verdicts,
    })
}

/// JSON safe inside a script element.
fn script_json(v: &Value) -> String {
    v.to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

/// The page.
pub fn render(r: &Report) -> Result<String> {
    let d = &r.slurm;
    let context = json!({
        "nodes": r.nodes,
        "rail_count": r.rails.len(),
        "rounds": r.rounds,
        "measurements": r.measurements,
        "relative": num(r.thresholds.relative, 2),
        "floor": num(r.thresholds.floor, 2),
        "rails": r.rails.iter().map(|x| json!({
            "rail": x.rail,
            "median": num(x.median_gbps, 2),
            "fraction": opt(x.median_fraction),
            "spread": num(x.spread, 3),
            "cut": num(x.cut, 2),
            "below_floor": x.below_floor,
        })).collect::<Vec<_>>(),
        "verdict_count": r.verdicts.len(),
        "suspect_count": r.suspects.len(),
        "verdicts": r.verdicts.iter().enumerate().map(|(i, v)| verdict(i, v)).collect::<Vec<_>>(),
        "suspects": r.suspects.iter().map(|x| json!({"node": x.node, "rails": x.rails.join(", ")})).collect::<Vec<_>>(),
        "path_retests": r.path_retests,
        "drain": d.drain,
        "resume": d.resume,
        "held": d.held.join(", "),
        "held_because": d.held_because,
        "cap": d.cap,
        "drained": r.grid.drained.join(", "),
        "map": script_json(&map_data(r)),
    });
    let mut hb = handlebars::Handlebars::new();
    hb.set_strict_mode(true);
    let failed = |msg: String| Error::Template {
        template: "templates/sweep-report.html.hbs".into(),
        path: "the HTML report".into(),
        msg,
    };
    hb.register_template_string("report", TEMPLATE)
        .map_err(|e| failed(e.to_string()))?;
    hb.render("report", &context)
        .map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::classify::{classify, Thresholds};
    use crate::fleet::render::{report, Context};
    use crate::fleet::{Obs, Sweep};

    /// Node names are whatever the result files were called: every one escaped.
    #[test]
    fn hostile_names_are_escaped_in_the_page_and_in_the_map() {
        let evil = "<script>alert(1)</script>&\"'";
        let names = ["a", "b", "c", "d", evil].map(String::from).to_vec();
        let mut s = Sweep::new(names, vec!["mlx5_0".into()]);
        let good = [(0, 1), (2, 3), (0, 2), (1, 3), (0, 3), (1, 2)];
        let low = [(0, 4), (1, 4), (2, 4), (3, 4)];
        for (i, (a, b)) in good.into_iter().chain(good).chain(low).enumerate() {
            let round = i as u32 + 1;
            let gbps = if b == 4 { 40.0 } else { 100.0 };
            s.obs.push(Obs {
                round,
                a,
                b,
                rail: 0,
                gbps,
                fraction: None,
                data_ok: true,
            });
        }
        let c = classify(&s, &Thresholds::default());
        let r = report(
            &s,
            &c,
            &Context {
                cap: 1,
                ..Context::default()
            },
        );
        assert!(
            r.verdicts.iter().any(|v| v.node.as_deref() == Some(evil)),
            "{:?}",
            r.verdicts
        );
        let html = render(&r).unwrap();
        assert!(!html.contains("<script>alert"), "raw name in the page");
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;&amp;"),
            "escaped name missing"
        );
        let data = html.split("id=\"map-data\">").nth(1).unwrap();
        let data = data.split("</script>").next().unwrap();
        assert!(
            data.contains("\\u003cscript\\u003ealert(1)\\u003c/script\\u003e\\u0026"),
            "{data}"
        );
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["nodes"][4], evil);
        assert_eq!(v["s"].as_str().unwrap().len(), 5);
    }
}
