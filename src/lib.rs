//! gdrprov: makes a Linux GPU host ready for NVIDIA GPUDirect RDMA and proves
//! that it is. One pipeline, each stage a module with one job:
//! profile + facts → plan (pure) → apply (journal) → output.

pub mod apply;
pub mod bench;
pub mod checks;
pub mod commands;
pub mod docs;
pub mod error;
pub mod facts;
pub mod fleet;
pub mod grammar;
pub mod host;
pub mod journal;
pub mod journal_proof;
pub mod names;
pub mod ops;
pub mod output;
pub mod plan;
pub mod profile;
pub mod suggest;
pub mod versions;

/// The exit codes live with the error type (`error::exit`), where the front
/// door (src/commands) may reach them; `crate::exit` names them too.
pub use error::exit;
