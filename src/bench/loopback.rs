//! The loopback run: two RC QPs connected to each other in-process, RDMA WRITEs from a source to a
//! destination buffer for a duration or a number of iterations per message size, then a data check
//! (write a known pattern, read the destination back, compare).

use std::sync::Arc;
use std::time::{Duration, Instant};

use sideway::ibverbs::completion::{BasicCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::memory_region::MemoryRegion;
use sideway::ibverbs::queue_pair::{
    PostSendGuard, QueuePair, SetScatterGatherEntry, WorkRequestFlags,
};

use super::cuda::{dmabuf_exporter, dmabuf_size, gpu_count, Gpu};
use super::error::BenchError;
use super::memory::{check_memlock, Buffer, HostBuf, MemoryKind};
use super::probe::{self, DmabufProbe};
use super::report::{DataCheck, ExportReport, GpuInfo, LoopbackReport, SizeResult, Threshold};
use super::verbs::{self, QpPair, Side};

/// How long each size runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunLength {
    Duration(Duration),
    Iterations(u64),
}

/// Everything a loopback run needs; `verify` builds this from a profile.
#[derive(Debug, Clone)]
pub struct LoopbackOptions {
    pub device: Option<String>,
    pub port: Option<u8>,
    pub to_device: Option<String>,
    pub to_port: Option<u8>,
    /// None: cuda-dmabuf when a GPU is present, else host.
    pub memory: Option<MemoryKind>,
    pub gpu: u32,
    pub sizes: Vec<u64>,
    pub length: RunLength,
    pub qps: u32,
    pub tx_depth: u32,
    pub gid_index: Option<u32>,
    /// Threshold as a fraction of line rate (default 0.90 GPU memory, 0.95 host memory).
    pub min_line_rate_fraction: Option<f64>,
    /// Threshold in Gb/s; replaces the fraction, and applies to software devices too.
    pub min_gbps: Option<f64>,
    /// Show a progress bar (callers pass true only on a terminal).
    pub progress: bool,
}

impl Default for LoopbackOptions {
    fn default() -> Self {
        LoopbackOptions {
            device: None,
            port: None,
            to_device: None,
            to_port: None,
            memory: None,
            gpu: 0,
            sizes: vec![8 << 20],
            length: RunLength::Duration(Duration::from_secs(5)),
            qps: 1,
            tx_depth: 128,
            gid_index: None,
            min_line_rate_fraction: None,
            min_gbps: None,
            progress: false,
        }
    }
}

/// The default threshold fraction per memory kind (Azure's health-check practice).
pub fn default_fraction(memory: MemoryKind) -> f64 {
    if memory.is_gpu() {
        0.90
    } else {
        0.95
    }
}

/// Judge the largest size's average against the threshold.
pub fn evaluate_threshold(
    results: &[SizeResult],
    line_rate: Option<f64>,
    software: Option<&str>,
    fraction: f64,
    min_gbps: Option<f64>,
) -> Threshold {
    let at = results.iter().max_by_key(|r| r.bytes);
    let at_bytes = at.map(|r| r.bytes);
    if let Some(g) = min_gbps {
        return Threshold {
            applicable: true,
            reason: None,
            min_line_rate_fraction: None,
            min_gbps: Some(g),
            at_bytes,
            passed: Some(at.is_some_and(|r| r.average_gbps >= g)),
        };
    }
    let not_applicable = |reason: String| Threshold {
        applicable: false,
        reason: Some(reason),
        min_line_rate_fraction: Some(fraction),
        min_gbps: None,
        at_bytes,
        passed: None,
    };
    if let Some(dev) = software {
        return not_applicable(format!(
            "software RDMA device {dev} has no meaningful line rate; use --min-gbps for a floor"
        ));
    }
    let Some(line) = line_rate else {
        return not_applicable("the port reports no line rate; use --min-gbps for a floor".into());
    };
    Threshold {
        applicable: true,
        reason: None,
        min_line_rate_fraction: Some(fraction),
        min_gbps: None,
        at_bytes,
        passed: Some(at.is_some_and(|r| r.average_gbps >= fraction * line)),
    }
}

