//! In-node NCCL: one all_reduce over every given GPU from one process (`ncclCommInitAll`, one
//! communicator per GPU, the calls of a step in one group), libnccl loaded at run time through
//! cudarc like libcuda. float32 sum, out of place; each size warmed up, then timed over
//! `iters` steps by the host clock after the streams drain (nccl-tests' way); algbw = bytes /
//! time, busbw = algbw x 2(n-1)/n. The first 4 KiB of every rank's result are checked.
//!
//! Which transports NCCL chose is in its own log (`NCCL_DEBUG=INFO`), which the caller asks for
//! through the environment and reads; nothing here touches the host.

use std::ffi::{c_int, c_void, CStr};
use std::time::Instant;

use cudarc::driver::sys;
use cudarc::nccl::sys as nccl;

use super::{check, Gpu};
use crate::error::Error;

/// The libnccl symbols called here.
pub const SYMBOLS: &[&str] = &[
    "ncclGetVersion",
    "ncclCommInitAll",
    "ncclCommDestroy",
    "ncclAllReduce",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclGetErrorString",
];

const CHECKED: usize = 1024; // floats

/// libnccl loads and has every symbol used here; the first missing piece is the error.
pub fn ensure_libnccl() -> Result<(), Error> {
    // SAFETY: is_culib_present only tries to dlopen the candidate names.
    if !unsafe { nccl::is_culib_present() } {
        return Err(Error::InvalidArgument(
            "libnccl.so.2 is not on the library path (install libnccl2, or point LD_LIBRARY_PATH at it)"
                .into(),
        ));
    }
    // SAFETY: present, checked just above, so culib() does not panic.
    let lib = unsafe { nccl::culib() };
    for s in SYMBOLS {
        let name = format!("{s}\0");
        // SAFETY: only the address is looked up.
        if unsafe { lib.get::<*const ()>(name.as_bytes()) }.is_err() {
            return Err(Error::InvalidArgument(format!("libnccl has no {s}")));
        }
    }
    Ok(())
}

fn nccl_check(op: &'static str, r: nccl::ncclResult_t) -> Result<(), Error> {
    if r == nccl::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: NCCL returns a static string for any result.
    let text = unsafe {
        let p = nccl::ncclGetErrorString(r);
        if p.is_null() {
            String::new()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    };
    Err(Error::InvalidArgument(format!(
        "{op} failed: {r:?} ({text})"
    )))
}

/// One message size.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeResult {
    pub bytes: usize,
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AllReduce {
    /// `ncclGetVersion` (22803 for 2.28.3).
    pub version: i32,
    pub ranks: usize,
    pub sizes: Vec<SizeResult>,
    pub data_ok: bool,
}

struct Rank {
    send: u64,
    recv: u64,
    stream: sys::CUstream,
    comm: nccl::ncclComm_t,
}

/// Everything of the run, released on drop (communicators first).
struct Ranks<'g> {
    gpus: &'g [Gpu],
    ranks: Vec<Rank>,
}

impl Drop for Ranks<'_> {
    fn drop(&mut self) {
        for (g, r) in self.gpus.iter().zip(&self.ranks) {
            if g.make_current().is_err() {
                continue;
            }
            // SAFETY: each handle was created in all_reduce (null/zero ones are skipped).
            unsafe {
                if !r.comm.is_null() {
                    nccl::ncclCommDestroy(r.comm);
                }
                if !r.stream.is_null() {
                    sys::cuStreamDestroy_v2(r.stream);
                }
                for p in [r.send, r.recv] {
                    if p != 0 {
                        sys::cuMemFree_v2(p);
                    }
                }
            }
        }
    }
}

/// Rank `i`'s buffers and stream on GPU `g`: `max` bytes to send, filled with i+1 (so the sum
/// over n ranks is n(n+1)/2), and as many to receive.
fn new_rank(g: &Gpu, i: usize, max: usize) -> Result<Rank, Error> {
    g.make_current()?;
    let mut r = Rank {
        send: 0,
        recv: 0,
        stream: std::ptr::null_mut(),
        comm: std::ptr::null_mut(),
    };
    // SAFETY: this GPU's context is current; out-pointers are fields of r.
    unsafe {
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut r.send, max))?;
        check("cuMemAlloc", sys::cuMemAlloc_v2(&mut r.recv, max))?;
        check("cuStreamCreate", sys::cuStreamCreate(&mut r.stream, 1))?;
        // Rank i sends i+1 everywhere: the sum is n(n+1)/2.
        let v = (i as f32 + 1.0).to_bits();
        check("cuMemsetD32", sys::cuMemsetD32_v2(r.send, v, max / 4))?;
    }
    Ok(r)
}

