//! The loopback run: two RC QPs connected to each other in-process, RDMA WRITEs from a source to a
//! destination buffer for a duration or a number of iterations per message size, then a data check
//! (write a known pattern, read the destination back, compare). The timed part is in `measure`.

use std::time::Duration;

use gdrprov_rdma::cuda::{dmabuf_exporter, dmabuf_size, gpu_count, Gpu};
use gdrprov_rdma::memory::{check_memlock, Buffer, HostBuf, MemoryKind};
use gdrprov_rdma::qp::{self, QpPair, Side};
use gdrprov_rdma::verbs;

use super::error::BenchError;
use super::measure::{self, CheckBuffers, Target};
use super::probe::{self, DmabufProbe};
use super::report::{ExportReport, GpuInfo, LoopbackReport, SizeResult, Threshold};
use super::sysfs::LiveHost;

pub use super::measure::{effective_depth, MAX_IN_FLIGHT};
pub use super::pattern::{compare, fill_pattern};
use super::units::usize_of;
pub use super::units::{gbps, RunLength};

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
    /// A bar per message size (callers pass one only on a terminal, with
    /// text output).
    pub progress: crate::bench::progress::Bars,
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
            progress: None,
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
        info.dmabuf_bytes = dmabuf_size(&LiveHost, &fd).or(Some(mem.size as u64));
        info.dmabuf_exporter = dmabuf_exporter(&LiveHost, &fd);
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

/// Check the options before anything is opened; the largest message size.
fn validate(opts: &LoopbackOptions) -> Result<u64, BenchError> {
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
    Ok(max_size)
}

/// The source and destination buffers: on the GPU (with its info) or in host memory.
fn buffers<'g>(
    gpu: Option<&'g Gpu>,
    memory: MemoryKind,
    size: usize,
    notes: &mut dyn FnMut(&str),
) -> Result<(Buffer<'g>, Buffer<'g>, Option<GpuInfo>), BenchError> {
    let Some(g) = gpu else {
        return Ok((
            Buffer::Host(HostBuf::new(size)?),
            Buffer::Host(HostBuf::new(size)?),
            None,
        ));
    };
    let mut info = gpu_info(g);
    let s = gpu_buffer(g, size, memory, &mut info)?;
    let d = gpu_buffer(g, size, memory, &mut info)?;
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
    Ok((s, d, Some(info)))
}

/// The sending side, and the receiving one when it is another device or port.
fn open_sides(opts: &LoopbackOptions) -> Result<(Side, Option<Side>), BenchError> {
    let (ctx_a, port_a) =
        verbs::select_port(&LiveHost, opts.device.as_deref(), opts.port, opts.gid_index)?;
    let side_a = Side::new(ctx_a, port_a)?;
    let same = opts.to_device.is_none()
        || (opts.to_device == Some(side_a.port.device.clone())
            && opts.to_port.unwrap_or(side_a.port.port) == side_a.port.port);
    if same {
        return Ok((side_a, None));
    }
    let dev = opts
        .to_device
        .clone()
        .unwrap_or_else(|| side_a.port.device.clone());
    let (ctx_b, port_b) = verbs::select_port(&LiveHost, Some(&dev), opts.to_port, opts.gid_index)?;
    Ok((side_a, Some(Side::new(ctx_b, port_b)?)))
}

/// The locked memory the run pins: the host buffers (twice the size) and the scratch page; dma-buf
/// memory is not pinned through the memlock limit at all.
fn check_memlock_for(memory: MemoryKind, buf_size: usize) -> Result<(), BenchError> {
    if memory == MemoryKind::CudaDmabuf {
        return Ok(());
    }
    let pinned = if memory == MemoryKind::Host {
        2 * buf_size as u64
    } else {
        0
    };
    check_memlock(pinned + 4096)
}

/// Run the loopback benchmark. `notes` receives progress lines for people (GPU steps done).
pub fn run_loopback(
    opts: &LoopbackOptions,
    notes: &mut dyn FnMut(&str),
) -> Result<LoopbackReport, BenchError> {
    let max_size = validate(opts)?;
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
    let (mut src, mut dst, ginfo) = buffers(gpu.as_ref(), memory, buf_size, notes)?;

    let (side_a, side_b) = open_sides(opts)?;
    let b = side_b.as_ref().unwrap_or(&side_a);

    let dmabuf_probe: Option<DmabufProbe> =
        probe::probe_dmabuf_support(Some(&side_a.port.device)).ok();

    check_memlock_for(memory, buf_size)?;
    let src_mr = src.register(&side_a, memory, &LiveHost)?;
    let dst_mr = dst.register(b, memory, &LiveHost)?;
    let scratch = HostBuf::new(4096)?;
    let scratch_mr = side_a.register_local(&scratch, "ibv_reg_mr(scratch)")?;

    let depth = opts.tx_depth;
    let cq_a = side_a.create_cq(opts.qps * depth + 1)?;
    let cq_b = b.create_cq(opts.qps + 1)?;
    let mut pairs = qp::connect_pairs(&side_a, b, &cq_a, &cq_b, opts.qps, depth)?;

    let software = side_a.port.software || b.port.software;
    let line_rate = if software {
        None
    } else {
        side_a.port.line_rate_gbps
    };
    let target = Target {
        src: &src_mr,
        dst: &dst_mr,
    };
    let results = measure_sizes(&mut pairs, &cq_a, &target, opts, software, line_rate)?;
    let check = CheckBuffers {
        src: &mut src,
        dst: &mut dst,
        target,
        scratch: &scratch_mr,
    };
    let data_check = measure::data_check(&mut pairs, &cq_a, check, max_size)?;
    // The QPs go before the memory they use.
    drop(pairs);

    let fraction = opts
        .min_line_rate_fraction
        .unwrap_or_else(|| default_fraction(memory));
    let sw_name = software.then_some(side_a.port.device.as_str());
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

/// Every message size in turn, each judged against the line rate when there is one.
fn measure_sizes(
    pairs: &mut [QpPair],
    cq: &qp::Cq,
    target: &Target<'_>,
    opts: &LoopbackOptions,
    software: bool,
    line_rate: Option<f64>,
) -> Result<Vec<SizeResult>, BenchError> {
    let mut results = Vec::new();
    for &size in &opts.sizes {
        let mut r = measure::measure(
            pairs,
            cq,
            target,
            size,
            opts.length,
            effective_depth(opts.tx_depth, size, software),
            opts.progress,
        )?;
        r.line_rate_fraction = line_rate.map(|l| r.average_gbps / l);
        results.push(r);
    }
    Ok(results)
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
    fn gbps_units() {
        assert_eq!(gbps(125_000_000, 1.0), 1.0);
        assert_eq!(gbps(1, 0.0), 0.0);
    }
}