/// The check pattern: a splitmix64 stream seeded per QP, so a stale or misplaced buffer never matches.
pub fn fill_pattern(buf: &mut [u8], seed: u64) {
    let mut state = seed;
    for chunk in buf.chunks_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let bytes = z.to_le_bytes();
        chunk.copy_from_slice(&bytes[..chunk.len()]);
    }
}

/// Compare: (number of differing bytes, first differing offset).
pub fn compare(expected: &[u8], actual: &[u8]) -> (u64, Option<u64>) {
    let mut count = 0u64;
    let mut first = None;
    for (i, (a, b)) in expected.iter().zip(actual.iter()).enumerate() {
        if a != b {
            count += 1;
            first.get_or_insert(i as u64);
        }
    }
    let extra = expected.len().abs_diff(actual.len()) as u64;
    if extra > 0 && first.is_none() {
        first = Some(expected.len().min(actual.len()) as u64);
    }
    (count + extra, first)
}

/// Gb/s from bytes and seconds (1 Gb = 10^9 bits, as perftest's --report_gbits).
pub fn gbps(bytes: u64, secs: f64) -> f64 {
    if secs <= 0.0 {
        return 0.0;
    }
    bytes as f64 * 8.0 / secs / 1e9
}

fn gpu_info(gpu: &Gpu) -> GpuInfo {
    GpuInfo {
        index: gpu.index,
        name: gpu.name.clone(),
        pci_bus_id: gpu.pci_bus_id.clone(),
        cuda_driver_version: gpu.driver_version_string(),
        dmabuf_supported: gpu.dmabuf_supported,
        dmabuf_bytes: None,
        dmabuf_exporter: None,
    }
}

/// Choose the memory kind: the asked one, else cuda-dmabuf when a GPU is present, else host (with why).
pub fn choose_memory(asked: Option<MemoryKind>) -> (MemoryKind, Option<String>) {
    if let Some(m) = asked {
        return (m, None);
    }
    match gpu_count() {
        Ok(n) if n > 0 => (MemoryKind::CudaDmabuf, Some("a GPU is present".into())),
        Ok(_) => (MemoryKind::Host, Some("no GPU visible to CUDA".into())),
        Err(e) => (
            MemoryKind::Host,
            Some(format!("no GPU memory: {}", short(&e))),
        ),
    }
}

fn short(e: &BenchError) -> String {
    match e {
        BenchError::LibcudaMissing { .. } => "libcuda not found".into(),
        other => other.to_string(),
    }
}

/// Allocate a GPU buffer, export it as dma-buf when asked; fill in the GPU info.
fn gpu_buffer<'g>(
    gpu: &'g Gpu,
    size: usize,
    kind: MemoryKind,
    info: &mut GpuInfo,
) -> Result<Buffer<'g>, BenchError> {
    let mem = gpu.alloc(size)?;
    let dmabuf = if kind == MemoryKind::CudaDmabuf {
        let fd = mem.export_dmabuf()?;
        info.dmabuf_bytes = dmabuf_size(&fd).or(Some(mem.size as u64));
        info.dmabuf_exporter = dmabuf_exporter(&fd);
        Some(fd)
    } else {
        mem.set_sync_memops()?;
        None
    };
    Ok(Buffer::Gpu { mem, dmabuf })
}

fn open_gpu(index: u32, kind: MemoryKind) -> Result<Gpu, BenchError> {
    let gpu = Gpu::open(index)?;
    if kind == MemoryKind::CudaDmabuf && !gpu.dmabuf_supported {
        return Err(BenchError::GpuNoDmabuf {
            index,
            name: gpu.name.clone(),
        });
    }
    Ok(gpu)
}

/// `--export-only`: allocate GPU memory and export it as dma-buf, then stop (needs no RDMA device).
pub fn export_only(gpu_index: u32, size: u64) -> Result<ExportReport, BenchError> {
    let gpu = open_gpu(gpu_index, MemoryKind::CudaDmabuf)?;
    let mut info = gpu_info(&gpu);
    let buf = gpu_buffer(&gpu, usize_of(size)?, MemoryKind::CudaDmabuf, &mut info)?;
    let allocated = buf.len() as u64;
    let valid = matches!(
        &buf,
        Buffer::Gpu {
            dmabuf: Some(_),
            ..
        }
    );
    // Round-trip a pattern through the allocation, so "allocated" means usable.
    let mut buf = buf;
    let mut pattern = vec![0u8; 4096];
    fill_pattern(&mut pattern, 7);
    buf.write(&pattern)?;
    let mut back = vec![0u8; 4096];
    buf.read(&mut back)?;
    let ok = valid && compare(&pattern, &back).0 == 0 && info.dmabuf_bytes == Some(allocated);
    Ok(ExportReport {
        gpu: info,
        allocated_bytes: allocated,
        dmabuf_fd_valid: valid,
        passed: ok,
    })
}

