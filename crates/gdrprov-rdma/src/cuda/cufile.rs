//! GPUDirect Storage through cuFile: cudarc's `cufile` binding, loaded at run time as libcuda
//! is. cudarc panics when libcufile or a symbol is missing, so [`ensure_libcufile`] checks both
//! before any call. A read or write is split into chunks that several threads take in turn (as
//! KvikIO does), each thread with the GPU's context current; the file descriptor comes from the
//! caller (gdrprov opens files only through its host layer).

use std::ffi::c_void;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cudarc::cufile::sys;
use cudarc::driver::sys as cu;

use super::{check, Gpu, GpuBuffer};
use crate::error::Error;

/// Every libcufile symbol called here.
pub const SYMBOLS: &[&str] = &[
    "cuFileDriverOpen",
    "cuFileDriverGetProperties",
    "cuFileDriverClose",
    "cuFileHandleRegister",
    "cuFileHandleDeregister",
    "cuFileRead",
    "cuFileWrite",
];

/// cuFile's "file descriptor is not registered" (`CU_FILE_HANDLE_NOT_REGISTERED`): what
/// `cuFileHandleRegister` returns when it cannot use the file (no udev record, an unsupported
/// file system).
pub const HANDLE_NOT_REGISTERED: u32 = 5027;

/// Load libcufile (and libcuda, which it needs) and check every symbol used here.
pub fn ensure_libcufile() -> Result<(), Error> {
    super::ensure_libcuda()?;
    // SAFETY: is_culib_present only tries to dlopen the candidate names.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::LibcufileMissing {
            detail:
                "no libcufile.so (or .so.1, .so.12) on the library path (ldconfig -p | grep cufile)"
                    .into(),
        });
    }
    // SAFETY: present, checked just above, so culib() does not panic.
    let lib = unsafe { sys::culib() };
    for s in SYMBOLS {
        let name = format!("{s}\0");
        // SAFETY: only the address is looked up.
        if unsafe { lib.get::<*const ()>(name.as_bytes()) }.is_err() {
            return Err(Error::LibcufileMissing {
                detail: format!("the libcufile found has no `{s}` (too old)"),
            });
        }
    }
    Ok(())
}

fn op_error(op: &'static str, err: sys::CUfileOpError) -> Error {
    Error::Cufile {
        op,
        code: err as u32,
        name: format!("{err:?}"),
    }
}

/// What `cuFileDriverGetProperties` says of the driver.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct DriverProps {
    /// nvidia-fs's version as cuFile sees it (`major.minor`); `None` when it reports 0.0.
    pub nvfs_version: Option<String>,
    /// The storage kinds the driver reports as supported (`nvme`, `nvme-p2pdma`, `nvmeof`, ...).
    pub supported: Vec<String>,
    /// Poll mode on (`dcontrolflags`).
    pub poll_mode: bool,
    pub max_direct_io_size: usize,
}

const STATUS_BITS: &[(u32, &str)] = &[
    (0, "lustre"),
    (1, "wekafs"),
    (2, "nfs"),
    (3, "gpfs"),
    (4, "nvme"),
    (5, "nvmeof"),
    (6, "scsi"),
    (7, "scaleflux-csd"),
    (8, "nvmesh"),
    (9, "beegfs"),
    (11, "nvme-p2pdma"),
];

