//! Timed GPU <-> host copies: pinned host memory (cuMemHostAlloc), device memory (cuMemAlloc),
//! one stream and two events; `gdrprov bench copy` runs them.

use std::ffi::{c_uint, c_void};

use cudarc::driver::sys;

use super::{Gpu, GpuBuffer};
use crate::error::Error;

/// The symbols used here beyond those [`super::ensure_libcuda`] checks.
pub const SYMBOLS: &[&str] = &[
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
];

fn check(op: &'static str, res: sys::CUresult) -> Result<(), Error> {
    if res == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            op,
            code: res as u32,
            name: format!("{res:?}"),
            message: String::new(),
            hint: String::new(),
        })
    }
}

/// libcuda with every symbol the copy needs; the first missing one is the error.
pub fn ensure_libcuda() -> Result<(), Error> {
    super::ensure_libcuda()?;
    super::ensure_symbols(SYMBOLS)
}

/// Pinned host memory, device memory, a stream and two events; freed on drop.
pub struct CopyRig<'g> {
    host: *mut c_void,
    len: usize,
    dev: GpuBuffer<'g>,
    stream: sys::CUstream,
    start: sys::CUevent,
    stop: sys::CUevent,
}

impl Drop for CopyRig<'_> {
    fn drop(&mut self) {
        // SAFETY: each was created by the driver in CopyRig::new (null ones are skipped).
        unsafe {
            if !self.start.is_null() {
                sys::cuEventDestroy_v2(self.start);
            }
            if !self.stop.is_null() {
                sys::cuEventDestroy_v2(self.stop);
            }
            if !self.stream.is_null() {
                sys::cuStreamDestroy_v2(self.stream);
            }
            if !self.host.is_null() {
                sys::cuMemFreeHost(self.host);
            }
        }
    }
}

impl<'g> CopyRig<'g> {
    /// `size` bytes each of pinned host and device memory on `gpu`.
    pub fn new(gpu: &'g Gpu, size: usize) -> Result<CopyRig<'g>, Error> {
        ensure_libcuda()?;
        let dev = gpu.alloc(size)?;
        let mut rig = CopyRig {
            host: std::ptr::null_mut(),
            len: size,
            dev,
            stream: std::ptr::null_mut(),
            start: std::ptr::null_mut(),
            stop: std::ptr::null_mut(),
        };
        // SAFETY: symbols checked; out-pointers are fields of rig.
        unsafe {
            check(
                "cuMemHostAlloc",
                sys::cuMemHostAlloc(&mut rig.host, size, 0 as c_uint),
            )?;
            // Touch every page so the first timed copy does not pay for faults.
            std::ptr::write_bytes(rig.host.cast::<u8>(), 0x5a, size);
            check("cuStreamCreate", sys::cuStreamCreate(&mut rig.stream, 1))?;
            check("cuEventCreate", sys::cuEventCreate(&mut rig.start, 0))?;
            check("cuEventCreate", sys::cuEventCreate(&mut rig.stop, 0))?;
        }
        Ok(rig)
    }

    /// One timed copy of `size` bytes (at most the rig's) in GB/s; `during` runs while the copy
    /// is in flight.
    pub fn copy(&self, h2d: bool, size: usize, during: &mut dyn FnMut()) -> Result<f64, Error> {
        let size = size.min(self.len);
        let mut ms: f32 = 0.0;
        // SAFETY: both buffers hold at least `size` bytes; symbols checked in new().
        unsafe {
            check("cuEventRecord", sys::cuEventRecord(self.start, self.stream))?;
            if h2d {
                check(
                    "cuMemcpyHtoDAsync",
                    sys::cuMemcpyHtoDAsync_v2(self.dev.ptr, self.host, size, self.stream),
                )?;
            } else {
                check(
                    "cuMemcpyDtoHAsync",
                    sys::cuMemcpyDtoHAsync_v2(self.host, self.dev.ptr, size, self.stream),
                )?;
            }
            check("cuEventRecord", sys::cuEventRecord(self.stop, self.stream))?;
            during();
            check("cuEventSynchronize", sys::cuEventSynchronize(self.stop))?;
            check(
                "cuEventElapsedTime",
                sys::cuEventElapsedTime(&mut ms, self.start, self.stop),
            )?;
        }
        if ms <= 0.0 {
            return Err(Error::InvalidArgument(
                "the copy took no measurable time".into(),
            ));
        }
        Ok(size as f64 / (f64::from(ms) * 1e-3) / 1e9)
    }
}
