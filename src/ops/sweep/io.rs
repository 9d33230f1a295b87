//! The files `fleet sweep` reads (src/ops/sweep.rs): host lists, pair results, verify reports,
//! Slurm's drained nodes. Every problem names the file and the fix.

use super::{add_records, Hosts};
use crate::docs::pair::PairResult;
use crate::docs::{self, verify::VerifyReport, ReadError};
use crate::error::{Error, Result};
use crate::fleet::remedy::{self, NodeFindings};
use crate::fleet::render::Unread;
use crate::fleet::results;
use crate::fleet::{slurm, Sweep};
use crate::grammar::{NodeName, RailName};
use crate::host::{is_local_dir, list_local_dir, local_id, read_local_text, ReadLimit};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// The most result (or report) files one sweep reads, and how deep it looks.
const MAX_FILES: usize = 200_000;
const MAX_DEPTH: usize = 8;
/// The highest round number (a directory `round-R`) taken as a round.
const MAX_ROUND: u32 = 10_000;

/// A file named on the command line, read through the host layer's guard:
/// a regular file only (a FIFO or `/dev/zero` is refused at once), at most
/// the size its kind allows.
pub fn read_text(path: &Path, kind: ReadLimit) -> Result<String> {
    read_local_text(path, kind)
}

/// The hosts of --hosts FILE or --nodelist LIST (one of them), in order,
/// once each; every one a [`NodeName`].
pub fn read_hosts(h: &Hosts) -> Result<Vec<String>> {
    let mut hosts = Vec::new();
    if let Some(f) = &h.file {
        for (i, line) in read_text(f, ReadLimit::HostList)?.lines().enumerate() {
            let name = line.split('#').next().unwrap_or("").trim();
            if name.is_empty() {
                continue;
            }
            let name = NodeName::parse(name).map_err(|e| {
                Error::Usage(format!(
                    "--hosts {}:{}: {e} (one name a line, `#` starts a comment)",
                    f.display(),
                    i + 1
                ))
            })?;
            hosts.push(name.into_string());
        }
    }
    if let Some(list) = &h.nodelist {
        let names =
            slurm::expand_hostlist(list).map_err(|e| Error::Usage(format!("--nodelist: {e}")))?;
        hosts.extend(names.into_iter().map(NodeName::into_string));
    }
    if !h.given() {
        return Err(Error::Usage(
            "which hosts? give --hosts FILE (one a line) or --nodelist LIST (a Slurm host list such as \"$SLURM_JOB_NODELIST\")".into(),
        ));
    }
    let mut seen = std::collections::HashSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    // The bound of a Slurm host list holds for a file of names too.
    if hosts.len() > slurm::MAX_HOSTS {
        return Err(Error::Usage(format!(
            "{} hosts given: more than {}, more than any cluster a sweep runs on; give fewer (split the sweep)",
            hosts.len(),
            slurm::MAX_HOSTS
        )));
    }
    Ok(hosts)
}

/// Every `*.json` under DIR (recursively), sorted; each file once, however
/// many ways (symlinks, a directory given twice) lead to it, and each
/// directory entered once (a symlink loop ends). At most [`MAX_FILES`]
/// files, [`MAX_DEPTH`] directories deep.
struct JsonFiles {
    files: Vec<PathBuf>,
    seen: HashSet<(u64, u64)>,
}

impl JsonFiles {
    fn new() -> Self {
        JsonFiles {
            files: Vec::new(),
            seen: HashSet::new(),
        }
    }

