//! What the CUDA driver API says about the GPUs, for `inventory` and `doctor`: the driver API
//! version and, per device, its name, PCI bus id, compute capability,
//! `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` and `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`. Never fails: a missing library or a failing call is
//! written in `error`.

use std::ffi::{c_char, c_int, CStr};

use cudarc::driver::sys;

/// The libcuda symbols the inventory calls.
pub const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceGetPCIBusId",
];

/// One CUDA device.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    pub ordinal: i32,
    pub name: Option<String>,
    /// `0000:3B:00.0` as CUDA writes it.
    pub pci_bus_id: Option<String>,
    /// `(major, minor)`.
    pub compute_capability: Option<(i32, i32)>,
    pub dmabuf_supported: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED` (116): whether the GPU can do GPUDirect
    /// RDMA at all (0 on consumer GPUs and some inference parts).
    pub gpudirect_rdma_supported: Option<bool>,
}

/// What the driver API said.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Inventory {
    /// `cuDriverGetVersion` (13000 for 13.0).
    pub driver_version: Option<i32>,
    pub devices: Vec<Device>,
    /// Why it could not answer (libcuda missing, a symbol missing, cuInit failed).
    pub error: Option<String>,
}

fn ok(res: sys::CUresult) -> bool {
    res == sys::CUresult::CUDA_SUCCESS
}

/// Ask libcuda (loaded here, at run time).
pub fn inventory() -> Inventory {
    if !super::libcuda_present() {
        return Inventory {
            error: Some("libcuda.so.1 not found (no NVIDIA user-space driver)".into()),
            ..Inventory::default()
        };
    }
    if let Err(crate::Error::CudaSymbolMissing { symbol }) = super::ensure_symbols(SYMBOLS) {
        return Inventory {
            error: Some(format!("libcuda has no {symbol}")),
            ..Inventory::default()
        };
    }
    let mut inv = Inventory::default();
    let mut v: c_int = 0;
    // SAFETY: symbols checked above; out-pointers to live locals, as the API asks.
    if ok(unsafe { sys::cuDriverGetVersion(&mut v) }) && v > 0 {
        inv.driver_version = Some(v);
    }
    // SAFETY: cuInit(0) is always valid to call.
    let r = unsafe { sys::cuInit(0) };
    if !ok(r) {
        inv.error = Some(format!(
            "cuInit failed with CUDA error {} (no usable GPU?)",
            r as u32
        ));
        return inv;
    }
    let mut n: c_int = 0;
    // SAFETY: out-pointer to a live local.
    if !ok(unsafe { sys::cuDeviceGetCount(&mut n) }) {
        inv.error = Some("cuDeviceGetCount failed".into());
        return inv;
    }
    for ordinal in 0..n {
        let mut dev: sys::CUdevice = 0;
        // SAFETY: out-pointer to a live local; ordinal < count.
        if !ok(unsafe { sys::cuDeviceGet(&mut dev, ordinal) }) {
            continue;
        }
        inv.devices.push(device(ordinal, dev));
    }
    inv
}

fn device(ordinal: i32, dev: sys::CUdevice) -> Device {
    type TextFn = unsafe fn(*mut c_char, c_int, sys::CUdevice) -> sys::CUresult;
    let text = |f: TextFn| {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer is 256 bytes and its length is passed; symbols checked.
        if !ok(unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) }) {
            return None;
        }
        // SAFETY: CUDA wrote a NUL-terminated string into buf (zeroed, so a NUL exists even if
        // it wrote nothing).
        Some(
            unsafe { CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    let attr = |a: sys::CUdevice_attribute| {
        let mut x: c_int = 0;
        // SAFETY: out-pointer to a live local.
        ok(unsafe { sys::cuDeviceGetAttribute(&mut x, a, dev) }).then_some(x)
    };
    use sys::CUdevice_attribute as A;
    Device {
        ordinal,
        name: text(sys::cuDeviceGetName),
        pci_bus_id: text(sys::cuDeviceGetPCIBusId),
        compute_capability: match (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR),
        ) {
            (Some(a), Some(b)) => Some((a, b)),
            _ => None,
        },
        dmabuf_supported: attr(A::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).map(|x| x == 1),
        gpudirect_rdma_supported: attr(A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED)
            .map(|x| x == 1),
    }
}
