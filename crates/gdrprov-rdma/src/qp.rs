//! RC queue pairs on one port: a protection domain and completion queues ([`Side`]), QPs brought
//! to RTS against the other end's [`Endpoint`] (in-process for the loopback, exchanged out of band
//! between two hosts), RDMA WRITE and READ posts that check their ranges against the memory
//! regions, and completion polling.
//!
//! A buffer registered as a memory region must outlive every queue pair that uses it: drop the
//! QPs first (the loopback keeps its buffers until its pairs are gone).
#![allow(
    unsafe_code,
    reason = "memory-region registration and scatter-gather entries over raw addresses"
)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::{BasicCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::device_context::DeviceContext;
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::protection_domain::ProtectionDomain;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState,
    SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use crate::error::Error;
use crate::host_buf::HostBuf;
use crate::verbs::{mtu_enum, to_io, PortInfo};

/// A completion queue.
pub type Cq = BasicCompletionQueue;
/// A registered memory region.
pub type Mr = MemoryRegion;

/// `ibv_wc_status` of a successful work request.
pub const WC_SUCCESS: u32 = WorkCompletionStatus::Success as u32;

/// One end of a connection: an opened device, its port and a protection domain.
pub struct Side {
    pub ctx: Arc<DeviceContext>,
    pub pd: Arc<ProtectionDomain>,
    pub port: PortInfo,
}

impl Side {
    pub fn new(ctx: Arc<DeviceContext>, port: PortInfo) -> Result<Side, Error> {
        let pd = ctx
            .alloc_pd()
            .map_err(|e| Error::verbs("ibv_alloc_pd", &port.device, to_io(e)))?;
        Ok(Side { ctx, pd, port })
    }

    pub fn create_cq(&self, cqe: u32) -> Result<Arc<Cq>, Error> {
        let mut b = self.ctx.create_cq_builder();
        b.setup_cqe(cqe);
        b.build()
            .map_err(|e| Error::verbs("ibv_create_cq", &self.port.device, to_io(e)))
    }

    /// An RC QP in state INIT whose send and receive completions go to `cq`, with room for
    /// `depth` outstanding sends; it accepts remote WRITEs and READs.
    pub fn create_qp(&self, cq: &Arc<Cq>, depth: u32) -> Result<Qp, Error> {
        let mut b = self.pd.create_qp_builder();
        b.setup_send_cq(Arc::clone(cq))
            .setup_recv_cq(Arc::clone(cq))
            .setup_max_send_wr(depth)
            .setup_max_recv_wr(1)
            .setup_max_send_sge(1)
            .setup_max_recv_sge(1)
            .setup_max_inline_data(0);
        let mut qp = b
            .build()
            .map_err(|e| Error::verbs("ibv_create_qp", &self.port.device, to_io(e)))?;
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::Init)
            .setup_pkey_index(0)
            .setup_port(self.port.port)
            .setup_access_flags(
                AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead,
            );
        qp.modify(&attr)
            .map_err(|e| Error::verbs("ibv_modify_qp(INIT)", &self.port.device, to_io(e)))?;
        Ok(Qp { inner: qp })
    }

    /// RDMA READs in flight per QP this device allows (`max_qp_rd_atom`, capped at 16 as
    /// perftest's default).
    pub fn rd_atom(&self) -> Result<u8, Error> {
        let attr = self
            .ctx
            .query_device()
            .map_err(|e| Error::verbs("ibv_query_device", &self.port.device, to_io(e)))?;
        let n = attr.attr.orig_attr.max_qp_rd_atom.clamp(1, 16);
        Ok(u8::try_from(n).unwrap_or(16))
    }

    /// Register host memory for local writes only (the target of a flushing READ).
    pub fn register_local(&self, buf: &HostBuf, what: &'static str) -> Result<Region, Error> {
        // SAFETY: buf is valid for len() bytes; the caller keeps it alive as long as the MR is used
        // (the module's rule: buffers outlive the QPs that use them).
        let mr = unsafe {
            self.pd
                .reg_mr(buf.addr() as usize, buf.len(), AccessFlags::LocalWrite)
        }
        .map_err(|e| Error::verbs(what, &self.port.device, to_io(e)))?;
        Ok(Region {
            mr,
            addr: buf.addr(),
            len: buf.len() as u64,
        })
    }
}

/// What one end of an RC connection tells the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    /// The port's GID (RoCE needs it; InfiniBand within a subnet does not).
    pub gid: Option<[u8; 16]>,
    /// The port's active MTU as `ibv_mtu` (1 = 256 ... 5 = 4096); the path uses the smaller one.
    pub mtu: u32,
}

