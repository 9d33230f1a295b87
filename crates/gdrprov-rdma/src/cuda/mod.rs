//! GPU memory through the CUDA driver API, loaded at run time by cudarc. cudarc panics when
//! libcuda or one of its symbols is missing, so both are checked here before any call: every
//! public entry point starts with [`ensure_symbols`] for the symbols it (and what it returns)
//! calls; the sets are [`SYMBOLS`] (GPUs, device memory, dma-buf), [`copy::SYMBOLS`] (timed
//! copies) and [`inventory::SYMBOLS`] (the device list of `inventory` and `doctor`).
#![allow(
    unsafe_code,
    reason = "the CUDA driver API is C: cudarc's raw calls, device pointers, dma-buf fds"
)]

pub mod copy;
pub mod cufile;
pub mod inventory;
pub mod nccl;
pub mod node;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::os::fd::{FromRawFd, OwnedFd};

use cudarc::driver::sys;

use crate::error::Error;
use crate::HostView;

/// Every libcuda symbol this module calls (the `_v2` names are what the CUDA headers map to).
pub const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetPCIBusId",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemsetD8_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemGetHandleForAddressRange",
    "cuPointerSetAttribute",
    "cuGetErrorName",
    "cuGetErrorString",
];

/// GPU pages are 2 MiB: allocations are rounded up to this, which also keeps the exported
/// range host-page aligned as cuMemGetHandleForAddressRange requires.
pub const GPU_PAGE: usize = 2 << 20;

/// Load libcuda and check every symbol used here; the first missing one is the error.
pub fn ensure_libcuda() -> Result<(), Error> {
    ensure_symbols(SYMBOLS)
}

/// True when libcuda can be loaded.
pub fn libcuda_present() -> bool {
    // SAFETY: is_culib_present only tries to dlopen the candidate names.
    unsafe { sys::is_culib_present() }
}

/// The one guard before cudarc: load libcuda and check `symbols`; the first missing one is the
/// error. After it succeeded, calling those symbols through `sys` does not panic.
pub fn ensure_symbols(symbols: &[&str]) -> Result<(), Error> {
    if !libcuda_present() {
        return Err(Error::LibcudaMissing {
            detail: "no libcuda.so / libcuda.so.1 on the library path (ldconfig -p | grep libcuda)"
                .to_string(),
        });
    }
    // SAFETY: present, checked just above, so culib() does not panic.
    let lib = unsafe { sys::culib() };
    for s in symbols {
        let name = format!("{s}\0");
        // SAFETY: only the address is looked up.
        if unsafe { lib.get::<*const ()>(name.as_bytes()) }.is_err() {
            return Err(Error::CudaSymbolMissing {
                symbol: (*s).to_string(),
            });
        }
    }
    Ok(())
}

fn error_text(res: sys::CUresult) -> (String, String) {
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: symbols checked in ensure_libcuda; the driver returns static strings.
    unsafe {
        let n = if sys::cuGetErrorName(res, &mut name) == sys::CUresult::CUDA_SUCCESS
            && !name.is_null()
        {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        } else {
            format!("CUDA error {}", res as u32)
        };
        let t = if sys::cuGetErrorString(res, &mut text) == sys::CUresult::CUDA_SUCCESS
            && !text.is_null()
        {
            CStr::from_ptr(text).to_string_lossy().into_owned()
        } else {
            String::new()
        };
        (n, t)
    }
}

pub(crate) fn check(op: &'static str, res: sys::CUresult) -> Result<(), Error> {
    if res == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let (name, message) = error_text(res);
    let hint = match res {
        sys::CUresult::CUDA_ERROR_NO_DEVICE => ": no NVIDIA GPU is visible (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)",
        sys::CUresult::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH | sys::CUresult::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE => {
            ": the kernel driver and libcuda do not match (reboot after a driver upgrade)"
        }
        sys::CUresult::CUDA_ERROR_NOT_SUPPORTED if op == "cuMemGetHandleForAddressRange" => {
            ": this driver cannot export dma-buf (needs the open kernel module driver and kernel >= 5.12)"
        }
        _ => "",
    };
    Err(Error::Cuda {
        op,
        code: res as u32,
        name,
        message,
        hint: hint.to_string(),
    })
}

/// A GPU chosen for the benchmark, with its primary context current on this thread.
#[derive(Debug)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    pub pci_bus_id: String,
    pub driver_version: i32,
    pub dmabuf_supported: bool,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
}

