//! The timed loop of one size: keep every QP's send queue full of transfers, count completions,
//! and take the average over the steady part of the run (as `bench loopback` measures).

use std::time::{Duration, Instant};

use super::engine::Xfer;
use super::error::PairError;
use crate::bench::error::BenchError;
use crate::bench::loopback::RunLength;
use crate::bench::report::SizeResult;
use crate::bench::sampler::Sampler;

/// What the loop needs of an engine.
pub trait Poster {
    fn qps(&self) -> usize;
    /// (transfers in flight per QP, transfers per post and per signaled completion) at `len`.
    fn depth(&self, len: u64) -> (u32, u32);
    /// Post `n` transfers on QP `i`, the last signaled with wr_id (i << 32) | n.
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError>;
    /// Append (status, wr_id) of the completions there are.
    fn poll(&mut self, out: &mut Vec<(u32, u64)>);
    /// How long to sleep after a poll that found nothing while every QP still has work queued
    /// (none: spin, as perftest does; see [`SOFTWARE_NAP`]).
    fn nap(&mut self) -> Option<Duration> {
        None
    }
}

/// A software RDMA device (rxe, siw) is the CPU itself: a loop spinning on its empty completion
/// queue takes the CPU time the device's kernel work needs (on a small VM or a loaded host, a whole
/// vCPU). With at least two transfers still queued on every QP the device has work while this end
/// sleeps, so a short sleep costs no throughput; with fewer it spins. A NIC never naps.
pub const SOFTWARE_NAP: Duration = Duration::from_micros(50);

/// After an empty poll: sleep the engine's nap while every QP has at least two transfers queued.
fn idle<P: Poster>(p: &mut P, outstanding: &[u32]) {
    if outstanding.iter().all(|&o| o >= 2) {
        if let Some(d) = p.nap() {
            std::thread::sleep(d);
        }
    }
}

const STALL: Duration = Duration::from_secs(30);

pub use crate::bench::sampler::margin;

/// The peak window of a pair run.
const WINDOW: Duration = Duration::from_millis(200);

