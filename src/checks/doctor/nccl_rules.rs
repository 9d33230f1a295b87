//! The lines of NCCL's log (`NCCL_DEBUG=INFO`) that name a failure, one row
//! each, in the shape of [`super::modes`]: the first row a line matches
//! gives its finding (`nccl_log` fills in what depends on the host for the
//! few rows that need it). Each row names the public report its line and
//! cause came from; `tests/fixtures/field-lines/nccl/` keeps the lines.
//! Long because it is the table: one row per failure mode, mostly text.

use super::modes::{Mode, Seen};
use super::Sev;

const ROW: Mode = Mode {
    id: "",
    seen: Seen::NcclLog,
    severity: Sev::Error,
    all: &[],
    any: &[],
    not: &[],
    symptom: "",
    title: "",
    cause: "",
    fix: "",
    report: "",
};

/// A completion with work-completion status N, in the words of every NCCL
/// version: `with error 12, opcode` (up to 2.18), `with status=12 opcode`
/// and `with status=IBV_WC_RETRY_EXC_ERR(12) opcode` (2.29 on).
macro_rules! status {
    ($n:literal) => {
        &[
            concat!("with error ", $n, ","),
            concat!("status=", $n, " "),
            concat!("(", $n, ") opcode"),
        ]
    };
}

