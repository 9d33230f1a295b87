//! Every way RDMA and GPU work can fail, each with its cause and the fix. The messages name
//! gdrprov's own options where one is the way out (`--memory host`, `--device DEV:PORT`).

use std::io;

/// Errors of the RDMA and GPU layer and of `gdrprov bench`. Each message names the cause and what
/// to do about it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "libibverbs is not installed or not loadable: {detail}. Install rdma-core's user-space verbs library \
         (Debian/Ubuntu: `apt install libibverbs1 ibverbs-providers`; RHEL: `dnf install libibverbs`)"
    )]
    LibibverbsMissing { detail: String },

    #[error(
        "this libibverbs has no `{symbol}` (rdma-core older than v34): dma-buf memory regions need \
         rdma-core >= 34 or a current MLNX_OFED/DOCA-OFED"
    )]
    LibibverbsTooOld { symbol: String },

    #[error("no RDMA device: {why}")]
    NoRdmaDevice { why: String },

    #[error("RDMA device `{name}` not found; devices present: {available}")]
    DeviceNotFound { name: String, available: String },

    #[error(
        "RDMA device `{device}` has no port {port} (it has {count}); ports are numbered from 1"
    )]
    PortNotFound { device: String, port: u8, count: u8 },

    #[error(
        "port {device}:{port} is not ACTIVE (state {state}{phys}): check the cable/link \
         (`ibstat`, `rdma link`), the subnet manager on InfiniBand (`opensm`), or the netdev on RoCE (`ip link set <dev> up`)"
    )]
    PortNotActive {
        device: String,
        port: u8,
        state: String,
        phys: String,
    },

    #[error(
        "no ACTIVE RDMA port: {summary}. Bring a link up, or name a port with --device DEV:PORT"
    )]
    NoActivePort { summary: String },

    #[error("port {device}:{port} has no usable GID{detail}")]
    NoGid {
        device: String,
        port: u8,
        detail: String,
    },

    #[error("{op} failed on {device}: {source}")]
    Verbs {
        op: &'static str,
        device: String,
        source: io::Error,
    },

    #[error(
        "memlock limit too low: `ulimit -l` is {limit} bytes, the benchmark pins {needed} bytes. Raise it \
         (`ulimit -l unlimited`; systemd: LimitMEMLOCK=infinity; /etc/security/limits.conf: `* - memlock unlimited`) or run as root"
    )]
    MemlockTooLow { limit: u64, needed: u64 },

    #[error(
        "this RDMA driver/OFED does not support dma-buf MRs ({device}: ibv_reg_dmabuf_mr returned {errno}). \
         Use a NIC and driver with dma-buf support (mlx5 with kernel >= 5.12 and rdma-core >= 34), or --memory cuda-peermem with nvidia_peermem"
    )]
    DmabufMrUnsupported { device: String, errno: String },

    #[error(
        "nvidia_peermem not loaded: registering GPU memory with ibv_reg_mr on {device} failed with EFAULT{loaded}. \
         Load it (`modprobe nvidia_peermem`), or use --memory cuda-dmabuf"
    )]
    PeermemNotLoaded { device: String, loaded: String },

    #[error("registering {what} memory on {device} failed: {source}{hint}")]
    RegisterMr {
        what: &'static str,
        device: String,
        source: io::Error,
        hint: String,
    },

    #[error("RDMA WRITE failed on QP {qp}: completion status {status} ({code}){hint}")]
    Completion {
        qp: usize,
        status: String,
        code: u32,
        hint: String,
    },

    #[error("RDMA transfer stalled: no completion for {secs} s (check the link, the GID index and the MTU)")]
    Stalled { secs: u64 },

    #[error(
        "libcuda (the NVIDIA driver's CUDA library) is not loadable: {detail}. Install the NVIDIA driver \
         (it ships libcuda.so.1); `bench loopback` can use --memory host"
    )]
    LibcudaMissing { detail: String },

    #[error(
        "libcuda has no `{symbol}`: the NVIDIA driver is too old for this check (dma-buf export needs \
         a driver for CUDA >= 11.7, i.e. R515 or newer)"
    )]
    CudaSymbolMissing { symbol: String },

    #[error("{op} failed: {name} ({code}): {message}{hint}")]
    Cuda {
        op: &'static str,
        code: u32,
        name: String,
        message: String,
        hint: String,
    },

    #[error(
        "libcufile (GPUDirect Storage's cuFile library) is not loadable: {detail}. Install the CUDA \
         toolkit's GDS package (Debian/Ubuntu: `apt install libcufile-13-0` or `nvidia-gds`), or add its \
         directory to the loader's path (`ldconfig`)"
    )]
    LibcufileMissing { detail: String },

    /// A cuFile call failed; `code` is cuFile's own (5027: the file could not be registered).
    #[error("{op} failed: cuFile error {code} ({name})")]
    Cufile {
        op: &'static str,
        code: u32,
        name: String,
    },

    #[error("GPU {index} not found: {count} CUDA device(s) visible (check CUDA_VISIBLE_DEVICES and `nvidia-smi`)")]
    GpuNotFound { index: u32, count: i32 },

    #[error(
        "GPU {index} ({name}) does not support dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 0): dma-buf needs \
         the NVIDIA open kernel module driver, a Turing or newer data-centre/RTX GPU and kernel >= 5.12. \
         Switch to the open driver (profile rdma-dmabuf) or use --memory cuda-peermem"
    )]
    GpuNoDmabuf { index: u32, name: String },

    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// `gdrprov bench pair` (gdrprov's src/bench/pair): its own error, already worded.
    #[error("{0}")]
    Pair(String),
}

impl Error {
    /// Wrap an ibverbs call's error.
    pub fn verbs(op: &'static str, device: &str, source: io::Error) -> Self {
        Error::Verbs {
            op,
            device: device.to_string(),
            source,
        }
    }

    /// No GPU visible to CUDA (`CUDA_ERROR_NO_DEVICE`), with where to look.
    pub fn no_cuda_device() -> Self {
        Error::Cuda {
            op: "cuDeviceGetCount",
            code: 100,
            name: "CUDA_ERROR_NO_DEVICE".into(),
            message: "no CUDA device".into(),
            hint: ": no NVIDIA GPU is visible (check `nvidia-smi` and CUDA_VISIBLE_DEVICES)".into(),
        }
    }
}

/// The name of an errno value, for messages ("EOPNOTSUPP (95)").
pub fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EBADF => "EBADF",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EINVAL => "EINVAL",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ENODEV => "ENODEV",
        _ => return format!("errno {errno}"),
    };
    format!("{name} ({errno})")
}
