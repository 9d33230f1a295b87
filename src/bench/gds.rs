//! `bench gds`: GPUDirect Storage measured through cuFile. A test file of each size is made in
//! the directory the user names (a pattern stamped with every 4 KiB block's offset), read into
//! GPU memory through cuFile (split over threads, as KvikIO does), cold (its pages dropped) and
//! warm, every byte checked, then written back through cuFile to a second file that is read and
//! checked. Both files are removed after. The mode cuFile ran in comes from its driver's
//! properties and the facts, and when it is compat, the causes say why. When cuFile refuses the
//! file (5027), the error names the cause (no udev record, not a block device) instead of the code.

use super::gds_log::{CufileP2pdma, LogDir};
use crate::error::{Error, Result};
use crate::facts::gds::{GdsFacts, GdsMode};
use crate::facts::gds_causes::Cause;
use crate::facts::gpu::Gpu as FactGpu;
use crate::facts::iommu::IommuState;
use crate::facts::nvidia_params::NvidiaParams;
use crate::facts::Facts;
use crate::host::{Existing, Scratch};
use gdrprov_rdma::cuda::cufile::{self, DriverProps, Split};
use gdrprov_rdma::cuda::Gpu;
use serde::Serialize;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;

/// The default test sizes: 1 GiB.
pub const DEFAULT_SIZE: u64 = 1 << 30;
/// Sizes are rounded up to this (O_DIRECT and cuFile want aligned sizes).
pub const ALIGN: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub struct GdsOptions {
    pub dir: PathBuf,
    pub sizes: Vec<u64>,
    pub gpu: u32,
    pub threads: usize,
    pub chunk: usize,
    pub rounds: u32,
    /// The user's file to read instead of test files made per size (`--file`); never
    /// written nor removed. The write-back still goes to a test file in `dir`.
    pub file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GdsSize {
    pub bytes: u64,
    /// Median GB/s (10^9 bytes/s) of the rounds.
    pub read_cold_gbs: f64,
    pub read_warm_gbs: f64,
    pub write_gbs: f64,
    /// Every round's figures, in order.
    pub rounds_cold_gbs: Vec<f64>,
    pub rounds_warm_gbs: Vec<f64>,
    /// Every byte read into GPU memory, and every byte written back, was right.
    pub data_ok: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GdsReport {
    pub dir: String,
    /// The user's file read (`--file`), when one was named.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    pub mountpoint: Option<String>,
    pub fs: Option<String>,
    pub device: Option<String>,
    pub transport: Option<String>,
    pub gpu: String,
    pub gpu_pci: String,
    pub libcufile: Option<String>,
    pub driver: DriverProps,
    /// Whether cuFile got an `O_DIRECT` descriptor.
    pub o_direct: bool,
    pub threads: usize,
    pub chunk: usize,
    /// The mode cuFile ran in.
    pub mode: GdsMode,
    /// Why not a direct mode (empty when one ran).
    pub compat_causes: Vec<Cause>,
    /// P2PDMA per GPU as cuFile asked the CUDA driver, from cuFile's own log.
    pub cufile_p2pdma: CufileP2pdma,
    pub results: Vec<GdsSize>,
    pub passed: bool,
}

/// The mode cuFile ran in: a direct one when its driver reports it and nothing of the host
/// closes it, else compat, with the causes of both direct modes.
pub fn mode_used(
    gds: &GdsFacts,
    gpus: &[FactGpu],
    params: &NvidiaParams,
    props: &DriverProps,
    dir: &str,
    iommu_translating: bool,
) -> (GdsMode, Vec<Cause>) {
    let mount = gds.mount_of(dir);
    let p2p = props.supported.iter().any(|s| s == "nvme-p2pdma");
    let p2p_causes = gds.direct_causes(
        GdsMode::P2pdma,
        mount,
        iommu_translating,
        Some(p2p),
        params,
        gpus,
    );
    if p2p_causes.is_empty() {
        return (GdsMode::P2pdma, Vec::new());
    }
    let mut nvfs_causes =
        gds.direct_causes(GdsMode::Nvfs, mount, iommu_translating, None, params, gpus);
    if props.nvfs_version.is_none() && gds.nvidia_fs.loaded {
        nvfs_causes.push(Cause {
            id: "gds-nvfs-missing",
            what: "cuFile's driver sees no nvidia-fs".into(),
            fix: "reload nvidia-fs (`modprobe -r nvidia-fs && modprobe nvidia-fs`)".into(),
        });
    }
    if nvfs_causes.is_empty() {
        return (GdsMode::Nvfs, Vec::new());
    }
    let mut all = p2p_causes;
    for c in nvfs_causes {
        if !all.contains(&c) {
            all.push(c);
        }
    }
    (GdsMode::Compat, all)
}

/// The test pattern at `offset`: a fixed pseudo-random 1 MiB block, each 4 KiB stamped with its
/// offset, so a block read from the wrong place is caught.
pub fn fill(base: &[u8], offset: u64, out: &mut [u8]) {
    let mut i = 0;
    while i < out.len() {
        let at = ((offset + i as u64) % base.len() as u64) as usize;
        let n = (base.len() - at).min(out.len() - i);
        out[i..i + n].copy_from_slice(&base[at..at + n]);
        i += n;
    }
    let first = offset.div_ceil(4096) * 4096;
    let mut p = first;
    while p + 8 <= offset + out.len() as u64 {
        let k = (p - offset) as usize;
        out[k..k + 8].copy_from_slice(&(p ^ 0x6764_7270_726f_7600).to_le_bytes());
        p += 4096;
    }
}

pub fn base_block() -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..(1usize << 20))
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The error for a file cuFile would not register, naming the cause the facts show
/// (`code`/`name`: cuFile's error).
pub fn refused(gds: &GdsFacts, dir: &str, code: u32, name: &str) -> Error {
    let causes = gds.open_causes(gds.mount_of(dir));
    let body = if causes.is_empty() || code != cufile::HANDLE_NOT_REGISTERED {
        let mut b = format!(
            "cuFile refused the test file in {dir} (cuFileHandleRegister: {name}, {code}); fix: set \
             logging.level to DEBUG in a copy of cufile.json (CUFILE_ENV_PATH_JSON names it) and read cufile.log for its reason"
        );
        for c in &causes {
            b.push_str(&format!(". Also: {}; fix: {}", c.what, c.fix));
        }
        b
    } else {
        causes
            .iter()
            .map(|c| format!("{}; fix: {}", c.what, c.fix))
            .collect::<Vec<_>>()
            .join(". ")
    };
    Error::Refused(format!("bench gds: {body} (cuFile error {code})"))
}

fn registration<'a>(
    gds: &'a GdsFacts,
    dir: &'a str,
) -> impl Fn(gdrprov_rdma::error::Error) -> Error + 'a {
    move |e| match e {
        gdrprov_rdma::error::Error::Cufile { code, name, .. } => refused(gds, dir, code, &name),
        other => Error::Bench(other),
    }
}

