//! GPUDirect Storage: what cuFile needs of the host, each read as it is. libcufile and its
//! version, `/etc/cufile.json` (parsed by [`super::cufile_json`], and where its link leads), the
//! nvidia-fs module, what PCI P2PDMA needs beside the driver (the kernel built with it, NVMe
//! multipath off), the NVMe controllers with their PCI distance to each GPU, and every mounted
//! block device with its udev record (cuFile reads `ID_FS_USAGE`/`ID_FS_TYPE` from
//! `/run/udev/data/bMAJ:MIN` and refuses a file whose device has none).

use super::cufile_json::{self, CufileConfig};
use super::gpu::Gpu;
use super::nvidia_params::NvidiaParams;
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

/// One reason a GDS path is closed, with its fix (doctor, verify and `bench gds` say it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cause {
    /// Stable id (doctor's finding id): `gds-udev-missing`, `gds-not-nvme`, ...
    pub id: &'static str,
    pub what: String,
    pub fix: String,
}

fn cause(id: &'static str, what: impl Into<String>, fix: impl Into<String>) -> Cause {
    Cause {
        id,
        what: what.into(),
        fix: fix.into(),
    }
}

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

impl GdsFacts {
    /// Why cuFile cannot open (register) a file on `mount` at all: its library, a mount on no
    /// block device, or no udev record for the device.
    pub fn open_causes(&self, mount: Option<&Mount>) -> Vec<Cause> {
        let mut out = Vec::new();
        if self.libcufile.is_none() {
            out.push(cause(
                "gds-libcufile-missing",
                "libcufile (cuFile, GPUDirect Storage's library) is not installed",
                "install the CUDA toolkit's GDS package (Debian/Ubuntu: `apt install nvidia-gds`, or libcufile-13-0)",
            ));
        }
        let Some(m) = mount else { return out };
        if !m.block() {
            out.push(cause(
                "gds-not-block",
                format!(
                    "{} is {} from {}, not on a block device: cuFile refuses its files",
                    m.mountpoint, m.fs, m.source
                ),
                "point cuFile (and `bench gds --dir`) at a local ext4 or XFS file system on NVMe",
            ));
        } else if m.udev.as_ref().and_then(|u| u.fs_usage.as_ref()).is_none() {
            out.push(cause(
                "gds-udev-missing",
                format!(
                    "cuFile cannot open files on {} ({}): the udev database has no record of the device \
                     (/run/udev/data/b{} with ID_FS_USAGE), so no udevd runs here",
                    m.mountpoint, m.source, m.dev
                ),
                "run systemd-udevd and `udevadm trigger --subsystem-match=block`; in a container, mount the \
                 host's /run/udev (`-v /run/udev:/run/udev:ro`). gdrprov never writes a udev record itself",
            ));
        }
        out
    }