impl Endpoint {
    /// The endpoint of a QP on `port` that starts at `psn`.
    pub fn of(port: &PortInfo, qpn: u32, psn: u32) -> Endpoint {
        Endpoint {
            lid: port.lid,
            qpn,
            psn,
            gid: port.gid_raw,
            mtu: port.active_mtu_raw,
        }
    }
}

/// Where a WRITE lands or a READ reads: a remote memory region's address and key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRange {
    pub addr: u64,
    pub rkey: u32,
}

/// A registered buffer: its memory region, the address work requests use for it (host VA, or
/// for GPU memory its VA, which is also the MR's iova) and its length.
pub struct Region {
    pub mr: Arc<Mr>,
    pub addr: u64,
    pub len: u64,
}

impl Region {
    /// The region as the far end addresses it.
    pub fn remote(&self) -> RemoteRange {
        RemoteRange {
            addr: self.addr,
            rkey: self.mr.rkey(),
        }
    }

    /// Its first `len` bytes, as the local side of a work request.
    pub fn first(&self, len: u32) -> Result<LocalRange<'_>, Error> {
        if u64::from(len) > self.len {
            return Err(Error::InvalidArgument(format!(
                "{len} bytes exceed the {}-byte memory region",
                self.len
            )));
        }
        Ok(LocalRange {
            mr: &self.mr,
            addr: self.addr,
            len,
        })
    }
}

/// A range inside a local memory region (made by [`Region::first`], which checks it).
#[derive(Clone, Copy)]
pub struct LocalRange<'a> {
    mr: &'a Mr,
    addr: u64,
    len: u32,
}

/// What a work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Write,
    Read,
}

/// An RC queue pair.
pub struct Qp {
    inner: BasicQueuePair,
}

impl Qp {
    pub fn number(&self) -> u32 {
        self.inner.qp_number()
    }

    /// Bring the QP to RTR then RTS against `remote`: it receives from `remote.psn` on and sends
    /// from `send_psn` on (the PSN its own [`Endpoint`] gave the far end); `local` is the side it
    /// was created on.
    pub fn connect(&mut self, local: &Side, send_psn: u32, remote: &Endpoint) -> Result<(), Error> {
        self.connect_reads(local, send_psn, remote, 1)
    }

    /// [`Qp::connect`] with `rd_atom` RDMA READs in flight each way (both ends' smaller
    /// `Side::rd_atom`).
    pub fn connect_reads(
        &mut self,
        local: &Side,
        send_psn: u32,
        remote: &Endpoint,
        rd_atom: u8,
    ) -> Result<(), Error> {
        let dev = &local.port.device;
        let rd_atom = rd_atom.max(1);
        let mtu = local.port.active_mtu_raw.min(remote.mtu).max(1);
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(mtu_enum(mtu))
            .setup_dest_qp_num(remote.qpn)
            .setup_rq_psn(remote.psn)
            .setup_max_dest_read_atomic(rd_atom)
            .setup_min_rnr_timer(12);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_port(local.port.port)
            .setup_service_level(0)
            .setup_dest_lid(remote.lid);
        if local.port.link_layer == "Ethernet" {
            let (Some(gid), Some(src)) = (remote.gid, local.port.gid_index) else {
                return Err(Error::NoGid {
                    device: dev.clone(),
                    port: local.port.port,
                    detail: " (the peer sent no GID, or this port has none)".into(),
                });
            };
            let src = u8::try_from(src)
                .map_err(|_| Error::InvalidArgument(format!("GID index {src} > 255")))?;
            ah.setup_grh(&Gid { raw: gid }, 0, src, 64, 0);
        }
        attr.setup_address_vector(&ah);
        self.inner
            .modify(&attr)
            .map_err(|e| Error::verbs("ibv_modify_qp(RTR)", dev, to_io(e)))?;
        let mut attr = QueuePairAttribute::new();
        attr.setup_state(QueuePairState::ReadyToSend)
            .setup_sq_psn(send_psn)
            .setup_timeout(14)
            .setup_retry_cnt(7)
            .setup_rnr_retry(7)
            .setup_max_read_atomic(rd_atom);
        self.inner
            .modify(&attr)
            .map_err(|e| Error::verbs("ibv_modify_qp(RTS)", dev, to_io(e)))
    }

    /// Post `n` RDMA WRITEs of `src` to `dst` in one call, the last one signaled, all with `wr_id`.
    pub fn post_writes(
        &mut self,
        wr_id: u64,
        n: u32,
        src: LocalRange<'_>,
        dst: RemoteRange,
    ) -> Result<(), Error> {
        self.post_batch(Op::Write, wr_id, n, src, dst)
    }

