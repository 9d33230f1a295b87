//! GPUDirect Storage: what cuFile needs of the host, each read as it is. libcufile and its
//! version, `/etc/cufile.json` (parsed by [`super::cufile_json`], and where its link leads), the
//! nvidia-fs module, what PCI P2PDMA needs beside the driver (the kernel built with it, NVMe
//! multipath off), the NVMe controllers with their PCI distance to each GPU, and every mounted
//! block device with its udev record (cuFile reads `ID_FS_USAGE`/`ID_FS_TYPE` from
//! `/run/udev/data/bMAJ:MIN` and refuses a file whose device has none).

use super::cufile_json::{self, CufileConfig};
use super::gpu::Gpu;
use super::pcie::{distance, Distance};
use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

/// Where cuFile reads its configuration (unless `CUFILE_ENV_PATH_JSON` names another file).
pub const CUFILE_JSON: &str = "/etc/cufile.json";

/// At most this many mounts are looked at (a container can show thousands).
const MAX_MOUNTS: usize = 256;

#[derive(Debug, Clone, Default, Serialize)]
pub struct GdsFacts {
    /// libcufile's path and version (from its file name, `libcufile.so.1.15.1`).
    pub libcufile: Option<Library>,
    pub cufile_json: CufileJson,
    pub nvidia_fs: NvidiaFs,
    pub p2pdma: P2pdmaHost,
    pub nvme: Vec<NvmeController>,
    pub mounts: Vec<Mount>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Library {
    pub path: String,
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CufileJson {
    pub present: bool,
    /// Where `/etc/cufile.json` leads when it is a link (through `/etc/alternatives`, into a
    /// package's copy), the final path.
    pub link_target: Option<String>,
    /// Whether the link goes through the alternatives system.
    pub alternatives: bool,
    /// The keys gdrprov reads; `None` when absent or unreadable (then `error` says why).
    pub config: Option<CufileConfig>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NvidiaFs {
    /// A module file `nvidia-fs.ko*` for the kernel in effect.
    pub present: bool,
    pub loaded: bool,
    /// `/proc/driver/nvidia-fs/version`.
    pub version: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct P2pdmaHost {
    /// `CONFIG_PCI_P2PDMA` in the kernel's config (`/boot/config-VERSION`); `None`: no config.
    pub kernel_config: Option<bool>,
    /// `/sys/module/nvme_core/parameters/multipath` (`Y`/`N`); `None`: nvme_core not loaded.
    pub nvme_multipath: Option<bool>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NvmeController {
    /// `nvme0`.
    pub name: String,
    pub pci: Option<String>,
    pub numa_node: Option<i64>,
    /// The PCI distance to each GPU (nvidia-smi topo's words: PIX, PXB, PHB, NODE, SYS).
    pub to_gpus: Vec<(String, Distance)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Mount {
    pub mountpoint: String,
    pub fs: String,
    pub source: String,
    /// `MAJ:MIN` as mountinfo gives it.
    pub dev: String,
    /// The mount's options and the file system's own (`rw,relatime` + `data=ordered`).
    pub options: Vec<String>,
    /// `nvme`, `virtio`, `scsi`, ... from the block device's sysfs path; `None`: not a block device.
    pub transport: Option<String>,
    /// The NVMe controller (`nvme0`) the device is on.
    pub nvme_controller: Option<String>,
    /// The udev record `/run/udev/data/bMAJ:MIN`: `None` when absent.
    pub udev: Option<UdevRecord>,
}

#[derive(Debug, Clone, Serialize)]
pub struct UdevRecord {
    pub fs_usage: Option<String>,
    pub fs_type: Option<String>,
}

impl GdsFacts {
    /// The mount `path` lies on: the longest mount point that is a prefix of it.
    pub fn mount_of(&self, path: &str) -> Option<&Mount> {
        self.mounts
            .iter()
            .filter(|m| {
                path == m.mountpoint
                    || m.mountpoint == "/"
                    || path.starts_with(&format!("{}/", m.mountpoint))
            })
            .max_by_key(|m| m.mountpoint.len())
    }
}

impl Mount {
    pub fn block(&self) -> bool {
        self.transport.is_some()
    }
}

/// The driver registry keys P2PDMA needs, each `=1`.
pub const P2PDMA_REGISTRY: &[&str] = &["RMForceStaticBar1", "RmForceDisableIomapWC"];

/// A GDS mode: the direct ones and the fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GdsMode {
    P2pdma,
    Nvfs,
    Compat,
}

impl GdsMode {
    pub fn name(self) -> &'static str {
        match self {
            GdsMode::P2pdma => "p2pdma",
            GdsMode::Nvfs => "nvfs",
            GdsMode::Compat => "compat",
        }
    }
}

const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/sbsa-linux/lib",
];

pub fn probe(host: &Host, kernel: Option<&str>, loaded: &[String], gpus: &[Gpu]) -> GdsFacts {
    GdsFacts {
        libcufile: libcufile(host),
        cufile_json: cufile_json(host),
        nvidia_fs: NvidiaFs {
            present: kernel.is_some_and(|k| nvidia_fs_present(host, k)),
            loaded: loaded.iter().any(|m| m == "nvidia_fs"),
            version: read_trim(host, "/proc/driver/nvidia-fs/version")
                .and_then(|v| super::util::version_in(&v)),
        },
        p2pdma: P2pdmaHost {
            kernel_config: kernel.and_then(|k| {
                let cfg = host.read_fact(&format!("/boot/config-{k}"))?;
                Some(cfg.lines().any(|l| l.trim() == "CONFIG_PCI_P2PDMA=y"))
            }),
            nvme_multipath: read_trim(host, "/sys/module/nvme_core/parameters/multipath")
                .map(|v| v == "Y" || v == "1"),
        },
        nvme: nvme(host, gpus),
        mounts: mounts(host),
    }
}

fn libcufile(host: &Host) -> Option<Library> {
    let mut cuda_dirs: Vec<String> = host
        .list_dir_prefix("/usr/local", "cuda-")
        .into_iter()
        .map(|d| format!("/usr/local/{d}/targets/x86_64-linux/lib"))
        .collect();
    cuda_dirs.extend(LIB_DIRS.iter().map(|d| d.to_string()));
    let mut best: Option<Library> = None;
    for dir in cuda_dirs {
        for f in host.list_dir_prefix(&dir, "libcufile.so") {
            let version = f.strip_prefix("libcufile.so.").map(str::to_string);
            let better = match (&best, &version) {
                (None, _) => true,
                (Some(b), Some(v)) => b.version.as_ref().is_none_or(|bv| v.len() > bv.len()),
                _ => false,
            };
            if better {
                best = Some(Library {
                    path: format!("{dir}/{f}"),
                    version,
                });
            }
        }
        if best.as_ref().is_some_and(|b| b.version.is_some()) {
            break;
        }
    }
    best
}

fn cufile_json(host: &Host) -> CufileJson {
    let present = host.exists(CUFILE_JSON);
    if !present {
        return CufileJson::default();
    }
    let canon = host.canonical(CUFILE_JSON);
    let link_target = canon.filter(|c| c != CUFILE_JSON);
    let alternatives = host
        .canonical("/etc/alternatives/cufile.json")
        .is_some_and(|a| link_target.as_deref() == Some(a.as_str()));
    let (config, error) = match host.read_fact(CUFILE_JSON) {
        None => (None, Some("it cannot be read".to_string())),
        Some(text) => match cufile_json::read(&text) {
            Ok(c) => (Some(c), None),
            Err(e) => (None, Some(e)),
        },
    };
    CufileJson {
        present,
        link_target,
        alternatives,
        config,
        error,
    }
}

fn nvidia_fs_present(host: &Host, kernel: &str) -> bool {
    let base = format!("/lib/modules/{kernel}");
    [
        "updates/dkms",
        "extra",
        "kernel/drivers/nvidia-fs",
        "updates",
    ]
    .iter()
    .any(|d| {
        !host
            .list_dir_prefix(&format!("{base}/{d}"), "nvidia-fs.ko")
            .is_empty()
    })
}

fn nvme(host: &Host, gpus: &[Gpu]) -> Vec<NvmeController> {
    let mut out = Vec::new();
    for name in host.list_dir_prefix("/sys/class/nvme", "nvme") {
        let path = host.canonical(&format!("/sys/class/nvme/{name}/device"));
        let pci = path
            .as_deref()
            .and_then(|p| super::pci::chain(p).last().cloned());
        let numa_node = pci
            .as_ref()
            .and_then(|a| super::pci::attr(host, a, "numa_node").and_then(|v| v.parse().ok()));
        let to_gpus = match &path {
            Some(p) => gpus
                .iter()
                .map(|g| {
                    (
                        g.pci.clone(),
                        distance(&g.sysfs_path, p, g.numa_node, numa_node).0,
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        out.push(NvmeController {
            name,
            pci,
            numa_node,
            to_gpus,
        });
    }
    out
}

fn mounts(host: &Host) -> Vec<Mount> {
    let Some(info) = host.read_fact("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(parse_mountinfo)
        .take(MAX_MOUNTS)
        .map(|mut m| {
            if !m.dev.starts_with("0:") {
                block_device(host, &mut m);
            }
            m
        })
        .collect()
}

/// One mountinfo line: `ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS ... - FS SOURCE SUPEROPTS`.
fn parse_mountinfo(line: &str) -> Option<Mount> {
    let (head, tail) = line.split_once(" - ")?;
    let h: Vec<&str> = head.split_whitespace().collect();
    let t: Vec<&str> = tail.split_whitespace().collect();
    let mut options: Vec<String> = h.get(5)?.split(',').map(str::to_string).collect();
    if let Some(sup) = t.get(2) {
        for o in sup.split(',') {
            if !options.iter().any(|x| x == o) {
                options.push(o.to_string());
            }
        }
    }
    Some(Mount {
        mountpoint: h.get(4)?.replace("\\040", " "),
        fs: t.first()?.to_string(),
        source: t.get(1).unwrap_or(&"").to_string(),
        dev: h.get(2)?.to_string(),
        options,
        transport: None,
        nvme_controller: None,
        udev: None,
    })
}

fn block_device(host: &Host, m: &mut Mount) {
    let Some(path) = host.canonical(&format!("/sys/dev/block/{}", m.dev)) else {
        return;
    };
    let parts: Vec<&str> = path.split('/').collect();
    m.nvme_controller = parts
        .windows(2)
        .find(|w| w[0] == "nvme")
        .map(|w| w[1].to_string());
    m.transport = Some(
        if m.nvme_controller.is_some() {
            "nvme"
        } else if parts.iter().any(|p| p.starts_with("virtio")) {
            "virtio"
        } else if parts
            .iter()
            .any(|p| p.starts_with("target") || p.starts_with("host"))
        {
            "scsi"
        } else if parts
            .iter()
            .any(|p| p.starts_with("dm-") || p.starts_with("md"))
        {
            "device-mapper or md"
        } else {
            "other"
        }
        .to_string(),
    );
    m.udev = host
        .read_fact(&format!("/run/udev/data/b{}", m.dev))
        .map(|text| UdevRecord {
            fs_usage: udev_property(&text, "ID_FS_USAGE"),
            fs_type: udev_property(&text, "ID_FS_TYPE"),
        });
}

fn udev_property(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("E:"))
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('=').map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_give_fs_options_and_device() {
        let m = parse_mountinfo(
            "29 1 252:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw,discard,errors=remount-ro",
        )
        .unwrap();
        assert_eq!(
            (m.fs.as_str(), m.dev.as_str(), m.source.as_str()),
            ("ext4", "252:1", "/dev/vda1")
        );
        assert_eq!(
            m.options,
            ["rw", "relatime", "discard", "errors=remount-ro"]
        );
        assert!(parse_mountinfo("garbage").is_none());
    }

    #[test]
    fn udev_records_give_usage_and_type() {
        let rec = "S:disk/by-uuid/x\nE:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n";
        assert_eq!(
            udev_property(rec, "ID_FS_USAGE").as_deref(),
            Some("filesystem")
        );
        assert_eq!(udev_property(rec, "ID_FS_TYPE").as_deref(), Some("ext4"));
        assert_eq!(udev_property(rec, "ID_FS"), None);
    }
}
