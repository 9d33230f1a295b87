//! What the scheduler is told: which nodes to drain (with a reason that says
//! what and why), which to resume, under a cap; the `scontrol` command lines;
//! and Slurm's host lists (`gpu[001-064,070]`).
//!
//! The cap: a sweep never drains more than `max_drain` nodes (default 10% of
//! the nodes, at least one) without being told to. When more would be
//! drained, none is: many nodes bad at once is likelier a shared cause (a
//! switch, a fabric setting) than that many broken nodes, and draining them
//! would take the cluster down for it. `--max-drain N` raises the cap.
//!
//! Slurm allocates no drained node, so a node a sweep drained cannot be in
//! the next sweep's job. examples/slurm/gdrprov-sweep-submit.sh puts those
//! nodes in a maintenance reservation that only the sweep's user may use,
//! resumes them and submits the sweep into the reservation: they are on
//! *probation*. This sweep then keeps in service a probation node it clears
//! and drains again any other (with this sweep's reason when it found the
//! node bad, else the earlier one), outside the cap: they were drained
//! before this sweep began.

use crate::error::{Error, Result};
use crate::grammar::{shown, NodeName};
use crate::host::CommandSpec;
use serde::Serialize;

/// Reasons gdrprov writes start with this; only those are ever resumed.
pub const REASON_PREFIX: &str = "gdrprov: ";
/// The health check's reasons (resumed by the health check only, never by a sweep).
pub const HEALTHCHECK_PREFIX: &str = "gdrprov: verify";

/// The cap: EXPLICIT, else PERCENT of NODES rounded down, at least one.
pub fn cap(nodes: usize, percent: f64, explicit: Option<usize>) -> usize {
    explicit.unwrap_or_else(|| ((nodes as f64 * percent / 100.0).floor() as usize).max(1))
}

/// One node to drain or resume, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Action {
    pub node: String,
    pub reason: String,
    /// The `scontrol` command that does it (empty: nothing to run, a
    /// probation node that stays in service).
    pub argv: Vec<String>,
}

/// Everything the scheduler is told.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Decisions {
    pub cap: usize,
    pub drain: Vec<Action>,
    pub resume: Vec<Action>,
    /// Hardware suspects not drained because they are more than the cap.
    pub held: Vec<String>,
    /// Why nothing was drained, when the cap held it back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_because: Option<String>,
}

impl Decisions {
    /// The command lines, one a line, for a runner to run (`sh FILE`).
    pub fn script(&self) -> String {
        let mut s = String::new();
        for a in self.drain.iter().chain(&self.resume) {
            if a.argv.is_empty() {
                continue; // a probation node kept in service: nothing to run
            }
            s.push_str(
                &CommandSpec::new(&a.argv.iter().map(String::as_str).collect::<Vec<_>>(), "")
                    .shell_line(),
            );
            s.push('\n');
        }
        s
    }
}

pub fn drain_argv(node: &str, reason: &str) -> Vec<String> {
    vec![
        "scontrol".into(),
        "update".into(),
        format!("NodeName={node}"),
        "State=DRAIN".into(),
        format!("Reason={reason}"),
    ]
}

pub fn resume_argv(node: &str) -> Vec<String> {
    vec![
        "scontrol".into(),
        "update".into(),
        format!("NodeName={node}"),
        "State=RESUME".into(),
    ]
}

/// A reason as Slurm keeps it: one line, no double quotes, short.
pub fn clean_reason(reason: &str) -> String {
    let one: String = reason
        .chars()
        .map(|c| if c == '"' || c.is_control() { ' ' } else { c })
        .collect();
    let one = one.trim();
    let text = if one.starts_with(REASON_PREFIX) {
        one.to_string()
    } else {
        format!("{REASON_PREFIX}{one}")
    };
    text.chars().take(200).collect()
}

