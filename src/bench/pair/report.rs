//! The pair report: per message size the loopback report's measurement fields, the data check at
//! the receiving end, both ends' ports and memory, the threshold; text for people, JSON for machines.

use serde::{Deserialize, Serialize};

use super::kinds::{Op, PortDesc};
use crate::bench::report::{SizeResult, Threshold};

/// One timed run (one direction), as `bench loopback` reports a size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub bytes: u64,
    pub iterations: u64,
    pub peak_gbps: f64,
    pub average_gbps: f64,
    pub msg_rate_mpps: f64,
    pub seconds: f64,
    pub writes_in_flight: u32,
    pub writes_per_completion: u32,
}

impl Measured {
    pub fn to_size_result(&self, line_rate: Option<f64>) -> SizeResult {
        SizeResult {
            bytes: self.bytes,
            iterations: self.iterations,
            peak_gbps: self.peak_gbps,
            average_gbps: self.average_gbps,
            msg_rate_mpps: self.msg_rate_mpps,
            line_rate_fraction: line_rate.map(|l| self.average_gbps / l),
            seconds: self.seconds,
            writes_in_flight: self.writes_in_flight,
            writes_per_completion: self.writes_per_completion,
        }
    }
}

/// The data check of one size (or of the whole run): fresh pattern per iteration, every byte compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairCheck {
    pub passed: bool,
    /// Checked transfers (each its own pattern; in both directions for bidir).
    pub iterations: u32,
    /// Bytes compared in all.
    pub bytes_compared: u64,
    pub mismatched_bytes: u64,
    /// The first mismatching offsets within the message (at most 16).
    pub mismatch_offsets: Vec<u64>,
}

impl PairCheck {
    pub fn add(&mut self, other: &PairCheck) {
        self.iterations += other.iterations;
        self.bytes_compared += other.bytes_compared;
        self.mismatched_bytes += other.mismatched_bytes;
        for o in &other.mismatch_offsets {
            if self.mismatch_offsets.len() < 16 {
                self.mismatch_offsets.push(*o);
            }
        }
        self.passed = self.mismatched_bytes == 0 && self.iterations > 0;
    }
}

/// One direction of a size (bidir has two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// "client -> listener" or "listener -> client".
    pub flow: String,
    pub average_gbps: f64,
    pub peak_gbps: f64,
}

/// One message size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairSize {
    pub bytes: u64,
    pub iterations: u64,
    pub peak_gbps: f64,
    /// Sum of both directions for bidir.
    pub average_gbps: f64,
    pub msg_rate_mpps: f64,
    pub line_rate_fraction: Option<f64>,
    pub seconds: f64,
    pub writes_in_flight: u32,
    pub writes_per_completion: u32,
    pub directions: Vec<Direction>,
    pub data_check: PairCheck,
}

/// One end: its port, memory path and GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct End {
    pub address: String,
    pub port: PortDesc,
    /// The memory path proven: host, cuda-dmabuf, cuda-peermem.
    pub memory: String,
    pub gpu: Option<String>,
}

/// Everything a pair run found (the client builds it and sends it to the listener).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    pub op: Op,
    pub client: End,
    pub listener: End,
    pub qps: u32,
    pub tx_depth: u32,
    /// The slower port of the two; none when either is a software device or reports none.
    pub line_rate_gbps: Option<f64>,
    pub results: Vec<PairSize>,
    pub data_check: PairCheck,
    pub threshold: Threshold,
    pub passed: bool,
    /// How the figures were timed (what the timed window holds; the data check is outside it).
    #[serde(default)]
    pub timing: String,
}