    fn walk(&mut self, dir: &Path, depth: usize) -> Result<()> {
        let shown = || dir.display().to_string();
        let m = local_id(dir).map_err(|e| Error::io("read", shown(), e))?;
        if !self.seen.insert((m.dev, m.ino)) {
            return Ok(());
        }
        if depth > MAX_DEPTH {
            return Err(Error::Usage(format!(
                "{}: more than {MAX_DEPTH} directories deep; give the results directory (DIR/round-R/A+B.json)",
                shown()
            )));
        }
        for (p, _) in list_local_dir(dir)? {
            let Ok(m) = local_id(&p) else {
                continue;
            };
            if m.is_dir {
                self.walk(&p, depth + 1)?;
            } else if p.extension().is_some_and(|x| x == "json") && self.seen.insert((m.dev, m.ino))
            {
                if self.files.len() >= MAX_FILES {
                    return Err(Error::Usage(format!(
                        "{}: more than {MAX_FILES} result files; give fewer directories",
                        shown()
                    )));
                }
                self.files.push(p);
            }
        }
        Ok(())
    }
}

fn json_files(dir: &Path, out: &mut JsonFiles) -> Result<()> {
    out.walk(dir, 0)?;
    out.files.sort();
    Ok(())
}

/// The round of a result file: its directory's `round-R` (`roundR`, `rR`),
/// 0 for a directory named otherwise. A round number past [`MAX_ROUND`]
/// (or past u32, which would wrap) is refused, naming the file.
fn round_of(f: &Path) -> Result<u32> {
    let Some(dir) = f
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
    else {
        return Ok(0);
    };
    let digits = dir
        .trim_start_matches("round")
        .trim_start_matches('r')
        .trim_start_matches(['-', '_']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(results::round_from_dir(dir));
    }
    match digits.parse::<u32>() {
        Ok(r) if r <= MAX_ROUND => Ok(r),
        _ => Err(Error::Usage(format!(
            "{}: round {digits} is past the highest a sweep runs ({MAX_ROUND}); rename its directory round-R with R from 1 to {MAX_ROUND}",
            f.display()
        ))),
    }
}

/// A result file's name (`A+B.json`, `A+B+RAIL.json`): two node names and
/// a rail name, each by its grammar.
fn result_names(f: &Path, a: &str, b: &str, rail: Option<&str>) -> Result<()> {
    let bad = |e: crate::grammar::NameError| {
        Error::Usage(format!(
            "{}: the file's name: {e}; name it LISTENER+CLIENT.json or LISTENER+CLIENT+RAIL.json with the nodes' host names",
            f.display()
        ))
    };
    NodeName::parse(a).map_err(bad)?;
    NodeName::parse(b).map_err(bad)?;
    if let Some(r) = rail {
        RailName::parse(r).map_err(bad)?;
    }
    Ok(())
}

/// A result file's place, checked (its names are [`result_names`]'): two
/// different nodes, a round in range
/// (what the file's name and directory say: the runner's layout, refused as
/// a whole; what is inside is the document's, read by `docs::read`).
fn check_place(f: &Path, a: &str, b: &str, round: u32) -> Result<()> {
    let bad = |why: String| {
        Err(Error::Usage(format!(
            "{}: {why}; remove or fix that file",
            f.display()
        )))
    };
    if a == b {
        return bad(format!(
            "`{a}` paired with itself is not a measurement of a path between two nodes"
        ));
    }
    if round > MAX_ROUND {
        return bad(format!(
            "round {round} is past the highest a sweep runs ({MAX_ROUND})"
        ));
    }
    Ok(())
}

/// A document that could not be read, said in the report: the door's
/// refusals (not a regular file, too large) stay errors of the whole
/// command; a content that is not the document names the nodes it is of.
fn unread_or_err(e: ReadError, nodes: Vec<String>) -> Result<Unread> {
    match e {
        ReadError::Door(e) => Err(e),
        // What the document says (serde quotes the raw value: `unknown
        // variant `fail\n  gpu042: drained``) and the file's name are
        // outside text: each shown as one line, whatever it holds.
        ReadError::Doc(d) => Ok(Unread {
            nodes,
            file: crate::output::escape::one_line(&d.file).into_owned(),
            field: d
                .field
                .as_deref()
                .map(|f| crate::output::escape::one_line(f).into_owned()),
            problem: crate::output::escape::one_line(&d.to_string()).into_owned(),
        }),
    }
}