/// Opens the cuFile driver (`cuFileDriverOpen`, once per process) and reads its properties.
pub fn open_driver() -> Result<DriverProps, Error> {
    ensure_libcufile()?;
    // SAFETY: symbols checked; an out-pointer to a plain C struct.
    unsafe {
        let e = sys::cuFileDriverOpen();
        if e.err != sys::CUfileOpError::CU_FILE_SUCCESS {
            return Err(op_error("cuFileDriverOpen", e.err));
        }
        let mut props = std::mem::MaybeUninit::<sys::CUfileDrvProps>::zeroed();
        let e = sys::cuFileDriverGetProperties(props.as_mut_ptr());
        if e.err != sys::CUfileOpError::CU_FILE_SUCCESS {
            return Err(op_error("cuFileDriverGetProperties", e.err));
        }
        let p = props.assume_init();
        let flags = p.nvfs.dstatusflags;
        Ok(DriverProps {
            nvfs_version: (p.nvfs.major_version != 0 || p.nvfs.minor_version != 0)
                .then(|| format!("{}.{}", p.nvfs.major_version, p.nvfs.minor_version)),
            supported: STATUS_BITS
                .iter()
                .filter(|(b, _)| flags & (1 << b) != 0)
                .map(|(_, n)| (*n).to_string())
                .collect(),
            poll_mode: p.nvfs.dcontrolflags & 1 != 0,
            max_direct_io_size: p.nvfs.max_direct_io_size,
        })
    }
}

/// Has cuFile log at `level` (`DEBUG`) into the file `path`, through the variables libcufile
/// reads at `cuFileDriverOpen` (`CUFILE_LOGGING_LEVEL`, `CUFILE_LOGFILE_PATH`); every setting of
/// the live cufile.json is kept. Not through `cuFileSetParameterString`: libcufile 1.15.1 on
/// the lent H200 accepted its logging-level and log-directory parameters and went on logging
/// at the level and place cufile.json names, while these variables took effect
/// (bench/results/h200-gds/p2pdma/README.md). The environment is the process's, so this is
/// called while the process has one thread, before CUDA is loaded: `ops::gds` does, first.
pub fn log_through_env(path: &std::path::Path, level: &str) {
    std::env::set_var("CUFILE_LOGGING_LEVEL", level);
    std::env::set_var("CUFILE_LOGFILE_PATH", path);
}

/// Closes the cuFile driver (`cuFileDriverClose`) once every handle is dropped, so that its
/// log is complete before it is read.
pub fn close_driver() -> Result<(), Error> {
    ensure_libcufile()?;
    // SAFETY: symbols checked; no handle or buffer of this process is registered any more.
    let e = unsafe { sys::cuFileDriverClose() };
    if e.err != sys::CUfileOpError::CU_FILE_SUCCESS {
        return Err(op_error("cuFileDriverClose", e.err));
    }
    Ok(())
}

/// Waits until the GPU has finished what was queued on it (the buffer's clearing), so a timed
/// transfer starts on a quiet GPU and cuFile's copies cannot race the clearing.
pub fn settle(gpu: &Gpu) -> Result<(), Error> {
    super::ensure_symbols(&["cuCtxSynchronize"])?;
    gpu.make_current()?;
    // SAFETY: the symbol is checked; the GPU's context is current on this thread.
    unsafe { check("cuCtxSynchronize", cu::cuCtxSynchronize()) }
}

/// A file registered with cuFile, deregistered on drop; it does not outlive its descriptor.
#[derive(Debug)]
pub struct Handle<'f> {
    h: sys::CUfileHandle_t,
    _fd: BorrowedFd<'f>,
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: registered in register(), deregistered once.
        unsafe { sys::cuFileHandleDeregister(self.h) }
    }
}

/// Registers an open file (`cuFileHandleRegister`); 5027 ([`HANDLE_NOT_REGISTERED`]) when
/// cuFile cannot use it. Call [`open_driver`] first.
pub fn register(fd: BorrowedFd<'_>) -> Result<Handle<'_>, Error> {
    ensure_libcufile()?;
    let descr = sys::CUfileDescr_t {
        type_: sys::CUfileFileHandleType::CU_FILE_HANDLE_TYPE_OPAQUE_FD,
        handle: sys::CUfileDescr_t__bindgen_ty_1 { fd: fd.as_raw_fd() },
        fs_ops: std::ptr::null(),
    };
    let mut h = std::mem::MaybeUninit::<sys::CUfileHandle_t>::uninit();
    // SAFETY: symbols checked; descr lives across the call; h is an out-pointer.
    unsafe {
        let e = sys::cuFileHandleRegister(h.as_mut_ptr(), &descr as *const _ as *mut _);
        if e.err != sys::CUfileOpError::CU_FILE_SUCCESS {
            return Err(op_error("cuFileHandleRegister", e.err));
        }
        Ok(Handle {
            h: h.assume_init(),
            _fd: fd,
        })
    }
}

/// How a transfer is split: `threads` workers take `chunk`-byte pieces in turn.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    pub threads: usize,
    pub chunk: usize,
}

