//! How long a bench runs and how its figures are computed.

use super::error::BenchError;
use std::time::Duration;

/// How long each size runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunLength {
    Duration(Duration),
    Iterations(u64),
}

/// Gb/s from bytes and seconds (1 Gb = 10^9 bits, as perftest's --report_gbits).
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / secs / 1e9
}

pub(crate) fn usize_of(n: u64) -> Result<usize, BenchError> {
    usize::try_from(n).map_err(|_| BenchError::InvalidArgument(format!("size {n} too large")))
}

/// A figure with one decimal, `?` when unknown.
pub fn one_decimal(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.1}")).unwrap_or_else(|| "?".into())
}