    /// Why cuFile falls back to compat mode on `mount` rather than `mode` (p2pdma or nvfs);
    /// `iommu_translating` from the IOMMU fact, `driver_p2pdma` from cuFile's own properties
    /// when it was asked (`None`: not asked).
    pub fn direct_causes(
        &self,
        mode: GdsMode,
        mount: Option<&Mount>,
        iommu_translating: bool,
        driver_p2pdma: Option<bool>,
        params: &NvidiaParams,
    ) -> Vec<Cause> {
        let mut out = self.open_causes(mount);
        if let Some(m) = mount.filter(|m| m.block()) {
            if !matches!(m.fs.as_str(), "ext4" | "xfs") {
                out.push(cause(
                    "gds-fs-unsupported",
                    format!(
                        "{} is {}: GDS reads directly only from ext4 or XFS",
                        m.mountpoint, m.fs
                    ),
                    "put the data on ext4 (data=ordered) or XFS",
                ));
            } else if m
                .options
                .iter()
                .any(|o| o == "data=journal" || o == "data=writeback")
            {
                out.push(cause(
                    "gds-mount-options",
                    format!(
                        "{} is ext4 mounted with {}",
                        m.mountpoint,
                        m.options
                            .iter()
                            .find(|o| o.starts_with("data="))
                            .map(String::as_str)
                            .unwrap_or("")
                    ),
                    "mount it with data=ordered (ext4's default)",
                ));
            }
            if m.transport.as_deref() != Some("nvme") {
                out.push(cause("gds-not-nvme", format!("{} is on a {} device, not NVMe", m.mountpoint, m.transport.as_deref().unwrap_or("?")), "put the data on a local NVMe drive (or an NVMe-oF/RDMA file system with nvidia-fs)"));
            }
        }
        if iommu_translating {
            out.push(cause("gds-iommu", "the IOMMU translates DMA addresses: GDS's direct paths need it off or in passthrough", "apply gds-iommu-off (iommu=off), or iommu=pt where the platform supports it"));
        }
        match mode {
            GdsMode::Nvfs => {
                if !self.nvidia_fs.loaded {
                    let why = if self.nvidia_fs.present {
                        "installed but not loaded"
                    } else {
                        "not installed"
                    };
                    out.push(cause(
                        "gds-nvfs-missing",
                        format!("nvidia-fs is {why}"),
                        "install nvidia-fs (the nvidia-gds package) and `modprobe nvidia-fs`",
                    ));
                }
            }
            GdsMode::P2pdma => out.extend(self.p2pdma_causes(driver_p2pdma, params)),
            GdsMode::Compat => {}
        }
        for n in &self.nvme {
            if mount.and_then(|m| m.nvme_controller.as_deref()) == Some(n.name.as_str()) {
                for (gpu, d) in &n.to_gpus {
                    if *d == Distance::SYS {
                        out.push(cause("gds-across-sockets", format!("{} and GPU {gpu} are on different CPU sockets (SYS)", n.name), "use a GPU on the NVMe drive's socket (CUDA_VISIBLE_DEVICES) or move the drive"));
                    }
                }
            }
        }
        out
    }

    fn p2pdma_causes(&self, driver_p2pdma: Option<bool>, params: &NvidiaParams) -> Vec<Cause> {
        let mut out = Vec::new();
        // NVIDIA's P2PDMA guide: a static BAR1 and write-combining off, through
        // NVreg_RegistryDwords (read from the running driver, when it shows its parameters).
        if params.source.is_some() {
            let unset: Vec<&str> = P2PDMA_REGISTRY
                .iter()
                .filter(|k| params.registry(k) != Some("1"))
                .copied()
                .collect();
            if !unset.is_empty() {
                out.push(cause(
                    "gds-registry",
                    format!("the NVIDIA driver runs without {} in NVreg_RegistryDwords", unset.iter().map(|k| format!("{k}=1")).collect::<Vec<_>>().join(" and ")),
                    "add RMForceStaticBar1=1;RmForceDisableIomapWC=1 to the nvidia module's NVreg_RegistryDwords (merged with the keys already there), then reload the driver or reboot",
                ));
            }
        }
        let cfg = self.cufile_json.config.as_ref();
        if cfg.and_then(|c| c.use_pci_p2pdma) != Some(true) {
            out.push(cause("gds-cufile-json", "P2PDMA is not enabled in /etc/cufile.json (properties.use_pci_p2pdma is not true)", "set properties.use_pci_p2pdma to true (the gds-iommu-off profile does, through the journal)"));
        }
        if self.p2pdma.kernel_config == Some(false) {
            out.push(cause(
                "gds-kernel-p2pdma",
                "the kernel is built without CONFIG_PCI_P2PDMA",
                "boot a kernel with PCI P2PDMA (Ubuntu's 6.2 and later have it)",
            ));
        }
        if self.p2pdma.nvme_multipath == Some(true) {
            out.push(cause(
                "gds-nvme-multipath",
                "NVMe multipath is on (nvme_core multipath=Y): P2PDMA does not work with it",
                "set `options nvme_core multipath=N` and rebuild the initramfs",
            ));
        }
        if driver_p2pdma == Some(false) {
            out.push(cause("gds-driver-p2pdma", "cuFile's driver reports no NVMe P2PDMA support (the CUDA driver answers not supported)", "use the open NVIDIA driver 565 or later with RMForceStaticBar1=1;RmForceDisableIomapWC=1 in NVreg_RegistryDwords, and CUDA 12.8 or later"));
        }
        out
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