/// How many GPUs are visible; Err if libcuda is missing or cuInit fails.
pub fn gpu_count() -> Result<i32, Error> {
    ensure_libcuda()?;
    // SAFETY: symbols checked.
    unsafe {
        check("cuInit", sys::cuInit(0))?;
        let mut n: c_int = 0;
        check("cuDeviceGetCount", sys::cuDeviceGetCount(&mut n))?;
        Ok(n)
    }
}

impl Gpu {
    /// Open GPU `index` and make its primary context current.
    pub fn open(index: u32) -> Result<Gpu, Error> {
        let count = gpu_count()?;
        let ordinal = c_int::try_from(index).unwrap_or(c_int::MAX);
        if ordinal >= count {
            return Err(Error::GpuNotFound { index, count });
        }
        // SAFETY: symbols checked by gpu_count; out-pointers are valid locals.
        unsafe {
            let mut dev: sys::CUdevice = 0;
            check("cuDeviceGet", sys::cuDeviceGet(&mut dev, ordinal))?;
            let mut buf = [0 as c_char; 256];
            check(
                "cuDeviceGetName",
                sys::cuDeviceGetName(buf.as_mut_ptr(), 256, dev),
            )?;
            let name = CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned();
            let mut bus = [0 as c_char; 64];
            let pci_bus_id = if sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 64, dev)
                == sys::CUresult::CUDA_SUCCESS
            {
                CStr::from_ptr(bus.as_ptr()).to_string_lossy().into_owned()
            } else {
                String::new()
            };
            let mut version: c_int = 0;
            check("cuDriverGetVersion", sys::cuDriverGetVersion(&mut version))?;
            let mut attr: c_int = 0;
            check(
                "cuDeviceGetAttribute(DMA_BUF_SUPPORTED)",
                sys::cuDeviceGetAttribute(
                    &mut attr,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
                    dev,
                ),
            )?;
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            check(
                "cuDevicePrimaryCtxRetain",
                sys::cuDevicePrimaryCtxRetain(&mut ctx, dev),
            )?;
            if let Err(e) = check("cuCtxSetCurrent", sys::cuCtxSetCurrent(ctx)) {
                sys::cuDevicePrimaryCtxRelease_v2(dev);
                return Err(e);
            }
            Ok(Gpu {
                index,
                name,
                pci_bus_id,
                driver_version: version,
                dmabuf_supported: attr == 1,
                dev,
                ctx,
            })
        }
    }

    /// Make this GPU's primary context current on the calling thread (several GPUs driven from
    /// one thread, as `bench copy --concurrent` and `bench p2p` do).
    pub fn make_current(&self) -> Result<(), Error> {
        // SAFETY: the context was retained in open() and is released only on drop.
        unsafe { check("cuCtxSetCurrent", sys::cuCtxSetCurrent(self.ctx)) }
    }

    /// CUDA driver version as "13.0".
    pub fn driver_version_string(&self) -> String {
        format!(
            "{}.{}",
            self.driver_version / 1000,
            (self.driver_version % 1000) / 10
        )
    }

    /// Allocate `size` bytes (rounded up to a GPU page) of device memory.
    pub fn alloc(&self, size: usize) -> Result<GpuBuffer<'_>, Error> {
        let size = size.div_ceil(GPU_PAGE).max(1) * GPU_PAGE;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: symbols checked; context current.
        unsafe { check("cuMemAlloc", sys::cuMemAlloc_v2(&mut ptr, size))? };
        Ok(GpuBuffer {
            _gpu: self,
            ptr,
            size,
        })
    }
}

impl Drop for Gpu {
    fn drop(&mut self) {
        // SAFETY: retained in open().
        unsafe {
            sys::cuDevicePrimaryCtxRelease_v2(self.dev);
        }
    }
}

/// Device memory from cuMemAlloc, freed on drop.
#[derive(Debug)]
pub struct GpuBuffer<'g> {
    _gpu: &'g Gpu,
    pub ptr: u64,
    pub size: usize,
}

