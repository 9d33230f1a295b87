//! Buffers in host or GPU memory and their registration with an RDMA device the way their kind
//! requires (dma-buf, legacy peer memory, plain host memory); every registration failure is
//! mapped to its cause.
#![allow(
    unsafe_code,
    reason = "memory-region registration over raw buffer addresses, getrlimit"
)]

use std::os::fd::{AsRawFd, OwnedFd};

use serde::Serialize;
use sideway::ibverbs::memory_region::RegisterMemoryRegionErrorKind;
use sideway::ibverbs::AccessFlags;

use crate::cuda::GpuBuffer;
use crate::error::{errno_name, Error};
pub use crate::host_buf::HostBuf;
use crate::qp::{Region, Side};
use crate::HostView;

/// Where the benchmark's buffers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryKind {
    /// Host memory (ibv_reg_mr).
    Host,
    /// GPU memory exported as dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr).
    CudaDmabuf,
    /// GPU memory registered directly (ibv_reg_mr; needs nvidia_peermem).
    CudaPeermem,
}

impl MemoryKind {
    pub fn is_gpu(self) -> bool {
        self != MemoryKind::Host
    }
    pub fn label(self) -> &'static str {
        match self {
            MemoryKind::Host => "host",
            MemoryKind::CudaDmabuf => "cuda-dmabuf",
            MemoryKind::CudaPeermem => "cuda-peermem",
        }
    }
}

/// One benchmark buffer.
pub enum Buffer<'g> {
    Host(HostBuf),
    Gpu {
        mem: GpuBuffer<'g>,
        dmabuf: Option<OwnedFd>,
    },
}

impl Buffer<'_> {
    /// The address RDMA work requests use (host VA, or GPU VA which is also the MR's iova).
    pub fn addr(&self) -> u64 {
        match self {
            Buffer::Host(h) => h.addr(),
            Buffer::Gpu { mem, .. } => mem.ptr,
        }
    }
    pub fn len(&self) -> usize {
        match self {
            Buffer::Host(h) => h.len(),
            Buffer::Gpu { mem, .. } => mem.size,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copy `data` into the start of the buffer.
    pub fn write(&mut self, data: &[u8]) -> Result<(), Error> {
        match self {
            Buffer::Host(h) => {
                let n = data.len().min(h.len());
                h.as_mut_slice()[..n].copy_from_slice(&data[..n]);
                Ok(())
            }
            Buffer::Gpu { mem, .. } => mem.write(data),
        }
    }

    /// Set the first `len` bytes to `byte`.
    pub fn fill(&mut self, byte: u8, len: usize) -> Result<(), Error> {
        match self {
            Buffer::Host(h) => {
                let n = len.min(h.len());
                h.as_mut_slice()[..n].fill(byte);
                Ok(())
            }
            Buffer::Gpu { mem, .. } => mem.fill(byte, len),
        }
    }

    /// Read the start of the buffer back into `out` (cuMemcpyDtoH for GPU memory).
    pub fn read(&self, out: &mut [u8]) -> Result<(), Error> {
        match self {
            Buffer::Host(h) => {
                let n = out.len().min(h.len());
                // Volatile-free copy is fine: the NIC wrote before the completion we waited for.
                out[..n].copy_from_slice(&h.as_slice()[..n]);
                Ok(())
            }
            Buffer::Gpu { mem, .. } => mem.read(out),
        }
    }

    /// Register the buffer with the side's protection domain, the way its memory kind requires;
    /// `host` tells whether nvidia_peermem is loaded when a peer-memory registration fails.
    /// The buffer must outlive the QPs that use the region.
    pub fn register(
        &self,
        side: &Side,
        kind: MemoryKind,
        host: &dyn HostView,
    ) -> Result<Region, Error> {
        self.register_access(side, kind, host, true)
    }

    /// [`Buffer::register`], open to remote WRITE and READ only when `remote` is true (else the
    /// local NIC may only write into it: the target of a READ, or a WRITE's source).
    pub fn register_access(
        &self,
        side: &Side,
        kind: MemoryKind,
        host: &dyn HostView,
        remote: bool,
    ) -> Result<Region, Error> {
        let access = if remote {
            AccessFlags::LocalWrite | AccessFlags::RemoteWrite | AccessFlags::RemoteRead
        } else {
            AccessFlags::LocalWrite
        };
        let device = side.port.device.clone();
        let len = self.len();
        let res = match (self, kind) {
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
            // SAFETY: addr is valid for len bytes (host memory, or GPU memory nvidia_peermem can pin).
            _ => unsafe { side.pd.reg_mr(self.addr() as usize, len, access) },
        };
        let mr = res.map_err(|e| {
            let errno = match &e.0 {
                RegisterMemoryRegionErrorKind::Ibverbs(io) => io.raw_os_error().unwrap_or(0),
                _ => 0,
            };
            registration_error(kind, &device, errno, len as u64, memlock_limit(), || {
                host.nvidia_peermem_loaded()
            })
        })?;
        Ok(Region {
            mr,
            addr: self.addr(),
            len: len as u64,
        })
    }
}

/// RLIMIT_MEMLOCK soft limit in bytes (None = unlimited) and whether the process is root.
pub fn memlock_limit() -> (Option<u64>, bool) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: r is a valid out-pointer.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } == 0;
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let limit = if !ok || r.rlim_cur == libc::RLIM_INFINITY {
        None
    } else {
        Some(r.rlim_cur)
    };
    (limit, root)
}

