//! The timed part of the loopback: RDMA WRITEs kept in flight on every QP for a duration or a
//! number of iterations, sampled into average and peak bandwidth; then the data check (write a
//! known pattern, flush with a READ, read the destination back, compare).

use std::time::{Duration, Instant};

use gdrprov_rdma::memory::Buffer;
use gdrprov_rdma::qp::{self, Cq, QpPair, Region};

use super::error::BenchError;
use super::pattern::{compare, fill_pattern};
use super::report::{DataCheck, SizeResult};
use super::sampler::Sampler;
use super::units::{usize_of, RunLength};

/// The source and destination of the WRITEs.
pub(crate) struct Target<'a> {
    pub src: &'a Region,
    pub dst: &'a Region,
}

const STALL: Duration = Duration::from_secs(30);

/// Bytes in flight per QP are capped at this: plenty to fill any link in loopback (1.3 ms at
/// 400 Gb/s), and it keeps a slow software device from queueing gigabytes it then has to drain.
pub const MAX_IN_FLIGHT: u64 = 32 << 20;

/// (outstanding WRITEs, WRITEs per signaled completion and per post) for a message size: tx depth
/// capped by MAX_IN_FLIGHT (at least 2). A NIC gets fewer doorbells and completions: signaling about
/// four times per window, at most every 16 WRITEs. A software device (rxe, siw) gets one WRITE per
/// post and per completion: there the CPU is the NIC, and each post is the system call in which the
/// kernel runs the protocol for the queue, so a post after every completion keeps it moving. Measured
/// on rxe in the VM testbed at 64 KiB, 6 rounds of 5 s: 0.199 Gb/s mean with 1, 0.187 with 16
/// (ahead in 4 of 6 rounds: a small gain inside the noise; ib_write_bw also posts one WRITE a call).
pub fn effective_depth(tx_depth: u32, size: u64, software: bool) -> (u32, u32) {
    let cap = u32::try_from(MAX_IN_FLIGHT / size.max(1))
        .unwrap_or(u32::MAX)
        .max(2);
    let depth = tx_depth.min(cap).max(1);
    let batch = if software {
        1
    } else {
        (depth / 4).clamp(1, 16)
    };
    (depth, batch)
}

/// The loopback's peak window: a twentieth of a duration within 100 to 500 ms, 100 ms for an
/// iteration count. Windows span many signaled completions so that one completion covering a batch
/// of WRITEs does not read as a burst.
fn window(length: RunLength) -> Duration {
    match length {
        RunLength::Duration(d) => {
            (d / 20).clamp(Duration::from_millis(100), Duration::from_millis(500))
        }
        RunLength::Iterations(_) => Duration::from_millis(100),
    }
}

fn completion_error(qp: usize, status: u32) -> BenchError {
    let hint = match status {
        4 => ": local protection error (lkey/memory registration; for GPU memory, PCIe ACS or IOMMU blocking peer-to-peer)",
        10 => ": remote access error (rkey or access flags)",
        12 => ": transport retry exceeded (the peer is unreachable: GID index, RoCE netdev or IB link)",
        _ => "",
    };
    BenchError::Completion {
        qp,
        status: qp::status_name(status),
        code: status,
        hint: hint.to_string(),
    }
}

/// Post `n` WRITEs of `size` on QP `i`, the last one signaled with wr_id = (i << 32) | n.
fn post_writes(
    pair: &mut QpPair,
    i: usize,
    n: u32,
    size: u64,
    t: &Target<'_>,
) -> Result<(), BenchError> {
    let wr_id = ((i as u64) << 32) | u64::from(n);
    pair.send
        .post_writes(wr_id, n, t.src.first(size as u32)?, t.dst.remote())
}

/// The progress bar of one size, drawn by the caller's maker (the output
/// layer's bar on standard error). Callers pass one only on a terminal and
/// never with JSON output, so nothing is drawn into a log.
struct Progress {
    bar: Box<dyn crate::bench::progress::Bar>,
    length: RunLength,
    last: Instant,
}

impl Progress {
    fn new(
        make: fn(&str, u64) -> Box<dyn crate::bench::progress::Bar>,
        length: RunLength,
        n_qps: usize,
        size: u64,
    ) -> Progress {
        let total = match length {
            RunLength::Duration(d) => d.as_millis() as u64,
            RunLength::Iterations(n) => n.saturating_mul(n_qps as u64),
        };
        let bar = make(&format!("{} B", size), total);
        Progress {
            bar,
            length,
            last: Instant::now(),
        }
    }

    fn update(&mut self, now: Instant, start: Instant, completed: u64) {
        if now.duration_since(self.last) > Duration::from_millis(100) {
            self.last = now;
            match self.length {
                RunLength::Duration(_) => self
                    .bar
                    .set_position(now.duration_since(start).as_millis() as u64),
                RunLength::Iterations(_) => self.bar.set_position(completed),
            }
        }
    }
}

/// WRITEs posted and outstanding per QP.
struct InFlight {
    outstanding: Vec<u32>,
    posted: Vec<u64>,
}

impl InFlight {
    /// Top every QP up to `depth` outstanding WRITEs, `batch` per post, `iters` in all per QP.
    fn fill(
        &mut self,
        pairs: &mut [QpPair],
        t: &Target<'_>,
        size: u64,
        (depth, batch): (u32, u32),
        iters: u64,
    ) -> Result<(), BenchError> {
        for (i, pair) in pairs.iter_mut().enumerate() {
            while self.outstanding[i] + batch <= depth || (self.outstanding[i] == 0) {
                let remaining = iters.saturating_sub(self.posted[i]);
                if remaining == 0 {
                    break;
                }
                let n = u64::from(batch).min(remaining) as u32;
                post_writes(pair, i, n, size, t)?;
                self.outstanding[i] += n;
                self.posted[i] += u64::from(n);
            }
        }
        Ok(())
    }

