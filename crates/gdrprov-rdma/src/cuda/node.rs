//! Several copies at once over the GPUs of one node, the way nvbandwidth's copy-engine tests
//! run them (its `MemcpyOperation::doMemcpyCore`): one thread drives every GPU, switching primary
//! contexts; each copy has its own non-blocking stream on the GPU whose copy engine runs it;
//! warm-up copies are queued first, then stream 0 records the start and every other stream waits
//! on that event before recording its own, `loops` copies of the whole buffer are queued and an
//! end event recorded; the bandwidth of a sample is bytes x loops over the events' time.
//! nvbandwidth holds every stream with a spin kernel until all is queued; here the queue is
//! simply ahead of the copy engines (queuing a 512 MiB copy takes microseconds, running it
//! milliseconds), which needs no kernel image.
//!
//! `bench copy --concurrent` runs host <-> device on every GPU at once; `bench p2p` device ->
//! device for each ordered pair.

use std::ffi::{c_int, c_uint, c_void};

use cudarc::driver::sys;

use super::{check, Gpu, GPU_PAGE};
use crate::error::Error;

/// The libcuda symbols used here beyond [`super::SYMBOLS`].
pub const SYMBOLS: &[&str] = &[
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamWaitEvent",
    "cuStreamSynchronize",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventElapsedTime",
    "cuMemcpyAsync",
    "cuDeviceCanAccessPeer",
    "cuDeviceGetP2PAttribute",
    "cuCtxEnablePeerAccess",
    "cuMemsetD32_v2",
];

/// libcuda with every symbol the node copies need; the first missing one is the error.
pub fn ensure_libcuda() -> Result<(), Error> {
    super::ensure_libcuda()?;
    super::ensure_symbols(SYMBOLS)
}

/// Where a copy reads or writes: the pinned host buffer kept for a GPU, or one of the two device
/// buffers of a GPU (positions in [`Node::gpus`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Host(usize),
    Device(usize, usize),
}

/// One copy of the whole buffer, run by the copy engine of GPU `on` (its context's stream).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copy {
    pub src: Place,
    pub dst: Place,
    pub on: usize,
}

/// nvbandwidth's defaults: 512 MiB, 4 warm-up copies, 16 timed copies a sample, 3 samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Method {
    pub warmups: u32,
    pub loops: u32,
    pub samples: u32,
}

impl Default for Method {
    fn default() -> Self {
        Method {
            warmups: 4,
            loops: 16,
            samples: 3,
        }
    }
}

/// One copy's result: GB/s (10^9 bytes per second) of each sample, and whether the bytes that
/// arrived are the ones sent (the first and last 4 KiB of the destination are read back).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub samples: Vec<f64>,
    pub data_ok: bool,
}

/// The GPUs of a node with two device buffers each and, when asked, one pinned host buffer
/// each; everything is freed on drop.
pub struct Node {
    gpus: Vec<Gpu>,
    size: usize,
    dev: Vec<[u64; 2]>,
    host: Vec<*mut c_void>,
}

impl Drop for Node {
    fn drop(&mut self) {
        for (i, g) in self.gpus.iter().enumerate() {
            if g.make_current().is_err() {
                continue;
            }
            // SAFETY: each pointer was allocated in open() (zero ones never were).
            unsafe {
                for p in self.dev.get(i).into_iter().flatten() {
                    if *p != 0 {
                        sys::cuMemFree_v2(*p);
                    }
                }
                if let Some(h) = self.host.get(i).filter(|h| !h.is_null()) {
                    sys::cuMemFreeHost(*h);
                }
            }
        }
    }
}

/// Streams and events of one run, destroyed on drop.
struct Queues {
    streams: Vec<sys::CUstream>,
    events: Vec<sys::CUevent>,
}

impl Drop for Queues {
    fn drop(&mut self) {
        // SAFETY: each was created by the driver in Node::run (null ones are skipped).
        unsafe {
            for e in self.events.iter().filter(|e| !e.is_null()) {
                sys::cuEventDestroy_v2(*e);
            }
            for s in self.streams.iter().filter(|s| !s.is_null()) {
                sys::cuStreamDestroy_v2(*s);
            }
        }
    }
}

const CHECKED: usize = 4096;

impl Node {
    /// Opens GPUs `indexes` (CUDA ordinals) with two `size`-byte device buffers each (rounded up
    /// to a GPU page) and, with `with_host`, a pinned host buffer each (portable: every
    /// context may use it, as nvbandwidth's host buffers).
    pub fn open(indexes: &[u32], size: usize, with_host: bool) -> Result<Node, Error> {
        Node::open_placed(indexes, size, with_host, &mut |_, _| {})
    }