    /// Post `n` work requests of `op` between `local` and `remote` in one call (a WRITE sends
    /// `local` to `remote`, a READ fetches `remote` into `local`), the last one signaled, all
    /// with `wr_id`.
    pub fn post_batch(
        &mut self,
        op: Op,
        wr_id: u64,
        n: u32,
        local: LocalRange<'_>,
        remote: RemoteRange,
    ) -> Result<(), Error> {
        let mut guard = self.inner.start_post_send();
        for k in 0..n {
            let flags = if k + 1 == n {
                WorkRequestFlags::Signaled
            } else {
                WorkRequestFlags::none()
            };
            let wr = guard.construct_wr(wr_id, flags);
            let h = match op {
                Op::Write => wr.setup_write(remote.rkey, remote.addr),
                Op::Read => wr.setup_read(remote.rkey, remote.addr),
            };
            // SAFETY: the range lies in the MR (Region::first checked it), which outlives the QP's
            // use of it (the module's rule).
            unsafe { h.setup_sge(local.mr.lkey(), local.addr, local.len) };
        }
        let what = match op {
            Op::Write => "ibv_post_send",
            Op::Read => "ibv_post_send(READ)",
        };
        guard
            .post()
            .map_err(|e| Error::verbs(what, "", std::io::Error::other(e.to_string())))
    }

    /// Post one signaled RDMA READ of `src` (remote) into `dst` (local).
    pub fn post_read(
        &mut self,
        wr_id: u64,
        dst: LocalRange<'_>,
        src: RemoteRange,
    ) -> Result<(), Error> {
        let mut guard = self.inner.start_post_send();
        let h = guard
            .construct_wr(wr_id, WorkRequestFlags::Signaled)
            .setup_read(src.rkey, src.addr);
        // SAFETY: as in post_writes.
        unsafe { h.setup_sge(dst.mr.lkey(), dst.addr, dst.len) };
        guard.post().map_err(|e| {
            Error::verbs(
                "ibv_post_send(READ)",
                "",
                std::io::Error::other(e.to_string()),
            )
        })
    }
}

/// Poll `cq` once, handing at most `max` completions (wr_id, status) to `each`; returns how many.
pub fn poll(
    cq: &Cq,
    max: usize,
    mut each: impl FnMut(u64, u32) -> Result<(), Error>,
) -> Result<usize, Error> {
    let mut seen = 0;
    if let Ok(poller) = cq.start_poll() {
        for wc in poller.into_iter().take(max) {
            seen += 1;
            each(wc.wr_id(), wc.status())?;
        }
    }
    Ok(seen)
}

/// The name of an `ibv_wc_status` (`RemoteAccessError`).
pub fn status_name(status: u32) -> String {
    format!("{:?}", WorkCompletionStatus::from(status))
}

/// A connected pair of RC QPs: `send` on the first side writes into memory of the second side.
pub struct QpPair {
    pub send: Qp,
    pub recv: Qp,
}

/// Create `n` QP pairs between two sides (which may be the same device and port) and connect
/// each pair to itself in-process: no out-of-band exchange is needed.
pub fn connect_pairs(
    a: &Side,
    b: &Side,
    a_cq: &Arc<Cq>,
    b_cq: &Arc<Cq>,
    n: u32,
    depth: u32,
) -> Result<Vec<QpPair>, Error> {
    let mut pairs = Vec::new();
    for i in 0..n {
        let mut send = a.create_qp(a_cq, depth)?;
        let mut recv = b.create_qp(b_cq, 1)?;
        let psn = 0x1000 + i * 0x100;
        send.connect(a, psn, &Endpoint::of(&b.port, recv.number(), psn))?;
        recv.connect(b, psn, &Endpoint::of(&a.port, send.number(), psn))?;
        pairs.push(QpPair { send, recv });
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_of_a_port() {
        let port = PortInfo {
            device: "mlx5_0".into(),
            port: 1,
            state: "ACTIVE".into(),
            link_layer: "Ethernet",
            lid: 0,
            active_mtu_raw: 5,
            active_mtu: 4096,
            line_rate_gbps: Some(400.0),
            software: false,
            gid_index: Some(3),
            gid: Some("::ffff:10.0.0.1".into()),
            gid_raw: Some([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]),
        };
        let e = Endpoint::of(&port, 0x11, 0x1000);
        assert_eq!((e.lid, e.qpn, e.psn, e.mtu), (0, 0x11, 0x1000, 5));
        assert_eq!(e.gid, port.gid_raw);
    }
}
