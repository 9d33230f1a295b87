//! Read-only probes of a root. Each copes with its subject being absent and
//! says so; none of them fails. Every read goes through [`Host`], so the
//! probes work the same on `/`, an image, or a snapshot (`inventory --snapshot`).

pub mod arch;
pub mod boot;
pub mod boot_shape;
pub mod bootdev;
pub mod cuda;
pub mod cufile_json;
pub mod distro_links;
pub mod efa;
pub mod erdma;
pub mod gdrcopy;
pub mod gds;
pub mod gds_causes;
pub mod gids;
pub mod gpu;
pub mod gpu_acs;
pub mod gpu_copy;
pub mod gpu_topo;
pub mod iommu;
pub mod job;
pub mod kernel;
pub mod kernlog;
pub mod kmod;
pub mod limits;
pub mod links;
pub mod loadreq;
pub mod nccl;
pub mod net;
pub mod numa;
pub mod nvidia;
pub mod nvidia_params;
pub mod ofed;
mod os;
mod packages;
pub mod pci;
pub mod pcicfg;
pub mod pcie;
pub mod pcie_dev;
pub mod perftest;
pub mod platform;
pub mod rdma;
pub mod roce;
pub mod signing;
mod util;

pub use os::{CpuVendor, OsFamily, OsRelease};

use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Facts {
    pub os: OsRelease,
    pub cpu_vendor: CpuVendor,
    /// The CPU architecture (x86_64, aarch64), and an arm64 CPU's name.
    pub arch: arch::ArchFacts,
    /// The running kernel's command line (`/proc/cmdline` in the root).
    pub proc_cmdline: Option<String>,
    /// Whether the root is the running system.
    pub live: bool,
    /// Whether the root is a snapshot (`inventory --snapshot`): commands were replayed.
    pub snapshot: bool,
    /// Whether the root shows a system's state (running, snapshot, or an image
    /// root carrying /sys or /proc/modules): then "not found" means absent,
    /// not merely unknown.
    pub observed: bool,
    pub kernel: kernel::KernelFacts,
    pub boot: boot::BootFacts,
    pub nvidia_driver: nvidia::DriverFacts,
    /// The NVIDIA driver's parameters (`/proc/driver/nvidia/params`) and the module options setting them.
    pub nvidia_params: nvidia_params::NvidiaParams,
    pub gpus: Vec<gpu::Gpu>,
    pub cuda: cuda::CudaFacts,
    pub ofed: ofed::OfedFacts,
    pub perftest: perftest::PerftestFacts,
    pub nccl: nccl::NcclFacts,
    pub erdma: erdma::ErdmaFacts,
    /// AWS EFA devices and driver.
    pub efa: efa::EfaFacts,
    pub rdma_devices: Vec<rdma::RdmaDevice>,
    pub iommu: iommu::IommuFacts,
    pub modules: kmod::ModuleFacts,
    pub limits: limits::LimitsFacts,
    pub pcie: Vec<pcie::PciePath>,
    /// Pairs of GPUs behind one PCIe switch, with ACS on the bridges between them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_pair_acs: Vec<gpu_acs::GpuPairAcs>,
    /// Each GPU's BARs, and the device control and ATS of every device on a GPU–NIC path.
    pub pcie_devices: pcie_dev::PcieDevFacts,
    /// PCIe link speed and width of the GPUs, RDMA NICs and bridges between.
    pub links: Vec<links::PcieLink>,
    /// The populated GIDs of every RoCE port.
    pub roce_gids: Vec<gids::PortGids>,
    /// The RoCE fabric per port: MTUs, ECN, PFC, DSCP trust, error counters; NCCL's GID index.
    pub roce: roce::RoceFacts,
    /// Xid, AER, link and port events from the kernel log; `None` when no log could be read.
    pub kernel_events: Option<kernlog::KernelLog>,
    /// Kernel log errors and warnings about the GPU and RDMA modules (the
    /// module lines of the one reading in `kernel_events`).
    pub kernel_log: Vec<String>,
    /// CPU architecture and virtualization (read by profiles' `when:`).
    pub platform: platform::PlatformFacts,
    /// The GPUs together: NVLink, fabric, GPU pairs, shared upstream ports.
    pub gpu_topology: gpu_topo::GpuTopology,
    /// Copy figures a snapshot recorded (each GPU alone and all together); `None` elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_copy: Option<gpu_copy::CopyFigures>,
    /// Links a distribution ships at a path gdrprov writes, that the write
    /// door follows (the plan says so beside the change).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub distro_links: Vec<distro_links::DistroLink>,
    /// Secure Boot, lockdown and how the out-of-tree modules are signed.
    pub signing: signing::SigningFacts,
    /// gdrcopy's module `gdrdrv`.
    pub gdrcopy: gdrcopy::GdrcopyFacts,
    /// GPUDirect Storage: libcufile, cufile.json, nvidia-fs, P2PDMA, NVMe, mounts and udev.
    pub gds: gds::GdsFacts,
}