    /// As [`Node::open`], calling `before_host(position, gpu)` in the calling thread just
    /// before each GPU's pinned host buffer is allocated (and its pages touched): the caller
    /// binds the thread to the GPU's NUMA node there, so that the pages land on it.
    pub fn open_placed(
        indexes: &[u32],
        size: usize,
        with_host: bool,
        before_host: &mut dyn FnMut(usize, &Gpu),
    ) -> Result<Node, Error> {
        ensure_libcuda()?;
        if size < 2 * CHECKED {
            return Err(Error::InvalidArgument(format!(
                "a copy of {size} bytes is too small (at least {} bytes)",
                2 * CHECKED
            )));
        }
        let size = size.div_ceil(GPU_PAGE) * GPU_PAGE;
        let mut node = Node {
            gpus: Vec::new(),
            size,
            dev: Vec::new(),
            host: Vec::new(),
        };
        for &i in indexes {
            let g = Gpu::open(i)?;
            node.gpus.push(g);
            node.dev.push([0, 0]);
            node.host.push(std::ptr::null_mut());
            let at = node.gpus.len() - 1;
            for b in 0..2 {
                let mut p: sys::CUdeviceptr = 0;
                // SAFETY: context of the GPU just opened is current; out-pointer valid.
                unsafe { check("cuMemAlloc", sys::cuMemAlloc_v2(&mut p, size))? };
                node.dev[at][b] = p;
            }
            if with_host {
                before_host(at, &node.gpus[at]);
                let mut h: *mut c_void = std::ptr::null_mut();
                // SAFETY: symbols checked; out-pointer valid; PORTABLE = 1.
                unsafe {
                    check(
                        "cuMemHostAlloc",
                        sys::cuMemHostAlloc(&mut h, size, 1 as c_uint),
                    )?;
                    node.host[at] = h;
                    // Touch every page so the first copy does not pay for faults.
                    std::ptr::write_bytes(h.cast::<u8>(), 0x5a, size);
                }
            }
        }
        Ok(node)
    }

    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// Bytes per copy (the buffer size, rounded up to a GPU page).
    pub fn size(&self) -> usize {
        self.size
    }

    /// `cuDeviceCanAccessPeer(a -> b)`, positions in [`Node::gpus`].
    pub fn can_access_peer(&self, a: usize, b: usize) -> Result<bool, Error> {
        let (ga, gb) = (self.gpu(a)?, self.gpu(b)?);
        let mut v: c_int = 0;
        // SAFETY: symbols checked; out-pointer valid.
        unsafe {
            check(
                "cuDeviceCanAccessPeer",
                sys::cuDeviceCanAccessPeer(&mut v, ga.dev, gb.dev),
            )?
        };
        Ok(v == 1)
    }

    /// CUDA's performance rank of the a -> b link (0 = best; `None`: not reported).
    pub fn performance_rank(&self, a: usize, b: usize) -> Option<i32> {
        let (ga, gb) = (self.gpu(a).ok()?, self.gpu(b).ok()?);
        let mut v: c_int = -1;
        // SAFETY: symbols checked; out-pointer valid.
        let r = unsafe {
            sys::cuDeviceGetP2PAttribute(
                &mut v,
                sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
                ga.dev,
                gb.dev,
            )
        };
        (r == sys::CUresult::CUDA_SUCCESS).then_some(v)
    }

