//! The pair report: per message size the loopback report's measurement fields, the data check at
//! the receiving end, both ends' ports and memory, the threshold; text for people, JSON for machines.

use serde::{Deserialize, Serialize};

use super::kinds::{Op, PortDesc};
use crate::bench::report::{SizeResult, Threshold};

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

/// One message size: the loopback report's fields (in JSON at the same level, in the same order),
/// then each direction and the data check.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairSize {
    /// Both directions summed for bidir.
    #[serde(flatten)]
    pub size: SizeResult,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair size in JSON: the loopback report's fields at the same level and in the same order,
    /// then its directions and data check; and it reads back as it was written (the listener reads
    /// the client's report).
    #[test]
    fn a_pair_size_keeps_its_json_fields_and_reads_back() {
        let size = PairSize {
            size: SizeResult {
                bytes: 65536,
                iterations: 100,
                peak_gbps: 2.5,
                average_gbps: 2.0,
                msg_rate_mpps: 0.1,
                line_rate_fraction: Some(0.5),
                seconds: 1.5,
                writes_in_flight: 64,
                writes_per_completion: 16,
            },
            directions: vec![Direction {
                flow: "client -> listener".into(),
                average_gbps: 2.0,
                peak_gbps: 2.5,
            }],
            data_check: PairCheck::default(),
        };
        let v = serde_json::to_value(&size).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "bytes",
                "iterations",
                "peak_gbps",
                "average_gbps",
                "msg_rate_mpps",
                "line_rate_fraction",
                "seconds",
                "writes_in_flight",
                "writes_per_completion",
                "directions",
                "data_check"
            ]
        );
        assert_eq!(v["line_rate_fraction"], 0.5);
        let back: PairSize = serde_json::from_value(v).unwrap();
        assert_eq!(back, size);
    }
}