fn usize_of(n: u64) -> Result<usize, BenchError> {
    usize::try_from(n).map_err(|_| BenchError::InvalidArgument(format!("size {n} too large")))
}

/// Run the loopback benchmark. `notes` receives progress lines for people (GPU steps done).
pub fn run_loopback(
    opts: &LoopbackOptions,
    notes: &mut dyn FnMut(&str),
) -> Result<LoopbackReport, BenchError> {
    if opts.sizes.is_empty() || opts.sizes.contains(&0) {
        return Err(BenchError::InvalidArgument(
            "message sizes must be > 0".into(),
        ));
    }
    if opts.qps == 0 || opts.tx_depth == 0 {
        return Err(BenchError::InvalidArgument(
            "--qps and --tx-depth must be > 0".into(),
        ));
    }
    let max_size = opts.sizes.iter().copied().max().unwrap_or(8 << 20);
    if max_size > u64::from(u32::MAX) {
        return Err(BenchError::InvalidArgument(format!(
            "message size {max_size} exceeds 4 GiB - 1"
        )));
    }
    let buf_size = usize_of(max_size)?;
    let (memory, memory_note) = choose_memory(opts.memory);
    if let Some(n) = memory_note.as_ref().filter(|_| !memory.is_gpu()) {
        notes(&format!("memory: host ({n})"));
    }

    // GPU side first: it needs no RDMA device, and a host without one still learns that this half works.
    let gpu = if memory.is_gpu() {
        Some(open_gpu(opts.gpu, memory)?)
    } else {
        None
    };
    let mut ginfo = gpu.as_ref().map(gpu_info);
    let (mut src, mut dst) = match (&gpu, ginfo.as_mut()) {
        (Some(g), Some(info)) => {
            let s = gpu_buffer(g, buf_size, memory, info)?;
            let d = gpu_buffer(g, buf_size, memory, info)?;
            notes(&format!(
                "GPU {} {}: allocated 2 x {} of device memory{}",
                g.index,
                g.name,
                super::report::human_bytes(s.len() as u64),
                match info.dmabuf_bytes {
                    Some(b) => format!(", exported each as a dma-buf of {b} bytes"),
                    None => String::new(),
                }
            ));
            (s, d)
        }
        _ => (
            Buffer::Host(HostBuf::new(buf_size)?),
            Buffer::Host(HostBuf::new(buf_size)?),
        ),
    };

    let (ctx_a, port_a) = verbs::select_port(opts.device.as_deref(), opts.port, opts.gid_index)?;
    let side_a = Side::new(ctx_a, port_a)?;
    let same = opts.to_device.is_none()
        || (opts.to_device == Some(side_a.port.device.clone())
            && opts.to_port.unwrap_or(side_a.port.port) == side_a.port.port);
    let side_b = if same {
        None
    } else {
        let dev = opts
            .to_device
            .clone()
            .unwrap_or_else(|| side_a.port.device.clone());
        let (ctx_b, port_b) = verbs::select_port(Some(&dev), opts.to_port, opts.gid_index)?;
        Some(Side::new(ctx_b, port_b)?)
    };
    let b = side_b.as_ref().unwrap_or(&side_a);

    let dmabuf_probe: Option<DmabufProbe> =
        probe::probe_dmabuf_support(Some(&side_a.port.device)).ok();

    if memory != MemoryKind::CudaDmabuf {
        let pinned = if memory == MemoryKind::Host {
            2 * buf_size as u64
        } else {
            0
        };
        check_memlock(pinned + 4096)?;
    }
    let src_mr = src.register(&side_a, memory)?;
    let dst_mr = dst.register(b, memory)?;
    let scratch = HostBuf::new(4096)?;
    // SAFETY: scratch lives until the end of this function, after every QP using it is destroyed.
    let scratch_mr = unsafe {
        side_a.pd.reg_mr(
            scratch.addr() as usize,
            scratch.len(),
            sideway::ibverbs::AccessFlags::LocalWrite,
        )
    }
    .map_err(|e| BenchError::verbs("ibv_reg_mr(scratch)", &side_a.port.device, verbs::io_of(e)))?;

    let depth = opts.tx_depth;
    let cq_a = side_a.create_cq(opts.qps * depth + 1)?;
    let cq_b = b.create_cq(opts.qps + 1)?;
    let mut pairs = verbs::connect_pairs(&side_a, b, &cq_a, &cq_b, opts.qps, depth)?;

    let software = side_a.port.software || b.port.software;
    let line_rate = if software {
        None
    } else {
        side_a.port.line_rate_gbps
    };
    let mut results = Vec::new();
    for &size in &opts.sizes {
        let target = Target {
            src: &src_mr,
            src_addr: src.addr(),
            dst_rkey: dst_mr.rkey(),
            dst_addr: dst.addr(),
        };
        let mut r = measure(
            &mut pairs,
            &cq_a,
            &target,
            size,
            opts.length,
            effective_depth(depth, size, software),
            opts.progress,
        )?;
        r.line_rate_fraction = line_rate.map(|l| r.average_gbps / l);
        results.push(r);
    }

    let data_check = data_check(
        &mut pairs,
        &cq_a,
        &mut src,
        &mut dst,
        &src_mr,
        &dst_mr,
        &scratch_mr,
        &scratch,
        max_size,
    )?;
    drop(pairs);

    let fraction = opts
        .min_line_rate_fraction
        .unwrap_or_else(|| default_fraction(memory));
    let sw_name = if software {
        Some(side_a.port.device.as_str())
    } else {
        None
    };
    let threshold = evaluate_threshold(&results, line_rate, sw_name, fraction, opts.min_gbps);
    let passed = data_check.passed && threshold.passed != Some(false);
    Ok(LoopbackReport {
        from: side_a.port.clone(),
        to: b.port.clone(),
        memory,
        memory_note,
        gpu: ginfo,
        dmabuf_probe,
        qps: opts.qps,
        tx_depth: depth,
        line_rate_gbps: side_a.port.line_rate_gbps,
        results,
        data_check,
        threshold,
        passed,
    })
}