/// How much to ask.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Depth {
    /// Files and probe commands only (plan, apply): fast, loads no library.
    #[default]
    Files,
    /// Also ask the CUDA driver API on a running system (inventory, doctor).
    WithCuda,
}

/// The distribution family of a root, from its os-release.
pub fn os_family(host: &Host) -> OsFamily {
    os::os_release(host).family
}

impl Facts {
    /// The facts `plan` and `apply` need: no library is loaded.
    pub fn gather(host: &Host, cpu_override: Option<CpuVendor>) -> Facts {
        Facts::gather_with(host, cpu_override, Depth::Files)
    }

    pub fn gather_with(host: &Host, cpu_override: Option<CpuVendor>, depth: Depth) -> Facts {
        Facts::gather_using(host, cpu_override, depth, cuda::libcuda_probe)
    }

    /// Long because it is the list of every probe, in the order their inputs need.
    /// As `gather_with`, with another CUDA prober (anything that fills a
    /// [`cuda::CudaRuntime`], a test's fake included). Called on a running system
    /// only; a snapshot replays what was recorded.
    pub fn gather_using(
        host: &Host,
        cpu_override: Option<CpuVendor>,
        depth: Depth,
        cuda_probe: fn() -> cuda::CudaRuntime,
    ) -> Facts {
        let proc_cmdline = host
            .read_fact("/proc/cmdline")
            .map(|s| s.trim().to_string());
        let kernel = kernel::probe(host);
        let nvidia_driver = nvidia::probe(host, &kernel.installed);
        let pci_devices = pci::devices(host);
        let mut gpus = gpu::probe(host, &pci_devices);
        let runtime = match depth {
            Depth::WithCuda => host.probe("cuda", cuda_probe),
            Depth::Files => None,
        };
        let cuda = cuda::probe(host, nvidia_driver.major(), runtime);
        refine_gpus(&mut gpus, &cuda);
        let modules = kmod::probe(host, proc_cmdline.as_deref());
        let rdma_devices = rdma::probe(host);
        let gpu_pci: Vec<String> = gpus.iter().map(|g| g.pci.clone()).collect();
        let (pcie, gpu_pair_acs) = (
            pcie::probe(host, &gpus, &rdma_devices),
            gpu_acs::probe(host, &gpus),
        );
        let links = links::probe(host, &gpus, &rdma_devices);
        // Asked where CUDA is asked; a snapshot replays it at any depth.
        let live_topology = match depth {
            Depth::WithCuda if !gpus.is_empty() => gpu_topo::recorded(host),
            _ if host.is_snapshot() => gpu_topo::recorded(host),
            _ => None,
        };
        let mut gpu_topology = gpu_topo::probe(live_topology, &gpus, &rdma_devices, &links);
        let roce_gids = gids::probe(host, &rdma_devices);
        let roce = roce::probe(host, &rdma_devices);
        let kernel_events = kernlog::probe(host);
        let signing = signing::probe(host, kernel.effective(), host.is_live());
        let gdrcopy = gdrcopy::probe(host, &modules, &signing);
        let packages = packages::Packages::new(host);
        gpu_topology.nvswitches = gpu_topo::nvswitches(&pci_devices);
        gpu_topology.pci_listed = !pci_devices.is_empty();
        if gpu_topology.nvswitch() || !gpu_topology.nvswitches.is_empty() {
            gpu_topology.fabric_manager =
                gpu_topo::fabric_manager(&packages, nvidia_driver.major());
        }
        Facts {
            os: os::os_release(host),
            cpu_vendor: cpu_override.unwrap_or_else(|| os::cpu_vendor(host)),
            arch: arch::probe(host),
            live: host.is_live(),
            snapshot: host.is_snapshot(),
            observed: host.is_live()
                || host.is_snapshot()
                || !pci_devices.is_empty()
                || host.exists("/proc/modules"),
            boot: boot::probe(host, proc_cmdline.as_deref(), &kernel),
            ofed: ofed::probe(host, &packages),
            perftest: perftest::probe(host, &packages),
            nccl: nccl::probe(host, &packages),
            erdma: erdma::probe(host, &modules.loaded),
            efa: efa::probe(host, &pci_devices, &rdma_devices),
            pcie_devices: pcie_dev::probe(host, &gpus, &rdma_devices),
            iommu: iommu::probe(host, proc_cmdline.as_deref(), &gpu_pci),
            limits: limits::probe(host),
            gds: gds::probe(host, kernel.effective(), &modules.loaded, &gpus),
            nvidia_params: nvidia_params::probe(host, proc_cmdline.as_deref()),
            proc_cmdline,
            kernel,
            nvidia_driver,
            gpus,
            cuda,
            rdma_devices,
            modules,
            pcie,
            gpu_pair_acs,
            links,
            roce_gids,
            roce,
            kernel_log: kernel_events
                .as_ref()
                .map(|l| l.module_lines.clone())
                .unwrap_or_default(),
            kernel_events,
            platform: platform::probe(host),
            gpu_topology,
            gpu_copy: gpu_copy::replayed(host),
            distro_links: distro_links::probe(host),
            signing,
            gdrcopy,
        }
    }