    /// Lets `a` reach `b`'s memory directly (cuCtxEnablePeerAccess in a's context); Ok(false)
    /// when CUDA says the pair cannot (copies then go through host memory).
    pub fn enable_peer(&self, a: usize, b: usize) -> Result<bool, Error> {
        if !self.can_access_peer(a, b)? {
            return Ok(false);
        }
        self.gpu(a)?.make_current()?;
        // SAFETY: both contexts retained by the node's Gpus.
        let r = unsafe { sys::cuCtxEnablePeerAccess(self.gpu(b)?.ctx, 0) };
        if r == sys::CUresult::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(true);
        }
        check("cuCtxEnablePeerAccess", r)?;
        Ok(true)
    }

    fn gpu(&self, at: usize) -> Result<&Gpu, Error> {
        self.gpus
            .get(at)
            .ok_or_else(|| Error::InvalidArgument(format!("GPU position {at} is not in this node")))
    }

    fn address(&self, p: Place) -> Result<u64, Error> {
        let bad = || Error::InvalidArgument(format!("{p:?} is not a buffer of this node"));
        match p {
            Place::Device(g, b) => self
                .dev
                .get(g)
                .and_then(|d| d.get(b))
                .copied()
                .ok_or_else(bad),
            Place::Host(g) => match self.host.get(g) {
                Some(h) if !h.is_null() => Ok(*h as u64),
                _ => Err(bad()),
            },
        }
    }

    /// Runs `copies` at once with `method`; one [`Measured`] per copy, in order.
    pub fn run(&self, copies: &[Copy], method: &Method) -> Result<Vec<Measured>, Error> {
        if copies.is_empty() || method.loops == 0 || method.samples == 0 {
            return Err(Error::InvalidArgument(
                "nothing to copy (no copy, loop or sample)".into(),
            ));
        }
        let mut q = Queues {
            streams: Vec::new(),
            events: Vec::new(),
        };
        let mut ends = Vec::new();
        for c in copies {
            self.gpu(c.on)?.make_current()?;
            let (mut s, mut a, mut b) = (
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            );
            // SAFETY: out-pointers valid; CU_STREAM_NON_BLOCKING = 1.
            unsafe {
                check("cuStreamCreate", sys::cuStreamCreate(&mut s, 1))?;
                q.streams.push(s);
                check("cuEventCreate", sys::cuEventCreate(&mut a, 0))?;
                q.events.push(a);
                check("cuEventCreate", sys::cuEventCreate(&mut b, 0))?;
                q.events.push(b);
            }
            ends.push((self.address(c.src)?, self.address(c.dst)?));
        }
        let mut out: Vec<Measured> = copies
            .iter()
            .map(|_| Measured {
                samples: Vec::new(),
                data_ok: true,
            })
            .collect();
        for sample in 0..method.samples {
            for (i, c) in copies.iter().enumerate() {
                self.fill(c.src, pattern(i, sample))?;
            }
            self.one_sample(copies, &ends, &q, method, &mut out)?;
            for (i, c) in copies.iter().enumerate() {
                if !self.holds(c.dst, pattern(i, sample))? {
                    out[i].data_ok = false;
                }
            }
        }
        Ok(out)
    }

    fn one_sample(
        &self,
        copies: &[Copy],
        ends: &[(u64, u64)],
        q: &Queues,
        m: &Method,
        out: &mut [Measured],
    ) -> Result<(), Error> {
        let start = |i: usize| q.events[2 * i];
        let end = |i: usize| q.events[2 * i + 1];
        let size = self.size;
        let enqueue = |i: usize, n: u32| -> Result<(), Error> {
            let (src, dst) = ends[i];
            for _ in 0..n {
                // SAFETY: both ends are buffers of `size` bytes owned by this node (UVA: host
                // pointers are valid CUdeviceptrs); the stream belongs to the current context.
                unsafe {
                    check(
                        "cuMemcpyAsync",
                        sys::cuMemcpyAsync(dst, src, size, q.streams[i]),
                    )?
                };
            }
            Ok(())
        };
        // SAFETY (every block below): streams and events were created in run() in the context
        // made current before each use.
        for (i, c) in copies.iter().enumerate() {
            self.gpu(c.on)?.make_current()?;
            enqueue(i, m.warmups)?;
        }
        self.gpu(copies[0].on)?.make_current()?;
        unsafe { check("cuEventRecord", sys::cuEventRecord(start(0), q.streams[0]))? };
        for (i, c) in copies.iter().enumerate().skip(1) {
            self.gpu(c.on)?.make_current()?;
            unsafe {
                check(
                    "cuStreamWaitEvent",
                    sys::cuStreamWaitEvent(q.streams[i], start(0), 0),
                )?;
                check("cuEventRecord", sys::cuEventRecord(start(i), q.streams[i]))?;
            }
        }
        for (i, c) in copies.iter().enumerate() {
            self.gpu(c.on)?.make_current()?;
            enqueue(i, m.loops)?;
            unsafe { check("cuEventRecord", sys::cuEventRecord(end(i), q.streams[i]))? };
        }
        for (i, c) in copies.iter().enumerate() {
            self.gpu(c.on)?.make_current()?;
            unsafe {
                check(
                    "cuStreamSynchronize",
                    sys::cuStreamSynchronize(q.streams[i]),
                )?
            };
        }
        for (i, c) in copies.iter().enumerate() {
            self.gpu(c.on)?.make_current()?;
            let mut ms: f32 = 0.0;
            unsafe {
                check(
                    "cuEventElapsedTime",
                    sys::cuEventElapsedTime(&mut ms, start(i), end(i)),
                )?
            };
            if ms <= 0.0 {
                return Err(Error::InvalidArgument(
                    "a copy took no measurable time".into(),
                ));
            }
            let bytes = size as f64 * f64::from(m.loops);
            out[i].samples.push(bytes / (f64::from(ms) * 1e-3) / 1e9);
        }
        Ok(())
    }

    /// Writes `byte` over the first and last [`CHECKED`] bytes of `p` (what the check reads).
    fn fill(&self, p: Place, byte: u8) -> Result<(), Error> {
        let at = self.address(p)?;
        let tail = at + (self.size - CHECKED) as u64;
        match p {
            Place::Host(_) => {
                // SAFETY: the host buffer holds `size` bytes.
                unsafe {
                    std::ptr::write_bytes(at as *mut u8, byte, CHECKED);
                    std::ptr::write_bytes(tail as *mut u8, byte, CHECKED);
                }
                Ok(())
            }
            Place::Device(g, _) => {
                self.gpu(g)?.make_current()?;
                // SAFETY: both ranges lie inside the device buffer.
                unsafe {
                    check("cuMemsetD8", sys::cuMemsetD8_v2(at, byte, CHECKED))?;
                    check("cuMemsetD8", sys::cuMemsetD8_v2(tail, byte, CHECKED))
                }
            }
        }
    }

    /// Whether the first and last [`CHECKED`] bytes of `p` all hold `byte`.
    fn holds(&self, p: Place, byte: u8) -> Result<bool, Error> {
        let at = self.address(p)?;
        let tail = at + (self.size - CHECKED) as u64;
        let mut buf = vec![0u8; 2 * CHECKED];
        match p {
            Place::Host(_) => {
                // SAFETY: the host buffer holds `size` bytes; no copy is in flight.
                unsafe {
                    std::ptr::copy_nonoverlapping(at as *const u8, buf.as_mut_ptr(), CHECKED);
                    std::ptr::copy_nonoverlapping(
                        tail as *const u8,
                        buf.as_mut_ptr().add(CHECKED),
                        CHECKED,
                    );
                }
            }
            Place::Device(g, _) => {
                self.gpu(g)?.make_current()?;
                // SAFETY: buf holds 2 x CHECKED bytes; both ranges lie inside the buffer.
                unsafe {
                    check(
                        "cuMemcpyDtoH",
                        sys::cuMemcpyDtoH_v2(buf.as_mut_ptr().cast(), at, CHECKED),
                    )?;
                    check(
                        "cuMemcpyDtoH",
                        sys::cuMemcpyDtoH_v2(buf.as_mut_ptr().add(CHECKED).cast(), tail, CHECKED),
                    )?;
                }
            }
        }
        Ok(buf.iter().all(|b| *b == byte))
    }
}

