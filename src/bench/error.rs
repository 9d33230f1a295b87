//! Every way the benchmark can fail: the gdrprov-rdma crate's error, each variant with its cause
//! and the fix.

pub use gdrprov_rdma::error::{errno_name, Error as BenchError};
