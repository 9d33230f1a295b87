//! The files `fleet sweep` reads: host lists, pair results, verify reports,
//! Slurm's drained nodes. Every problem names the file and the fix.

use super::add_records;
use crate::commands::cli::fleet::HostsArgs;
use crate::error::{Error, Result};
use crate::fleet::remedy::{self, NodeFindings};
use crate::fleet::results;
use crate::fleet::{slurm, Sweep};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|e| Error::io("read", path.display().to_string(), e))
}

fn read_json(path: &Path) -> Result<serde_json::Value> {
    serde_json::from_str(&read_text(path)?).map_err(|e| {
        Error::Usage(format!(
            "{}: not JSON ({e}); the runner must save `--format json` output there",
            path.display()
        ))
    })
}

/// The hosts of --hosts FILE or --nodelist LIST (one of them), in order, once each.
pub fn read_hosts(h: &HostsArgs) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    if let Some(f) = &h.hosts {
        for line in read_text(f)?.lines() {
            let name = line.split('#').next().unwrap_or("").trim();
            if name.is_empty() {
                continue;
            }
            if name.contains(char::is_whitespace) || name.contains('+') {
                return Err(Error::Usage(format!(
                    "{}: `{name}` is not a host name (one name a line, no spaces or `+`)",
                    f.display()
                )));
            }
            hosts.push(name.to_string());
        }
    }
    if let Some(list) = &h.nodelist {
        hosts.extend(slurm::expand_hostlist(list)?);
    }
    if h.hosts.is_none() && h.nodelist.is_none() {
        return Err(Error::Usage(
            "which hosts? give --hosts FILE (one a line) or --nodelist LIST (a Slurm host list such as \"$SLURM_JOB_NODELIST\")".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    Ok(hosts)
}

/// Every `*.json` under DIR (recursively), sorted.
fn json_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::io("read", dir.display().to_string(), e))?;
    for e in entries {
        let e = e.map_err(|e| Error::io("read", dir.display().to_string(), e))?;
        let p = e.path();
        if p.is_dir() {
            json_files(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
    out.sort();
    Ok(())
}

/// Each (node, rail)'s port MTU, as the pair results show it.
pub type Mtus = HashMap<(String, String), u64>;

/// The pair results under DIRS as a sweep over NODES (more are added as
/// found) and RAILS, with each node rail's MTU.
pub fn load_with_mtus(
    dirs: &[PathBuf],
    nodes: Vec<String>,
    rails: &[String],
    bar: &indicatif::ProgressBar,
) -> Result<(Sweep, Mtus)> {
    let mut files = Vec::new();
    for d in dirs {
        if !d.is_dir() {
            return Err(Error::Usage(format!(
                "{} is not a directory of pair results (DIR/round-R/A+B.json)",
                d.display()
            )));
        }
        json_files(d, &mut files)?;
    }
    let mut records = Vec::new();
    bar.set_length(files.len() as u64);
    for f in &files {
        bar.inc(1);
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let Some((a, b, rail)) = results::names_from_stem(stem) else {
            return Err(Error::Usage(format!(
                "{}: the name must be LISTENER+CLIENT.json or LISTENER+CLIENT+RAIL.json",
                f.display()
            )));
        };
        let round = f
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str())
            .map(results::round_from_dir)
            .unwrap_or(0);
        let doc = read_json(f)?;
        records.extend(results::read(&doc, &a, &b, rail.as_deref(), round));
    }
    bar.finish_and_clear();
    let mut sweep = Sweep::new(nodes, rails.to_vec());
    let mut mtus = HashMap::new();
    add_records(&mut sweep, &records, &mut mtus);
    Ok((sweep, mtus))
}

pub fn load_results(
    dirs: &[PathBuf],
    nodes: Vec<String>,
    rails: &[String],
    bar: &indicatif::ProgressBar,
) -> Result<Sweep> {
    Ok(load_with_mtus(dirs, nodes, rails, bar)?.0)
}

/// DIR/NODE.json, each a `gdrprov verify --format json` document.
pub fn read_verify_dir(dir: &Path) -> Result<HashMap<String, NodeFindings>> {
    let mut files = Vec::new();
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "--verify-dir {}: not a directory (the runner saves each node's `gdrprov verify --format json` as DIR/NODE.json)",
            dir.display()
        )));
    }
    json_files(dir, &mut files)?;
    let mut out = HashMap::new();
    for f in files {
        let node = f
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string();
        out.insert(node, remedy::from_verify(&read_json(&f)?));
    }
    Ok(out)
}