    /// Reap every completion there is; returns how many WRITEs they covered.
    fn reap(&mut self, cq: &Cq) -> Result<Option<u64>, BenchError> {
        let mut done = 0u64;
        let seen = qp::poll(cq, usize::MAX, |wr_id, status| {
            let qp = (wr_id >> 32) as usize;
            if status != qp::WC_SUCCESS {
                return Err(completion_error(qp, status));
            }
            let n = (wr_id & 0xffff_ffff) as u32;
            if let Some(o) = self.outstanding.get_mut(qp) {
                *o = o.saturating_sub(n);
            }
            done += u64::from(n);
            Ok(())
        })?;
        Ok((seen > 0).then_some(done))
    }

    fn idle(&self) -> bool {
        self.outstanding.iter().all(|&o| o == 0)
    }
}

/// Run one message size on every QP for `length`; `depth` is (WRITEs in flight, WRITEs per post).
pub(crate) fn measure(
    pairs: &mut [QpPair],
    cq: &Cq,
    t: &Target<'_>,
    size: u64,
    length: RunLength,
    depth: (u32, u32),
    progress: crate::bench::progress::Bars,
) -> Result<SizeResult, BenchError> {
    let n_qps = pairs.len();
    let mut flight = InFlight {
        outstanding: vec![0u32; n_qps],
        posted: vec![0u64; n_qps],
    };
    let mut completed_total: u64 = 0;
    let start = Instant::now();
    let (mut sampler, end, iters) = Sampler::new(start, length, size, window(length));
    let mut bar = progress.map(|make| Progress::new(make, length, n_qps, size));
    let mut stopping = false;
    let mut last_activity = start;
    loop {
        let now = Instant::now();
        if let Some(e) = end {
            if now >= e {
                stopping = true;
            }
        } else if flight.posted.iter().all(|&p| p >= iters) {
            stopping = true;
        }
        if !stopping {
            flight.fill(pairs, t, size, depth, iters)?;
        }
        let got = flight.reap(cq)?;
        let now = Instant::now();
        if let Some(n) = got {
            completed_total += n;
            sampler.on_completions(now, completed_total);
            last_activity = now;
        } else if now.duration_since(last_activity) > STALL && !flight.idle() {
            return Err(BenchError::Stalled {
                secs: STALL.as_secs(),
            });
        }
        if let Some(p) = bar.as_mut() {
            p.update(now, start, completed_total);
        }
        if stopping && flight.idle() {
            break;
        }
    }
    if let Some(p) = bar {
        p.bar.finish();
    }
    Ok(sampler.result(completed_total, depth))
}

fn wait_one(cq: &Cq) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        let seen = qp::poll(cq, 1, |wr_id, status| {
            if status != qp::WC_SUCCESS {
                return Err(completion_error((wr_id >> 32) as usize, status));
            }
            Ok(())
        })?;
        if seen > 0 {
            return Ok(());
        }
        if start.elapsed() > STALL {
            return Err(BenchError::Stalled {
                secs: STALL.as_secs(),
            });
        }
    }
}

/// The buffers and regions of the data check.
pub(crate) struct CheckBuffers<'a, 'g> {
    pub src: &'a mut Buffer<'g>,
    pub dst: &'a mut Buffer<'g>,
    pub target: Target<'a>,
    pub scratch: &'a Region,
}

/// Write a per-QP pattern of `size` bytes on each QP, flush it, read it back and compare.
pub(crate) fn data_check(
    pairs: &mut [QpPair],
    cq: &Cq,
    b: CheckBuffers<'_, '_>,
    size: u64,
) -> Result<DataCheck, BenchError> {
    let n = usize_of(size)?;
    let mut expected = vec![0u8; n];
    let mut actual = vec![0u8; n];
    let mut mismatched = 0u64;
    let mut first = None;
    for (i, pair) in pairs.iter_mut().enumerate() {
        fill_pattern(&mut expected, 0x6764_7270_0000 + i as u64);
        b.src.write(&expected)?;
        b.dst.fill(0, n)?;
        post_writes(pair, i, 1, size, &b.target)?;
        wait_one(cq)?;
        // Flush: an RDMA READ on the same QP completes only after the WRITE has landed (NCCL's method).
        pair.send.post_read(
            ((i as u64) << 32) | 1,
            b.scratch.first(8)?,
            b.target.dst.remote(),
        )?;
        wait_one(cq)?;
        b.dst.read(&mut actual)?;
        let (m, f) = compare(&expected, &actual);
        if m > 0 && first.is_none() {
            first = f;
        }
        mismatched += m;
    }
    Ok(DataCheck {
        passed: mismatched == 0,
        bytes: size,
        qps: pairs.len() as u32,
        mismatched_bytes: mismatched,
        first_mismatch: first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_bounded() {
        assert_eq!(effective_depth(128, 65536, false), (128, 16));
        assert_eq!(effective_depth(128, 1 << 20, false), (32, 8));
        assert_eq!(effective_depth(128, 8 << 20, false), (4, 1));
        assert_eq!(effective_depth(128, 1 << 30, false), (2, 1));
        assert_eq!(effective_depth(1, 4096, false), (1, 1));
        assert_eq!(effective_depth(8, 4096, false), (8, 2));
        // Software devices: same depth, one WRITE per post and completion.
        assert_eq!(effective_depth(128, 65536, true), (128, 1));
        assert_eq!(effective_depth(128, 1 << 20, true), (32, 1));
    }
}
