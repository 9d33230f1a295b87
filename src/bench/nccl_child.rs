//! `bench nccl`'s all_reduce (and `verify`'s nccl-allreduce) in a child process of gdrprov, with
//! a deadline per stage.
//!
//! Why: `ncclCommInitAll` can hang (a peer GPU that never answers, Fabric Manager that never
//! finishes training the NVSwitch fabric, a shared-memory segment that cannot be made), and a
//! thread inside NCCL cannot be cancelled: a timeout in the same process could only stop
//! waiting, leaving the process wedged with the GPUs' contexts and NCCL's threads in it. So
//! gdrprov starts itself, `gdrprov bench nccl --child ...`, the child runs the all_reduce and
//! writes each stage it enters (`{"stage":"init"}` before ncclCommInitAll, `{"stage":"run"}`
//! after it) and its result as JSON lines; the parent watches them through
//! [`crate::host::child::run_staged`] and kills the child when a stage outlives its deadline.
//! The hang then becomes a finding with the stage, the time waited and what to look at, and
//! gdrprov exits. NCCL's own log (`NCCL_DEBUG=INFO`) goes into a file of the parent's, given
//! in the child's environment only.

use super::BenchError;
use crate::host::child::{run_staged, End};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// The deadline of each stage of the child.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// From the start to ncclCommInitAll: CUDA opens the GPUs and allocates.
    pub start: Duration,
    /// ncclCommInitAll (`--init-timeout`).
    pub init: Duration,
    /// Every size's warm-ups and timed steps.
    pub run: Duration,
}

pub const DEFAULT_INIT_SECS: u64 = 60;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            start: Duration::from_secs(60),
            init: Duration::from_secs(DEFAULT_INIT_SECS),
            run: Duration::from_secs(300),
        }
    }
}

impl Limits {
    fn of(&self, stage: Option<&str>) -> Duration {
        match stage {
            Some("init") => self.init,
            Some("run") => self.run,
            _ => self.start,
        }
    }
}

/// One message size of the all_reduce.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Size {
    pub bytes: usize,
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
}

/// What the child reports when the all_reduce finished.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildResult {
    pub version: i32,
    pub ranks: usize,
    pub sizes: Vec<Size>,
    pub data_ok: bool,
}

/// A stage that outlived its deadline.
#[derive(Debug, Clone, Serialize)]
pub struct Timeout {
    /// `ncclCommInitAll`, `the all_reduce` or `CUDA's set-up`.
    pub stage: String,
    pub limit_s: f64,
    pub waited_s: f64,
    pub child_pid: Option<u32>,
    /// Whether the killed child is gone (false: stuck in the kernel, left to init).
    pub reaped: bool,
    /// Where to look, in order.
    pub look_at: Vec<String>,
}

impl Timeout {
    /// The finding, one sentence.
    pub fn finding(&self, ranks: usize, last_log_line: Option<&str>) -> String {
        format!(
            "{} did not return within {:.0} s over {ranks} GPUs (waited {:.1} s; gdrprov's NCCL child process{} was {}){}",
            self.stage,
            self.limit_s,
            self.waited_s,
            self.child_pid.map(|p| format!(", pid {p},")).unwrap_or_default(),
            if self.reaped {
                "killed"
            } else {
                "sent SIGKILL but is stuck in the kernel (the GPU driver: see dmesg for Xid) and was left behind"
            },
            last_log_line
                .map(|l| format!("; NCCL's last log line: {}", l.trim()))
                .unwrap_or_default()
        )
    }
}

/// How the child ended, for [`super::nccl::run`].
#[derive(Debug)]
pub enum Outcome {
    Done(ChildResult),
    TimedOut(Timeout),
}

fn look_at(stage: &str) -> Vec<String> {
    let mut v = vec![
        "NCCL's log: `NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT gdrprov bench nccl` and its last lines".to_string(),
        "`nvidia-smi`: a GPU held by another process or in an error state (dmesg: Xid)".to_string(),
    ];
    if stage != "CUDA's set-up" {
        v.push("on an NVSwitch board, Fabric Manager: `systemctl status nvidia-fabricmanager` (gdrprov verify's gpu-fabric)".into());
        v.push("NCCL_* variables in the environment (NCCL_NVLS_ENABLE, NCCL_P2P_LEVEL, NCCL_SHM_DISABLE, NCCL_SOCKET_IFNAME)".into());
        v.push(
            "in a container: the size of /dev/shm and whether it shares the host's IPC namespace"
                .into(),
        );
    }
    v
}

/// Runs `program bench nccl --child ...` (gdrprov itself in production) with `limits`, NCCL's
/// log into `log_path`.
pub fn run(
    program: &Path,
    indexes: &[u32],
    sizes: &[usize],
    iters: u32,
    log_path: &str,
    limits: &Limits,
) -> Result<Outcome, BenchError> {
    let join = |v: Vec<String>| v.join(",");
    let args: Vec<String> = vec![
        "bench".into(),
        "nccl".into(),
        "--child".into(),
        "--gpu".into(),
        join(indexes.iter().map(u32::to_string).collect()),
        "--size".into(),
        join(sizes.iter().map(usize::to_string).collect()),
        "--iters".into(),
        iters.to_string(),
    ];
    let mut env: Vec<(String, String)> = Vec::new();
    for (k, v) in [
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,P2P,SHM,NET"),
    ] {
        if std::env::var_os(k).is_none() {
            env.push((k.into(), v.into()));
        }
    }
    env.push(("NCCL_DEBUG_FILE".into(), log_path.into()));
    let s = run_staged(program, &args, &env, &|stage| limits.of(stage));
    let result = s.json.iter().rev().find_map(|v| {
        Some(match (v.get("result"), v.get("error")) {
            (Some(r), _) => serde_json::from_value::<ChildResult>(r.clone())
                .map_err(|e| format!("the NCCL child's result is not readable: {e}")),
            (None, Some(e)) => Err(e.as_str().unwrap_or("unknown error").to_string()),
            _ => return None,
        })
    });
    match (s.end, result) {
        (
            End::TimedOut {
                stage,
                waited,
                reaped,
            },
            _,
        ) => {
            let name = match stage.as_str() {
                "init" => "ncclCommInitAll",
                "run" => "the all_reduce",
                _ => "CUDA's set-up",
            };
            Ok(Outcome::TimedOut(Timeout {
                stage: name.into(),
                limit_s: limits.of(Some(&stage)).as_secs_f64(),
                waited_s: waited.as_secs_f64(),
                child_pid: s.pid,
                reaped,
                look_at: look_at(name),
            }))
        }
        (End::NotStarted(why), _) => Err(BenchError::InvalidArgument(format!(
            "cannot start gdrprov's NCCL child process: {why}"
        ))),
        (_, Some(Ok(r))) => Ok(Outcome::Done(r)),
        (_, Some(Err(e))) => Err(BenchError::InvalidArgument(e)),
        (End::Exited(code), None) => Err(BenchError::InvalidArgument(format!(
            "gdrprov's NCCL child process ended ({}) without a result{}",
            code.map(|c| format!("exit code {c}"))
                .unwrap_or_else(|| "killed by a signal".into()),
            s.stderr
                .lines()
                .last()
                .map(|l| format!(": {l}"))
                .unwrap_or_default()
        ))),
    }
}