/// Drains SUSPECTS (node, reason) unless they are more than CAP; resumes
/// each node of DRAINED (drained earlier by a sweep, with its reason) that
/// CLEARED says this sweep found fine. A node drained for another reason, or
/// by the health check, is left alone. PROBATION (node, earlier reason):
/// nodes drained by an earlier sweep and resumed for this one (see the
/// module's documentation).
pub fn decide(
    suspects: &[(String, String)],
    drained: &[(String, String)],
    probation: &[(String, String)],
    cleared: &dyn Fn(&str) -> bool,
    cap: usize,
) -> Decisions {
    let mut d = Decisions {
        cap,
        ..Decisions::default()
    };
    // Sets, not scans: a node list holds up to MAX_HOSTS names.
    let probation_set: std::collections::HashSet<&str> =
        probation.iter().map(|(n, _)| n.as_str()).collect();
    let drained_set: std::collections::HashSet<&str> =
        drained.iter().map(|(n, _)| n.as_str()).collect();
    let suspect_reason: std::collections::HashMap<&str, &String> =
        suspects.iter().map(|(n, r)| (n.as_str(), r)).collect();
    let on_probation = |n: &str| probation_set.contains(n);
    let already = |n: &str| drained_set.contains(n) || on_probation(n);
    let new: Vec<&(String, String)> = suspects.iter().filter(|(n, _)| !already(n)).collect();
    // The cap counts every node a sweep keeps drained, old and new.
    let kept_old = drained
        .iter()
        .filter(|(n, r)| is_sweep_reason(r) && suspect_reason.contains_key(n.as_str()))
        .count();
    if new.len() + kept_old > cap {
        d.held = new.iter().map(|(n, _)| n.clone()).collect();
        d.held_because = Some(format!(
            "{} nodes would be drained, more than the cap of {cap}: a shared cause (a switch, a fabric setting) is likelier than that many broken nodes; check it, or pass --max-drain {}",
            new.len() + kept_old,
            new.len() + kept_old
        ));
    } else {
        d.drain = new.iter().map(|(n, r)| drain_action(n, r)).collect();
    }
    d.resume = drained
        .iter()
        .filter(|(n, r)| is_sweep_reason(r) && cleared(n) && !on_probation(n))
        .map(|(n, _)| Action {
            node: n.clone(),
            reason: "gdrprov: the sweep found it fine on every rail".into(),
            argv: resume_argv(n),
        })
        .collect();
    for (n, earlier) in probation {
        if cleared(n) {
            d.resume.push(Action {
                node: n.clone(),
                reason: "gdrprov: the sweep found it fine on every rail (resumed for this sweep: stays in service)".into(),
                argv: Vec::new(),
            });
        } else {
            let now = suspect_reason.get(n.as_str()).copied();
            d.drain.push(drain_action(n, now.unwrap_or(earlier)));
        }
    }
    d
}

fn drain_action(node: &str, reason: &str) -> Action {
    let reason = clean_reason(reason);
    Action {
        argv: drain_argv(node, &reason),
        node: node.to_string(),
        reason,
    }
}

/// A reason a sweep wrote (not the health check's, not a person's).
pub fn is_sweep_reason(reason: &str) -> bool {
    reason.starts_with(REASON_PREFIX) && !reason.starts_with(HEALTHCHECK_PREFIX)
}

/// Drained nodes as `sinfo -h -N -t drain,draining -o '%N|%E'` prints them
/// (one `NODE|REASON` a line), each node once (its first line), at most
/// [`MAX_HOSTS`] of them: a longer list is refused, naming `what` (the
/// option), before the sweep's work grows with it (issue 37: 200,000 lines
/// took over a minute, deduplicated pairwise).
pub fn parse_drained(text: &str, what: &str) -> Result<Vec<(String, String)>> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (node, reason) = line.split_once('|').unwrap_or((line, ""));
        let node = node.trim();
        if seen.contains(node) {
            continue;
        }
        NodeName::parse(node).map_err(|e| {
            Error::Usage(format!(
                "{what}: {e}; give the output of `sinfo -h -N -t drain,draining -o '%N|%E'`"
            ))
        })?;
        if out.len() == MAX_HOSTS {
            return Err(Error::Usage(format!(
                "{what}: it names more than {MAX_HOSTS} nodes, more than any Slurm cluster; give the output of `sinfo -h -N -t drain,draining -o '%N|%E'` for the sweep's cluster"
            )));
        }
        seen.insert(node.to_string());
        out.push((node.to_string(), reason.trim().to_string()));
    }
    Ok(out)
}

/// The most nodes one host list may name: past any Slurm cluster (the
/// largest run about 10,000 nodes), so a list that names more is a mistake,
/// refused before it takes memory.
pub const MAX_HOSTS: usize = 65_536;
/// The widest zero-padded number in a range (`gpu[0001-0064]`: 4).
const MAX_WIDTH: usize = 12;