impl GpuBuffer<'_> {
    /// Export the whole buffer as a dma-buf (cuMemGetHandleForAddressRange).
    pub fn export_dmabuf(&self) -> Result<OwnedFd, Error> {
        let page = page_size();
        if self.ptr % page as u64 != 0 || self.size % page != 0 {
            return Err(Error::InvalidArgument(format!(
                "GPU range {:#x}+{} is not host-page ({page}) aligned",
                self.ptr, self.size
            )));
        }
        let mut fd: c_int = -1;
        // SAFETY: fd is a valid out-pointer for an int; symbols checked.
        unsafe {
            check(
                "cuMemGetHandleForAddressRange",
                sys::cuMemGetHandleForAddressRange(
                    (&mut fd as *mut c_int).cast::<c_void>(),
                    self.ptr,
                    self.size,
                    sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                    0,
                ),
            )?;
            if fd < 0 {
                return Err(Error::InvalidArgument(
                    "cuMemGetHandleForAddressRange returned no fd".into(),
                ));
            }
            Ok(OwnedFd::from_raw_fd(fd))
        }
    }

    /// Ask for synchronous memory operations on this range (needed for peer-memory RDMA).
    pub fn set_sync_memops(&self) -> Result<(), Error> {
        let one: u32 = 1;
        // SAFETY: value points to an unsigned int as the attribute requires.
        unsafe {
            check(
                "cuPointerSetAttribute(SYNC_MEMOPS)",
                sys::cuPointerSetAttribute(
                    (&one as *const u32).cast::<c_void>(),
                    sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                    self.ptr,
                ),
            )
        }
    }

    pub fn fill(&self, byte: u8, len: usize) -> Result<(), Error> {
        // SAFETY: len <= size is checked by the caller's use; the driver checks bounds too.
        unsafe {
            check(
                "cuMemsetD8",
                sys::cuMemsetD8_v2(self.ptr, byte, len.min(self.size)),
            )
        }
    }

    pub fn write(&self, data: &[u8]) -> Result<(), Error> {
        let n = data.len().min(self.size);
        // SAFETY: data is valid for n bytes.
        unsafe {
            check(
                "cuMemcpyHtoD",
                sys::cuMemcpyHtoD_v2(self.ptr, data.as_ptr().cast::<c_void>(), n),
            )
        }
    }

    pub fn read(&self, out: &mut [u8]) -> Result<(), Error> {
        let n = out.len().min(self.size);
        // SAFETY: out is valid for n bytes.
        unsafe {
            check(
                "cuMemcpyDtoH",
                sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast::<c_void>(), self.ptr, n),
            )
        }
    }
}

impl GpuBuffer<'_> {
    /// Copies `out.len()` bytes from `offset` of the buffer to host memory (a check in pieces).
    pub fn read_range(&self, offset: usize, out: &mut [u8]) -> Result<(), Error> {
        if offset.saturating_add(out.len()) > self.size {
            return Err(Error::InvalidArgument(format!(
                "{}+{} lies outside the {}-byte GPU buffer",
                offset,
                out.len(),
                self.size
            )));
        }
        // SAFETY: the range lies inside the allocation (checked above); out is valid for its length.
        unsafe {
            check(
                "cuMemcpyDtoH",
                sys::cuMemcpyDtoH_v2(
                    out.as_mut_ptr().cast::<c_void>(),
                    self.ptr + offset as u64,
                    out.len(),
                ),
            )
        }
    }
}

impl Drop for GpuBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc; freeing once.
        unsafe {
            sys::cuMemFree_v2(self.ptr);
        }
    }
}

/// The host page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// Size of the dma-buf behind `fd`, from its fdinfo (the kernel's `size:` line, read through
/// the caller's [`HostView`]), else lseek.
pub fn dmabuf_size(host: &dyn HostView, fd: &OwnedFd) -> Option<u64> {
    use std::os::fd::AsRawFd;
    let raw = fd.as_raw_fd();
    if let Some(n) = host
        .fd_info(raw)
        .as_deref()
        .and_then(|info| fdinfo_field(info, "size:"))
        .and_then(|v| v.parse().ok())
    {
        return Some(n);
    }
    // SAFETY: lseek on an owned fd.
    let end = unsafe { libc::lseek(raw, 0, libc::SEEK_END) };
    u64::try_from(end).ok().filter(|&n| n > 0)
}

/// The exporter's name for a dma-buf (`exp_name:` in its fdinfo), e.g. "nvidia".
pub fn dmabuf_exporter(host: &dyn HostView, fd: &OwnedFd) -> Option<String> {
    use std::os::fd::AsRawFd;
    fdinfo_field(&host.fd_info(fd.as_raw_fd())?, "exp_name:").map(str::to_string)
}

/// The value of the first `key` line of an fdinfo text, trimmed.
fn fdinfo_field<'a>(info: &'a str, key: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
}
