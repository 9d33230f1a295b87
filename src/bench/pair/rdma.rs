//! The verbs engine: one end's buffers (the test buffer, the only one registered for remote
//! access, and a local one), its RC QPs connected to the peer's, and the timed loop. Every verbs
//! call goes through the gdrprov-rdma crate (its `qp` and `memory` modules).

use std::sync::Arc;
use std::time::{Duration, Instant};

use gdrprov_rdma::cuda::Gpu;
use gdrprov_rdma::memory::{check_memlock, Buffer, HostBuf, MemoryKind};
use gdrprov_rdma::qp::{self, Cq, Endpoint, Op, Qp, Region, RemoteRange, Side};

use super::engine::{compare_pattern, Engine, Xfer};
use super::error::PairError;
use super::protocol::{Buf, Compared, Params, PortDesc, Setup};
use crate::bench::error::BenchError;
use crate::bench::loopback::{effective_depth, fill_pattern, RunLength};
use crate::bench::report::SizeResult;
use crate::bench::sysfs::LiveHost;

/// One end's RDMA resources. Field order is drop order: QPs before the CQ, MRs before buffers.
pub struct VerbsEngine<'g> {
    qps: Vec<Qp>,
    cq: Arc<Cq>,
    scratch_mr: Region,
    exposed_mr: Region,
    local_mr: Region,
    /// Backs `scratch_mr` (the flushing READ's target); only the NIC touches it.
    _scratch: HostBuf,
    exposed: Buffer<'g>,
    local: Buffer<'g>,
    side: Side,
    desc: PortDesc,
    memory: MemoryKind,
    gpu_name: Option<String>,
    psns: Vec<u32>,
    depth: u32,
    rd_atom: u8,
    remote: Option<RemoteRange>,
}

fn gpu_buffer<'g>(gpu: &'g Gpu, size: usize, kind: MemoryKind) -> Result<Buffer<'g>, BenchError> {
    let mem = gpu.alloc(size)?;
    let dmabuf = if kind == MemoryKind::CudaDmabuf {
        Some(mem.export_dmabuf()?)
    } else {
        mem.set_sync_memops()?;
        None
    };
    Ok(Buffer::Gpu { mem, dmabuf })
}

fn op(x: Xfer) -> Op {
    match x {
        Xfer::Write => Op::Write,
        Xfer::Read => Op::Read,
    }
}

fn len32(len: u64) -> Result<u32, PairError> {
    u32::try_from(len).map_err(|_| PairError::Usage(format!("message size {len} exceeds 4 GiB")))
}

impl<'g> VerbsEngine<'g> {
    /// Allocate and register the buffers, create the CQ and QPs (to INIT). Called only after the
    /// peer is authenticated.
    pub fn new(
        side: Side,
        desc: PortDesc,
        memory: MemoryKind,
        gpu: Option<&'g Gpu>,
        params: &Params,
    ) -> Result<VerbsEngine<'g>, PairError> {
        let tx_depth = params.tx_depth;
        let max = params.sizes.iter().copied().max().unwrap_or(8 << 20);
        let size =
            usize::try_from(max).map_err(|_| PairError::Usage(format!("size {max} too large")))?;
        let (exposed, local) = match gpu {
            Some(g) if memory.is_gpu() => {
                (gpu_buffer(g, size, memory)?, gpu_buffer(g, size, memory)?)
            }
            _ => (
                Buffer::Host(HostBuf::new(size)?),
                Buffer::Host(HostBuf::new(size)?),
            ),
        };
        if memory != MemoryKind::CudaDmabuf {
            let pinned = if memory == MemoryKind::Host {
                2 * size as u64
            } else {
                0
            };
            check_memlock(pinned + 4096)?;
        }
        // The test buffer is the only memory the peer may touch; the local one is local-write only.
        let exposed_mr = exposed.register_access(&side, memory, &LiveHost, true)?;
        let local_mr = local.register_access(&side, memory, &LiveHost, false)?;
        let scratch = HostBuf::new(4096)?;
        let scratch_mr = side.register_local(&scratch, "ibv_reg_mr(scratch)")?;
        let rd_atom = side.rd_atom()?;
        let cq = side.create_cq(params.qps * (tx_depth + 2) + 1)?;
        let mut qps = Vec::new();
        let mut psns = Vec::new();
        let seed = super::auth::random_bytes(4)?;
        let base = u32::from_le_bytes([seed[0], seed[1], seed[2], 0]);
        for i in 0..params.qps {
            qps.push(side.create_qp(&cq, tx_depth + 2)?);
            psns.push((base + i * 0x100) & 0xff_ffff);
        }
        Ok(VerbsEngine {
            qps,
            cq,
            scratch_mr,
            exposed_mr,
            local_mr,
            _scratch: scratch,
            exposed,
            local,
            side,
            desc,
            memory,
            gpu_name: gpu.map(|g| format!("GPU {} {} ({})", g.index, g.name, g.pci_bus_id)),
            psns,
            depth: tx_depth,
            rd_atom,
            remote: None,
        })
    }

    fn buf(&mut self, b: Buf) -> &mut Buffer<'g> {
        match b {
            Buf::Exposed => &mut self.exposed,
            Buf::Local => &mut self.local,
        }
    }

    fn target(&self) -> Result<RemoteRange, PairError> {
        self.remote.ok_or_else(|| {
            PairError::Usage("internal: transfer before the QPs are connected".into())
        })
    }

    /// Post `n` transfers of `len` on QP `i`, the last signaled with wr_id (i << 32) | n.
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError> {
        let remote = self.target()?;
        let local = self.local_mr.first(len32(len)?)?;
        let wr_id = ((i as u64) << 32) | u64::from(n);
        self.qps[i]
            .post_batch(op(x), wr_id, n, local, remote)
            .map_err(|e| with_device(e, &self.desc.device))
    }

    fn wait_one(&self, deadline: Instant) -> Result<(), PairError> {
        loop {
            let mut got = None;
            qp::poll(&self.cq, 1, |wr_id, status| {
                got = Some((status, wr_id));
                Ok(())
            })?;
            if let Some((status, wr_id)) = got {
                return super::timed::completion(status, wr_id);
            }
            if Instant::now() >= deadline {
                return Err(BenchError::Stalled {
                    secs: STALL.as_secs(),
                }
                .into());
            }
        }
    }
}

