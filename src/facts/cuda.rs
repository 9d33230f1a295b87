//! CUDA: the toolkit installed in the root (`/usr/local/cuda*/version.json`,
//! `nvcc`), and on a running system the CUDA driver API itself (libcuda,
//! loaded at run time only by `inventory` and `doctor`): its version and,
//! per device, `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` and `..._GPU_DIRECT_RDMA_SUPPORTED`.
//!
//! The runtime answer is a plain struct, [`CudaRuntime`], so a test can fill
//! it instead of [`libcuda_probe`] (which asks the gdrprov-rdma crate).

use super::util::{query_ok, version_in};
use crate::host::Host;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CudaDevice {
    pub ordinal: i32,
    pub name: Option<String>,
    /// `0000:3B:00.0` as CUDA writes it.
    pub pci_bus_id: Option<String>,
    /// `9.0`.
    pub compute_capability: Option<String>,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` (124).
    pub dmabuf_supported: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (116): 0 on a GPU that cannot do
    /// GPUDirect RDMA at all (consumer parts, some inference parts), whatever the NIC.
    /// Absent from snapshots recorded before it was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpudirect_rdma: Option<bool>,
}

/// What the CUDA driver API said.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CudaRuntime {
    /// `cuDriverGetVersion`, as `13.0`; `None` when libcuda is absent.
    pub driver_api: Option<String>,
    pub devices: Vec<CudaDevice>,
    /// Why it could not answer (libcuda missing, cuInit failed).
    pub error: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CudaFacts {
    /// CUDA driver API version: from libcuda when it could be asked, else
    /// inferred from the driver branch (then `driver_api_source` says so).
    pub driver_api: Option<String>,
    pub driver_api_source: Option<String>,
    /// The toolkit `/usr/local/cuda` points to (or the newest one).
    pub toolkit: Option<String>,
    /// Every toolkit found: (directory, version).
    pub toolkits: Vec<(String, String)>,
    /// The libcuda answer; `None` when it was not asked (image root, `plan`).
    pub runtime: Option<CudaRuntime>,
}

fn toolkit_version(host: &Host, dir: &str) -> Option<String> {
    if let Some(json) = host.read_fact(&format!("{dir}/version.json")) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&json) {
            if let Some(s) = v.pointer("/cuda/version").and_then(|x| x.as_str()) {
                return Some(s.to_string());
            }
        }
    }
    if let Some(txt) = host.read_fact(&format!("{dir}/version.txt")) {
        return version_in(&txt);
    }
    None
}

pub fn probe(host: &Host, driver_major: Option<u32>, runtime: Option<CudaRuntime>) -> CudaFacts {
    let mut toolkits = Vec::new();
    for name in host.list_dir_prefix("/usr/local", "cuda") {
        if name == "cuda" || name.starts_with("cuda-") {
            let dir = format!("/usr/local/{name}");
            if let Some(v) = toolkit_version(host, &dir) {
                toolkits.push((dir, v));
            }
        }
    }
    let mut toolkit = toolkits
        .iter()
        .find(|(d, _)| d == "/usr/local/cuda")
        .or_else(|| {
            toolkits
                .iter()
                .max_by(|a, b| crate::versions::compare(&a.1, &b.1))
        })
        .map(|(_, v)| v.clone());
    if toolkit.is_none() {
        // `release 12.4, V12.4.131` on the last line.
        for nvcc in ["/usr/local/cuda/bin/nvcc", "nvcc"] {
            if let Some(out) = query_ok(host, &[nvcc, "--version"]) {
                toolkit = out
                    .lines()
                    .find_map(|l| l.split(", V").nth(1))
                    .and_then(version_in);
                if toolkit.is_some() {
                    break;
                }
            }
        }
    }
    let (driver_api, driver_api_source) = match runtime.as_ref().and_then(|r| r.driver_api.clone())
    {
        Some(v) => (Some(v), Some("libcuda (cuDriverGetVersion)".to_string())),
        None => match driver_major.and_then(super::nvidia::cuda_for_driver) {
            Some(v) => (
                Some(v.to_string()),
                Some("inferred from the driver branch".to_string()),
            ),
            None => (None, None),
        },
    };
    CudaFacts {
        driver_api,
        driver_api_source,
        toolkit,
        toolkits,
        runtime,
    }
}

/// Asks libcuda, loaded at run time through the gdrprov-rdma crate (the binary starts without
/// it). Never fails: a missing library or a failing call is written in `error`.
pub fn libcuda_probe() -> CudaRuntime {
    let inv = gdrprov_rdma::cuda::inventory::inventory();
    CudaRuntime {
        driver_api: inv
            .driver_version
            .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10)),
        devices: inv
            .devices
            .into_iter()
            .map(|d| CudaDevice {
                ordinal: d.ordinal,
                name: d.name,
                pci_bus_id: d.pci_bus_id,
                compute_capability: d.compute_capability.map(|(a, b)| format!("{a}.{b}")),
                dmabuf_supported: d.dmabuf_supported,
                gpudirect_rdma: d.gpudirect_rdma_supported,
            })
            .collect(),
        error: inv.error,
    }
}
