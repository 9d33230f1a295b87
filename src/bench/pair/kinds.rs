//! What both ends name on the wire and in the report: the operation and a port.

use serde::{Deserialize, Serialize};

/// What the data moves with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// The client writes into the listener's buffer (RDMA WRITE).
    Write,
    /// The client reads the listener's buffer (RDMA READ).
    Read,
    /// Both write into each other's buffer at once.
    Bidir,
}

impl Op {
    pub fn label(self) -> &'static str {
        match self {
            Op::Write => "RDMA WRITE",
            Op::Read => "RDMA READ",
            Op::Bidir => "RDMA WRITE, both directions",
        }
    }
}

/// One end's port, as the other end needs it (and names it in errors).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortDesc {
    pub host: String,
    pub device: String,
    pub port: u8,
    pub link_layer: String,
    pub state: String,
    pub lid: u16,
    pub gid: Option<String>,
    pub gid_raw: Option<[u8; 16]>,
    pub gid_index: Option<u32>,
    /// "RoCE v2", "IB/RoCE v1" (sysfs gid_attrs/types), when known.
    pub gid_type: Option<String>,
    /// Active MTU in bytes (256..4096).
    pub mtu: u32,
    pub netdev: Option<String>,
    pub netdev_mtu: Option<u32>,
    pub line_rate_gbps: Option<f64>,
    pub software: bool,
}
