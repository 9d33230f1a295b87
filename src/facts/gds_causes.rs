//! Why a GDS path is closed, from the facts of [`super::gds`] (and each GPU's `p2pmem/`,
//! [`super::gpu::P2pMem`]): what keeps cuFile from opening a file at all, and what keeps a
//! direct mode (P2PDMA, nvidia-fs) from running. Doctor, verify and `bench gds` say them.

use super::gds::{GdsFacts, GdsMode, Mount, P2PDMA_REGISTRY};
use super::gpu::Gpu;
use super::nvidia_params::NvidiaParams;
use super::pcie::Distance;
use serde::Serialize;

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
    /// when it was asked (`None`: not asked), `gpus` for the kernel's view of each (p2pmem).
    pub fn direct_causes(
        &self,
        mode: GdsMode,
        mount: Option<&Mount>,
        iommu_translating: bool,
        driver_p2pdma: Option<bool>,
        params: &NvidiaParams,
        gpus: &[Gpu],
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
            GdsMode::P2pdma => {
                out.extend(self.p2pdma_causes(driver_p2pdma, params));
                out.extend(self.p2pmem_causes(gpus));
            }
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

    /// Each GPU the NVIDIA driver runs that registered no P2P memory with the kernel (no
    /// `p2pmem/`, [`Gpu::p2pmem`]): NVMe cannot DMA into it through PCI P2PDMA. Not said
    /// where the kernel lacks P2PDMA (that cause is named, and this follows from it).
    fn p2pmem_causes(&self, gpus: &[Gpu]) -> Vec<Cause> {
        if self.p2pdma.kernel_config == Some(false) {
            return Vec::new();
        }
        gpus.iter()
            .filter(|g| g.driver.as_deref() == Some("nvidia") && g.p2pmem.is_none())
            .map(|g| {
                cause(
                    "gds-p2pmem",
                    format!(
                        "GPU {0} has registered no P2P memory with the kernel (no /sys/bus/pci/devices/{0}/p2pmem): \
                         the NVIDIA driver did not enable PCI P2PDMA",
                        g.pci
                    ),
                    "set RMForceStaticBar1=1;RmForceDisableIomapWC=1 in the nvidia module's NVreg_RegistryDwords \
                     (a profile with `gds:` mode p2pdma or any-direct writes them: `gdrprov apply gds-iommu-off`), \
                     then reload the NVIDIA driver or reboot",
                )
            })
            .collect()
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
