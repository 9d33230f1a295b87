//! A child process watched by stages, each with its own deadline, and killed when one passes.
//!
//! Why a child: some calls cannot be cancelled from inside the process that makes them. A
//! thread stuck in `ncclCommInitAll` (waiting on a peer GPU, a Fabric Manager that never
//! finishes, a shared-memory segment) holds the CUDA contexts and NCCL's own threads; no Rust
//! timeout can unwind it, and exiting around it leaves the answer unknown. A process can be
//! killed: gdrprov starts itself as the child (`bench nccl` does), the child writes one JSON
//! line `{"stage": "NAME"}` on standard output as it enters each stage and its result last,
//! and this module reads the lines with the deadline of the current stage. When it passes, the
//! child gets SIGKILL and the caller gets [`End::TimedOut`] with the stage and the time waited,
//! so gdrprov reports it and exits instead of hanging. A child that does not die even from
//! SIGKILL within [`REAP_WAIT`] (stuck inside the GPU driver in the kernel) is left to init,
//! and that is said too: gdrprov still returns.
//!
//! The child should ask for SIGKILL when its parent thread dies (`PR_SET_PDEATHSIG`), so that
//! a gdrprov killed while waiting leaves nothing behind; call [`run_staged`] from a thread that
//! lives until it returns (the main thread).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How long a SIGKILLed child is waited for before it is left to init.
pub const REAP_WAIT: Duration = Duration::from_secs(5);
/// Standard error kept of a child (its last bytes are what explains a failure).
const STDERR_KEPT: u64 = 64 << 10;

/// How the child ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// It exited (`None`: killed by a signal it did not catch).
    Exited(Option<i32>),
    /// The deadline of `stage` passed after `waited`; the child was killed (`reaped`: and
    /// gone; false: it did not die within [`REAP_WAIT`] of SIGKILL).
    TimedOut {
        stage: String,
        waited: Duration,
        reaped: bool,
    },
    /// It could not be started.
    NotStarted(String),
}

/// What the child said and how it ended.
#[derive(Debug, Clone)]
pub struct Staged {
    /// Every line of its standard output (stage lines included), in order.
    pub lines: Vec<String>,
    /// Those of its lines that are JSON, each parsed once, in order (stage lines included).
    pub json: Vec<serde_json::Value>,
    /// The last stage it entered (`None`: no stage line yet).
    pub stage: Option<String>,
    pub end: End,
    pub pid: Option<u32>,
    pub stderr: String,
}

fn stage_of(v: &serde_json::Value) -> Option<String> {
    v.get("stage")?.as_str().map(str::to_string)
}

/// Waits for `child` to be reaped for at most `limit`.
fn reap(child: &mut Child, limit: Duration) -> Option<Option<i32>> {
    let until = Instant::now() + limit;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.code());
        }
        if Instant::now() >= until {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `program args` with `env` added, stdin closed; `deadline(stage)` is how long each stage
/// may last (`None`: from the start to the first stage line, and after the last one until the
/// child exits it is the last stage's).
pub fn run_staged(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    deadline: &dyn Fn(Option<&str>) -> Duration,
) -> Staged {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("PATH", super::runner::search_path())
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut out = Staged {
        lines: Vec::new(),
        json: Vec::new(),
        stage: None,
        end: End::Exited(None),
        pid: None,
        stderr: String::new(),
    };
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            out.end = End::NotStarted(format!("{}: {e}", program.display()));
            return out;
        }
    };
    out.pid = Some(child.id());
    let (rx, erx) = readers(&mut child);
    let mut since = Instant::now();
    loop {
        let limit = deadline(out.stage.as_deref());
        let left = limit.saturating_sub(since.elapsed());
        match rx.recv_timeout(left) {
            Ok(line) => {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if let Some(s) = stage_of(&v) {
                        out.stage = Some(s);
                        since = Instant::now();
                    }
                    out.json.push(v);
                }
                out.lines.push(line);
            }
            Err(RecvTimeoutError::Timeout) => {
                out.end = kill(&mut child, &out.stage, since);
                break;
            }
            // Standard output closed: the child is exiting (or closed it and went on).
            Err(RecvTimeoutError::Disconnected) => {
                let left = deadline(out.stage.as_deref()).saturating_sub(since.elapsed());
                out.end = match reap(&mut child, left) {
                    Some(code) => End::Exited(code),
                    None => kill(&mut child, &out.stage, since),
                };
                break;
            }
        }
    }
    out.stderr = erx.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
    out
}

