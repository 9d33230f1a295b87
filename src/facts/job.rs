//! What a job sees, read from inside it (`gdrprov verify --in-job`, run by `srun`, `mpirun`,
//! a Slurm prolog or in a container): the locked-memory limit this process really has
//! (`getrlimit(RLIMIT_MEMLOCK)`), whether it holds CAP_IPC_LOCK, the `/dev/infiniband`
//! device files it can see beside the RDMA devices sysfs shows, the libibverbs providers
//! of its root, and `NCCL_IB_HCA` as NCCL will read it.

use super::rdma::{self, RdmaDevice};
use super::roce::{nccl_env, nccl_setting, NcclSetting};
use crate::host::Host;
use serde::{Deserialize, Serialize};

/// The soft and hard locked-memory limits in bytes (`None`: unlimited).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq)]
pub struct Memlock {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JobFacts {
    /// `getrlimit(RLIMIT_MEMLOCK)` of this process; `None` when it could not be asked.
    pub memlock: Option<Memlock>,
    /// CAP_IPC_LOCK in this process's effective set (`/proc/self/status` CapEff).
    pub cap_ipc_lock: Option<bool>,
    /// Whether `/dev/infiniband` exists for this process.
    pub dev_infiniband: bool,
    /// The files in `/dev/infiniband` (`uverbs0`, `rdma_cm`).
    pub dev_files: Vec<String>,
    /// Each uverbs device's RDMA device (`/sys/class/infiniband_verbs/uverbsN/ibdev`).
    pub uverbs: Vec<(String, String)>,
    pub rdma_devices: Vec<RdmaDevice>,
    /// The libibverbs providers of the root (`/etc/libibverbs.d/NAME.driver`).
    pub providers: Vec<String>,
    /// `NCCL_IB_HCA`, environment first, then `/etc/nccl.conf`.
    pub nccl_ib_hca: Option<NcclSetting>,
}

/// Bit 14 of the capability sets.
const CAP_IPC_LOCK: u32 = 14;

pub fn probe(host: &Host) -> JobFacts {
    let memlock = host.probe("job-memlock", || {
        use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
        let lim = |v: u64| (v != RLIM_INFINITY).then_some(v);
        getrlimit(Resource::RLIMIT_MEMLOCK)
            .ok()
            .map(|(s, h)| Memlock {
                soft: lim(s),
                hard: lim(h),
            })
    });
    let cap_ipc_lock = host.read_fact("/proc/self/status").and_then(|s| {
        let hex = s.lines().find_map(|l| l.strip_prefix("CapEff:"))?.trim();
        let bits = u64::from_str_radix(hex, 16).ok()?;
        Some(bits & (1 << CAP_IPC_LOCK) != 0)
    });
    let dev_files = host.list_dir("/dev/infiniband");
    let uverbs = host
        .list_dir("/sys/class/infiniband_verbs")
        .into_iter()
        .filter(|u| u.starts_with("uverbs"))
        .filter_map(|u| {
            let dev =
                super::util::read_trim(host, &format!("/sys/class/infiniband_verbs/{u}/ibdev"))?;
            Some((u, dev))
        })
        .collect();
    let providers = host
        .list_dir("/etc/libibverbs.d")
        .into_iter()
        .filter_map(|f| f.strip_suffix(".driver").map(String::from))
        .collect();
    let env = nccl_env(host);
    JobFacts {
        memlock: memlock.flatten(),
        cap_ipc_lock,
        dev_infiniband: host.exists("/dev/infiniband"),
        dev_files,
        uverbs,
        rdma_devices: rdma::probe(host),
        providers,
        nccl_ib_hca: nccl_setting(host, &env, "NCCL_IB_HCA"),
    }
}

/// The libibverbs provider (`/etc/libibverbs.d/NAME.driver`) a kernel RDMA driver needs.
pub fn provider_for(driver: &str, device: &str) -> Option<&'static str> {
    let by_name = [
        ("mlx5", "mlx5"),
        ("mlx4", "mlx4"),
        ("rxe", "rxe"),
        ("siw", "siw"),
        ("bnxt_re", "bnxt_re"),
        ("irdma", "irdma"),
        ("erdma", "erdma"),
        ("efa", "efa"),
        ("qedr", "qedr"),
        ("hns", "hns"),
        ("ionic", "ionic"),
        ("mana", "mana"),
    ];
    let by_driver = [
        ("mlx5_core", "mlx5"),
        ("mlx4_core", "mlx4"),
        ("rdma_rxe", "rxe"),
        ("siw", "siw"),
        ("bnxt_en", "bnxt_re"),
        ("ice", "irdma"),
        ("i40e", "irdma"),
        ("erdma", "erdma"),
        ("efa", "efa"),
        ("qede", "qedr"),
        ("hns3", "hns"),
    ];
    by_driver
        .iter()
        .find(|(d, _)| *d == driver)
        .or_else(|| by_name.iter().find(|(n, _)| device.starts_with(n)))
        .map(|(_, p)| *p)
}