/// What the reads come from: the test file made here, or the user's own (`--file`).
enum Source {
    Made(Scratch),
    Theirs(Existing),
}

impl Source {
    /// The file opened again with `O_DIRECT`, when the file system takes it.
    fn direct(&self) -> Option<OwnedFd> {
        match self {
            Source::Made(s) => s.direct().map(OwnedFd::from),
            Source::Theirs(e) => e.direct().map(OwnedFd::from),
        }
    }

    /// The descriptor it was opened with (buffered).
    fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Source::Made(s) => s.file().as_fd(),
            Source::Theirs(e) => e.file().as_fd(),
        }
    }

    fn drop_pages(&self) -> Result<()> {
        match self {
            Source::Made(s) => s.drop_pages(),
            Source::Theirs(e) => e.drop_pages(),
        }
    }

    /// The bytes the file holds at `offset`: the pattern, or the user's file read again.
    fn want(&self, base: &[u8], offset: u64, out: &mut [u8]) -> Result<()> {
        match self {
            Source::Made(_) => {
                fill(base, offset, out);
                Ok(())
            }
            Source::Theirs(e) => e.read_at(out, offset),
        }
    }
}

/// One size: the source registered, read `rounds` times cold and warm (only the reads are
/// timed: registration, allocation and the checks are not), checked, written back.
/// Long because the steps share the file, the handle and the buffer, in this order.
fn one_size(
    o: &GdsOptions,
    gds: &GdsFacts,
    gpu: &Gpu,
    base: &[u8],
    src: &Source,
    size: u64,
    o_direct: &mut bool,
) -> Result<GdsSize> {
    let dir = o.dir.display().to_string();
    let direct = src.direct();
    *o_direct = direct.is_some();
    let fd = direct.as_ref().map(|f| f.as_fd()).unwrap_or(src.fd());
    let handle = cufile::register(fd).map_err(registration(gds, &dir))?;
    let len = size as usize;
    let buf = gpu.alloc(len)?;
    let split = Split {
        threads: o.threads,
        chunk: o.chunk,
    };
    let gbs = |secs: f64| {
        if secs > 0.0 {
            size as f64 / secs / 1e9
        } else {
            0.0
        }
    };
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let mut data_ok = true;
    for round in 0..o.rounds.max(1) {
        src.drop_pages()?;
        buf.fill(0, len)?;
        cufile::settle(gpu)?;
        cold.push(gbs(handle.read_into(gpu, &buf, len, split)?));
        if round == 0 {
            data_ok &= check_gpu(&buf, src, base, size)?;
        }
        warm.push(gbs(handle.read_into(gpu, &buf, len, split)?));
    }
    drop(handle);
    let pid = std::process::id();
    let dst = Scratch::create(
        &o.dir,
        &format!(".gdrprov-gds-{pid}-{size}.w"),
        0,
        &mut |_, _| {},
    )?;
    let wdirect = dst.direct();
    let wfd = wdirect
        .as_ref()
        .map(|f| f.as_fd())
        .unwrap_or(dst.file().as_fd());
    let wh = cufile::register(wfd).map_err(registration(gds, &dir))?;
    let write_gbs = gbs(wh.write_from(gpu, &buf, len, split)?);
    drop(wh);
    dst.drop_pages()?;
    data_ok &= check_file(&dst, src, base, size)?;
    Ok(GdsSize {
        bytes: size,
        read_cold_gbs: median(&cold),
        read_warm_gbs: median(&warm),
        write_gbs,
        rounds_cold_gbs: cold,
        rounds_warm_gbs: warm,
        data_ok,
    })
}

