//! The failure modes of issue 48 part B in the shape of [`super::modes`] (a table of [`super::tables`]): the RoCE fabric,
//! what the job sees (`verify --in-job`), each GPU's GPUDirect RDMA attribute and ACS between
//! two GPUs. They are read from the host, not from a log line ([`Seen::Host`]): doctor's
//! findings take their title and cause from these rows ([`rule`]), and the in-job checks
//! their fix, so docs/troubleshooting.md (generated from the rows) says what the code says.

use super::modes::{Mode, Seen};
use super::Sev;
use crate::checks::{injob, roce};

const ROW: Mode = Mode {
    id: "",
    seen: Seen::Host,
    severity: Sev::Warn,
    all: &[],
    any: &[],
    not: &[],
    symptom: "",
    title: "",
    cause: "",
    fix: "",
    report: "",
};

pub const RULES: &[Mode] = &[
    Mode {
        id: "roce-mtu",
        seen: Seen::HostAndVerify,
        title: "a RoCE port runs below its largest MTU",
        cause: "a RoCE port's MTU follows its network device's: with MTU 1500 RDMA sends 1024-byte packets, a fraction of a 4096-byte port's bandwidth",
        fix: roce::MTU_FIX,
        report: "https://github.com/NVIDIA/dgx-spark-playbooks/pull/103",
        ..ROW
    },
    Mode {
        id: "roce-mtu-profile",
        seen: Seen::HostAndVerify,
        severity: Sev::Error,
        symptom: "NCCL WARN NET/IB : Got completion with error 12, opcode 32736, len 32736, vendor err 129",
        title: "a RoCE network device's MTU is not the profile's",
        cause: "the network device's MTU differs from what the profile (and so the rest of the fabric) uses: RoCE peers whose path MTUs differ drop packets or fail with completion error 4 (local length)",
        fix: roce::MTU_PROFILE_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/709",
        ..ROW
    },
    Mode {
        id: "roce-gid",
        seen: Seen::HostAndVerify,
        severity: Sev::Error,
        symptom: "NCCL WARN Call to ibv_modify_qp failed with error Connection timed out",
        title: "NCCL_IB_GID_INDEX does not point at a routable RoCE v2 GID",
        cause: "NCCL uses the GID at NCCL_IB_GID_INDEX for every connection; a link-local or RoCE v1 GID is not routed between subnets, so queue pairs time out (completion error 12, ibv_modify_qp timing out)",
        fix: "set NCCL_IB_GID_INDEX (environment or /etc/nccl.conf) to the index of the routable RoCE v2 GID the finding names, the same on every node, or remove it so that NCCL (2.21 and later) picks one",
        report: "https://github.com/NVIDIA/nccl/issues/769",
        ..ROW
    },
    Mode {
        id: "roce-lossless",
        seen: Seen::HostAndVerify,
        title: "a RoCE port has neither PFC nor ECN",
        cause: "RoCE needs a lossless fabric (PFC) or congestion control (ECN, DCQCN): without either, congestion drops packets and RDMA retransmits",
        fix: roce::LOSSLESS_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/378",
        ..ROW
    },
    Mode {
        id: "roce-lossless-profile",
        seen: Seen::HostAndVerify,
        severity: Sev::Error,
        title: "a RoCE port's PFC or ECN is not what the profile's network.lossless wants",
        cause: "the port's PFC priorities or ECN differ from what the profile (and so the switches and the other nodes) use: traffic on a priority without PFC drops under congestion, and without ECN DCQCN cannot slow senders, so NCCL sees retransmissions and completion error 12",
        fix: roce::LOSSLESS_PROFILE_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/378",
        ..ROW
    },
    Mode {
        id: "roce-counters",
        seen: Seen::Verify,
        title: "RoCE retransmission, out-of-sequence or timeout counters grew during verify",
        cause: "the port's hw_counters count packets the fabric dropped or reordered: the same fabric fails NCCL with completion error 12 under load",
        fix: roce::COUNTERS_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/902",
        ..ROW
    },
    Mode {
        id: "gpu-no-gpudirect-rdma",
        severity: Sev::Error,
        title: "CUDA says a GPU cannot do GPUDirect RDMA",
        cause: "the GPU (a GeForce/consumer part, or an inference part without it) or its driver does not allow a NIC to read or write its memory; NCCL then stages every transfer through host memory",
        fix: "run GPUDirect RDMA jobs on a data-centre GPU that reports the attribute as 1 (`gdrprov inventory` shows it per GPU); on this GPU expect host-staged transfers (NCCL_NET_GDR_LEVEL has no effect)",
        report: "https://github.com/NVIDIA/gdrcopy/issues/211",
        ..ROW
    },
    Mode {
        id: "acs-gpu-pair",
        severity: Sev::Error,
        title: "ACS redirects peer-to-peer traffic between two GPUs on one PCIe switch",
        cause: "ACS request/completion redirect on a switch port between two GPUs sends their peer-to-peer traffic up to the root complex: NCCL's P2P transport between them fails, hangs or falls back to host memory, and GPUDirect RDMA through the same switch is diverted the same way",
        fix: "disable ACS on the switch's downstream ports: in the BIOS (PCIe ACS / IOMMU settings), or at boot with `setpci -s BRIDGE ECAP_ACS+0x6.w=0000` (not persistent; a profile's `pcie.acs` clears only the bridges between GPU and NIC)",
        report: "https://github.com/NVIDIA/nccl/issues/667",
        ..ROW
    },
    Mode {
        id: "peermem-register",
        seen: Seen::Verify,
        severity: Sev::Error,
        symptom: "ibv_reg_mr_iova2 failed with error bad address",
        title: "GPU memory cannot be registered through the loaded peer-memory module",
        cause: "nvidia_peermem (or nv_peer_mem) is loaded but the NIC driver cannot pin GPU memory through it: built against another OFED's ib_core, or a NIC driver without peer-memory support; NCCL then fails registration or runs without GPUDirect RDMA",
        fix: crate::bench::peermem::FIX,
        report: "https://github.com/Mellanox/nv_peer_memory/issues/115",
        ..ROW
    },
    Mode {
        id: "job-memlock",
        seen: Seen::Job,
        severity: Sev::Error,
        symptom: "NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        title: "the job's locked-memory limit is low",
        cause: "the job (srun, mpirun, a container, a unit) gets its memlock limit from what starts it, not from limits.conf: 64 KiB under slurmd or a service is common, and memory registration and queue creation fail beyond it",
        fix: injob::MEMLOCK_FIX,
        report: "https://github.com/ai4d-iasc/trixie/issues/81",
        ..ROW
    },
    Mode {
        id: "job-rdma-devices",
        seen: Seen::Job,
        severity: Sev::Error,
        symptom: "NCCL WARN NET/IB : Unable to open device mlx5_bond_0",
        title: "the job cannot open the RDMA devices",
        cause: "sysfs shows the devices, but the job's container or mount namespace has no /dev/infiniband/uverbsN for them",
        fix: injob::DEVICES_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/451",
        ..ROW
    },
    Mode {
        id: "job-rdma-provider",
        seen: Seen::Job,
        severity: Sev::Error,
        symptom: "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0",
        title: "no user-space provider for the device's kernel driver",
        cause: "libibverbs opens a device through the provider of its kernel driver (/etc/libibverbs.d); a container image without it (or with another OFED's) sees the device and cannot open it",
        fix: injob::PROVIDER_FIX,
        report: "https://github.com/NVIDIA/caffe/issues/590",
        ..ROW
    },
    Mode {
        id: "job-nccl-hca",
        seen: Seen::Job,
        severity: Sev::Error,
        title: "NCCL_IB_HCA names an HCA that is absent or down",
        cause: "NCCL uses only the HCAs NCCL_IB_HCA names; one that the job does not see, or whose port is down, fails the connection or leaves the rail unused",
        fix: injob::HCA_FIX,
        report: "https://github.com/NVIDIA/nccl/issues/799",
        ..ROW
    },
];

/// The row of ID.
pub fn rule(id: &str) -> Option<&'static Mode> {
    RULES.iter().find(|m| m.id == id)
}
