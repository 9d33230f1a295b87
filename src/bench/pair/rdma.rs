//! The verbs engine: one end's buffers (the test buffer, the only one registered for remote
//! access, and a local one), its RC QPs connected to the peer's, and the timed loop.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sideway::ibverbs::completion::{BasicCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::memory_region::{MemoryRegion, RegisterMemoryRegionErrorKind};
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, PostSendGuard, QueuePair, SetScatterGatherEntry, WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

use super::engine::{compare_pattern, Engine, Xfer};
use super::error::PairError;
use super::protocol::{Buf, Compared, Params, PortDesc, Setup};
use super::qp;
use super::report::Measured;
use crate::bench::cuda::Gpu;
use crate::bench::error::BenchError;
use crate::bench::loopback::{effective_depth, fill_pattern, gbps, RunLength};
use crate::bench::memory::{
    check_memlock, memlock_limit, registration_error, Buffer, HostBuf, MemoryKind,
};
use crate::bench::verbs::{io_of, Side};

/// One end's RDMA resources. Field order is drop order: QPs before the CQ, MRs before buffers.
pub struct VerbsEngine<'g> {
    qps: Vec<BasicQueuePair>,
    cq: Arc<BasicCompletionQueue>,
    scratch_mr: Arc<MemoryRegion>,
    exposed_mr: Arc<MemoryRegion>,
    local_mr: Arc<MemoryRegion>,
    scratch: HostBuf,
    exposed: Buffer<'g>,
    local: Buffer<'g>,
    side: Side,
    desc: PortDesc,
    memory: MemoryKind,
    gpu_name: Option<String>,
    psns: Vec<u32>,
    depth: u32,
    rd_atom: u8,
    remote: Option<(u64, u32)>,
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