/// The child's standard output, line by line, and its standard error (the
/// first [`STDERR_KEPT`] bytes, once it is closed), each read by a thread.
fn readers(child: &mut Child) -> (Receiver<String>, Receiver<String>) {
    let (tx, rx) = channel::<String>();
    if let Some(stdout) = child.stdout.take() {
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let (etx, erx) = channel::<String>();
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.take(STDERR_KEPT).read_to_string(&mut s);
            let _ = etx.send(s);
        });
    }
    (rx, erx)
}

/// Kills a child past its stage's deadline (`since`: when the stage began)
/// and says so, with whether it was reaped.
fn kill(child: &mut Child, stage: &Option<String>, since: Instant) -> End {
    let waited = since.elapsed();
    let _ = child.kill();
    End::TimedOut {
        stage: stage.clone().unwrap_or_else(|| "start".into()),
        waited,
        reaped: reap(child, REAP_WAIT).is_some(),
    }
}

/// MOCK children for tests: shell scripts standing in for gdrprov's NCCL child, which needs
/// GPUs.
#[cfg(test)]
pub(crate) mod testkit {
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};

    /// An executable `dir/name` running `body` under /bin/sh.
    pub(crate) fn mock(dir: &Path, name: &str, body: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::mock;
    use super::*;

    fn alive(pid: u32) -> bool {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_ok()
    }

    #[test]
    fn a_child_that_hangs_in_a_stage_is_killed_at_its_deadline() {
        let d = tempfile::tempdir().unwrap();
        let p = mock(
            d.path(),
            "mock-nccl-child-hangs-in-init",
            "echo '{\"stage\":\"init\"}'\necho 'waiting for peers' >&2\nexec sleep 600",
        );
        let t = Instant::now();
        let s = run_staged(&p, &[], &[], &|stage| match stage {
            Some("init") => Duration::from_millis(800),
            _ => Duration::from_secs(30),
        });
        let took = t.elapsed();
        let End::TimedOut {
            stage,
            waited,
            reaped,
        } = &s.end
        else {
            panic!("{:?}", s.end)
        };
        assert_eq!(stage, "init");
        assert!(*reaped);
        assert!(*waited >= Duration::from_millis(800), "{waited:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
        assert_eq!(s.stage.as_deref(), Some("init"));
        assert!(s.stderr.contains("waiting for peers"), "{}", s.stderr);
        assert!(!alive(s.pid.unwrap()), "the mock was not killed");
    }

    #[test]
    fn a_silent_child_times_out_before_its_first_stage() {
        let d = tempfile::tempdir().unwrap();
        let p = mock(d.path(), "mock-child-silent", "exec sleep 600");
        let s = run_staged(&p, &[], &[], &|_| Duration::from_millis(300));
        assert!(
            matches!(&s.end, End::TimedOut { stage, .. } if stage == "start"),
            "{:?}",
            s.end
        );
    }

    #[test]
    fn a_child_that_finishes_gives_its_lines_and_code() {
        let d = tempfile::tempdir().unwrap();
        let p = mock(
            d.path(),
            "mock-child-done",
            "echo '{\"stage\":\"init\"}'\necho '{\"stage\":\"run\"}'\necho \"{\\\"result\\\":$FOO}\"\nexit 3",
        );
        let s = run_staged(&p, &[], &[("FOO".into(), "7".into())], &|_| {
            Duration::from_secs(30)
        });
        assert_eq!(s.end, End::Exited(Some(3)));
        assert_eq!(s.stage.as_deref(), Some("run"));
        assert_eq!(s.lines.last().map(String::as_str), Some("{\"result\":7}"));
        // A child that closes its output and lingers is still bounded.
        let p = mock(d.path(), "mock-child-lingers", "exec >&- ; exec sleep 600");
        let s = run_staged(&p, &[], &[], &|_| Duration::from_millis(300));
        assert!(matches!(s.end, End::TimedOut { .. }), "{:?}", s.end);
        let s = run_staged(&d.path().join("absent"), &[], &[], &|_| {
            Duration::from_secs(1)
        });
        assert!(matches!(s.end, End::NotStarted(_)), "{:?}", s.end);
    }
}
