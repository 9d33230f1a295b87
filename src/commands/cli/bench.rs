//! `gdrprov bench ...`: the loopback, the dma-buf probe, the copy bandwidth
//! and the two-host pair. The options the loopback and the pair share are
//! two groups, [`EndArgs`] (this end's device and memory) and [`RunArgs`]
//! (what runs and when it passes), written once.

use super::bench_node::gpu_index;
use super::values::{self, MemoryArg, OpArg};
use crate::bench::memory::MemoryKind;
use crate::bench::pair::protocol::Op;
use crate::bench::pair::DEFAULT_PORT;
use crate::bench::parse::parse_size;
use crate::grammar;
use crate::names;
use clap::{Args, Subcommand};
use std::path::PathBuf;

/// `gdrprov bench ...`
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// RDMA WRITE bandwidth between two QPs of this host (like ib_write_bw against itself), with a data check.
    Loopback(LoopbackArgs),
    /// Does the RDMA device accept dma-buf memory regions? (needs no GPU)
    Probe(ProbeArgs),
    /// GPU <-> host copy bandwidth (pinned memory, 256 MiB, best of several runs) per GPU.
    Copy(CopyArgs),
    /// RDMA between two hosts: `--listen` on one, `pair PEER` on the other; with a data check.
    Pair(PairArgs),
    /// GPU -> GPU copy-engine bandwidth of every ordered pair: read, write, bidirectional, peer access and path.
    P2p(super::bench_node::P2pArgs),
    /// NCCL all_reduce over every local GPU in one process: busbw per size, the transports NCCL chose.
    Nccl(super::bench_node::NcclArgs),
    /// GPUDirect Storage through cuFile: a test file read into GPU memory (cold and warm) and written back, every byte checked; GB/s per size, the mode cuFile used and why.
    Gds(GdsArgs),
}

impl BenchCommand {
    pub fn name(&self) -> &'static str {
        match self {
            BenchCommand::Loopback(_) => names::BENCH_LOOPBACK,
            BenchCommand::Probe(_) => names::BENCH_PROBE,
            BenchCommand::Copy(_) => names::BENCH_COPY,
            BenchCommand::Pair(_) => names::BENCH_PAIR,
            BenchCommand::P2p(_) => names::BENCH_P2P,
            BenchCommand::Nccl(_) => names::BENCH_NCCL,
            BenchCommand::Gds(_) => names::BENCH_GDS,
        }
    }
}

/// This end of an RDMA run: its port, and where its buffers live.
#[derive(Debug, Clone, Args)]
pub struct EndArgs {
    /// RDMA device and port of this end, the sending one in a loopback (default: the first
    /// ACTIVE port).
    #[arg(long, value_name = "DEV[:PORT]", value_parser = crate::grammar::rail_port)]
    pub device: Option<String>,
    /// Where this end's buffers live (default: cuda-dmabuf when a GPU is present, else host).
    #[arg(long, value_parser = values::parser::<MemoryArg, MemoryKind>())]
    pub memory: Option<MemoryKind>,
    /// CUDA device index for GPU memory.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = gpu_index())]
    pub gpu: u32,
}

/// What an RDMA run does and when it passes (`bench pair`: the client sets them).
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Message size(s) in bytes; K/M/G (binary) suffixes and comma lists are accepted [default: 8MiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Seconds per message size [default: 5, or 1 with loopback --sweep].
    #[arg(long, value_name = "SECS", conflicts_with = "iters", value_parser = grammar::seconds)]
    pub duration: Option<f64>,
    /// Iterations (transfers per QP) per message size, instead of a duration.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub iters: Option<u64>,
    /// Number of QP pairs.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub qps: u32,
    /// Outstanding transfers per QP (capped so that at most 32 MiB are in flight per QP).
    #[arg(long, default_value_t = 128, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8192))]
    pub tx_depth: u32,
    /// GID index on RoCE (default: the RoCE v2 IPv4 GID).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=255))]
    pub gid_index: Option<u32>,
    /// Pass when the average reaches this fraction of line rate (the slower port's in a pair)
    /// [default: 0.90 GPU memory, 0.95 host].
    #[arg(long, value_name = "FRACTION", value_parser = grammar::fraction_above_zero)]
    pub min_fraction: Option<f64>,
    /// Pass when the average reaches this many Gb/s (also on software RDMA devices).
    #[arg(long, value_name = "GBPS", value_parser = grammar::rate)]
    pub min_gbps: Option<f64>,
}

