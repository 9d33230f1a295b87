//! gdrprov: makes a Linux GPU host ready for NVIDIA GPUDirect RDMA and proves
//! that it is. One pipeline, each stage a module with one job:
//! profile + facts → plan (pure) → apply (journal) → render.

pub mod ansible;
pub mod apply;
pub mod bench;
pub mod boot;
pub mod bootcmd;
pub mod change;
pub mod cli;
pub mod commands;
pub mod doctor;
pub mod error;
pub mod exit;
pub mod facts;
pub mod fleet;
pub mod health;
pub mod host;
pub mod inventory;
pub mod journal;
pub mod modules;
pub mod ops;
pub mod plan;
pub mod prepare;
pub mod profile;
pub mod render;
pub mod requirements;
pub mod rollback;
pub mod snapshot;
pub mod verify;
pub mod versions;
pub mod wildcard;