/// A byte per copy and sample, never the 0x5a the host buffers start with.
fn pattern(copy: usize, sample: u32) -> u8 {
    let v = (copy as u32).wrapping_mul(37).wrapping_add(sample * 11) % 200;
    (v as u8).wrapping_add(0x10) | 1
}

/// (a, b, whether a can reach b's memory, CUDA's performance rank of the link).
pub type PeerPair = (u32, u32, bool, Option<i32>);

/// For every ordered pair of visible GPUs (CUDA ordinals): whether CUDA lets the first reach
/// the second's memory directly (`cuDeviceCanAccessPeer`) and the link's performance rank.
/// Needs no context: nothing is allocated.
pub fn peer_matrix() -> Result<Vec<PeerPair>, Error> {
    let n = u32::try_from(super::gpu_count()?).unwrap_or(0);
    ensure_libcuda()?;
    let mut devs = Vec::new();
    for i in 0..n {
        let mut d: sys::CUdevice = 0;
        // SAFETY: symbols checked; ordinal below the count.
        unsafe { check("cuDeviceGet", sys::cuDeviceGet(&mut d, i as c_int))? };
        devs.push(d);
    }
    let mut out = Vec::new();
    for (a, da) in devs.iter().enumerate() {
        for (b, db) in devs.iter().enumerate() {
            if a == b {
                continue;
            }
            let (mut can, mut rank): (c_int, c_int) = (0, -1);
            // SAFETY: symbols checked; out-pointers valid.
            unsafe {
                check(
                    "cuDeviceCanAccessPeer",
                    sys::cuDeviceCanAccessPeer(&mut can, *da, *db),
                )?;
                let r = sys::cuDeviceGetP2PAttribute(
                    &mut rank,
                    sys::CUdevice_P2PAttribute::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK,
                    *da,
                    *db,
                );
                if r != sys::CUresult::CUDA_SUCCESS {
                    rank = -1;
                }
            }
            out.push((a as u32, b as u32, can == 1, (rank >= 0).then_some(rank)));
        }
    }
    Ok(out)
}

/// The median of `v` (0 when empty).
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_patterns() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        for c in 0..64 {
            for s in 0..8 {
                assert_ne!(pattern(c, s), 0x5a);
                assert_ne!(pattern(c, s), 0);
            }
        }
        assert_ne!(pattern(0, 0), pattern(1, 0));
        assert_ne!(pattern(0, 0), pattern(0, 1));
    }

    #[test]
    fn a_tiny_copy_is_refused_before_any_library_call() {
        // Without libcuda the library error comes first; with it, the size error.
        assert!(Node::open(&[0], 16, false).is_err());
    }
}
