//! The whole node's benchmark options: `bench copy --concurrent` (a group flattened into
//! `bench copy`), `bench p2p` and `bench nccl`.

use crate::bench::parse::parse_size;
use clap::Args;

/// A CUDA device index (the most GPUs one host has is far below it).
pub fn gpu_index() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(0..1024)
}

/// Samples whose median counts.
fn samples() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(1..=1000)
}

/// `bench copy --concurrent` (flattened into `bench copy`'s arguments).
#[derive(Debug, Clone, Default, Args)]
pub struct ConcurrentArgs {
    /// Host -> device and device -> host on every GPU at once (each alone first), per GPU and in
    /// sum, floors from the topology (512 MiB copies, median of --samples, nvbandwidth's method).
    #[arg(long)]
    pub concurrent: bool,
    /// Samples whose median counts (with --concurrent).
    #[arg(long, default_value_t = 3, value_name = "N", requires = "concurrent", value_parser = samples())]
    pub samples: u32,
}

/// `gdrprov bench p2p`
#[derive(Debug, Clone, Args)]
pub struct P2pArgs {
    /// CUDA device indexes (default: every GPU); every ordered pair of them is measured.
    #[arg(long, value_name = "N", value_delimiter = ',', value_parser = gpu_index())]
    pub gpu: Vec<u32>,
    /// Bytes per copy; K/M/G suffixes [default: 512MiB].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Samples whose median counts.
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = samples())]
    pub samples: u32,
}

/// `gdrprov bench nccl`
#[derive(Debug, Clone, Args)]
pub struct NcclArgs {
    /// CUDA device indexes (default: every GPU); one communicator each, in this process.
    #[arg(long, value_name = "N", value_delimiter = ',', value_parser = gpu_index())]
    pub gpu: Vec<u32>,
    /// Message size(s) in bytes; K/M/G suffixes, comma lists [default: 1MiB,8MiB,64MiB,256MiB].
    #[arg(long, value_name = "BYTES", value_delimiter = ',', value_parser = parse_size)]
    pub size: Vec<u64>,
    /// Timed all_reduce steps per size (after 5 warm-ups).
    #[arg(long, default_value_t = 20, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub iters: u32,
    /// Seconds ncclCommInitAll may take; past it the all_reduce's process is killed and the
    /// hang is the finding (the all_reduce runs in a child process of gdrprov).
    #[arg(long, default_value_t = crate::bench::nccl_child::DEFAULT_INIT_SECS, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub init_timeout: u64,
    /// Internal: be that child process (gdrprov starts itself so): run the all_reduce here and
    /// write each stage and the result as JSON lines on standard output.
    #[arg(long, hide = true)]
    pub child: bool,
}
