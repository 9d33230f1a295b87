//! `gdrprov bench pair` arguments (the loopback's names where they apply).

use std::path::PathBuf;
use std::time::Duration;

use super::error::PairError;
use super::protocol::{Op, WireLength};
use super::PairOptions;
use crate::bench::memory::MemoryKind;
use crate::bench::parse::{parse_dev_port, parse_size};

/// The TCP port a listener uses unless told otherwise (perftest's is 18515).
pub const DEFAULT_PORT: u16 = 18516;

/// `gdrprov bench pair`
#[derive(Debug, Clone, clap::Args)]
pub struct PairArgs {
    /// The listener to connect to: HOST or HOST:PORT (on the other host: `gdrprov bench pair --listen`).
    #[arg(
        value_name = "PEER",
        required_unless_present = "listen",
        conflicts_with = "listen"
    )]
    pub peer: Option<String>,
    /// Serve one session and exit; bind to ADDR (IP or IP:PORT) [default: the RDMA port's own IPv4 address].
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "")]
    pub listen: Option<String>,
    /// TCP port (when ADDR/PEER names none).
    #[arg(long, default_value_t = DEFAULT_PORT, value_name = "PORT")]
    pub port: u16,
    /// File holding the shared secret [default: $GDRPROV_PAIR_TOKEN; a listener without either makes one].
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Hard time limit in seconds for the whole session (accept, set-up, run).
    #[arg(long, default_value_t = 300, value_name = "SECS")]
    pub timeout: u64,
    /// RDMA device and port of this end (default: the first ACTIVE port).
    #[arg(long, value_name = "DEV[:PORT]")]
    pub device: Option<String>,
    /// Where this end's buffers live (default: cuda-dmabuf when a GPU is present, else host).
    #[arg(long, value_enum)]
    pub memory: Option<MemoryKind>,
    /// CUDA device index for GPU memory.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub gpu: u32,
    /// What to measure (client): write into the listener, read from it, or write both ways at once.
    #[arg(long, value_enum, default_value_t = Op::Write)]
    pub op: Op,
    /// Message size(s) (client); K/M/G suffixes and comma lists [default: 8MiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Seconds per message size (client) [default: 5].
    #[arg(long, value_name = "SECS", conflicts_with = "iters")]
    pub duration: Option<f64>,
    /// Transfers per QP per message size (client), instead of a duration.
    #[arg(long, value_name = "N")]
    pub iters: Option<u64>,
    /// Number of QPs (client).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub qps: u32,
    /// Outstanding transfers per QP (capped so that at most 32 MiB are in flight per QP).
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub tx_depth: u32,
    /// Checked transfers per size after the timed run (client), each with a fresh pattern.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub check_iters: u32,
    /// GID index on RoCE (default: the RoCE v2 IPv4 GID).
    #[arg(long, value_name = "N")]
    pub gid_index: Option<u32>,
    /// Pass when the average reaches this fraction of the slower port's line rate [default: 0.90 GPU, 0.95 host].
    #[arg(long, value_name = "FRACTION")]
    pub min_fraction: Option<f64>,
    /// Pass when the average reaches this many Gb/s (also on software RDMA devices).
    #[arg(long, value_name = "GBPS")]
    pub min_gbps: Option<f64>,
    /// Also write Prometheus metrics to FILE atomically (node-exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// One run per rail: each RDMA NIC with an ACTIVE port (name order) with its nearest GPU, against
    /// the peer's NIC of the same rail (both ends pass it; the listener needs --listen ADDR).
    #[arg(long, conflicts_with_all = ["device", "gpu", "textfile"])]
    pub all_nics: bool,
}

fn bad(s: String) -> PairError {
    PairError::Usage(s)
}

impl PairArgs {
    pub fn to_options(&self) -> Result<PairOptions, PairError> {
        let (device, port) = match &self.device {
            Some(d) => {
                let (d, p) = parse_dev_port(d)?;
                (Some(d), p)
            }
            None => (None, None),
        };
        let sizes = if self.size.is_empty() {
            vec![8 << 20]
        } else {
            self.size.clone()
        };
        if sizes.iter().any(|&s| s > u64::from(u32::MAX)) {
            return Err(bad("--size: a message is at most 4 GiB - 1".into()));
        }
        let length = match (self.iters, self.duration) {
            (Some(0), _) => return Err(bad("--iters must be > 0".into())),
            (Some(n), _) => WireLength::Iterations(n),
            (None, Some(d)) if d.is_finite() && d > 0.0 && d < 86_400.0 => WireLength::Seconds(d),
            (None, Some(d)) => return Err(bad(format!("--duration {d}: must be > 0 seconds"))),
            (None, None) => WireLength::Seconds(5.0),
        };
        for (name, v) in [
            ("--min-fraction", self.min_fraction),
            ("--min-gbps", self.min_gbps),
        ] {
            if let Some(x) = v {
                if !(x.is_finite() && x > 0.0) || (name == "--min-fraction" && x > 1.0) {
                    return Err(bad(format!("{name} {x} is out of range")));
                }
            }
        }
        if self.qps == 0 || self.qps > 64 || self.tx_depth == 0 || self.tx_depth > 8192 {
            return Err(bad("--qps must be 1..64 and --tx-depth 1..8192".into()));
        }
        if self.check_iters == 0 {
            return Err(bad(
                "--check-iters must be > 0 (every run checks its data)".into()
            ));
        }
        if self.all_nics && self.listen.as_deref() == Some("") {
            return Err(bad(
                "--all-nics --listen needs ADDR: the address the client reaches for every rail's set-up (each rail's RDMA goes over its own NIC)".into(),
            ));
        }
        if self.timeout == 0 || self.timeout > 86_400 {
            return Err(bad("--timeout must be 1..86400 seconds".into()));
        }
        if let WireLength::Seconds(d) = length {
            let need = d * sizes.len() as f64;
            if need >= self.timeout as f64 {
                return Err(bad(format!(
                    "{} size(s) x {d} s do not fit in --timeout {} s; raise --timeout",
                    sizes.len(),
                    self.timeout
                )));
            }
        }
        Ok(PairOptions {
            listen: self.listen.clone(),
            peer: self.peer.clone(),
            port: self.port,
            token_file: self.token_file.clone(),
            timeout: Duration::from_secs(self.timeout),
            device,
            dev_port: port,
            memory: self.memory,
            gpu: self.gpu,
            op: self.op,
            sizes,
            length,
            qps: self.qps,
            tx_depth: self.tx_depth,
            check_iters: self.check_iters,
            gid_index: self.gid_index,
            min_fraction: self.min_fraction,
            min_gbps: self.min_gbps,
            all_nics: self.all_nics,
            rail: None,
            gpu_pci: None,
            rail_note: None,
        })
    }
}