/// The crate's post errors carry no device name: add this end's.
fn with_device(e: BenchError, device: &str) -> PairError {
    match e {
        BenchError::Verbs { op, source, .. } => BenchError::verbs(op, device, source).into(),
        other => other.into(),
    }
}

const STALL: Duration = Duration::from_secs(30);

/// The crate's endpoint of the peer's QP `i`, from what it sent.
fn endpoint(remote: &Setup, i: usize) -> Result<Endpoint, PairError> {
    let (Some(&qpn), Some(&psn)) = (remote.qpns.get(i), remote.psns.get(i)) else {
        return Err(PairError::Usage(format!("the peer sent no QP {i}")));
    };
    Ok(Endpoint {
        lid: remote.port.lid,
        qpn,
        psn,
        gid: remote.port.gid_raw,
        mtu: mtu_raw(remote.port.mtu),
    })
}

/// `ibv_mtu` of a byte count (1 = 256 ... 5 = 4096).
pub fn mtu_raw(bytes: u32) -> u32 {
    match bytes {
        0..=256 => 1,
        257..=512 => 2,
        513..=1024 => 3,
        1025..=2048 => 4,
        _ => 5,
    }
}

impl Engine for VerbsEngine<'_> {
    fn setup(&self) -> Setup {
        Setup {
            port: self.desc.clone(),
            memory: self.memory.label().to_string(),
            gpu: self.gpu_name.clone(),
            addr: self.exposed_mr.addr,
            rkey: self.exposed_mr.remote().rkey,
            len: self.exposed_mr.len,
            qpns: self.qps.iter().map(|q| q.number()).collect(),
            psns: self.psns.clone(),
            rd_atom: self.rd_atom,
        }
    }

    fn connect(&mut self, remote: &Setup) -> Result<(), PairError> {
        let rd = self.rd_atom.min(remote.rd_atom).max(1);
        for (i, q) in self.qps.iter_mut().enumerate() {
            q.connect_reads(&self.side, self.psns[i], &endpoint(remote, i)?, rd)?;
        }
        self.remote = Some(RemoteRange {
            addr: remote.addr,
            rkey: remote.rkey,
        });
        Ok(())
    }

    fn fill(&mut self, buf: Buf, seed: u64, len: u64) -> Result<(), PairError> {
        let mut data = vec![0u8; len as usize];
        fill_pattern(&mut data, seed);
        Ok(self.buf(buf).write(&data)?)
    }

    fn clear(&mut self, buf: Buf, len: u64) -> Result<(), PairError> {
        Ok(self.buf(buf).fill(0, len as usize)?)
    }

    fn compare(&mut self, buf: Buf, seed: u64, len: u64) -> Result<Compared, PairError> {
        let mut data = vec![0u8; len as usize];
        self.buf(buf).read(&mut data)?;
        Ok(compare_pattern(&data, seed))
    }

    fn once(&mut self, x: Xfer, len: u64, qp: u32) -> Result<(), PairError> {
        let i = qp as usize % self.qps.len().max(1);
        let deadline = Instant::now() + STALL;
        self.post(x, i, 1, len)?;
        self.wait_one(deadline)?;
        if x == Xfer::Write {
            // Flush: a READ on the same QP completes only after the WRITE has landed.
            let remote = self.target()?;
            let scratch = self.scratch_mr.first(8)?;
            self.qps[i]
                .post_batch(Op::Read, ((i as u64) << 32) | 1, 1, scratch, remote)
                .map_err(|e| with_device(e, &self.desc.device))?;
            self.wait_one(deadline)?;
        }
        Ok(())
    }

    fn timed(
        &mut self,
        x: Xfer,
        len: u64,
        length: RunLength,
        deadline: Instant,
        peer_gone: &dyn Fn() -> bool,
    ) -> Result<SizeResult, PairError> {
        super::timed::run(self, x, len, length, deadline, peer_gone)
    }
}

impl super::timed::Poster for VerbsEngine<'_> {
    fn qps(&self) -> usize {
        self.qps.len()
    }
    fn depth(&self, len: u64) -> (u32, u32) {
        effective_depth(self.depth, len, self.desc.software)
    }
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError> {
        VerbsEngine::post(self, x, i, n, len)
    }
    fn poll(&mut self, out: &mut Vec<(u32, u64)>) {
        let _ = qp::poll(&self.cq, usize::MAX, |wr_id, status| {
            out.push((status, wr_id));
            Ok(())
        });
    }
    fn nap(&mut self) -> Option<Duration> {
        self.desc.software.then_some(super::timed::SOFTWARE_NAP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bytes_map_to_ibv_mtu() {
        assert_eq!([256, 512, 1024, 2048, 4096].map(mtu_raw), [1, 2, 3, 4, 5]);
    }
}
