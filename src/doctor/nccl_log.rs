//! Maps lines of an NCCL debug log (`NCCL_DEBUG=INFO`) to findings.

use super::{Finding, Sev};
use crate::facts::nvidia::Flavor;
use crate::facts::Facts;
use crate::versions;

pub fn findings(log: &str, file: &str, facts: &Facts) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let kernel_ok = facts
        .kernel
        .effective()
        .is_some_and(|k| versions::satisfies(k, ">= 5.12").unwrap_or(false));
    let open = facts.nvidia_driver.flavor == Flavor::Open;
    let old_nccl = facts
        .nccl
        .version
        .as_deref()
        .is_some_and(|v| versions::satisfies(v, "< 2.23.4").unwrap_or(false));
    for (i, line) in log.lines().enumerate() {
        let ev = format!("{file}:{}: {}", i + 1, line.trim());
        let mut push = |id: &'static str, f: Finding| {
            if seen.insert(id) {
                out.push(f);
            }
        };
        if line.contains("GPU Direct RDMA Disabled for HCA") {
            let fix = if open && kernel_ok {
                "this host can use dma-buf: `gdrprov apply rdma-dmabuf` (sets NCCL_DMABUF_ENABLE=1) or export NCCL_DMABUF_ENABLE=1; check NCCL_NET_GDR_LEVEL against the GPU-NIC distance in `gdrprov inventory`".to_string()
            } else if old_nccl {
                "upgrade NCCL to 2.23.4 or newer (older NCCL does not look for /sys/module/nvidia_peermem), or load nv_peer_mem".to_string()
            } else {
                "load nvidia_peermem (`gdrprov apply legacy-peermem`), or switch to the open driver and kernel >= 5.12 for dma-buf (`rdma-dmabuf`)".to_string()
            };
            push(
                "nccl-gdr-disabled",
                Finding::new(
                    "nccl-gdr-disabled",
                    Sev::Error,
                    "NCCL disabled GPUDirect RDMA",
                    ev,
                    "NCCL found no way to let the NIC reach GPU memory: no peer-memory module it recognises (nvidia_peermem / nv_peer_mem) and no usable dma-buf (NCCL_DMABUF_ENABLE, open driver, kernel >= 5.12), or the GPU and NIC are farther apart than NCCL_NET_GDR_LEVEL",
                    fix,
                ),
            );
        } else if line.contains("GPU Direct RDMA Enabled for HCA") {
            push(
                "nccl-gdr-enabled",
                Finding::new(
                    "nccl-gdr-enabled",
                    Sev::Info,
                    "NCCL uses GPUDirect RDMA",
                    ev,
                    "",
                    "",
                ),
            );
        } else if line.contains("DMA-BUF is available on GPU device") {
            push(
                "nccl-dmabuf-available",
                Finding::new(
                    "nccl-dmabuf-available",
                    Sev::Info,
                    "NCCL sees dma-buf support on the GPU",
                    ev,
                    "the open driver exports GPU memory as dma-buf",
                    "",
                ),
            );
        } else if line.contains("NET/IB : No device found")
            || line.contains("NET/IB : No device found.")
        {
            push(
                "nccl-no-ib-device",
                Finding::new(
                    "nccl-no-ib-device",
                    Sev::Error,
                    "NCCL found no RDMA device and falls back to sockets",
                    ev,
                    if facts.rdma_devices.is_empty() {
                        "there is no RDMA device on this host (/sys/class/infiniband is empty)".to_string()
                    } else {
                        "RDMA devices exist, but NCCL's IB transport did not open one: libibverbs missing in the job's environment, NCCL_IB_HCA excluding them, or the container without /dev/infiniband".to_string()
                    },
                    "load the NIC's RDMA driver (mlx5_ib, erdma), make libibverbs and /dev/infiniband available to the job, and check NCCL_IB_HCA",
                ),
            );
        } else if line.contains("nvidia_peermem") && line.contains("Invalid argument") {
            push("peermem-invalid-argument", super::peermem_einval(ev));
        } else if line.contains("Using network Socket") || line.contains("NET/Socket : Using") {
            push(
                "nccl-socket",
                Finding::new(
                    "nccl-socket",
                    Sev::Warn,
                    "NCCL uses TCP sockets between nodes",
                    ev,
                    "no RDMA transport was usable",
                    "see the NET/IB findings; `gdrprov doctor` without a log lists the RDMA devices",
                ),
            );
        }
    }
    out
}
