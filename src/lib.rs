//! gdrprov: make a Linux GPU host ready for NVIDIA GPUDirect RDMA, and prove it.

pub mod bench;