/// Each (node, rail)'s port MTU, as the pair results show it.
pub type Mtus = HashMap<(String, String), u64>;

/// The pair results under DIRS as a sweep over NODES (more are added as
/// found) and RAILS, with each node rail's MTU, and the files that could
/// not be read (their nodes are for the caller to withhold from judgement).
pub fn load_with_mtus(
    dirs: &[PathBuf],
    nodes: Vec<String>,
    rails: &[String],
    bar: &crate::output::progress::Bar,
) -> Result<(Sweep, Mtus, Vec<Unread>)> {
    let mut files = JsonFiles::new();
    for d in dirs {
        if !is_local_dir(d) {
            return Err(Error::Usage(format!(
                "{} is not a directory of pair results (DIR/round-R/A+B.json)",
                d.display()
            )));
        }
        json_files(d, &mut files)?;
    }
    let mut records = Vec::new();
    let mut unread = Vec::new();
    // Each measurement once: keyed by round, pair (either order) and rail.
    let mut measured = HashSet::new();
    bar.set_length(files.files.len() as u64);
    for f in &files.files {
        bar.inc(1);
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let Some((a, b, rail)) = results::names_from_stem(stem) else {
            return Err(Error::Usage(format!(
                "{}: the name must be LISTENER+CLIENT.json or LISTENER+CLIENT+RAIL.json",
                f.display()
            )));
        };
        result_names(f, &a, &b, rail.as_deref())?;
        let round = round_of(f)?;
        check_place(f, &a, &b, round)?;
        let doc = match docs::read::<PairResult>(f) {
            Ok(doc) => doc,
            Err(e) => {
                unread.push(unread_or_err(e, vec![a.clone(), b.clone()])?);
                continue;
            }
        };
        for r in results::read(&doc, &a, &b, rail.as_deref(), round) {
            let pair = if r.a < r.b {
                (&r.a, &r.b)
            } else {
                (&r.b, &r.a)
            };
            if measured.insert((r.round, pair.0.clone(), pair.1.clone(), r.rail.clone())) {
                records.push(r);
            }
        }
    }
    bar.finish();
    let mut sweep = Sweep::new(nodes, rails.to_vec());
    let mut mtus = HashMap::new();
    add_records(&mut sweep, &records, &mut mtus);
    Ok((sweep, mtus, unread))
}

pub fn load_results(
    dirs: &[PathBuf],
    nodes: Vec<String>,
    rails: &[String],
    bar: &crate::output::progress::Bar,
) -> Result<(Sweep, Vec<Unread>)> {
    let (sweep, _, unread) = load_with_mtus(dirs, nodes, rails, bar)?;
    Ok((sweep, unread))
}

/// DIR/NODE.json, each a `gdrprov verify --format json` document; those
/// that could not be read are added to UNREAD (their node is not judged).
pub fn read_verify_dir(
    dir: &Path,
    unread: &mut Vec<Unread>,
) -> Result<HashMap<String, NodeFindings>> {
    let mut files = JsonFiles::new();
    if !is_local_dir(dir) {
        return Err(Error::Usage(format!(
            "--verify-dir {}: not a directory (the runner saves each node's `verify --format json` output, of its profiles, as DIR/NODE.json)",
            dir.display()
        )));
    }
    json_files(dir, &mut files)?;
    let mut out = HashMap::new();
    for f in files.files {
        let stem = f
            .file_stem()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default();
        let node = NodeName::parse(&stem).map_err(|e| {
            Error::Usage(format!(
                "--verify-dir: {}: the file's name: {e}; save each node's report as DIR/NODE.json",
                f.display()
            ))
        })?;
        // A report's `profiles` go into the fix command it prints: each is
        // a ProfileName (docs::verify's check), else the node is not judged.
        match docs::read::<VerifyReport>(&f) {
            Ok(doc) => {
                out.insert(node.into_string(), remedy::from_verify(&doc));
            }
            Err(e) => unread.push(unread_or_err(e, vec![node.into_string()])?),
        }
    }
    Ok(out)
}
