//! cuFile's own answer on PCI P2PDMA, per GPU, from its log. cuFile asks the CUDA driver through
//! the driver's private export tables (no public `CUdevice_attribute` exists for it:
//! bench/results/h200-gds/README.md), so gdrprov cannot ask the same question itself; it reads
//! the answer where cuFile writes it. `bench gds` has cuFile log at DEBUG into a private
//! directory ([`LogDir::point_cufile_here`]), then reads two lines of that log:
//!
//! - `cuda GPU device attributes:  gpu :0 model :NVIDIA H200 ... PCIP2PDMACapable:0 bdf :0 : 0 : 6 : 0`
//!   (DEBUG, one per GPU);
//! - `Is PCIP2PDMA Supported: 0 kernel Support: 0 pci_p2pdma_supported_cuda: 0 ...` (INFO).

use crate::host::Host;
use serde::Serialize;
use std::path::Path;

/// What cuFile's log says of P2PDMA.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CufileP2pdma {
    /// Per GPU, as the CUDA driver answered cuFile (`PCIP2PDMACapable`).
    pub gpus: Vec<GpuP2pdma>,
    /// `pci_p2pdma_supported_cuda`: every GPU answered yes.
    pub supported_cuda: Option<bool>,
    /// `kernel Support`: the kernel side as cuFile sees it.
    pub kernel_support: Option<bool>,
    /// Why nothing could be read (no log, no such lines); `None` when read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GpuP2pdma {
    /// cuFile's index of the GPU (CUDA's ordinal).
    pub index: u32,
    pub model: Option<String>,
    /// `dddd:bb:dd.f`, from cuFile's `bdf`.
    pub pci: Option<String>,
    pub capable: bool,
}

impl CufileP2pdma {
    pub fn unknown(why: impl Into<String>) -> CufileP2pdma {
        CufileP2pdma {
            unknown: Some(why.into()),
            ..CufileP2pdma::default()
        }
    }
}

/// cuFile's private log directory under the bench's directory (`.gdrprov-gds-PID-log`, mode
/// 0700), removed with everything cuFile wrote in it when dropped.
pub struct LogDir {
    host: Host,
    pub path: String,
}

/// At most this much of each log file is read: the answer comes at `cuFileDriverOpen`, first.
const LOG_HEAD: usize = 16 << 20;

impl LogDir {
    /// `None` when it cannot be made (then cuFile logs where cufile.json says, and the
    /// answer is not known); the directory it goes in is never made here.
    pub fn make(dir: &Path) -> Option<LogDir> {
        // The bench's directory must exist and be no link: never made here.
        crate::host::door::check_scratch_dir(dir).ok()?;
        let abs = std::path::absolute(dir).ok()?;
        let path = format!(
            "{}/.gdrprov-gds-{}-log",
            abs.display().to_string().trim_end_matches('/'),
            std::process::id()
        );
        let host = Host::open(Path::new("/"), true).ok()?;
        host.create_dir_all(&path, 0o700).ok()?;
        Some(LogDir { host, path })
    }

    /// Has cuFile log at DEBUG into `cufile.log` here. The process's environment: called while
    /// it has one thread, before CUDA is loaded (`ops::gds`, first).
    pub fn point_cufile_here(&self) {
        gdrprov_rdma::cuda::cufile::log_through_env(
            Path::new(&format!("{}/cufile.log", self.path)),
            "DEBUG",
        );
    }

    /// cuFile's answer from what it logged here.
    pub fn answer(&self) -> CufileP2pdma {
        let files = self.host.list_dir(&self.path);
        if files.is_empty() {
            return CufileP2pdma::unknown(format!("cuFile wrote no log in {}", self.path));
        }
        let mut text = String::new();
        for f in files {
            if let Some(b) = self
                .host
                .read_fact_bytes(&format!("{}/{f}", self.path), LOG_HEAD)
            {
                text.push_str(&String::from_utf8_lossy(&b));
            }
        }
        parse(&text)
    }
}

impl Drop for LogDir {
    fn drop(&mut self) {
        let _ = self.host.remove_dir_all(&self.path);
    }
}

/// The text after `key` up to the next space (or the end).
fn word_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    rest.split_whitespace().next()
}

fn flag(line: &str, key: &str) -> Option<bool> {
    word_after(line, key).and_then(|w| match w {
        "0" => Some(false),
        "1" => Some(true),
        _ => None,
    })
}