/// Expands a Slurm host list: `gpu[001-003,7],login1` is gpu001 gpu002
/// gpu003 gpu7 login1 (zero padding kept from the range's start). At most
/// [`MAX_HOSTS`] names, counted before any is made; each a [`NodeName`]
/// (a newline, `;`, `$(...)` or a space in the list is refused here).
pub fn expand_hostlist(list: &str) -> Result<Vec<NodeName>> {
    let bad = |why: &str| {
        Error::Usage(format!(
            "host list \"{}\": {why}; write it as Slurm does, e.g. gpu[001-064,070],login1",
            shown(list)
        ))
    };
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' if depth == 0 => return Err(bad("a `]` without its `[`")),
            ']' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(bad("a `[` without its `]`"));
    }
    items.push(&list[start..]);
    for item in items.into_iter().map(str::trim).filter(|s| !s.is_empty()) {
        expand_item(item, &mut out).map_err(|w| bad(&w))?;
    }
    out.into_iter()
        .map(|n| NodeName::parse(&n).map_err(|e| bad(&e.to_string())))
        .collect()
}

fn too_many() -> String {
    format!("it names more than {MAX_HOSTS} nodes; give fewer (split the sweep)")
}

/// Appends `item`'s names to `out`, never past [`MAX_HOSTS`] in all.
fn expand_item(item: &str, out: &mut Vec<String>) -> std::result::Result<(), String> {
    let Some(open) = item.find('[') else {
        if out.len() >= MAX_HOSTS {
            return Err(too_many());
        }
        out.push(item.to_string());
        return Ok(());
    };
    let close = item[open..]
        .find(']')
        .map(|c| c + open)
        .ok_or("a `[` without its `]`")?;
    let (prefix, ranges, rest) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    let mut tails = Vec::new();
    expand_item(rest, &mut tails)?;
    if rest.is_empty() {
        tails = vec![String::new()];
    }
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let width = lo.len();
        if width > MAX_WIDTH || hi.len() > MAX_WIDTH {
            return Err(format!(
                "`{range}` has numbers of more than {MAX_WIDTH} digits"
            ));
        }
        let a: u64 = lo
            .parse()
            .map_err(|_| format!("`{range}` is not a number range"))?;
        let b: u64 = hi
            .parse()
            .map_err(|_| format!("`{range}` is not a number range"))?;
        if b < a {
            return Err(format!("`{range}` is not a range from low to high"));
        }
        let names = (b - a)
            .checked_add(1)
            .and_then(|n| usize::try_from(n).ok())
            .and_then(|n| n.checked_mul(tails.len()));
        if names.is_none_or(|n| n > MAX_HOSTS - out.len()) {
            return Err(too_many());
        }
        for v in a..=b {
            for t in &tails {
                out.push(format!("{prefix}{v:0width$}{t}"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_is_ten_percent_at_least_one_or_as_told() {
        assert_eq!(cap(4096, 10.0, None), 409);
        assert_eq!(cap(8, 10.0, None), 1);
        assert_eq!(cap(3, 10.0, None), 1);
        assert_eq!(cap(100, 10.0, Some(30)), 30);
    }

    #[test]
    fn drains_with_reason_resumes_only_its_own() {
        let suspects = vec![(
            "n1".to_string(),
            "rail mlx5_2 0.41 of line rate with 3 partners".to_string(),
        )];
        let drained = vec![
            (
                "n5".to_string(),
                "gdrprov: rail mlx5_0 0.5 of line rate with 2 partners".to_string(),
            ),
            ("n6".to_string(), "bad DIMM".to_string()),
            (
                "n7".to_string(),
                "gdrprov: verify failed: modules".to_string(),
            ),
        ];
        let d = decide(&suspects, &drained, &[], &|_| true, 2);
        assert_eq!(d.drain.len(), 1);
        assert_eq!(
            d.drain[0].argv,
            vec![
                "scontrol",
                "update",
                "NodeName=n1",
                "State=DRAIN",
                "Reason=gdrprov: rail mlx5_2 0.41 of line rate with 3 partners"
            ]
        );
        let resumed: Vec<&str> = d.resume.iter().map(|a| a.node.as_str()).collect();
        assert_eq!(
            resumed,
            vec!["n5"],
            "a person's drain and the health check's stay"
        );
        assert!(d.script().contains(
            "scontrol update NodeName=n1 State=DRAIN 'Reason=gdrprov: rail mlx5_2 0.41 of line rate with 3 partners'\n"
        ), "{}", d.script());
        assert!(d
            .script()
            .contains("scontrol update NodeName=n5 State=RESUME\n"));
    }

    #[test]
    fn over_the_cap_nothing_is_drained_and_it_says_why() {
        let suspects: Vec<(String, String)> = (0..3)
            .map(|i| (format!("n{i}"), "every rail low".to_string()))
            .collect();
        let d = decide(&suspects, &[], &[], &|_| false, 2);
        assert!(d.drain.is_empty());
        assert_eq!(d.held.len(), 3);
        assert!(d.held_because.unwrap().contains("--max-drain 3"));
        let d = decide(&suspects, &[], &[], &|_| false, 3);
        assert_eq!(d.drain.len(), 3);
    }

    #[test]
    fn a_node_still_bad_is_not_drained_twice_nor_resumed() {
        let suspects = vec![("n1".to_string(), "x".to_string())];
        let drained = vec![("n1".to_string(), "gdrprov: x".to_string())];
        let d = decide(&suspects, &drained, &[], &|_| false, 1);
        assert!(d.drain.is_empty() && d.resume.is_empty() && d.held.is_empty());
    }

    #[test]
    fn probation_nodes_stay_when_cleared_and_go_back_otherwise() {
        let probation = vec![
            ("p1".to_string(), "gdrprov: rail rxe0 0.02 Gb/s".to_string()),
            ("p2".to_string(), "gdrprov: rail rxe0 0.02 Gb/s".to_string()),
            ("p3".to_string(), "gdrprov: every rail low".to_string()),
        ];
        // p1 cleared, p2 bad again (this sweep's reason), p3 undecided (its old reason);
        // n1 new and bad: the cap of 1 is not used up by the probation nodes.
        let suspects = vec![
            (
                "p2".to_string(),
                "rail rxe0 0.03 Gb/s with 2 partners".to_string(),
            ),
            ("n1".to_string(), "every rail low".to_string()),
        ];
        let d = decide(&suspects, &[], &probation, &|n| n == "p1", 1);
        let drained: Vec<(&str, &str)> = d
            .drain
            .iter()
            .map(|a| (a.node.as_str(), a.reason.as_str()))
            .collect();
        assert_eq!(
            drained,
            vec![
                ("n1", "gdrprov: every rail low"),
                ("p2", "gdrprov: rail rxe0 0.03 Gb/s with 2 partners"),
                ("p3", "gdrprov: every rail low"),
            ]
        );
        assert_eq!(d.resume.len(), 1);
        assert_eq!(d.resume[0].node, "p1");
        assert!(d.resume[0].argv.is_empty());
        assert!(!d.script().contains("p1"), "{}", d.script());
        assert_eq!(d.script().lines().count(), 3);
    }

    #[test]
    fn reasons_are_one_clean_line_with_the_prefix() {
        assert_eq!(clean_reason("a \"b\"\nc"), "gdrprov: a  b  c");
        assert_eq!(clean_reason("gdrprov: x"), "gdrprov: x");
    }

    #[test]
    fn sinfo_lines_parse() {
        let d = parse_drained("n1|gdrprov: rail x\nn2|\n\nn1|dup\n", "--drained").unwrap();
        assert_eq!(
            d,
            vec![
                ("n1".into(), "gdrprov: rail x".into()),
                ("n2".into(), "".into())
            ]
        );
    }

    #[test]
    fn host_lists_expand_as_slurm_does() {
        assert_eq!(
            expand_hostlist("gpu[001-003,7],login1").unwrap(),
            vec!["gpu001", "gpu002", "gpu003", "gpu7", "login1"]
        );
        assert_eq!(
            expand_hostlist("r[1-2]n[1-2]").unwrap(),
            vec!["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        for bad in ["gpu[1-", "gpu]1", "gpu[a-b]", "gpu[5-1]"] {
            let e = expand_hostlist(bad).unwrap_err().to_string();
            assert!(e.contains("host list"), "{e}");
        }
        assert_eq!(expand_hostlist("g[1-65536]").unwrap().len(), MAX_HOSTS);
    }

    /// Large ranges, several of them or nested, are refused before any
    /// memory is taken (issue 37: gigabytes, or a panic).
    #[test]
    fn host_lists_are_bounded() {
        let start = std::time::Instant::now();
        for list in [
            "g[1-65537]",
            "g[1-60000],h[1-6000]",
            "r[1-100000]n[1-100000]",
            "r[1-1000]n[1-1000]x[1-1000]",
            &format!("g[{}]", vec!["1-60000"; 1000].join(",")),
            "g[0-18446744073709551615]",
            "g[000000000000001-2]",
        ] {
            let e = expand_hostlist(list).unwrap_err().to_string();
            assert!(e.contains("more than"), "{list}: {e}");
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
    }
}
