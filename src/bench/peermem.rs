//! The peer-memory path on its own (issue 48): GPU memory registered with plain `ibv_reg_mr`
//! (not dma-buf), which only a working peer-memory module (`nvidia_peermem`, `nv_peer_mem`)
//! lets the NIC driver pin. A module that is loaded but does not work (built against another
//! OFED, a NIC driver without peer-memory support) is caught here, before NCCL falls back to
//! host memory or fails with "Bad address". Needs a GPU and an RDMA device on this machine.

use gdrprov_rdma::cuda::Gpu;
use gdrprov_rdma::memory::{Buffer, MemoryKind};
use gdrprov_rdma::qp::Side;
use gdrprov_rdma::verbs;
use serde::Serialize;

use super::error::BenchError;
use super::sysfs::LiveHost;

/// What to do when GPU memory cannot be registered through peer memory.
pub const FIX: &str = "reinstall the NVIDIA driver (or rebuild its DKMS modules: `dkms autoinstall`) after MLNX_OFED/DOCA-OFED so that nvidia_peermem is built against the ib_core that is loaded, then `modprobe nvidia_peermem` (nv_peer_mem: rebuild its package against the running OFED); or move to dma-buf (`gdrprov apply rdma-dmabuf`: open driver, kernel >= 5.12), which needs no peer-memory module";

/// How much GPU memory is registered: one 2 MiB page of the GPU's large pages.
pub const BYTES: usize = 2 << 20;

/// What the registration did.
#[derive(Debug, Clone, Serialize)]
pub struct PeermemProbe {
    pub device: String,
    pub gpu: u32,
    pub gpu_name: String,
    pub bytes: u64,
    pub registered: bool,
    /// What `ibv_reg_mr` said: the region's key, or the error naming its cause.
    pub detail: String,
}

/// Register `BYTES` of GPU `gpu_index`'s memory on DEVICE (the first ACTIVE port when none)
/// through peer memory, then release it. An error opening the GPU or the device is an `Err`;
/// a registration that fails is a probe with `registered: false`.
pub fn probe(device: Option<&str>, gpu_index: u32) -> Result<PeermemProbe, BenchError> {
    let gpu = Gpu::open(gpu_index)?;
    let (ctx, port) = verbs::select_port(&LiveHost, device, None, None)?;
    let side = Side::new(ctx, port)?;
    let mem = gpu.alloc(BYTES)?;
    mem.set_sync_memops()?;
    let buf = Buffer::Gpu { mem, dmabuf: None };
    let device = side.port.device.clone();
    let (registered, detail) =
        match buf.register_access(&side, MemoryKind::CudaPeermem, &LiveHost, false) {
            Ok(region) => (
                true,
                format!(
                    "ibv_reg_mr on {} bytes of GPU memory at {:#x}: registered",
                    region.len, region.addr
                ),
            ),
            Err(e) => (false, e.to_string()),
        };
    Ok(PeermemProbe {
        device,
        gpu: gpu_index,
        gpu_name: gpu.name.clone(),
        bytes: BYTES as u64,
        registered,
        detail,
    })
}