struct Target<'a> {
    src: &'a Arc<MemoryRegion>,
    src_addr: u64,
    dst_rkey: u32,
    dst_addr: u64,
}

const STALL: Duration = Duration::from_secs(30);

/// Bytes in flight per QP are capped at this: plenty to fill any link in loopback (1.3 ms at
/// 400 Gb/s), and it keeps a slow software device from queueing gigabytes it then has to drain.
pub const MAX_IN_FLIGHT: u64 = 32 << 20;

/// (outstanding WRITEs, WRITEs per signaled completion and per post) for a message size: tx depth
/// capped by MAX_IN_FLIGHT (at least 2). A NIC gets fewer doorbells and completions: signaling about
/// four times per window, at most every 16 WRITEs. A software device (rxe, siw) gets one WRITE per
/// post and per completion: there the CPU is the NIC, and each post is the system call in which the
/// kernel runs the protocol for the queue, so a post after every completion keeps it moving. Measured
/// on rxe in the VM testbed at 64 KiB, 6 rounds of 5 s: 0.199 Gb/s mean with 1, 0.187 with 16
/// (ahead in 4 of 6 rounds: a small gain inside the noise; ib_write_bw also posts one WRITE a call).
pub fn effective_depth(tx_depth: u32, size: u64, software: bool) -> (u32, u32) {
    let cap = u32::try_from(MAX_IN_FLIGHT / size.max(1))
        .unwrap_or(u32::MAX)
        .max(2);
    let depth = tx_depth.min(cap).max(1);
    let batch = if software {
        1
    } else {
        (depth / 4).clamp(1, 16)
    };
    (depth, batch)
}