#[derive(Clone, Copy)]
enum Dir {
    Read,
    Write,
}

impl Handle<'_> {
    /// Reads `size` bytes from the file's start into `buf`; the seconds it took.
    pub fn read_into(
        &self,
        gpu: &Gpu,
        buf: &GpuBuffer,
        size: usize,
        split: Split,
    ) -> Result<f64, Error> {
        self.transfer(Dir::Read, gpu, buf, size, split)
    }

    /// Writes `size` bytes of `buf` to the file's start; the seconds it took.
    pub fn write_from(
        &self,
        gpu: &Gpu,
        buf: &GpuBuffer,
        size: usize,
        split: Split,
    ) -> Result<f64, Error> {
        self.transfer(Dir::Write, gpu, buf, size, split)
    }

    fn transfer(
        &self,
        dir: Dir,
        gpu: &Gpu,
        buf: &GpuBuffer,
        size: usize,
        split: Split,
    ) -> Result<f64, Error> {
        if size > buf.size {
            return Err(Error::InvalidArgument(format!(
                "{size} bytes do not fit the {}-byte GPU buffer",
                buf.size
            )));
        }
        let next = AtomicUsize::new(0);
        let (ctx, h, base) = (gpu.ctx as usize, self.h as usize, buf.ptr);
        let chunk = split.chunk.max(4096);
        let start = Instant::now();
        let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..split.threads.max(1))
                .map(|_| s.spawn(|| worker(dir, ctx, h, base, size, chunk, &next)))
                .collect();
            workers
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::InvalidArgument(
                            "a cuFile worker thread panicked".into(),
                        ))
                    })
                })
                .collect()
        });
        let secs = start.elapsed().as_secs_f64();
        results.into_iter().collect::<Result<Vec<()>, Error>>()?;
        Ok(secs)
    }
}

/// One worker: takes chunk after chunk until the transfer is done.
fn worker(
    dir: Dir,
    ctx: usize,
    h: usize,
    base: u64,
    size: usize,
    chunk: usize,
    next: &AtomicUsize,
) -> Result<(), Error> {
    // SAFETY: the context is the GPU's retained primary context, alive while `gpu` is borrowed.
    unsafe { check("cuCtxSetCurrent", cu::cuCtxSetCurrent(ctx as cu::CUcontext))? };
    loop {
        let off = next.fetch_add(1, Ordering::Relaxed).saturating_mul(chunk);
        if off >= size {
            return Ok(());
        }
        let len = chunk.min(size - off);
        let mut done = 0usize;
        while done < len {
            let at = (off + done) as i64;
            // SAFETY: [base+at, base+at+len-done) lies inside the buffer (size <= buf.size);
            // the handle is registered and outlives the scope of every worker.
            let n = unsafe {
                match dir {
                    Dir::Read => sys::cuFileRead(h as _, base as *mut c_void, len - done, at, at),
                    Dir::Write => {
                        sys::cuFileWrite(h as _, base as *const c_void, len - done, at, at)
                    }
                }
            };
            let op = match dir {
                Dir::Read => "cuFileRead",
                Dir::Write => "cuFileWrite",
            };
            if n == -1 {
                let e = std::io::Error::last_os_error();
                return Err(Error::Cufile {
                    op,
                    code: e.raw_os_error().unwrap_or(0) as u32,
                    name: e.to_string(),
                });
            }
            if n <= 0 {
                return Err(Error::Cufile {
                    op,
                    code: n.unsigned_abs() as u32,
                    name: if n == 0 {
                        "short transfer (0 bytes)".into()
                    } else {
                        "cuFile error".into()
                    },
                });
            }
            done += n as usize;
        }
    }
}