/// `bdf :0 : 0 : 6 : 0` (decimal domain, bus, device, function) as `0000:00:06.0`.
fn bdf(line: &str) -> Option<String> {
    let rest = &line[line.find("bdf :")? + 5..];
    let n: Vec<u32> = rest
        .split(':')
        .take(4)
        .map(|p| p.trim().parse().ok())
        .collect::<Option<Vec<u32>>>()?;
    match n[..] {
        [d, b, dev, f] => Some(format!("{d:04x}:{b:02x}:{dev:02x}.{f:x}")),
        _ => None,
    }
}

fn gpu_line(line: &str) -> Option<GpuP2pdma> {
    let at = line.find("cuda GPU device attributes:")?;
    let line = &line[at..];
    let index = word_after(line, "gpu :")?.parse().ok()?;
    let model = line
        .find("model :")
        .map(|i| &line[i + 7..])
        .map(|m| m.split(" nvdirect").next().unwrap_or(m).trim().to_string());
    Some(GpuP2pdma {
        index,
        model,
        pci: bdf(line),
        capable: flag(line, "PCIP2PDMACapable:")?,
    })
}

/// Reads cuFile's log text; `unknown` says why when it holds neither line.
pub fn parse(log: &str) -> CufileP2pdma {
    let mut out = CufileP2pdma::default();
    for line in log.lines() {
        if let Some(g) = gpu_line(line) {
            if !out.gpus.iter().any(|x| x.index == g.index) {
                out.gpus.push(g);
            }
        } else if line.contains("Is PCIP2PDMA Supported:") {
            out.supported_cuda = flag(line, "pci_p2pdma_supported_cuda:");
            out.kernel_support = flag(line, "kernel Support:");
        }
    }
    if out.gpus.is_empty() && out.supported_cuda.is_none() {
        out.unknown = Some("cuFile's log holds no P2PDMA answer".into());
    }
    out
}

/// `GPU 0 no, GPU 1 yes` (the CUDA driver's all-GPU flag when there are no GPU lines).
pub fn words(p: &CufileP2pdma) -> String {
    if let Some(why) = &p.unknown {
        return format!("not known ({why})");
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    if p.gpus.is_empty() {
        return format!("all GPUs {}", yes(p.supported_cuda.unwrap_or(false)));
    }
    p.gpus
        .iter()
        .map(|g| format!("GPU {} {}", g.index, yes(g.capable)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of cuFile's DEBUG log on the lent H200 (bench/results/h200-gds/cufile-asis-excerpt.log).
    const H200: &str = " 29-11-2026 19:59:45:955 [pid=505 tid=505] INFO   cufio-drv:838 Is PCIP2PDMA Supported: 0 kernel Support: 0 pci_p2pdma_supported_cuda: 0 checkIfAllGPUsSupportP2PDMA(): 0
 29-11-2026 19:59:45:955 [pid=505 tid=505] NOTICE  cufio-drv:851 running in compatible mode
 29-11-2026 19:59:45:956 [pid=505 tid=505] DEBUG  cufio-plat:412 cuda GPU device attributes:  gpu :0 model :NVIDIA H200 nvdirect :0 numa:-1 pcibridge: bar :1 barBase :17592186044428 barSize :274877906944 streamMemOps :0 dmaBufCapable:1 GDRBufCapable:1 PCIP2PDMACapable:0 bdf :0 : 0 : 6 : 0
 29-11-2026 19:59:45:956 [pid=505 tid=505] DEBUG  cufio-plat:412 cuda GPU device attributes:  gpu :0 model :NVIDIA H200 nvdirect :0 numa:-1 pcibridge: bar :1 barBase :17592186044428 barSize :274877906944 streamMemOps :0 dmaBufCapable:1 GDRBufCapable:1 PCIP2PDMACapable:0 bdf :0 : 0 : 6 : 0
";

    #[test]
    fn the_h200s_answer_is_no_per_gpu() {
        let p = parse(H200);
        assert_eq!(
            p.gpus,
            [GpuP2pdma {
                index: 0,
                model: Some("NVIDIA H200".into()),
                pci: Some("0000:00:06.0".into()),
                capable: false
            }]
        );
        assert_eq!(
            (p.supported_cuda, p.kernel_support),
            (Some(false), Some(false))
        );
        assert_eq!(words(&p), "GPU 0 no");
        let yes = H200.replace("PCIP2PDMACapable:0", "PCIP2PDMACapable:1");
        assert_eq!(words(&parse(&yes)), "GPU 0 yes");
    }

    #[test]
    fn a_log_without_the_lines_says_so() {
        let p = parse("INFO cufio_core:597 Loaded successfully  libudev.so\n");
        assert_eq!(words(&p), "not known (cuFile's log holds no P2PDMA answer)");
        assert!(
            parse("cuda GPU device attributes: gpu :x PCIP2PDMACapable:0")
                .unknown
                .is_some()
        );
    }
}
