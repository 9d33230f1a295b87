//! Real SIGKILLs at seeded random instants (issue 37): apply, rollback and
//! recover of the built-in profiles, of a profile of many new files in new
//! directories and of one of three large files (800 kB each, so that some
//! kills land inside one write: a temporary file left beside its target),
//! each killed once per round at an instant drawn from the seed over the
//! measured length of that command, then `recover` (and `rollback` where
//! the apply had finished), and the tree compared with the original: path,
//! type, mode, owner and content (tests/it/kills.rs's comparison). 100%.
//!
//! The seed is printed; `GDRPROV_KILL_SEED=N` draws the same instants again
//! (where in the run an instant lands still depends on the machine's load),
//! `GDRPROV_KILL_ROUNDS=N` kills each command N times (default 1: 21 kills,
//! about 20 s of a loaded 2-core machine for the two tests together).

use crate::kills::{fresh, gd, journal, kill_at, many_files, ok, recovered, tree, BUILT_INS};
use crate::util::Root;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// splitmix64: the instants, from the seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A whole number in 0..n.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn seed() -> u64 {
    std::env::var("GDRPROV_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(37)
        })
}

fn rounds() -> usize {
    std::env::var("GDRPROV_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
}

/// A profile of three large new files (about 800 kB each, inline: each in
/// its own file of the `extends` chain, a profile being at most 1 MiB).
fn large_files(dir: &Path) -> String {
    let mut top = String::from("name: large\nextends: [rdma-dmabuf");
    for i in 0..3 {
        let line = format!("{i}{}\\n", "z".repeat(3999));
        let y = format!(
            "name: large{i}\nfiles:\n  - path: /opt/large/d{i}/f{i}.bin\n    content: \"{}\"\n",
            line.repeat(200)
        );
        std::fs::write(dir.join(format!("large{i}.yaml")), y).unwrap();
        top.push_str(&format!(", large{i}"));
    }
    top.push_str("]\n");
    let p = dir.join("large.yaml");
    std::fs::write(&p, top).unwrap();
    p.display().to_string()
}

/// Whether a killed write left its temporary file (`.NAME.gdrprov-PID.tmp`)
/// somewhere in the root: the kill landed inside one write.
fn temp_left(root: &Path) -> bool {
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.contains(".gdrprov-") && name.ends_with(".tmp") {
                return true;
            }
            if p.is_dir() && !p.is_symlink() {
                todo.push(p);
            }
        }
    }
    false
}

/// How long one run takes here, in microseconds.
fn measure(mut run: impl FnMut() -> Duration) -> u64 {
    (run().as_micros() as u64).max(1)
}

#[derive(Default)]
struct Tally {
    kills: usize,
    stopped: usize,
    in_progress: usize,
    inside_write: usize,
}

/// Whether generation `n` was left in progress.
fn unfinished(root: &Root, n: u64) -> bool {
    root.join(format!("var/lib/gdrprov/generations/{n}/journal.json"))
        .exists()
        && journal(root, n)["status"] != "complete"
}

/// One profile: apply, rollback and recover each killed `rounds` times at
/// drawn instants.
fn kill_randomly(host: &str, profile: &str, rng: &mut Rng, seed: u64, t: &mut Tally) {
    let apply = ["apply", profile, "--yes", "--no-exec"];
    let rollback = ["rollback", "--yes", "--no-exec"];
    let recover = ["recover", "--yes", "--no-exec"];
    let timed = |root: &Root, args: &[&str], fault: Option<usize>| {
        let start = Instant::now();
        gd(root, args, fault);
        start.elapsed()
    };
    let probe = fresh(host);
    ok(&probe, &apply);
    let steps = journal(&probe, 1)["steps"].as_array().unwrap().len() as u64;
    let t_apply = measure(|| timed(&fresh(host), &apply, None));
    let t_rollback = measure(|| {
        let r = fresh(host);
        ok(&r, &apply);
        timed(&r, &rollback, None)
    });
    let t_recover = measure(|| {
        let r = fresh(host);
        gd(&r, &apply, Some(steps as usize / 2 + 1));
        timed(&r, &recover, None)
    });
    for _ in 0..rounds() {
        for cmd in ["apply", "rollback", "recover"] {
            let root = fresh(host);
            let was = tree(&root);
            let (args, span, gen): (&[&str], u64, u64) = match cmd {
                "apply" => (&apply, t_apply, 1),
                "rollback" => {
                    ok(&root, &apply);
                    (&rollback, t_rollback, 2)
                }
                _ => {
                    // An apply stopped after a drawn step, to recover.
                    let k = 1 + rng.below(steps.max(1));
                    gd(&root, &apply, Some(k as usize));
                    (&recover, t_recover, 2)
                }
            };
            // Over the whole run and a little past it.
            let at = rng.below(span * 11 / 10);
            let what =
                format!("seed {seed}: {host} {profile}: {cmd} SIGKILLed at {at} us of {span} us");
            let stopped = kill_at(&root, args, Duration::from_micros(at)).signal() == Some(9);
            t.kills += 1;
            t.stopped += usize::from(stopped);
            t.in_progress +=
                usize::from(stopped && (unfinished(&root, gen) || unfinished(&root, 1)));
            t.inside_write += usize::from(temp_left(&root));
            recovered(&root, &was, cmd, &what);
        }
    }
}

fn report(what: &str, seed: u64, t: &Tally) {
    eprintln!(
        "{what}: seed {seed} (GDRPROV_KILL_SEED={seed} draws the same instants): {} SIGKILLs, {} stopped a run, {} left a generation in progress, {} inside one write (a temporary file left); every one recovered to the original tree",
        t.kills, t.stopped, t.in_progress, t.inside_write
    );
}

#[test]
fn sigkills_at_random_instants_of_the_built_in_profiles_are_recovered() {
    let seed = seed();
    eprintln!("built-in profiles: kill seed {seed}");
    let mut rng = Rng(seed);
    let mut t = Tally::default();
    for (host, profile) in BUILT_INS {
        kill_randomly(host, profile, &mut rng, seed, &mut t);
    }
    report("built-in profiles", seed, &t);
    assert_eq!(t.kills, 15 * rounds());
}

#[test]
fn sigkills_at_random_instants_of_many_and_large_files_are_recovered() {
    let seed = seed();
    eprintln!("many and large files: kill seed {seed}");
    let dir = tempfile::tempdir().unwrap();
    // Other instants than the built-ins' from the same seed.
    let mut rng = Rng(seed ^ 0x5EED);
    let mut t = Tally::default();
    for p in [many_files(dir.path()), large_files(dir.path())] {
        kill_randomly("ubuntu-22.04-h100", &p, &mut rng, seed, &mut t);
    }
    report("many and large files", seed, &t);
    assert_eq!(t.kills, 6 * rounds());
}
