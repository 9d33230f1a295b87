//! `gdrprov verify --in-job`: the readiness checks a job needs, judged from inside the job
//! (what `srun`, `mpirun`, a Slurm prolog or a container gives the process), each with its
//! fix: the locked-memory limit, CAP_IPC_LOCK, the RDMA device files, the user-space
//! provider of each kernel driver, and `NCCL_IB_HCA`. They read only [`JobFacts`].

use crate::checks::Check;
use crate::facts::job::{provider_for, JobFacts};

/// Below this, registering GPU or host buffers for NCCL fails ("Cannot allocate memory").
pub const MEMLOCK_FLOOR: u64 = 64 << 20;

pub const MEMLOCK_FIX: &str = "raise the job's memlock limit to unlimited where the job is started: Slurm: `LimitMEMLOCK=infinity` in slurmd's unit (`systemctl edit slurmd`) and `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf; a systemd unit: `LimitMEMLOCK=infinity`; Docker: `--ulimit memlock=-1`; Kubernetes/containerd: the runtime's default ulimits; mpirun: `ulimit -l unlimited` in the launcher's shell; or give the job CAP_IPC_LOCK";

/// The fix of `job-rdma-devices`.
pub const DEVICES_FIX: &str = "give the job /dev/infiniband: Docker `--device=/dev/infiniband` (or `-v /dev/infiniband:/dev/infiniband`), Kubernetes the RDMA shared device plugin (`rdma/...` resource), Slurm with ConstrainDevices: list /dev/infiniband/* in cgroup_allowed_devices_file or gres.conf; load ib_uverbs on the host where the file is missing there too";
/// The fix of `job-rdma-provider`.
pub const PROVIDER_FIX: &str = "install the user-space provider that matches the host's kernel driver in the job's root: rdma-core's ibverbs-providers (Debian/Ubuntu) or libibverbs (RHEL), or the same DOCA-OFED/MLNX_OFED user space as the host";
/// The fix of `job-nccl-hca`.
pub const HCA_FIX: &str = "name only present, ACTIVE devices in NCCL_IB_HCA (the environment or /etc/nccl.conf), or unset it; NCCL otherwise fails with \"NET/IB : No device found\" or skips the rail";

/// Every in-job check, in the order reported.
pub fn checks(j: &JobFacts) -> Vec<Check> {
    vec![
        memlock(j),
        ipc_lock(j),
        devices(j),
        provider(j),
        nccl_ib_hca(j),
    ]
}

fn bytes(v: Option<u64>) -> String {
    match v {
        None => "unlimited".into(),
        Some(b) if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        Some(b) if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        Some(b) => format!("{b} bytes"),
    }
}

/// `job-memlock`: the soft limit this process has (getrlimit), unless CAP_IPC_LOCK lifts it.
pub fn memlock(j: &JobFacts) -> Check {
    const NAME: &str = "job-memlock";
    let Some(m) = j.memlock else {
        return Check::skip(NAME, "getrlimit(RLIMIT_MEMLOCK) could not be asked here");
    };
    let seen = format!(
        "getrlimit(RLIMIT_MEMLOCK): soft {}, hard {}",
        bytes(m.soft),
        bytes(m.hard)
    );
    match m.soft {
        Some(s) if s < MEMLOCK_FLOOR && j.cap_ipc_lock != Some(true) => Check::fail(
            NAME,
            format!("the job's locked-memory limit is {} ({seen}): RDMA memory registration and queue creation fail with \"Cannot allocate memory\" beyond it", bytes(Some(s))),
            MEMLOCK_FIX,
        ),
        Some(s) if s < MEMLOCK_FLOOR => Check::pass(NAME, format!("{seen}; CAP_IPC_LOCK lifts it")),
        _ => Check::pass(NAME, seen),
    }
}

/// `job-ipc-lock`: CAP_IPC_LOCK in the effective set (needed only where memlock is limited).
pub fn ipc_lock(j: &JobFacts) -> Check {
    const NAME: &str = "job-ipc-lock";
    let limited = j
        .memlock
        .and_then(|m| m.soft)
        .is_some_and(|s| s < MEMLOCK_FLOOR);
    match (j.cap_ipc_lock, limited) {
        (None, _) => Check::skip(NAME, "no CapEff line in /proc/self/status"),
        (Some(true), _) => Check::pass(NAME, "CAP_IPC_LOCK is in the job's effective capabilities"),
        (Some(false), false) => Check::pass(NAME, "CAP_IPC_LOCK not held; not needed with this memlock limit"),
        (Some(false), true) => Check::warn(
            NAME,
            "CAP_IPC_LOCK not held and the memlock limit is low: pinned memory is capped by the limit",
            "raise the memlock limit (job-memlock), or give the container CAP_IPC_LOCK (`--cap-add=IPC_LOCK`, Kubernetes `securityContext.capabilities.add: [IPC_LOCK]`)",
        ),
    }
}