/// Every size timed: `warmups` steps, then `iters` steps measured.
fn measure(
    all: &Ranks,
    sizes: &[usize],
    warmups: u32,
    iters: u32,
) -> Result<Vec<SizeResult>, Error> {
    let n = all.gpus.len() as f64;
    let mut out = Vec::new();
    for &bytes in sizes {
        let count = (bytes / 4).max(CHECKED);
        step(all, count, warmups)?;
        let t = Instant::now();
        step(all, count, iters)?;
        let secs = t.elapsed().as_secs_f64() / f64::from(iters);
        let algbw = (count * 4) as f64 / secs / 1e9;
        out.push(SizeResult {
            bytes: count * 4,
            time_us: secs * 1e6,
            algbw_gbs: algbw,
            busbw_gbs: algbw * 2.0 * (n - 1.0) / n,
        });
    }
    Ok(out)
}

/// Whether every rank received the right sum (its first CHECKED floats).
fn sums_right(all: &Ranks) -> Result<bool, Error> {
    let n = all.gpus.len() as f64;
    let want = (n * (n + 1.0) / 2.0) as f32;
    let mut data_ok = true;
    for (g, r) in all.gpus.iter().zip(&all.ranks) {
        g.make_current()?;
        let mut buf = vec![0f32; CHECKED];
        // SAFETY: buf holds CHECKED floats; the buffer holds at least that many.
        unsafe {
            check(
                "cuMemcpyDtoH",
                sys::cuMemcpyDtoH_v2(buf.as_mut_ptr().cast::<c_void>(), r.recv, CHECKED * 4),
            )?;
        }
        data_ok &= buf.iter().all(|x| *x == want);
    }
    Ok(data_ok)
}

/// Runs all_reduce over `indexes` (CUDA ordinals) at each of `sizes` bytes. `stage` is told
/// `"init"` just before `ncclCommInitAll` and `"run"` once it returned: a call into NCCL cannot
/// be cancelled, so gdrprov runs this in a child process of its own and watches the stages
/// with a deadline (gdrprov's `bench::nccl`).
pub fn all_reduce(
    indexes: &[u32],
    sizes: &[usize],
    warmups: u32,
    iters: u32,
    stage: &mut dyn FnMut(&'static str),
) -> Result<AllReduce, Error> {
    super::node::ensure_libcuda()?;
    ensure_libnccl()?;
    let max = sizes.iter().copied().max().unwrap_or(0);
    if indexes.is_empty() || max < 4 * CHECKED || iters == 0 {
        return Err(Error::InvalidArgument(format!(
            "all_reduce needs a GPU, sizes of at least {} bytes and an iteration",
            4 * CHECKED
        )));
    }
    let gpus: Vec<Gpu> = indexes
        .iter()
        .map(|&i| Gpu::open(i))
        .collect::<Result<_, _>>()?;
    let mut all = Ranks {
        gpus: &gpus,
        ranks: Vec::new(),
    };
    for (i, g) in gpus.iter().enumerate() {
        all.ranks.push(new_rank(g, i, max)?);
    }
    let mut comms = vec![std::ptr::null_mut(); gpus.len()];
    let devlist: Vec<c_int> = indexes.iter().map(|&i| i as c_int).collect();
    let mut version: c_int = 0;
    // SAFETY: symbols checked; comms holds one slot per device of devlist.
    unsafe {
        nccl_check("ncclGetVersion", nccl::ncclGetVersion(&mut version))?;
        stage("init");
        nccl_check(
            "ncclCommInitAll",
            nccl::ncclCommInitAll(comms.as_mut_ptr(), devlist.len() as c_int, devlist.as_ptr()),
        )?;
    }
    for (r, c) in all.ranks.iter_mut().zip(comms) {
        r.comm = c;
    }
    stage("run");
    let out = measure(&all, sizes, warmups, iters)?;
    let data_ok = sums_right(&all)?;
    Ok(AllReduce {
        version,
        ranks: gpus.len(),
        sizes: out,
        data_ok,
    })
}

/// `times` all_reduce steps over every rank (each step one NCCL group), then every stream
/// drained.
fn step(all: &Ranks, count: usize, times: u32) -> Result<(), Error> {
    for _ in 0..times {
        // SAFETY: communicators, streams and buffers of `all` are live; count floats fit.
        unsafe {
            nccl_check("ncclGroupStart", nccl::ncclGroupStart())?;
            for r in &all.ranks {
                nccl_check(
                    "ncclAllReduce",
                    nccl::ncclAllReduce(
                        r.send as *const c_void,
                        r.recv as *mut c_void,
                        count,
                        nccl::ncclDataType_t::ncclFloat32,
                        nccl::ncclRedOp_t::ncclSum,
                        r.comm,
                        r.stream as nccl::cudaStream_t,
                    ),
                )?;
            }
            nccl_check("ncclGroupEnd", nccl::ncclGroupEnd())?;
        }
    }
    for (g, r) in all.gpus.iter().zip(&all.ranks) {
        g.make_current()?;
        // SAFETY: the stream was created in this context.
        unsafe { check("cuStreamSynchronize", sys::cuStreamSynchronize(r.stream))? };
    }
    Ok(())
}
