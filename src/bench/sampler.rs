//! How a timed run is measured, the part `bench loopback` and `bench pair` share: a margin is left
//! out at each end of a timed run (the ramp-up and the drain), the average is taken over the
//! sampled span, the peak over the best window; at the end, one [`SizeResult`].

use std::time::{Duration, Instant};

use super::report::SizeResult;
use super::units::{gbps, RunLength};

/// What is left out at each end of a timed run before averaging: a tenth of a duration, at most
/// 1 s (the ramp-up and the drain); nothing of an iteration count.
pub fn margin(length: RunLength) -> Duration {
    match length {
        RunLength::Duration(d) => (d / 10).min(Duration::from_secs(1)),
        RunLength::Iterations(_) => Duration::ZERO,
    }
}

/// Where a timed run stands: when it started, when sampling starts and ends, the sampled span so
/// far and the best window.
pub(crate) struct Sampler {
    start: Instant,
    sample_from: Instant,
    sample_to: Option<Instant>,
    base: Option<(Instant, u64)>,
    last: (Instant, u64),
    window: Duration,
    win_start: (Instant, u64),
    peak: f64,
    size: u64,
}

impl Sampler {
    /// A run of messages of `size` bytes that starts at `start` and lasts `length`, its peak taken
    /// over windows of `window`. Gives the sampler, when the run ends (a duration) and how many
    /// messages each QP sends (an iteration count; else unbounded).
    pub(crate) fn new(
        start: Instant,
        length: RunLength,
        size: u64,
        window: Duration,
    ) -> (Sampler, Option<Instant>, u64) {
        let margin = margin(length);
        let (end, iters) = match length {
            RunLength::Duration(d) => (Some(start + d), u64::MAX),
            RunLength::Iterations(n) => (None, n.max(1)),
        };
        let sampler = Sampler {
            start,
            sample_from: start + margin,
            sample_to: end.map(|e| e - margin),
            base: margin.is_zero().then_some((start, 0)),
            last: (start, 0),
            window,
            win_start: (start, 0),
            peak: 0.0,
            size,
        };
        (sampler, end, iters)
    }

    /// Completions came in: `completed` messages in all so far, at `now`.
    pub(crate) fn on_completions(&mut self, now: Instant, completed: u64) {
        if self.base.is_none() && now >= self.sample_from {
            self.base = Some((now, completed));
            self.win_start = (now, completed);
        }
        if self.base.is_some() && self.sample_to.is_none_or(|s| now <= s) {
            self.last = (now, completed);
            let dt = now.duration_since(self.win_start.0);
            if dt >= self.window {
                self.peak = self.peak.max(gbps(
                    (completed - self.win_start.1) * self.size,
                    dt.as_secs_f64(),
                ));
                self.win_start = (now, completed);
            }
        }
    }

    /// The result once every message has completed (`completed_total` in all), with the
    /// (messages in flight per QP, messages per signaled completion) it ran with. Without a sampled
    /// span (too short a run) the average is over the whole run.
    pub(crate) fn result(&self, completed_total: u64, (depth, batch): (u32, u32)) -> SizeResult {
        let (t0, c0) = self.base.unwrap_or((self.start, 0));
        let secs = self.last.0.duration_since(t0).as_secs_f64();
        let count = self.last.1.saturating_sub(c0);
        let (secs, count) = if secs > 0.0 && count > 0 {
            (secs, count)
        } else {
            (self.start.elapsed().as_secs_f64(), completed_total)
        };
        let average = gbps(count * self.size, secs);
        SizeResult {
            bytes: self.size,
            iterations: completed_total,
            // Never below the average (gbps is never negative).
            peak_gbps: self.peak.max(average),
            average_gbps: average,
            msg_rate_mpps: if secs > 0.0 {
                count as f64 / secs / 1e6
            } else {
                0.0
            },
            line_rate_fraction: None,
            seconds: secs,
            writes_in_flight: depth,
            writes_per_completion: batch,
        }
    }
}