/// Register `buf` with `access` (dma-buf, or ibv_reg_mr of a host or peer-memory address).
fn register(
    buf: &Buffer<'_>,
    side: &Side,
    kind: MemoryKind,
    access: AccessFlags,
) -> Result<Arc<MemoryRegion>, BenchError> {
    let len = buf.len();
    let res = match (buf, kind) {
        (
            Buffer::Gpu {
                mem,
                dmabuf: Some(fd),
            },
            MemoryKind::CudaDmabuf,
        ) => {
            // SAFETY: fd is a live dma-buf covering [0, len) of this allocation; iova = its GPU VA.
            unsafe {
                side.pd
                    .reg_dmabuf_mr(0, len, mem.ptr, fd.as_raw_fd(), access)
            }
        }
        // SAFETY: addr is valid for len bytes (host memory, or GPU memory nvidia_peermem pins).
        _ => unsafe { side.pd.reg_mr(buf.addr() as usize, len, access) },
    };
    res.map_err(|e| {
        let errno = match &e.0 {
            RegisterMemoryRegionErrorKind::Ibverbs(io) => io.raw_os_error().unwrap_or(0),
            _ => 0,
        };
        registration_error(
            kind,
            &side.port.device,
            errno,
            len as u64,
            memlock_limit(),
            std::path::Path::new("/"),
        )
    })
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
        let remote = AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead;
        let exposed_mr = register(&exposed, &side, memory, remote)?;
        let local_mr = register(&local, &side, memory, AccessFlags::LocalWrite)?;
        let scratch = HostBuf::new(4096)?;
        // SAFETY: scratch lives in self after every QP using it is destroyed (field order).
        let scratch_mr = unsafe {
            side.pd.reg_mr(
                scratch.addr() as usize,
                scratch.len(),
                AccessFlags::LocalWrite,
            )
        }
        .map_err(|e| BenchError::verbs("ibv_reg_mr(scratch)", &side.port.device, io_of(e)))?;
        let rd_atom = qp::rd_atom(&side)?;
        let cq = side.create_cq(params.qps * (tx_depth + 2) + 1)?;
        let mut qps = Vec::new();
        let mut psns = Vec::new();
        let seed = super::auth::random_bytes(4)?;
        let base = u32::from_le_bytes([seed[0], seed[1], seed[2], 0]);
        for i in 0..params.qps {
            qps.push(qp::make_qp(&side, &cq, tx_depth + 2)?);
            psns.push((base + i * 0x100) & 0xff_ffff);
        }
        Ok(VerbsEngine {
            qps,
            cq,
            scratch_mr,
            exposed_mr,
            local_mr,
            scratch,
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

    fn target(&self) -> Result<(u64, u32), PairError> {
        self.remote.ok_or_else(|| {
            PairError::Usage("internal: transfer before the QPs are connected".into())
        })
    }

    /// Post `n` transfers of `len` on QP `i`, the last signaled with wr_id (i << 32) | n.
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError> {
        let (raddr, rkey) = self.target()?;
        let (lkey, laddr) = (self.local_mr.lkey(), self.local.addr());
        let qp = &mut self.qps[i];
        let mut guard = qp.start_post_send();
        for k in 0..n {
            let flags = if k + 1 == n {
                WorkRequestFlags::Signaled
            } else {
                WorkRequestFlags::none()
            };
            let wr = guard.construct_wr(((i as u64) << 32) | u64::from(n), flags);
            let h = match x {
                Xfer::Write => wr.setup_write(rkey, raddr),
                Xfer::Read => wr.setup_read(rkey, raddr),
            };
            // SAFETY: the local MR covers [laddr, laddr + len) and outlives the QP's use of it.
            unsafe { h.setup_sge(lkey, laddr, len as u32) };
        }
        guard.post().map_err(|e| {
            BenchError::verbs(
                "ibv_post_send",
                &self.desc.device,
                std::io::Error::other(e.to_string()),
            )
            .into()
        })
    }

    fn wait_one(&self, deadline: Instant) -> Result<(), PairError> {
        loop {
            if let Ok(poller) = self.cq.start_poll() {
                if let Some(wc) = poller.into_iter().next() {
                    return check_wc(wc.status(), wc.wr_id());
                }
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

const STALL: Duration = Duration::from_secs(30);

fn check_wc(status: u32, wr_id: u64) -> Result<(), PairError> {
    if status == WorkCompletionStatus::Success as u32 {
        return Ok(());
    }
    let hint = match status {
        4 => ": local protection error (lkey/memory registration; for GPU memory, PCIe ACS or IOMMU blocking peer-to-peer)",
        5 => ": work request flushed (the QP went to the error state)",
        10 => ": remote access error (rkey or access flags)",
        12 => ": transport retry exceeded (the peer does not answer: it stopped, or the GID/route/MTU is wrong)",
        13 => ": RNR retry exceeded (the peer's QP is not ready)",
        _ => "",
    };
    Err(BenchError::Completion {
        qp: (wr_id >> 32) as usize,
        status: format!("{:?}", WorkCompletionStatus::from(status)),
        code: status,
        hint: hint.to_string(),
    }
    .into())
}

impl Engine for VerbsEngine<'_> {
    fn setup(&self) -> Setup {
        Setup {
            port: self.desc.clone(),
            memory: self.memory.label().to_string(),
            gpu: self.gpu_name.clone(),
            addr: self.exposed.addr(),
            rkey: self.exposed_mr.rkey(),
            len: self.exposed.len() as u64,
            qpns: self.qps.iter().map(|q| q.qp_number()).collect(),
            psns: self.psns.clone(),
            rd_atom: self.rd_atom,
        }
    }

    fn connect(&mut self, remote: &Setup) -> Result<(), PairError> {
        let rd = self.rd_atom.min(remote.rd_atom).max(1);
        for (i, q) in self.qps.iter_mut().enumerate() {
            qp::connect_remote(q, &self.side, &self.desc, remote, i, self.psns[i], rd)?;
        }
        self.remote = Some((remote.addr, remote.rkey));
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
            let (raddr, rkey) = self.target()?;
            let (lkey, saddr) = (self.scratch_mr.lkey(), self.scratch.addr());
            let mut guard = self.qps[i].start_post_send();
            let h = guard
                .construct_wr(((i as u64) << 32) | 1, WorkRequestFlags::Signaled)
                .setup_read(rkey, raddr);
            // SAFETY: the scratch MR covers 4096 bytes; 8 are read.
            unsafe { h.setup_sge(lkey, saddr, 8) };
            guard.post().map_err(|e| {
                PairError::from(BenchError::verbs(
                    "ibv_post_send(READ)",
                    &self.desc.device,
                    std::io::Error::other(e.to_string()),
                ))
            })?;
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
    ) -> Result<Measured, PairError> {
        super::timed::run(self, x, len, length, deadline, peer_gone)
    }
}

impl super::timed::Poster for VerbsEngine<'_> {
    fn qps(&self) -> usize {
        self.qps.len()
    }
    fn depth(&self, len: u64) -> (u32, u32) {
        let (d, b) = effective_depth(self.depth, len, self.desc.software);
        // READs in flight beyond the negotiated read depth only wait in the send queue.
        (d, b)
    }
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError> {
        VerbsEngine::post(self, x, i, n, len)
    }
    fn poll(&mut self, out: &mut Vec<(u32, u64)>) {
        if let Ok(poller) = self.cq.start_poll() {
            for wc in poller {
                out.push((wc.status(), wc.wr_id()));
            }
        }
    }
}

/// Re-exported for the timed loop's messages.
pub fn completion(status: u32, wr_id: u64) -> Result<(), PairError> {
    check_wc(status, wr_id)
}

pub fn rate(bytes: u64, secs: f64) -> f64 {
    gbps(bytes, secs)
}
