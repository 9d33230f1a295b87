//! RC queue pairs connected to a remote end's QP from the data it sent over the socket (the
//! loopback connects its two QPs in-process; verbs.rs keeps that, this is the two-host variant).

use std::sync::Arc;

use sideway::ibverbs::address::{AddressHandleAttribute, Gid};
use sideway::ibverbs::completion::BasicCompletionQueue;
use sideway::ibverbs::device_context::Mtu;
use sideway::ibverbs::queue_pair::{BasicQueuePair, QueuePair, QueuePairAttribute, QueuePairState};
use sideway::ibverbs::AccessFlags;

use super::error::PairError;
use super::protocol::{PortDesc, Setup};
use crate::bench::error::BenchError;
use crate::bench::verbs::{io_of, Side};

/// RDMA READs in flight per QP this device allows (capped at 16, as perftest's default).
pub fn rd_atom(side: &Side) -> Result<u8, PairError> {
    let attr = side
        .ctx
        .query_device()
        .map_err(|e| BenchError::verbs("ibv_query_device", &side.port.device, io_of(e)))?;
    let n = attr.attr.orig_attr.max_qp_rd_atom.clamp(1, 16);
    Ok(u8::try_from(n).unwrap_or(16))
}

/// A new RC QP in INIT, open to remote WRITE and READ (the MRs decide what is reachable).
pub fn make_qp(
    side: &Side,
    cq: &Arc<BasicCompletionQueue>,
    depth: u32,
) -> Result<BasicQueuePair, PairError> {
    let mut b = side.pd.create_qp_builder();
    b.setup_send_cq(Arc::clone(cq))
        .setup_recv_cq(Arc::clone(cq))
        .setup_max_send_wr(depth)
        .setup_max_recv_wr(1)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(0);
    let mut qp = b
        .build()
        .map_err(|e| BenchError::verbs("ibv_create_qp", &side.port.device, io_of(e)))?;
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::Init)
        .setup_pkey_index(0)
        .setup_port(side.port.port)
        .setup_access_flags(
            AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead,
        );
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(INIT)", &side.port.device, io_of(e)))?;
    Ok(qp)
}

/// The ibverbs MTU enum of a byte count.
pub fn mtu_enum(bytes: u32) -> Mtu {
    match bytes {
        0..=256 => Mtu::Mtu256,
        257..=512 => Mtu::Mtu512,
        513..=1024 => Mtu::Mtu1024,
        1025..=2048 => Mtu::Mtu2048,
        _ => Mtu::Mtu4096,
    }
}

/// Move QP `i` to RTR and RTS against the remote's QP `i` (its QPN, PSN, LID or GID).
pub fn connect_remote(
    qp: &mut BasicQueuePair,
    local: &Side,
    desc: &PortDesc,
    remote: &Setup,
    i: usize,
    my_psn: u32,
    rd_atom: u8,
) -> Result<(), PairError> {
    let dev = &desc.device;
    let (Some(&qpn), Some(&psn)) = (remote.qpns.get(i), remote.psns.get(i)) else {
        return Err(PairError::Usage(format!("the peer sent no QP {i}")));
    };
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::ReadyToReceive)
        .setup_path_mtu(mtu_enum(desc.mtu.min(remote.port.mtu)))
        .setup_dest_qp_num(qpn)
        .setup_rq_psn(psn)
        .setup_max_dest_read_atomic(rd_atom)
        .setup_min_rnr_timer(12);
    let mut ah = AddressHandleAttribute::new();
    ah.setup_port(local.port.port)
        .setup_service_level(0)
        .setup_dest_lid(remote.port.lid);
    if desc.link_layer == "Ethernet" {
        let (Some(gid), Some(src)) = (remote.port.gid_raw, desc.gid_index) else {
            return Err(BenchError::NoGid {
                device: dev.clone(),
                port: desc.port,
                detail: " (the peer sent no GID, or this port has none)".into(),
            }
            .into());
        };
        let src =
            u8::try_from(src).map_err(|_| PairError::Usage(format!("GID index {src} > 255")))?;
        ah.setup_grh(&Gid { raw: gid }, 0, src, 64, 0);
    }
    attr.setup_address_vector(&ah);
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(RTR)", dev, io_of(e)))?;
    let mut attr = QueuePairAttribute::new();
    attr.setup_state(QueuePairState::ReadyToSend)
        .setup_sq_psn(my_psn)
        .setup_timeout(14)
        .setup_retry_cnt(7)
        .setup_rnr_retry(7)
        .setup_max_read_atomic(rd_atom);
    qp.modify(&attr)
        .map_err(|e| BenchError::verbs("ibv_modify_qp(RTS)", dev, io_of(e)))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bytes_map_to_the_enum() {
        assert!(matches!(mtu_enum(1024), Mtu::Mtu1024));
        assert!(matches!(mtu_enum(4096), Mtu::Mtu4096));
        assert!(matches!(mtu_enum(512), Mtu::Mtu512));
        assert!(matches!(mtu_enum(256), Mtu::Mtu256));
    }
}