/// How the figures of a run were timed, for the report: what the timed window holds and what it
/// does not (the data check).
pub fn method(op: super::kinds::Op, length: RunLength, check_iters: u32, software: bool) -> String {
    let what = match op {
        super::kinds::Op::Write => "RDMA WRITEs",
        super::kinds::Op::Read => "RDMA READs",
        super::kinds::Op::Bidir => {
            "RDMA WRITEs of each end (each end times its own; the sum is reported)"
        }
    };
    let span = match length {
        RunLength::Duration(d) => format!(
            "the average of each {} s run from the first completion after its first {m} s to the last one before its last {m} s",
            fmt_secs(d),
            m = fmt_secs(margin(length))
        ),
        RunLength::Iterations(n) => {
            format!("the average from the first post to the last completion of {n} transfers per QP")
        }
    };
    let nap = if software {
        format!(
            "; on this software device a {} us sleep after an empty poll while every QP has two or more queued",
            SOFTWARE_NAP.as_micros()
        )
    } else {
        String::new()
    };
    format!(
        "timed where the transfers are posted: only the {what} kept in flight (posts and completion polling{nap}; no byte of the buffers is read or written by the CPU), {span}; the data check ({check_iters} transfers per size, each its own pattern, every byte compared at the receiving end) runs after the timed run, outside it"
    )
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

/// Run one size for `length`; stop with an error at `deadline` or after 30 s without a completion.
pub fn run<P: Poster>(
    p: &mut P,
    x: Xfer,
    len: u64,
    length: RunLength,
    deadline: Instant,
    peer_gone: &dyn Fn() -> bool,
) -> Result<SizeResult, PairError> {
    let n_qps = p.qps();
    let (depth, batch) = p.depth(len);
    let mut outstanding = vec![0u32; n_qps];
    let mut posted = vec![0u64; n_qps];
    let mut done: u64 = 0;
    let start = Instant::now();
    let (mut sampler, end, iters) = Sampler::new(start, length, len, WINDOW);
    let mut last_activity = start;
    let mut wcs = Vec::new();
    let mut watched = start;
    loop {
        let now = Instant::now();
        if now.duration_since(watched) >= Duration::from_millis(250) {
            watched = now;
            if peer_gone() {
                return Err(PairError::Aborted);
            }
        }
        if now >= deadline {
            return Err(PairError::Usage(
                "the time limit (--timeout) ended the timed run; raise --timeout or shorten --duration".into(),
            ));
        }
        let stopping = match end {
            Some(e) => now >= e,
            None => posted.iter().all(|&n| n >= iters),
        };
        if !stopping {
            fill(
                p,
                (x, len, iters),
                (depth, batch),
                &mut outstanding,
                &mut posted,
            )?;
        }
        wcs.clear();
        p.poll(&mut wcs);
        let now = Instant::now();
        for &(status, wr_id) in &wcs {
            completion(status, wr_id)?;
            let n = (wr_id & 0xffff_ffff) as u32;
            if let Some(o) = outstanding.get_mut((wr_id >> 32) as usize) {
                *o = o.saturating_sub(n);
            }
            done += u64::from(n);
        }
        if !wcs.is_empty() {
            sampler.on_completions(now, done);
            last_activity = now;
        } else if now.duration_since(last_activity) > STALL && outstanding.iter().any(|&o| o > 0) {
            return Err(BenchError::Stalled {
                secs: STALL.as_secs(),
            }
            .into());
        } else {
            idle(p, &outstanding);
        }
        if stopping && outstanding.iter().all(|&o| o == 0) {
            break;
        }
    }
    Ok(sampler.result(done, (depth, batch)))
}

/// Keep every QP's send queue full: up to `depth` in flight, posted `batch` at a time, at most
/// `iters` per QP.
fn fill<P: Poster>(
    p: &mut P,
    (x, len, iters): (Xfer, u64, u64),
    (depth, batch): (u32, u32),
    outstanding: &mut [u32],
    posted: &mut [u64],
) -> Result<(), PairError> {
    for i in 0..outstanding.len() {
        while outstanding[i] + batch <= depth || outstanding[i] == 0 {
            let remaining = iters.saturating_sub(posted[i]);
            if remaining == 0 {
                break;
            }
            let n = u64::from(batch).min(remaining) as u32;
            p.post(x, i, n, len)?;
            outstanding[i] += n;
            posted[i] += u64::from(n);
        }
    }
    Ok(())
}

/// A work completion's status as a result, with what each failure usually means.
pub fn completion(status: u32, wr_id: u64) -> Result<(), PairError> {
    if status == gdrprov_rdma::qp::WC_SUCCESS {
        return Ok(());
    }
    let hint = match status {
        4 => ": local protection error (lkey/memory registration; for GPU memory, PCIe ACS or IOMMU blocking peer-to-peer)",
        5 => ": work request flushed (the QP went to the error state)",
        10 => ": remote access error (rkey or access flags)",
        12 => ": transport retry exceeded (the peer does not answer: it stopped, or the GID/route/MTU is wrong)",
        13 => ": RNR retry exceeded (the peer's QP is not ready)",
        _ => "",
    };
    Err(BenchError::Completion {
        qp: (wr_id >> 32) as usize,
        status: gdrprov_rdma::qp::status_name(status),
        code: status,
        hint: hint.to_string(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One QP; every other poll finds nothing, the others complete the oldest transfer. Records
    /// the transfers queued at each empty poll and at each nap.
    struct Slow {
        queued: u32,
        polls: u32,
        empties: Vec<u32>,
        naps: Vec<u32>,
    }

    impl Poster for Slow {
        fn qps(&self) -> usize {
            1
        }
        fn depth(&self, _len: u64) -> (u32, u32) {
            (4, 1)
        }
        fn post(&mut self, _x: Xfer, _i: usize, n: u32, _len: u64) -> Result<(), PairError> {
            self.queued += n;
            Ok(())
        }
        fn poll(&mut self, out: &mut Vec<(u32, u64)>) {
            self.polls += 1;
            if self.polls % 2 == 0 && self.queued > 0 {
                self.queued -= 1;
                out.push((gdrprov_rdma::qp::WC_SUCCESS, 1));
            } else {
                self.empties.push(self.queued);
            }
        }
        fn nap(&mut self) -> Option<Duration> {
            self.naps.push(self.queued);
            Some(Duration::from_micros(1))
        }
    }

    #[test]
    fn a_software_device_naps_only_while_work_is_queued() {
        let mut p = Slow {
            queued: 0,
            polls: 0,
            empties: Vec::new(),
            naps: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        let m = run(
            &mut p,
            Xfer::Write,
            4096,
            RunLength::Iterations(20),
            deadline,
            &|| false,
        )
        .unwrap();
        assert_eq!(m.iterations, 20);
        // Every empty poll with two or more queued napped; those in the drain (fewer left) spun.
        let queued = p.empties.iter().filter(|&&q| q >= 2).count();
        assert!(
            queued > 0 && p.naps.len() == queued,
            "{:?} {:?}",
            p.empties,
            p.naps
        );
        assert!(p.naps.iter().all(|&q| q >= 2), "{:?}", p.naps);
        assert!(p.empties.iter().any(|&q| q < 2), "{:?}", p.empties);
    }
}