    /// The facts of a root where nothing was found (no kernel, driver, GPU,
    /// NIC or CPU vendor): what planning tests start from and fill in. Long because
    /// it names every field of `Facts`, one line each.
    pub fn blank(family: OsFamily) -> Facts {
        Facts {
            os: OsRelease {
                id: None,
                version_id: None,
                pretty_name: None,
                family,
            },
            cpu_vendor: CpuVendor::Unknown,
            arch: arch::ArchFacts {
                arch: arch::Arch::Unknown,
                source: String::new(),
                cpu: None,
            },
            proc_cmdline: None,
            live: false,
            snapshot: false,
            observed: false,
            kernel: kernel::KernelFacts::default(),
            boot: blank_boot(),
            nvidia_driver: nvidia::DriverFacts {
                version: None,
                flavor: nvidia::Flavor::Unknown,
                source: None,
            },
            nvidia_params: nvidia_params::NvidiaParams::default(),
            gpus: Vec::new(),
            cuda: cuda::CudaFacts::default(),
            ofed: ofed::OfedFacts {
                kind: ofed::OfedKindFact::Absent,
                version: None,
                evidence: None,
                openibd: None,
            },
            perftest: perftest::PerftestFacts {
                installed: false,
                version: None,
                cuda_dmabuf: None,
            },
            nccl: nccl::NcclFacts::default(),
            erdma: erdma::ErdmaFacts {
                version: None,
                module_loaded: false,
                module_version: None,
            },
            efa: efa::EfaFacts::default(),
            rdma_devices: Vec::new(),
            iommu: iommu::IommuFacts {
                state: iommu::IommuState::Unknown,
                evidence: String::new(),
                cmdline_args: Vec::new(),
                units: Vec::new(),
                groups: 0,
                domain_types: Vec::new(),
            },
            modules: kmod::ModuleFacts {
                source: "absent".into(),
                loaded: Vec::new(),
                blocked: Vec::new(),
                peermem_paths: Vec::new(),
            },
            limits: limits::LimitsFacts {
                memlock_soft: None,
                memlock_hard: None,
                configured: Vec::new(),
            },
            pcie: Vec::new(),
            gpu_pair_acs: Vec::new(),
            pcie_devices: pcie_dev::PcieDevFacts::default(),
            links: Vec::new(),
            roce_gids: Vec::new(),
            roce: roce::RoceFacts::default(),
            kernel_events: None,
            kernel_log: Vec::new(),
            platform: platform::PlatformFacts::unknown(),
            gpu_topology: gpu_topo::GpuTopology::default(),
            gpu_copy: None,
            distro_links: Vec::new(),
            signing: signing::SigningFacts::blank(),
            gdrcopy: gdrcopy::GdrcopyFacts::default(),
            gds: gds::GdsFacts::default(),
        }
    }