/// Fail early when pinning `needed` bytes of host memory cannot work under the memlock limit.
pub fn check_memlock(needed: u64) -> Result<(), Error> {
    match memlock_limit() {
        (Some(limit), false) if limit < needed => Err(Error::MemlockTooLow { limit, needed }),
        _ => Ok(()),
    }
}

/// Map a failed registration's errno to the error that names its cause; `peermem_loaded` is
/// asked only for a failed peer-memory registration.
pub fn registration_error(
    kind: MemoryKind,
    device: &str,
    errno: i32,
    needed: u64,
    memlock: (Option<u64>, bool),
    peermem_loaded: impl FnOnce() -> bool,
) -> Error {
    let device = device.to_string();
    match (kind, errno) {
        (MemoryKind::CudaDmabuf, libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::ENOSYS) => {
            Error::DmabufMrUnsupported {
                device,
                errno: errno_name(errno),
            }
        }
        (MemoryKind::CudaPeermem, libc::EFAULT | libc::EINVAL) => {
            let loaded = if peermem_loaded() {
                " although /sys/module/nvidia_peermem exists: the NIC driver may lack peer-memory support (MLNX_OFED/DOCA-OFED needed)"
                    .to_string()
            } else {
                " (/sys/module/nvidia_peermem is absent)".to_string()
            };
            Error::PeermemNotLoaded { device, loaded }
        }
        (MemoryKind::Host | MemoryKind::CudaPeermem, libc::ENOMEM | libc::EPERM | libc::EAGAIN)
            if matches!(memlock, (Some(l), false) if l < needed.saturating_mul(2)) =>
        {
            Error::MemlockTooLow {
                limit: memlock.0.unwrap_or(0),
                needed: needed.saturating_mul(2),
            }
        }
        _ => Error::RegisterMr {
            what: kind.label(),
            device,
            source: std::io::Error::from_raw_os_error(errno),
            hint: String::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registration_errors_name_the_cause() {
        let e = registration_error(
            MemoryKind::CudaDmabuf,
            "rxe0",
            libc::EOPNOTSUPP,
            1 << 23,
            (None, true),
            || false,
        );
        assert!(
            e.to_string().contains("does not support dma-buf MRs"),
            "{e}"
        );
        let e = registration_error(
            MemoryKind::CudaPeermem,
            "mlx5_0",
            libc::EFAULT,
            1 << 23,
            (None, true),
            || false,
        );
        assert!(e.to_string().contains("nvidia_peermem not loaded"), "{e}");
        assert!(e.to_string().contains("absent"), "{e}");
        let e = registration_error(
            MemoryKind::CudaPeermem,
            "mlx5_0",
            libc::EFAULT,
            1 << 23,
            (None, true),
            || true,
        );
        assert!(
            e.to_string()
                .contains("although /sys/module/nvidia_peermem exists"),
            "{e}"
        );
        let e = registration_error(
            MemoryKind::Host,
            "mlx5_0",
            libc::ENOMEM,
            1 << 23,
            (Some(65536), false),
            || false,
        );
        assert!(e.to_string().contains("memlock limit too low"), "{e}");
        let e = registration_error(
            MemoryKind::Host,
            "mlx5_0",
            libc::ENOMEM,
            1 << 23,
            (None, true),
            || false,
        );
        assert!(e.to_string().contains("Cannot allocate memory"), "{e}");
    }

    #[test]
    fn host_buffers_are_page_aligned() {
        let b = HostBuf::new(100).unwrap();
        assert_eq!(b.addr() % crate::cuda::page_size() as u64, 0);
        assert_eq!(b.len(), crate::cuda::page_size());
        assert!(b.as_slice().iter().all(|&x| x == 0));
    }
}