/// `job-rdma-devices`: the RDMA devices sysfs shows, each with its `/dev/infiniband/uverbsN`.
pub fn devices(j: &JobFacts) -> Check {
    const NAME: &str = "job-rdma-devices";
    if j.rdma_devices.is_empty() {
        return Check::fail(
            NAME,
            "no RDMA device in /sys/class/infiniband where the job runs",
            "run the job where the NIC is, or pass it into the container (the RDMA shared device plugin or SR-IOV network operator on Kubernetes; `--network host` and `--device /dev/infiniband` with Docker)",
        );
    }
    let (mut missing, mut ok) = (Vec::new(), Vec::new());
    for d in &j.rdma_devices {
        let node = j
            .uverbs
            .iter()
            .find(|(_, dev)| dev == &d.name)
            .map(|(u, _)| u);
        match node {
            Some(u) if j.dev_files.iter().any(|f| f == u) => {
                ok.push(format!("{} /dev/infiniband/{u}", d.name))
            }
            Some(u) => missing.push(format!("{} (its /dev/infiniband/{u} is not there)", d.name)),
            None => missing.push(format!(
                "{} (no uverbs device in /sys/class/infiniband_verbs)",
                d.name
            )),
        }
    }
    if missing.is_empty() {
        return Check::pass(NAME, ok.join(", "));
    }
    let seen = if !j.dev_infiniband {
        "/dev/infiniband does not exist for the job".to_string()
    } else {
        format!("/dev/infiniband holds [{}]", j.dev_files.join(", "))
    };
    Check::fail(
        NAME,
        format!("the job cannot open {}: {seen}; sysfs shows the devices, so the job's mount namespace or container hides their device files (libibverbs: \"No such device\", NCCL: NET/IB : No device found)", missing.join(", ")),
        DEVICES_FIX,
    )
}

/// `job-rdma-provider`: a libibverbs provider for each device's kernel driver in the job's
/// root (a container image without the provider sees the device and cannot open it).
pub fn provider(j: &JobFacts) -> Check {
    const NAME: &str = "job-rdma-provider";
    if j.rdma_devices.is_empty() {
        return Check::skip(NAME, "no RDMA device to open");
    }
    let (mut bad, mut ok) = (Vec::new(), Vec::new());
    for d in &j.rdma_devices {
        let drv = d.driver.as_deref().unwrap_or("?");
        match provider_for(drv, &d.name) {
            Some(p) if j.providers.iter().any(|x| x == p) => {
                ok.push(format!("{} ({drv}) provider {p}", d.name))
            }
            Some(p) => bad.push(format!(
                "{} (kernel driver {drv}) needs the libibverbs provider {p}",
                d.name
            )),
            None => ok.push(format!("{} ({drv}): provider not known to gdrprov", d.name)),
        }
    }
    if bad.is_empty() {
        return Check::pass(NAME, ok.join(", "));
    }
    let have = if j.providers.is_empty() {
        "/etc/libibverbs.d is empty or missing".to_string()
    } else {
        format!("/etc/libibverbs.d has [{}]", j.providers.join(", "))
    };
    Check::fail(
        NAME,
        format!(
            "{}; {have}: ibv_open_device fails (\"libibverbs: Warning: couldn't load driver\")",
            bad.join("; ")
        ),
        PROVIDER_FIX,
    )
}

