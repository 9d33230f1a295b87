//! `gdrprov bench`: the built-in RDMA loopback bandwidth check, the NIC dma-buf probe and the
//! GPU <-> host copy check.
//!
//! Verbs, CUDA and NVML come through the gdrprov-rdma crate (ibverbs through sideway, loaded on
//! the first verbs call; the CUDA driver API through cudarc's dynamic loading), so the binary
//! starts on a host that has neither; each missing piece is reported as an error that names it.
//! What the crate needs to know of the host comes from [`sysfs::LiveHost`].

pub mod concurrent;
pub mod copy;
pub mod error;
pub mod gds;
pub mod gds_log;
pub mod loopback;
mod measure;
pub mod nccl;
pub mod nccl_child;
pub mod numa;
pub mod p2p;
pub mod pair;
pub mod parse;
pub mod pattern;
pub mod peermem;
pub mod probe;
pub mod progress;
pub mod report;
mod sampler;
pub mod sysfs;
pub mod units;

pub use error::BenchError;
pub use gdrprov_rdma::{cuda, gid, memory, verbs};
pub use loopback::{export_only, run_loopback, LoopbackOptions, RunLength};
pub use memory::MemoryKind;
pub use probe::{probe_all, probe_dmabuf_support, DmabufProbe, DmabufSupport};
pub use report::{DataCheck, ExportReport, GpuInfo, LoopbackReport, SizeResult, Threshold};