/// `gdrprov bench loopback`
#[derive(Debug, Clone, Args)]
pub struct LoopbackArgs {
    #[command(flatten)]
    pub end: EndArgs,
    /// RDMA device and port that receives (default: the sending port itself).
    #[arg(long, value_name = "DEV[:PORT]", value_parser = crate::grammar::rail_port)]
    pub to: Option<String>,
    /// Every power of two from 4 KiB to 8 MiB.
    #[arg(long, conflicts_with = "size")]
    pub sweep: bool,
    #[command(flatten)]
    pub run: RunArgs,
    /// Allocate GPU memory and export it as dma-buf, then stop (test mode; needs no RDMA device).
    #[arg(long)]
    pub export_only: bool,
}

/// `gdrprov bench probe`
#[derive(Debug, Clone, Args)]
pub struct ProbeArgs {
    /// RDMA device (default: every device).
    #[arg(long, value_name = "DEV", value_parser = crate::grammar::rail)]
    pub device: Option<String>,
}

/// `gdrprov bench copy`
#[derive(Debug, Clone, Args)]
pub struct CopyArgs {
    /// CUDA device index(es) (default: every GPU).
    #[arg(long, value_name = "N", value_delimiter = ',', value_parser = gpu_index())]
    pub gpu: Vec<u32>,
    /// Bytes per copy; K/M/G suffixes [default: 256MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Timed runs per direction; the best counts.
    #[arg(long, default_value_t = crate::bench::copy::DEFAULT_RUNS, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Pass at this fraction of the link's raw rate [default: Azure's floor for the GPU, else 0.75].
    #[arg(long, value_name = "FRACTION", value_parser = grammar::fraction_above_zero)]
    pub min_fraction: Option<f64>,
    /// Pass at this many GB/s each way.
    #[arg(long, value_name = "GBS", value_parser = grammar::rate)]
    pub min_gbs: Option<f64>,
    /// Allocate and drive each GPU's host buffer wherever the scheduler puts the thread, not
    /// from the CPUs of the GPU's NUMA node (to compare; the report says which was used).
    #[arg(long)]
    pub no_numa_pin: bool,
    #[command(flatten)]
    pub node: super::bench_node::ConcurrentArgs,
}

/// `gdrprov bench pair`
#[derive(Debug, Clone, Args)]
pub struct PairArgs {
    /// The listener to connect to: HOST or HOST:PORT (on the other host: `gdrprov bench pair --listen`).
    #[arg(
        value_name = "PEER",
        value_parser = grammar::peer,
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
    /// Hard time limit in seconds for the whole session (accept, set-up, run); the handshake has its own deadline of 10 s on both ends.
    #[arg(long, default_value_t = 300, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub timeout: u64,
    #[command(flatten)]
    pub end: EndArgs,
    /// What to measure (client): write into the listener, read from it, or write both ways at once.
    #[arg(long, value_parser = values::parser::<OpArg, Op>(), default_value = "write")]
    pub op: Op,
    #[command(flatten)]
    pub run: RunArgs,
    /// Checked transfers per size after the timed run (client), each with a fresh pattern.
    #[arg(long, default_value_t = 4, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub check_iters: u32,
    /// Also write Prometheus metrics to FILE atomically (node-exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
    /// One run per rail: each RDMA NIC with an ACTIVE port (name order) with its nearest GPU, against
    /// the peer's NIC of the same rail (both ends pass it; the listener needs --listen ADDR).
    #[arg(long, conflicts_with_all = ["device", "gpu", "textfile"])]
    pub all_nics: bool,
}

/// `gdrprov bench gds`
#[derive(Debug, Clone, Args)]
pub struct GdsArgs {
    /// Directory for the test files, on the mount to test (they are removed after).
    #[arg(long, value_name = "DIR")]
    pub dir: PathBuf,
    /// Read this existing file instead of making one per --size (never written nor removed;
    /// checked against its own bytes); the write-back still goes to a test file in --dir.
    #[arg(long, value_name = "FILE", conflicts_with = "size")]
    pub file: Option<PathBuf>,
    /// Test file size(s); K/M/G suffixes and comma lists, rounded up to 1 MiB [default: 1GiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// CUDA device index of the GPU to read into.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = gpu_index())]
    pub gpu: u32,
    /// Threads issuing cuFile requests at once (KvikIO splits reads the same way).
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub threads: u32,
    /// Bytes per cuFile request; K/M suffixes [default: 4MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub chunk: Option<u64>,
    /// Timed rounds per size (cold, then warm, each round); the median counts.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Also write Prometheus metrics to FILE atomically (node-exporter's textfile collector).
    #[arg(long, value_name = "FILE")]
    pub textfile: Option<PathBuf>,
}