fn completion_error(qp: usize, status: u32) -> BenchError {
    let name = format!("{:?}", WorkCompletionStatus::from(status));
    let hint = match status {
        4 => ": local protection error (lkey/memory registration; for GPU memory, PCIe ACS or IOMMU blocking peer-to-peer)",
        10 => ": remote access error (rkey or access flags)",
        12 => ": transport retry exceeded (the peer is unreachable: GID index, RoCE netdev or IB link)",
        _ => "",
    };
    BenchError::Completion {
        qp,
        status: name,
        code: status,
        hint: hint.to_string(),
    }
}

/// Post `n` WRITEs of `size` on QP `i`, the last one signaled with wr_id = (i << 32) | n.
fn post_writes(
    pair: &mut QpPair,
    i: usize,
    n: u32,
    size: u64,
    t: &Target<'_>,
) -> Result<(), BenchError> {
    let mut guard = pair.send.start_post_send();
    for k in 0..n {
        let flags = if k + 1 == n {
            WorkRequestFlags::Signaled
        } else {
            WorkRequestFlags::none()
        };
        let wr_id = ((i as u64) << 32) | u64::from(n);
        let h = guard
            .construct_wr(wr_id, flags)
            .setup_write(t.dst_rkey, t.dst_addr);
        // SAFETY: the source MR covers [src_addr, src_addr + size) and outlives the QP's use of it.
        unsafe { h.setup_sge(t.src.lkey(), t.src_addr, size as u32) };
    }
    guard
        .post()
        .map_err(|e| BenchError::verbs("ibv_post_send", "", std::io::Error::other(e.to_string())))
}

fn measure(
    pairs: &mut [QpPair],
    cq: &BasicCompletionQueue,
    t: &Target<'_>,
    size: u64,
    length: RunLength,
    (depth, batch): (u32, u32),
    progress: bool,
) -> Result<SizeResult, BenchError> {
    let n_qps = pairs.len();
    let mut outstanding = vec![0u32; n_qps];
    let mut posted = vec![0u64; n_qps];
    let mut completed_total: u64 = 0;
    let start = Instant::now();
    let (end, margin, iters) = match length {
        RunLength::Duration(d) => {
            let margin = (d / 10).min(Duration::from_secs(1));
            (Some(start + d), margin, u64::MAX)
        }
        RunLength::Iterations(n) => (None, Duration::ZERO, n.max(1)),
    };
    let sample_from = start + margin;
    let sample_to = end.map(|e| e - margin);
    let mut base: Option<(Instant, u64)> = if margin.is_zero() {
        Some((start, 0))
    } else {
        None
    };
    let mut last: (Instant, u64) = (start, 0);
    // Peak = the best window; windows span many signaled completions so that one completion
    // covering a batch of WRITEs does not read as a burst.
    let window = match length {
        RunLength::Duration(d) => {
            (d / 20).clamp(Duration::from_millis(100), Duration::from_millis(500))
        }
        RunLength::Iterations(_) => Duration::from_millis(100),
    };
    let mut win_start: (Instant, u64) = (start, 0);
    let mut peak = 0.0f64;
    let mut last_progress = Instant::now();
    let bar = progress.then(|| {
        let total = match length {
            RunLength::Duration(d) => d.as_millis() as u64,
            RunLength::Iterations(n) => n.saturating_mul(n_qps as u64),
        };
        let pb =
            indicatif::ProgressBar::with_draw_target(Some(total), crate::output::progress_target());
        pb.set_message(format!("{} B", size));
        pb
    });
    let mut stopping = false;
    let mut last_activity = start;
    loop {
        let now = Instant::now();
        if let Some(e) = end {
            if now >= e {
                stopping = true;
            }
        } else if posted.iter().all(|&p| p >= iters) {
            stopping = true;
        }
        if !stopping {
            for (i, pair) in pairs.iter_mut().enumerate() {
                while outstanding[i] + batch <= depth || (outstanding[i] == 0) {
                    let remaining = iters.saturating_sub(posted[i]);
                    if remaining == 0 {
                        break;
                    }
                    let n = u64::from(batch).min(remaining) as u32;
                    post_writes(pair, i, n, size, t)?;
                    outstanding[i] += n;
                    posted[i] += u64::from(n);
                }
            }
        }
        let mut got = false;
        if let Ok(poller) = cq.start_poll() {
            for wc in poller {
                let status = wc.status();
                let qp = (wc.wr_id() >> 32) as usize;
                if status != WorkCompletionStatus::Success as u32 {
                    return Err(completion_error(qp, status));
                }
                let n = (wc.wr_id() & 0xffff_ffff) as u32;
                if let Some(o) = outstanding.get_mut(qp) {
                    *o = o.saturating_sub(n);
                }
                completed_total += u64::from(n);
                got = true;
            }
        }
        let now = Instant::now();
        if got {
            if base.is_none() && now >= sample_from {
                base = Some((now, completed_total));
                win_start = (now, completed_total);
            }
            if base.is_some() && sample_to.is_none_or(|s| now <= s) {
                last = (now, completed_total);
                let dt = now.duration_since(win_start.0);
                if dt >= window {
                    peak = peak.max(gbps(
                        (completed_total - win_start.1) * size,
                        dt.as_secs_f64(),
                    ));
                    win_start = (now, completed_total);
                }
            }
            last_activity = now;
        } else if now.duration_since(last_activity) > STALL && outstanding.iter().any(|&o| o > 0) {
            return Err(BenchError::Stalled {
                secs: STALL.as_secs(),
            });
        }
        if let Some(pb) = &bar {
            if now.duration_since(last_progress) > Duration::from_millis(100) {
                last_progress = now;
                match length {
                    RunLength::Duration(_) => {
                        pb.set_position(now.duration_since(start).as_millis() as u64)
                    }
                    RunLength::Iterations(_) => pb.set_position(completed_total),
                }
            }
        }
        if stopping && outstanding.iter().all(|&o| o == 0) {
            break;
        }
    }
    if let Some(pb) = bar {
        pb.finish_and_clear();
    }
    let (t0, c0) = base.unwrap_or((start, 0));
    let secs = last.0.duration_since(t0).as_secs_f64();
    let count = last.1.saturating_sub(c0);
    let (secs, count) = if secs > 0.0 && count > 0 {
        (secs, count)
    } else {
        (
            Instant::now().duration_since(start).as_secs_f64(),
            completed_total,
        )
    };
    let average = gbps(count * size, secs);
    Ok(SizeResult {
        bytes: size,
        iterations: completed_total,
        peak_gbps: if peak > 0.0 {
            peak.max(average)
        } else {
            average
        },
        average_gbps: average,
        msg_rate_mpps: if secs > 0.0 {
            count as f64 / secs / 1e6
        } else {
            0.0
        },
        line_rate_fraction: None,
        seconds: secs,
        writes_in_flight: depth,
        writes_per_completion: batch,
    })
}

