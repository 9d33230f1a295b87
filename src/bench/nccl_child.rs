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

use super::nccl::Size;
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

/// How the child ended, for [`super::nccl::run_with`].
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
    let result = s.lines.iter().rev().find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
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

/// The child's side (`gdrprov bench nccl --child`): dies with its parent, runs the all_reduce
/// here, writes the stages and the result (or the error) as JSON lines; Ok(0) when it ran.
pub fn child_main(indexes: &[u32], sizes: &[usize], iters: u32) -> i32 {
    // A gdrprov killed while waiting takes its child with it.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let line = |v: serde_json::Value| crate::output::json_line(&v);
    let ran = gdrprov_rdma::cuda::nccl::all_reduce(indexes, sizes, 5, iters, &mut |s| {
        line(serde_json::json!({ "stage": s }))
    });
    match ran {
        Ok(a) => {
            let r = ChildResult {
                version: a.version,
                ranks: a.ranks,
                sizes: a
                    .sizes
                    .iter()
                    .map(|s| Size {
                        bytes: s.bytes,
                        time_us: s.time_us,
                        algbw_gbs: s.algbw_gbs,
                        busbw_gbs: s.busbw_gbs,
                    })
                    .collect(),
                data_ok: a.data_ok,
            };
            line(serde_json::json!({ "result": r }));
            0
        }
        Err(e) => {
            // The parent makes it its own invalid-argument error: the message alone.
            let msg = match e {
                gdrprov_rdma::Error::InvalidArgument(m) => m,
                e => e.to_string(),
            };
            line(serde_json::json!({ "error": msg }));
            1
        }
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use crate::facts::gpu_topo::GpuTopology;
    use std::os::unix::fs::PermissionsExt;

    /// A MOCK of gdrprov's NCCL child (no GPU, no libnccl here): a shell script that speaks the
    /// child's protocol, writes NCCL-like log lines where the parent said, and records its
    /// arguments there too.
    fn mock(dir: &Path, name: &str, after_init: &str) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(
            &p,
            format!(
                "#!/bin/sh\necho \"args: $*\" >> \"$NCCL_DEBUG_FILE\"\n\
                 echo 'h200:7:7 [0] NCCL INFO Bootstrap: Using eth0:10.0.0.2<0>' >> \"$NCCL_DEBUG_FILE\"\n\
                 echo '{{\"stage\":\"init\"}}'\n{after_init}\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn pcis() -> Vec<String> {
        vec!["0000:00:06.0".into(), "0000:00:07.0".into()]
    }

    #[test]
    fn a_hung_init_becomes_a_finding_and_gdrprov_returns() {
        let d = tempfile::tempdir().unwrap();
        let p = mock(d.path(), "mock-nccl-child-hangs-in-init", "exec sleep 600");
        let limits = Limits {
            init: Duration::from_secs(1),
            ..Limits::default()
        };
        let t = std::time::Instant::now();
        let r = super::super::nccl::run_with(
            &p,
            &[0, 1],
            &pcis(),
            &[8 << 20],
            3,
            &GpuTopology::default(),
            &limits,
        )
        .unwrap();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(r.verdict, "fail");
        let f = r.finding.clone().unwrap();
        assert!(
            f.starts_with("ncclCommInitAll did not return within 1 s over 2 GPUs (waited 1."),
            "{f}"
        );
        assert!(f.contains("was killed"), "{f}");
        assert!(
            f.contains("NCCL's last log line: h200:7:7 [0] NCCL INFO Bootstrap"),
            "{f}"
        );
        let to = r.timeout.as_ref().unwrap();
        assert!(to.waited_s >= 1.0 && to.waited_s < 5.0, "{to:?}");
        assert!(to.reaped);
        assert!(to
            .look_at
            .iter()
            .any(|l| l.contains("nvidia-fabricmanager")));
        // The child was asked for exactly this run; its log is kept in the report.
        let log = r.log.clone().unwrap();
        assert!(
            log.contains("args: bench nccl --child --gpu 0,1 --size 8388608 --iters 3"),
            "{log}"
        );
        // The text says what to look at.
        let text = crate::output::node::nccl_text(&{
            let mut x = r.clone();
            x.log = None;
            x
        });
        assert!(text.contains("Look at:\n    - NCCL's log"), "{text}");
        assert!(text.ends_with("Result: FAIL\n"), "{text}");
    }

    #[test]
    fn a_child_that_finishes_is_read_back_and_judged() {
        let d = tempfile::tempdir().unwrap();
        let result = r#"{"result":{"version":22803,"ranks":2,"sizes":[{"bytes":8388608,"time_us":60.0,"algbw_gbs":139.8,"busbw_gbs":139.8}],"data_ok":true}}"#;
        let p = mock(
            d.path(),
            "mock-nccl-child-finishes",
            &format!(
                "echo 'h200:7:7 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read' >> \"$NCCL_DEBUG_FILE\"\n\
                 echo '{{\"stage\":\"run\"}}'\necho '{result}'"
            ),
        );
        let r = super::super::nccl::run_with(
            &p,
            &[0, 1],
            &pcis(),
            &[8 << 20],
            3,
            &GpuTopology::default(),
            &Limits::default(),
        )
        .unwrap();
        assert_eq!(r.nccl_version, "2.28.3");
        assert_eq!(r.transports, vec!["P2P/CUMEM/read"]);
        assert_eq!(r.path, "p2p");
        assert_eq!(r.verdict, "pass", "{:?}", r.finding);
        assert!(r.timeout.is_none());
        // An error the child reports is the error.
        let p = mock(
            d.path(),
            "mock-nccl-child-fails",
            "echo '{\"error\":\"ncclCommInitAll failed: ncclInvalidUsage (invalid usage)\"}'\nexit 1",
        );
        let e = super::super::nccl::run_with(
            &p,
            &[0, 1],
            &pcis(),
            &[8 << 20],
            3,
            &GpuTopology::default(),
            &Limits::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("ncclInvalidUsage"), "{e}");
    }
}