/// The rows, in the order they are tried.
pub const RULES: &[Mode] = &[
    // NCCL's own words on the path it chose (nccl_log fills in the fix from the host).
    Mode {
        id: "nccl-gdr-disabled",
        all: &["GPU Direct RDMA Disabled for HCA"],
        not: &["NET/Socket"],
        symptom: "NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        title: "NCCL disabled GPUDirect RDMA",
        cause: "NCCL found no way to let the NIC reach GPU memory: no peer-memory module it recognises (nvidia_peermem / nv_peer_mem) and no usable dma-buf (NCCL_DMABUF_ENABLE, open driver, kernel >= 5.12), or the GPU and NIC are farther apart than NCCL_NET_GDR_LEVEL",
        fix: "on the open driver and kernel >= 5.12: `gdrprov apply rdma-dmabuf`; else load nvidia_peermem (`gdrprov apply legacy-peermem`); NCCL older than 2.23.4 needs an upgrade to see nvidia_peermem",
        // The report shows the socket transport's form of the line (`NET/Socket : GPU Direct RDMA
        // Disabled for HCA 0 'eth0'`, the socket fallback, not this row); NCCL prints the IB form
        // with the same words.
        report: "https://github.com/NVIDIA/nccl/issues/1410",
        ..ROW
    },
    Mode {
        id: "nccl-gdr-enabled",
        severity: Sev::Info,
        all: &["GPU Direct RDMA Enabled for HCA"],
        symptom: "NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
        title: "NCCL uses GPUDirect RDMA",
        report: "https://github.com/siderolabs/docs/issues/566",
        ..ROW
    },
    Mode {
        id: "nccl-dmabuf-available",
        severity: Sev::Info,
        all: &["DMA-BUF is available on GPU device"],
        symptom: "NCCL INFO DMA-BUF is available on GPU device 1",
        title: "NCCL sees dma-buf support on the GPU",
        cause: "the open driver exports GPU memory as dma-buf",
        report: "https://github.com/NVIDIA/nccl/issues/1925",
        ..ROW
    },
    Mode {
        id: "nccl-no-ib-device",
        all: &["NET/IB : No device found"],
        symptom: "NCCL INFO NET/IB : No device found.",
        title: "NCCL found no RDMA device and falls back to sockets",
        cause: "no RDMA device on the host, or one NCCL's IB transport could not open: libibverbs missing in the job's environment, NCCL_IB_HCA excluding it, or a container without /dev/infiniband (information only when every channel stays GPU to GPU inside the node)",
        fix: "load the NIC's RDMA driver (mlx5_ib, erdma), make libibverbs and /dev/infiniband available to the job, and check NCCL_IB_HCA",
        report: "https://github.com/NVIDIA/nccl/issues/952",
        ..ROW
    },
    Mode {
        id: "peermem-invalid-argument",
        all: &["nvidia_peermem", "Invalid argument"],
        symptom: "modprobe: ERROR: could not insert 'nvidia_peermem': Invalid argument",
        title: "nvidia_peermem does not load: `modprobe nvidia_peermem` gives \"Invalid argument\"",
        cause: "the NVIDIA driver was built before MLNX_OFED/DOCA-OFED was installed, so nvidia_peermem lacks OFED's peer-memory symbols (ib_register_peer_memory_client)",
        fix: "reinstall the NVIDIA driver (or rebuild its DKMS modules) after OFED, then `modprobe nvidia_peermem`; or use dma-buf instead (`gdrprov apply rdma-dmabuf`, open driver, kernel >= 5.12)",
        report: "https://github.com/NVIDIA/nccl/issues/1044",
        ..ROW
    },
    Mode {
        id: "nccl-socket",
        severity: Sev::Warn,
        any: &[&["Using network Socket", "NET/Socket : Using", "NET/Socket : GPU Direct RDMA"]],
        symptom: "NCCL INFO Using network Socket",
        title: "NCCL uses TCP sockets between nodes",
        cause: "no RDMA transport was usable (on EFA: the aws-ofi-nccl plugin was not loaded)",
        fix: "see the NET/IB findings; `gdrprov doctor` without a log lists the RDMA devices; on EFA install aws-ofi-nccl and put it on LD_LIBRARY_PATH",
        report: "https://github.com/huggingface/accelerate/issues/2183",
        ..ROW
    },
    // The families of failure the field reports (issue 48).
    Mode {
        id: "nccl-memlock",
        all: &["Cannot allocate memory"],
        any: &[&["ibv_reg_mr", "ibv_reg_dmabuf_mr", "ibv_create_qp", "ibv_create_cq", "Unable to register memory"]],
        symptom: "misc/ibvwrap.cc:278 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory",
        title: "NCCL could not register memory or create a queue pair: the job's locked-memory limit",
        cause: "registering memory with the NIC pins it against the job's RLIMIT_MEMLOCK; the limit the job really has (under mpirun, srun, a container or a systemd unit) is small (8192 KiB is a common default), whatever the login shell shows",
        fix: "raise it where the job starts: `* - memlock unlimited` in /etc/security/limits.d (and a new login), LimitMEMLOCK=infinity for slurmd and other units, `--ulimit memlock=-1` for a container; check with `mpirun ... bash -c 'ulimit -l'` or `srun bash -c 'ulimit -l'`",
        report: "https://github.com/NVIDIA/nccl-tests/issues/206",
        ..ROW
    },
    Mode {
        id: "nccl-dmabuf-nic-unsupported",
        all: &["ibv_reg_dmabuf_mr"],
        any: &[&["Operation not supported", "Unknown error 524"]],
        symptom: "misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported",
        title: "the NIC's stack cannot import GPU memory as dma-buf",
        cause: "the RDMA side refuses dma-buf memory regions: a kernel before 5.12, an MLNX_OFED or rdma-core too old for ibv_reg_dmabuf_mr, or a NIC driver without dma-buf support; the GPU side may be ready while the NIC side is not",
        fix: "install a current DOCA-OFED or rdma-core (>= 34) on a kernel >= 5.12 and retry; until then set NCCL_DMABUF_ENABLE=0 and use the peer-memory path (`gdrprov apply legacy-peermem`)",
        report: "https://github.com/NVIDIA/nccl/issues/778",
        ..ROW
    },
    Mode {
        id: "nccl-retry-exceeded",
        all: &["Got completion"],
        any: &[status!("12")],
        symptom: "NCCL WARN NET/IB : Got completion from peer xxx.xxx.xxx.xxx<55921> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221 remoteGids::ffff:29.87.88.182",
        title: "RDMA packets to a peer were never acknowledged (completion error 12: retries exceeded)",
        cause: "the peer did not answer within the transport's retries (IBV_WC_RETRY_EXC_ERR, vendor err 129): on RoCE a GID index that is not routable between the nodes (link-local or the wrong RoCE version), a lossy fabric (no PFC/ECN, drops under load), or, on a rail-optimised fabric, traffic between NICs of different rails; a port or peer going down does the same",
        fix: "point NCCL_IB_GID_INDEX at the RoCE v2 GID with the port's routable address (`show_gids`, `gdrprov doctor`), make the fabric lossless (PFC on the RoCE priority, ECN), set NCCL_CROSS_NIC=0 on rail-optimised fabrics, and check both ports' error counters; `ib_write_bw` between the two nodes reproduces it without NCCL",
        report: "https://github.com/NVIDIA/nccl/issues/1814",
        ..ROW
    },
    Mode {
        id: "nccl-qp-connect-timeout",
        all: &["ibv_modify_qp"],
        any: &[&["Connection timed out", "Network is unreachable"]],
        symptom: "ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR, local GID index 3, local GID ::ffff:xxx.xx.xx.xx, remote GID ::ffff:xxx.xx.xxx.xx",
        title: "NCCL could not connect a queue pair to a peer (ibv_modify_qp timed out)",
        cause: "moving a queue pair to RTR needs a route to the peer's GID: the GID index names an address the peer cannot reach (another subnet, link-local, IPv6 where IPv4 is routed), the NICs are on different rails of a rail-optimised fabric, or ARP/neighbour resolution for the RoCE address fails",
        fix: "use the same routable RoCE v2 GID index on every node (NCCL_IB_GID_INDEX, `show_gids`), set NCCL_CROSS_NIC=0 on rail-optimised fabrics, and check that the RoCE interfaces reach each other (`ping -I <netdev>`, `rping`)",
        report: "https://github.com/NVIDIA/nccl/issues/2013",
        ..ROW
    },
    Mode {
        id: "nccl-local-length",
        all: &["Got completion"],
        any: &[status!("1")],
        // No posted line of this status was found: the report (a fix in NCCL) names the status
        // and its cause, and the symptom is NCCL's line in the format of the other rows with it.
        symptom: "NCCL WARN NET/IB : Got completion from peer 10.1.3.201<33057> with status=1 opcode=0 len=0 vendor err 105 (Recv)",
        title: "a message did not fit where it was received (completion error 1: local length): the MTU differs along the path",
        cause: "IBV_WC_LOC_LEN_ERR: the two ends of a queue pair use different path MTUs, because the ports' active MTU, the RoCE network devices' MTU or a switch port's MTU differ between the nodes",
        fix: "give every NIC port, RoCE netdev and switch port on the path the same MTU (`ibv_devinfo | grep active_mtu`, `ip link show <netdev>`; gdrprov's `network.mtu` sets the netdev's and `gdrprov fleet report` compares nodes)",
        report: "https://github.com/NVIDIA/nccl/pull/2135",
        ..ROW
    },
    Mode {
        id: "nccl-local-protection",
        all: &["Got completion"],
        any: &[status!("4")],
        symptom: "ib_plugin.c:1105 NCCL WARN NET/IB : Got completion from peer 10.0.35.1<49189> with error 4, opcode 5327, len 5327, vendor err 81 (Send)",
        title: "the NIC was refused access to the memory it was given (completion error 4: local protection)",
        cause: "IBV_WC_LOC_PROT_ERR on GPU memory: the NIC's peer-to-peer reads of the GPU are blocked or translated on the way (ACS redirect on a PCIe switch, the IOMMU translating DMA in a VM or with iommu=on), or the peer-memory module registered memory the NIC cannot map",
        fix: "disable ACS on the switches between GPU and NIC (BIOS, or `gdrprov doctor` names the bridge), run the IOMMU in passthrough (`iommu=pt`, the rdma profiles set it), check the peer-memory findings; NCCL_NET_GDR_LEVEL=LOC confirms it by keeping GPU memory away from the NIC",
        report: "https://github.com/NVIDIA/nccl/issues/214",
        ..ROW
    },
    Mode {
        id: "nccl-port-error",
        all: &["Got async event"],
        any: &[&["port error"]],
        // The line as quoted from the OPT-175B training logbook; the event is libibverbs' IBV_EVENT_PORT_ERR.
        symptom: "p2p_plugin.c:141 NCCL WARN NET/IB : Got async event : port error",
        title: "an RDMA port went down under the job (async event: port error)",
        cause: "IBV_EVENT_PORT_ERR: the port's link dropped while the job ran (a flapping link: cable, transceiver, switch port, or the netdev taken down)",
        fix: "look at the port's link events in the kernel log (`gdrprov doctor` lists them), its physical error counters (`ethtool -S <netdev>`, `perfquery`) and replace the cable or optic that flaps; run the job again once the port stays ACTIVE",
        report: "https://github.com/open-mpi/ompi/issues/180",
        ..ROW
    },
    Mode {
        id: "nccl-device-not-visible",
        any: &[&["Unable to open device", "Call to ibv_open_device failed"]],
        symptom: "transport/net_ib.cc:148 NCCL WARN NET/IB : Unable to open device mlx5_bond_0",
        title: "NCCL sees an RDMA device but cannot open it where the job runs",
        cause: "the device is listed in /sys/class/infiniband but the job cannot open its /dev/infiniband/uverbs* node: a container started without the RDMA devices (or IPC_LOCK), the node's permissions, or a user-space provider (libmlx5 in the container) that does not match the host's kernel driver",
        fix: "give the job the devices: `docker run --device=/dev/infiniband --cap-add=IPC_LOCK` (Kubernetes: the RDMA shared device plugin), use the host's rdma-core/DOCA-OFED version inside the container, and check `ibv_devinfo` where the job runs",
        report: "https://github.com/NVIDIA/nccl/issues/451",
        ..ROW
    },
    Mode {
        id: "ibverbs-provider-mismatch",
        severity: Sev::Warn,
        all: &["libibverbs: Warning: couldn't load driver"],
        symptom: "libibverbs: Warning: couldn't load driver 'mlx4': /usr/local/nvidia/cpu_lib/libibverbs.so.1: version `IBVERBS_PRIVATE_22' not found (required by /usr/lib64/libibverbs/libmlx4-rdmav2.so)",
        title: "libibverbs could not load a NIC's user-space provider",
        cause: "the provider library is missing where the job runs, or belongs to another rdma-core than the libibverbs the job loaded (`IBVERBS_PRIVATE_NN not found`: a container's or a bundled libibverbs mixed with the host's providers); harmless for a provider of a NIC this host does not have (ipathverbs, vmw_pvrdma), but for the NIC's own (mlx5, efa, irdma, bnxt_re, erdma) its devices cannot be opened",
        fix: "use one rdma-core for libibverbs and its providers (the job image's own, or the host's mounted whole; not a bundled libibverbs.so on LD_LIBRARY_PATH), install ibverbs-providers in the image, and check with `ibv_devinfo` where the job runs",
        report: "https://github.com/bytedance/byteps/issues/313",
        ..ROW
    },
    Mode {
        id: "nccl-no-libibverbs",
        all: &["Failed to open libibverbs.so"],
        symptom: "NCCL INFO Failed to open libibverbs.so[.1]",
        title: "the job has no libibverbs: NCCL cannot use RDMA",
        cause: "libibverbs (rdma-core) is not installed where the job runs (a container image without it is common) or is not on the library path, so NCCL falls back to sockets",
        fix: "install rdma-core and ibverbs-providers (or DOCA-OFED's user space) in the job's image, or put its lib directory on LD_LIBRARY_PATH",
        report: "https://github.com/huggingface/accelerate/issues/2183",
        ..ROW
    },
    Mode {
        id: "nccl-nvls-fabric-manager",
        all: &["nvls"],
        any: &[&["invalid argument"]],
        symptom: "transport/nvls.cc:158 NCCL WARN Cuda failure 1 'invalid argument'",
        title: "NVLink SHARP (NVLS) setup failed: Fabric Manager was restarted without a GPU reset",
        cause: "on NVSwitch systems NVLS multicast memory needs Fabric Manager and the GPUs initialised in order; after Fabric Manager is stopped and started again with the GPUs not reset, CUDA refuses the multicast objects NCCL creates",
        fix: "stop the GPU jobs, stop nvidia-fabricmanager, reset the GPUs (`nvidia-smi -r`) or reboot, start nvidia-fabricmanager; NCCL_NVLS_ENABLE=0 runs without NVLS meanwhile",
        report: "https://github.com/NVIDIA/nccl/issues/1488",
        ..ROW
    },
    Mode {
        id: "nccl-fabric-manager-not-ready",
        any: &[&["system not yet initialized", "failure 802"]],
        symptom: "Test CUDA failure common.cu:941 'system not yet initialized'",
        title: "CUDA is not ready on this NVSwitch system: Fabric Manager is not running",
        cause: "cudaErrorSystemNotReady (802): on NVSwitch boards (HGX/DGX) CUDA waits for Fabric Manager to bring up the NVLink fabric; it is not installed, not enabled at boot, failed, or its version differs from the driver's",
        fix: "install nvidia-fabricmanager of exactly the driver's version, `systemctl enable --now nvidia-fabricmanager`, and check `nvidia-smi -q | grep -A2 Fabric` shows the fabric Completed",
        report: "https://github.com/NVIDIA/nccl-tests/issues/264",
        ..ROW
    },
];