const CHECK_BLOCK: usize = 64 << 20;

fn check_gpu(
    buf: &gdrprov_rdma::cuda::GpuBuffer,
    src: &Source,
    base: &[u8],
    size: u64,
) -> Result<bool> {
    let (mut got, mut want) = (vec![0u8; CHECK_BLOCK], vec![0u8; CHECK_BLOCK]);
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(CHECK_BLOCK as u64) as usize;
        buf.read_range(off as usize, &mut got[..n])?;
        src.want(base, off, &mut want[..n])?;
        if got[..n] != want[..n] {
            return Ok(false);
        }
        off += n as u64;
    }
    Ok(true)
}

fn check_file(f: &Scratch, src: &Source, base: &[u8], size: u64) -> Result<bool> {
    let (mut got, mut want) = (vec![0u8; CHECK_BLOCK], vec![0u8; CHECK_BLOCK]);
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(CHECK_BLOCK as u64) as usize;
        f.read_at(&mut got[..n], off)?;
        src.want(base, off, &mut want[..n])?;
        if got[..n] != want[..n] {
            return Ok(false);
        }
        off += n as u64;
    }
    Ok(true)
}

/// The user's file (`--file`), with its length rounded down to 4 KiB, as `O_DIRECT` wants.
fn theirs(path: &std::path::Path) -> Result<(Source, u64)> {
    let e = Existing::open(path)?;
    let size = e.len() / 4096 * 4096;
    if size == 0 {
        return Err(Error::Refused(format!(
            "bench gds: {} is shorter than 4 KiB; fix: name a larger file (or leave out --file: a test file is made in --dir)",
            e.shown()
        )));
    }
    Ok((Source::Theirs(e), size))
}

/// The test file of `size` bytes (rounded up to 1 MiB), made just before it is read.
fn made(o: &GdsOptions, base: &[u8], size: u64) -> Result<(Source, u64)> {
    let size = size.div_ceil(ALIGN).max(1) * ALIGN;
    let name = format!(".gdrprov-gds-{}-{size}.r", std::process::id());
    let file = Scratch::create(&o.dir, &name, size, &mut |off, b| fill(base, off, b))?;
    Ok((Source::Made(file), size))
}