    /// The CUDA device that is this GPU, if the driver API answered.
    pub fn cuda_device(&self, gpu: &gpu::Gpu) -> Option<&cuda::CudaDevice> {
        let rt = self.cuda.runtime.as_ref()?;
        rt.devices.iter().find(|d| {
            d.pci_bus_id
                .as_deref()
                .is_some_and(|b| same_bus_id(b, &gpu.pci))
        })
    }
}

/// `00000000:3B:00.0` (CUDA) and `0000:3b:00.0` (sysfs) name the same device.
pub fn same_bus_id(a: &str, b: &str) -> bool {
    let tail = |s: &str| {
        let s = s.to_ascii_lowercase();
        let parts: Vec<&str> = s.rsplitn(3, ':').collect();
        if parts.len() < 2 {
            return (0u64, s.clone());
        }
        let domain = parts
            .get(2)
            .and_then(|d| u64::from_str_radix(d, 16).ok())
            .unwrap_or(0);
        (domain, format!("{}:{}", parts[1], parts[0]))
    };
    tail(a) == tail(b)
}

/// The compute capability, when CUDA gave it, names the architecture better
/// than the device ID, and CUDA's name is the marketing name.
fn refine_gpus(gpus: &mut [gpu::Gpu], cuda: &cuda::CudaFacts) {
    let Some(rt) = &cuda.runtime else { return };
    for g in gpus.iter_mut() {
        let Some(d) = rt.devices.iter().find(|d| {
            d.pci_bus_id
                .as_deref()
                .is_some_and(|b| same_bus_id(b, &g.pci))
        }) else {
            continue;
        };
        if let Some((maj, min)) = d
            .compute_capability
            .as_deref()
            .and_then(|c| c.split_once('.'))
        {
            if let (Ok(a), Ok(b)) = (maj.parse(), min.parse()) {
                let arch = gpu::Arch::from_compute_capability(a, b);
                if arch != gpu::Arch::Unknown {
                    g.arch = arch;
                    g.arch_source = "compute-capability";
                }
            }
        }
        if g.name.is_none() {
            g.name = d.name.clone();
        }
    }
}

/// The boot facts of a root where no boot loader was found.
fn blank_boot() -> boot::BootFacts {
    boot::BootFacts {
        kind: boot::BootLoaderKind::Unknown,
        efi: false,
        grub_cfg: None,
        bls_entries: Vec::new(),
        next_entry: None,
        running_entry: None,
        trial_running: false,
        // Planning tests put GRUB's files into PlanFacts themselves.
        cmdline_home: boot_shape::CmdlineHome::OnHost {
            evidence: String::new(),
        },
        booted: None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_ids_match_across_spellings() {
        assert!(super::same_bus_id("00000000:3B:00.0", "0000:3b:00.0"));
        assert!(!super::same_bus_id("00000000:3B:00.0", "0000:3c:00.0"));
    }
}
