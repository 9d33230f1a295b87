//! `gdrprov bench`: the built-in RDMA loopback bandwidth check and the NIC dma-buf probe.
//!
//! ibverbs comes through sideway (libibverbs loaded at run time by rdma-mummy-sys) and the CUDA
//! driver API through cudarc's dynamic loading, so the binary starts on a host that has neither;
//! each missing piece is reported as an error that names it.

pub mod copy;
pub mod cuda;
pub mod error;
pub mod gid;
pub mod loopback;
pub mod memory;
pub mod pair;
pub mod probe;
pub mod report;
pub mod sysfs;
pub mod verbs;

pub use error::BenchError;
pub use loopback::{export_only, run_loopback, LoopbackOptions, RunLength};
pub use memory::MemoryKind;
pub use probe::{probe_all, probe_dmabuf_support, DmabufProbe, DmabufSupport};
pub use report::{DataCheck, ExportReport, GpuInfo, LoopbackReport, SizeResult, Threshold};