/// `job-nccl-hca`: every HCA that `NCCL_IB_HCA` names (`mlx5_0:1,mlx5_1`, `=` exact, `^`
/// excluding) is there and has an ACTIVE port.
pub fn nccl_ib_hca(j: &JobFacts) -> Check {
    const NAME: &str = "job-nccl-hca";
    let Some(set) = &j.nccl_ib_hca else {
        return Check::skip(NAME, "NCCL_IB_HCA is not set: NCCL uses every RDMA device");
    };
    let v = set.value.trim();
    if v.starts_with('^') {
        return Check::pass(
            NAME,
            format!(
                "NCCL_IB_HCA={v} ({}) excludes devices; nothing to find",
                set.source
            ),
        );
    }
    let exact = v.starts_with('=');
    let (mut bad, mut ok) = (Vec::new(), Vec::new());
    for item in v
        .trim_start_matches('=')
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (name, port) = match item.split_once(':') {
            Some((n, p)) => (n, p.parse::<u32>().ok()),
            None => (item, None),
        };
        let found: Vec<_> = j
            .rdma_devices
            .iter()
            .filter(|d| {
                if exact {
                    d.name == name
                } else {
                    d.name.starts_with(name)
                }
            })
            .collect();
        if found.is_empty() {
            bad.push(format!("{item}: no such RDMA device"));
            continue;
        }
        let active = found.iter().any(|d| {
            d.ports
                .iter()
                .any(|p| p.is_active() && port.is_none_or(|n| n == p.port))
        });
        if active {
            ok.push(format!("{item} ACTIVE"));
        } else {
            bad.push(format!("{item}: not ACTIVE"));
        }
    }
    let head = format!("NCCL_IB_HCA={v} ({})", set.source);
    if bad.is_empty() {
        return Check::pass(NAME, format!("{head}: {}", ok.join(", ")));
    }
    let have: Vec<&str> = j.rdma_devices.iter().map(|d| d.name.as_str()).collect();
    Check::fail(
        NAME,
        format!(
            "{head}: {}; the job sees [{}]",
            bad.join("; "),
            have.join(", ")
        ),
        format!("{HCA_FIX} (here: {})", set.source),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Status;
    use crate::facts::job::Memlock;
    use crate::facts::rdma::{RdmaDevice, RdmaPort};
    use crate::facts::roce::NcclSetting;

    /// A job on a host with rxe0 (port 1 ACTIVE): everything given unless a test takes it away.
    fn job() -> JobFacts {
        JobFacts {
            memlock: Some(Memlock {
                soft: None,
                hard: None,
            }),
            cap_ipc_lock: Some(false),
            dev_infiniband: true,
            dev_files: vec!["rdma_cm".into(), "uverbs0".into()],
            uverbs: vec![("uverbs0".into(), "rxe0".into())],
            rdma_devices: vec![RdmaDevice {
                name: "rxe0".into(),
                driver: Some("rdma_rxe".into()),
                pci: None,
                sysfs_path: None,
                numa_node: None,
                ports: vec![RdmaPort {
                    port: 1,
                    state: Some("ACTIVE".into()),
                    phys_state: None,
                    link_layer: Some("Ethernet".into()),
                    rate: None,
                    rate_gbps: None,
                    netdev: Some("ens3".into()),
                    mtu: Some(1500),
                }],
            }],
            providers: vec!["mlx5".into(), "rxe".into()],
            nccl_ib_hca: None,
        }
    }

    fn status(c: &Check) -> (Status, &str) {
        (c.status, c.evidence.as_str())
    }

    #[test]
    fn everything_given_is_ready() {
        let all = checks(&job());
        assert!(all.iter().all(|c| c.status != Status::Fail), "{all:?}");
    }

    #[test]
    fn a_64k_memlock_without_ipc_lock_fails_and_ipc_lock_lifts_it() {
        let mut j = job();
        j.memlock = Some(Memlock {
            soft: Some(64 << 10),
            hard: Some(64 << 10),
        });
        let c = memlock(&j);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.evidence
                .starts_with("the job's locked-memory limit is 64 KiB"),
            "{c:?}"
        );
        assert!(c
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("LimitMEMLOCK=infinity")));
        assert_eq!(ipc_lock(&j).status, Status::Warn);
        j.cap_ipc_lock = Some(true);
        assert_eq!(memlock(&j).status, Status::Pass);
    }

    #[test]
    fn a_hidden_dev_infiniband_and_a_missing_provider_are_named() {
        let mut j = job();
        j.dev_files.clear();
        let c = devices(&j);
        assert_eq!(c.status, Status::Fail);
        assert!(c.evidence.starts_with("the job cannot open rxe0 (its /dev/infiniband/uverbs0 is not there): /dev/infiniband holds []"), "{c:?}");
        j.providers = vec!["mlx5".into()];
        let c = provider(&j);
        assert_eq!(status(&c).0, Status::Fail);
        assert!(
            c.evidence
                .contains("rxe0 (kernel driver rdma_rxe) needs the libibverbs provider rxe"),
            "{c:?}"
        );
    }

    #[test]
    fn nccl_ib_hca_naming_an_absent_or_down_hca_fails() {
        let mut j = job();
        let set = |v: &str| {
            Some(NcclSetting {
                value: v.into(),
                source: "environment".into(),
            })
        };
        j.nccl_ib_hca = set("mlx5_0,rxe0:1");
        let c = nccl_ib_hca(&j);
        assert_eq!(c.status, Status::Fail);
        assert!(c.evidence.starts_with("NCCL_IB_HCA=mlx5_0,rxe0:1 (environment): mlx5_0: no such RDMA device; the job sees [rxe0]"), "{c:?}");
        j.nccl_ib_hca = set("=rxe0:2");
        assert!(nccl_ib_hca(&j).evidence.contains("rxe0:2: not ACTIVE"));
        j.nccl_ib_hca = set("rxe");
        assert_eq!(nccl_ib_hca(&j).status, Status::Pass);
        j.nccl_ib_hca = set("^mlx5_0");
        assert_eq!(nccl_ib_hca(&j).status, Status::Pass);
    }
}