fn wait_one(cq: &BasicCompletionQueue) -> Result<(), BenchError> {
    let start = Instant::now();
    loop {
        if let Ok(poller) = cq.start_poll() {
            if let Some(wc) = poller.into_iter().next() {
                if wc.status() != WorkCompletionStatus::Success as u32 {
                    return Err(completion_error((wc.wr_id() >> 32) as usize, wc.status()));
                }
                return Ok(());
            }
        }
        if start.elapsed() > STALL {
            return Err(BenchError::Stalled {
                secs: STALL.as_secs(),
            });
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn data_check(
    pairs: &mut [QpPair],
    cq: &BasicCompletionQueue,
    src: &mut Buffer<'_>,
    dst: &mut Buffer<'_>,
    src_mr: &Arc<MemoryRegion>,
    dst_mr: &Arc<MemoryRegion>,
    scratch_mr: &Arc<MemoryRegion>,
    scratch: &HostBuf,
    size: u64,
) -> Result<DataCheck, BenchError> {
    let n = usize_of(size)?;
    let mut expected = vec![0u8; n];
    let mut actual = vec![0u8; n];
    let mut mismatched = 0u64;
    let mut first = None;
    for (i, pair) in pairs.iter_mut().enumerate() {
        fill_pattern(&mut expected, 0x6764_7270_0000 + i as u64);
        src.write(&expected)?;
        dst.fill(0, n)?;
        let t = Target {
            src: src_mr,
            src_addr: src.addr(),
            dst_rkey: dst_mr.rkey(),
            dst_addr: dst.addr(),
        };
        post_writes(pair, i, 1, size, &t)?;
        wait_one(cq)?;
        // Flush: an RDMA READ on the same QP completes only after the WRITE has landed (NCCL's method).
        {
            let mut guard = pair.send.start_post_send();
            let h = guard
                .construct_wr(((i as u64) << 32) | 1, WorkRequestFlags::Signaled)
                .setup_read(dst_mr.rkey(), dst.addr());
            // SAFETY: scratch MR covers 4096 bytes; we read 8.
            unsafe { h.setup_sge(scratch_mr.lkey(), scratch.addr(), 8) };
            guard.post().map_err(|e| {
                BenchError::verbs(
                    "ibv_post_send(READ)",
                    "",
                    std::io::Error::other(e.to_string()),
                )
            })?;
        }
        wait_one(cq)?;
        dst.read(&mut actual)?;
        let (m, f) = compare(&expected, &actual);
        if m > 0 && first.is_none() {
            first = f;
        }
        mismatched += m;
    }
    Ok(DataCheck {
        passed: mismatched == 0,
        bytes: size,
        qps: pairs.len() as u32,
        mismatched_bytes: mismatched,
        first_mismatch: first,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(bytes: u64, avg: f64) -> SizeResult {
        SizeResult {
            bytes,
            iterations: 10,
            peak_gbps: avg,
            average_gbps: avg,
            msg_rate_mpps: 0.0,
            line_rate_fraction: None,
            seconds: 1.0,
            writes_in_flight: 1,
            writes_per_completion: 1,
        }
    }

    #[test]
    fn pattern_detects_corruption() {
        let mut a = vec![0u8; 8191];
        fill_pattern(&mut a, 1);
        let mut b = a.clone();
        assert_eq!(compare(&a, &b), (0, None));
        b[4000] ^= 1;
        b[5000] = b[5000].wrapping_add(3);
        assert_eq!(compare(&a, &b), (2, Some(4000)));
        // A different seed (another QP's data, or stale data) never passes.
        let mut c = vec![0u8; 8191];
        fill_pattern(&mut c, 2);
        assert!(compare(&a, &c).0 > 8000);
        // An all-zero destination (nothing written) fails.
        assert_eq!(compare(&a, &vec![0u8; 8191]).1, Some(0));
        assert_eq!(compare(&a, &a[..100]), (8091, Some(100)));
    }

    #[test]
    fn thresholds() {
        let res = [r(65536, 50.0), r(8 << 20, 92.0)];
        let t = evaluate_threshold(&res, Some(100.0), None, 0.90, None);
        assert!(t.applicable && t.passed == Some(true) && t.at_bytes == Some(8 << 20));
        let t = evaluate_threshold(&res, Some(100.0), None, 0.95, None);
        assert_eq!(t.passed, Some(false));
        let t = evaluate_threshold(&res, Some(100.0), Some("rxe0"), 0.95, None);
        assert!(!t.applicable && t.passed.is_none());
        assert!(t.reason.unwrap().contains("software RDMA device rxe0"));
        let t = evaluate_threshold(&res, None, Some("rxe0"), 0.95, Some(0.3));
        assert!(t.applicable && t.passed == Some(true));
        let t = evaluate_threshold(&res, None, None, 0.95, None);
        assert!(!t.applicable);
        assert_eq!(default_fraction(MemoryKind::CudaDmabuf), 0.90);
        assert_eq!(default_fraction(MemoryKind::Host), 0.95);
    }

    #[test]
    fn in_flight_is_bounded() {
        assert_eq!(effective_depth(128, 65536, false), (128, 16));
        assert_eq!(effective_depth(128, 1 << 20, false), (32, 8));
        assert_eq!(effective_depth(128, 8 << 20, false), (4, 1));
        assert_eq!(effective_depth(128, 1 << 30, false), (2, 1));
        assert_eq!(effective_depth(1, 4096, false), (1, 1));
        assert_eq!(effective_depth(8, 4096, false), (8, 2));
        // Software devices: same depth, one WRITE per post and completion.
        assert_eq!(effective_depth(128, 65536, true), (128, 1));
        assert_eq!(effective_depth(128, 1 << 20, true), (32, 1));
    }

    #[test]
    fn gbps_units() {
        assert_eq!(gbps(125_000_000, 1.0), 1.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }
}