/// Runs the bench on the live host whose facts are `facts`.
/// `log`: cuFile's private log directory, pointed to before CUDA was loaded
/// ([`LogDir::point_cufile_here`]), for its P2PDMA answer per GPU.
pub fn run(o: &GdsOptions, facts: &Facts, log: Option<LogDir>) -> Result<GdsReport> {
    let gds = &facts.gds;
    let iommu_translating = facts.iommu.state == IommuState::Translated;
    let dir = o.dir.display().to_string();
    let causes = gds.open_causes(gds.mount_of(&dir));
    if let Some(c) = causes.iter().find(|c| c.id == "gds-libcufile-missing") {
        return Err(Error::Refused(format!(
            "bench gds: {}; fix: {}",
            c.what, c.fix
        )));
    }
    let gpu = Gpu::open(o.gpu)?;
    let props = cufile::open_driver()?;
    let base = base_block();
    let mut results = Vec::new();
    let mut o_direct = false;
    if let Some(path) = &o.file {
        let (src, size) = theirs(path)?;
        results.push(one_size(o, gds, &gpu, &base, &src, size, &mut o_direct)?);
    } else {
        for &s in &o.sizes {
            let (src, size) = made(o, &base, s)?;
            results.push(one_size(o, gds, &gpu, &base, &src, size, &mut o_direct)?);
        }
    }
    let (mode, compat_causes) = mode_used(
        gds,
        &facts.gpus,
        &facts.nvidia_params,
        &props,
        &dir,
        iommu_translating,
    );
    // Every handle is dropped: the driver closed, cuFile's log is whole.
    let closed = cufile::close_driver();
    let cufile_p2pdma = match (&log, closed) {
        (Some(l), Ok(())) => l.answer(),
        (Some(_), Err(e)) => CufileP2pdma::unknown(format!("cuFile's driver did not close: {e}")),
        (None, _) => CufileP2pdma::unknown(format!(
            "cuFile's log was not read: `bench gds` has it written to a private directory in --dir ({dir} here), made before CUDA loads"
        )),
    };
    drop(log);
    let mount = gds.mount_of(&dir);
    Ok(GdsReport {
        file: o.file.as_ref().map(|f| f.display().to_string()),
        dir,
        mountpoint: mount.map(|m| m.mountpoint.clone()),
        fs: mount.map(|m| m.fs.clone()),
        device: mount.map(|m| m.source.clone()),
        transport: mount.and_then(|m| m.transport.clone()),
        gpu: gpu.name.clone(),
        gpu_pci: gpu.pci_bus_id.clone(),
        libcufile: gds.libcufile.as_ref().and_then(|l| l.version.clone()),
        driver: props,
        o_direct,
        threads: o.threads,
        chunk: o.chunk,
        mode,
        compat_causes,
        cufile_p2pdma,
        passed: results.iter().all(|r| r.data_ok),
        results,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_is_the_same_whatever_the_blocks() {
        let base = base_block();
        let mut whole = vec![0u8; 3 << 20];
        fill(&base, 0, &mut whole);
        let mut part = vec![0u8; 1 << 20];
        fill(&base, 1 << 20, &mut part);
        assert_eq!(&whole[1 << 20..2 << 20], &part[..]);
        // Two blocks differ by their stamp.
        assert_ne!(&whole[..4096], &whole[1 << 20..(1 << 20) + 4096]);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn the_users_file_is_read_as_it_is_and_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let short = t.path().join("short");
        crate::host::write_local(&short, &[7u8; 1000]).unwrap();
        let e = theirs(&short).map(|_| ()).unwrap_err().to_string();
        assert!(
            e.contains("shorter than 4 KiB") && e.contains("fix:"),
            "{e}"
        );
        let dir_err = theirs(t.path()).map(|_| ()).unwrap_err().to_string();
        assert!(dir_err.contains("not a regular file"), "{dir_err}");
        let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let f = t.path().join("data");
        crate::host::write_local(&f, &data).unwrap();
        let (src, size) = theirs(&f).unwrap();
        // O_DIRECT wants whole 4 KiB blocks: the tail is left out.
        assert_eq!(size, 8192);
        let mut got = vec![0u8; 4096];
        src.want(&[], 4096, &mut got).unwrap();
        assert_eq!(&got[..], &data[4096..8192]);
        src.drop_pages().unwrap();
        drop(src);
        let after = crate::host::read_local(&f, crate::host::ReadLimit::RootFile).unwrap();
        assert_eq!(after, data);
    }
}
