//! The `pair` entry of verify (`--peer HOST`): `bench pair` from this host as the client against
//! a listener on HOST, its data check and line rate, as one check.

use std::time::Duration;

use super::LoopbackChoice;
use crate::bench::pair::report::PairReport;
use crate::bench::pair::{run_client, PairOptions};
use crate::checks::Check;

const NAME: &str = "pair";

/// The shortest session limit of the pair check (`bench pair --timeout`'s default).
const SESSION_LIMIT_SECS: f64 = 300.0;

/// What verify passes to the pair check: its loopback choices (peer, secret, duration, floor),
/// `--device DEV[:PORT]` parsed, and the profile's line-rate fraction.
pub struct PairInput<'a> {
    pub choice: &'a LoopbackChoice,
    pub device: &'a (Option<String>, Option<u8>),
    pub min_fraction: Option<f64>,
}

/// The options of the pair run: the peer, the secret, verify's device, duration and thresholds.
pub fn options(input: &PairInput, peer: &str) -> PairOptions {
    let mut o = PairOptions::client(peer);
    o.token_file = input.choice.token_file.clone();
    o.device = input.device.0.clone();
    o.dev_port = input.device.1;
    let secs = input.choice.seconds.unwrap_or(3.0);
    o.length = crate::bench::pair::protocol::WireLength::Seconds(secs);
    // The session's limit, as `bench pair`'s default (300 s): the timed run and then the data
    // check of 8 MiB transfers, slow on a software device on a loaded host.
    o.timeout = Duration::from_secs_f64((secs + 60.0).max(SESSION_LIMIT_SECS));
    o.min_fraction = input.min_fraction;
    o.min_gbps = input.choice.min_gbps;
    o
}

/// Absent without `--peer`; on a root that is not the running system, skipped.
pub fn check(host: &crate::host::Host, input: &PairInput) -> Option<Check> {
    let peer = input.choice.peer.as_deref()?;
    if !host.is_live() {
        return Some(Check::skip(
            NAME,
            format!("{} is not the running system", host.root().display()),
        ));
    }
    let opts = options(input, peer);
    Some(verdict(
        peer,
        run_client(&opts, &|_| {})
            .map(|o| o.report)
            .map_err(|e| e.to_string()),
    ))
}

/// The check of a pair run's outcome.
pub fn verdict(peer: &str, run: Result<PairReport, String>) -> Check {
    match run {
        Ok(r) => {
            let detail = summary(&r);
            if r.passed {
                Check::pass(NAME, detail)
            } else {
                Check::fail_with_cause(NAME, detail)
            }
        }
        Err(e) => Check::fail_with_cause(NAME, format!("to {peer}: {e}")),
    }
}

/// `WRITE 8 MiB to 10.0.0.2 (mlx5_0 -> mlx5_3, cuda-dmabuf -> cuda-dmabuf): 370.1 Gb/s = 0.93 of
/// 400 Gb/s; data check passed (4 transfers)`.
pub fn summary(r: &PairReport) -> String {
    let mut s = format!(
        "{} to {} ({} -> {}, {} -> {})",
        r.op.label(),
        r.listener.address,
        r.client.port.device,
        r.listener.port.device,
        r.client.memory,
        r.listener.memory
    );
    if let Some(x) = r.results.last() {
        s.push_str(&format!(
            ": {} bytes at {:.2} Gb/s",
            x.size.bytes, x.size.average_gbps
        ));
        if let (Some(f), Some(l)) = (x.size.line_rate_fraction, r.line_rate_gbps) {
            s.push_str(&format!(" = {f:.2} of {l} Gb/s"));
        }
    }
    let c = &r.data_check;
    if c.passed {
        s.push_str(&format!(
            "; data check passed ({} transfers, {} bytes compared)",
            c.iterations, c.bytes_compared
        ));
    } else {
        s.push_str(&format!(
            "; data check FAILED: {} bytes differ (first offsets {:?})",
            c.mismatched_bytes, c.mismatch_offsets
        ));
    }
    if let Some(false) = r.threshold.passed {
        s.push_str("; below the threshold");
        if let Some(f) = r.threshold.min_line_rate_fraction {
            s.push_str(&format!(" ({f:.2} of line rate)"));
        }
    }
    s
}

#[cfg(test)]
#[path = "pair_tests.rs"]
mod tests;
