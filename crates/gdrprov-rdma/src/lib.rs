//! RDMA and GPU access for gdrprov: ibverbs through sideway, the CUDA driver API through cudarc,
//! and NVML; each library is loaded at run time (the binary starts on a host that has none of
//! them) and each missing piece is an [`Error`] that names it.
//!
//! This crate holds every `unsafe` block gdrprov needs for them (`unsafe_code` is denied in the
//! gdrprov crate; the host layer's raw system calls are `crates/gdrprov-sys`'s). It reads nothing
//! of the host itself: what it needs to know of the machine (a port's line rate in sysfs, why no
//! device is visible, whether nvidia_peermem is loaded, a dma-buf's fdinfo) comes from the caller
//! through [`HostView`].
//!
//! The pieces, from the bottom up:
//! - [`verbs`]: is libibverbs there, the devices, opening one, its ports ([`verbs::PortInfo`],
//!   [`verbs::select_port`]).
//! - [`qp`]: a protection domain and completion queues on a port ([`qp::Side`]), RC queue pairs
//!   brought to RTS against a remote's [`qp::Endpoint`] (LID, QPN, PSN, GID), RDMA WRITE and
//!   READ posts and completion polling.
//! - [`memory`]: host or GPU buffers ([`memory::Buffer`]) and their registration as memory
//!   regions the way their [`memory::MemoryKind`] requires (dma-buf or legacy peer memory).
//! - [`cuda`]: GPUs and device memory through the CUDA driver API, dma-buf export, timed copies.
//! - [`nvml`]: GPU health counters through NVML.
//! - [`nvlink`]: the node's NVLink links, fabric state and GPU pairs through `nvml-wrapper`.
//! - `nvml_raw`: the few NVML calls nvml-wrapper cannot make (each says why), in one place.

pub mod cuda;
pub mod error;
pub mod gid;
pub mod host_buf;
pub mod memory;
pub mod nvlink;
pub mod nvml;
mod nvml_raw;
pub mod qp;
pub mod verbs;

pub use error::{errno_name, Error};
pub use memory::MemoryKind;

/// What this crate needs to know of the host, answered by the caller (gdrprov reads it through
/// its host layer, and tests from fixture trees).
pub trait HostView {
    /// The port's line rate in Gb/s from sysfs (`/sys/class/infiniband/DEV/ports/N/rate`).
    fn port_rate_gbps(&self, device: &str, port: u8) -> Option<f64>;
    /// Why libibverbs sees no RDMA device, from the kernel's view of the host.
    fn explain_no_device(&self) -> String;
    /// Whether the nvidia_peermem module is loaded (`/sys/module/nvidia_peermem`).
    fn nvidia_peermem_loaded(&self) -> bool;
    /// The kernel's fdinfo of this process's file descriptor `fd` (`/proc/self/fdinfo/FD`: a
    /// dma-buf's size and exporter); `None` when it cannot be read.
    fn fd_info(&self, fd: std::os::fd::RawFd) -> Option<String>;
}
