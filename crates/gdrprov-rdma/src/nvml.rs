//! GPU health counters through NVML (libnvidia-ml.so.1, loaded at run time): uncorrectable ECC
//! errors, pending or failed row remapping, retired pages, persistence mode, NVLink links down.
//! gdrprov's `gpu-health` check judges them.
#![allow(
    unsafe_code,
    reason = "NVML is C, loaded at run time: symbols and calls through libloading"
)]

use libloading::{Library, Symbol};
use serde::Serialize;
use std::ffi::{c_char, c_uint, c_ulonglong, c_void, CStr};

type Ret = c_uint;
const SUCCESS: Ret = 0;
const INSUFFICIENT_SIZE: Ret = 7;
const NVLINK_MAX_LINKS: c_uint = 18;

#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuHealth {
    pub index: u32,
    pub name: String,
    pub pci: String,
    /// Since the driver loaded / over the GPU's life; `None`: not supported (no ECC).
    pub ecc_uncorrected_volatile: Option<u64>,
    pub ecc_uncorrected_aggregate: Option<u64>,
    /// Row remapping (A100 and newer); `None` where unsupported.
    pub remap_pending: Option<bool>,
    pub remap_failed: Option<bool>,
    pub remapped_rows_uncorrectable: Option<u32>,
    /// Page retirement (before A100): single-bit and double-bit causes.
    pub retired_pages: Option<u32>,
    pub persistence_mode: Option<bool>,
    /// NVLink links present and how many of them are down.
    pub nvlinks: u32,
    pub nvlinks_down: Vec<u32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NvmlReport {
    pub driver: Option<String>,
    pub gpus: Vec<GpuHealth>,
}

fn err(what: &str, r: Ret) -> String {
    format!("{what} returned NVML error {r}")
}

/// Reads every GPU through NVML; Err names what is missing or failed.
pub fn read() -> Result<NvmlReport, String> {
    // SAFETY: loading the NVIDIA management library runs its initialisers only.
    let lib = unsafe { Library::new("libnvidia-ml.so.1") }.map_err(|e| {
        format!("libnvidia-ml.so.1 cannot be loaded ({e}); it comes with the NVIDIA driver")
    })?;
    // SAFETY: the signatures below are NVML's (nvml.h), looked up by name.
    unsafe {
        macro_rules! sym {
            ($name:literal, $t:ty) => {{
                let s: Result<Symbol<$t>, _> = lib.get(concat!($name, "\0").as_bytes());
                s.map_err(|_| format!("libnvidia-ml.so.1 has no {}", $name))?
            }};
        }
        let init = sym!("nvmlInit_v2", unsafe extern "C" fn() -> Ret);
        let shutdown = sym!("nvmlShutdown", unsafe extern "C" fn() -> Ret);
        let r = init();
        if r != SUCCESS {
            return Err(err("nvmlInit", r));
        }
        let out = gather(&lib);
        shutdown();
        out
    }
}

#[repr(C)]
struct PciInfo {
    bus_id_legacy: [c_char; 16],
    domain: c_uint,
    bus: c_uint,
    device: c_uint,
    pci_device_id: c_uint,
    pci_sub_system_id: c_uint,
    bus_id: [c_char; 32],
}

unsafe fn gather(lib: &Library) -> Result<NvmlReport, String> {
    type Dev = *mut c_void;
    macro_rules! sym {
        ($name:literal, $t:ty) => {{
            let s: Result<Symbol<$t>, _> = lib.get(concat!($name, "\0").as_bytes());
            s.map_err(|_| format!("libnvidia-ml.so.1 has no {}", $name))?
        }};
    }
    let count = sym!(
        "nvmlDeviceGetCount_v2",
        unsafe extern "C" fn(*mut c_uint) -> Ret
    );
    let handle = sym!(
        "nvmlDeviceGetHandleByIndex_v2",
        unsafe extern "C" fn(c_uint, *mut Dev) -> Ret
    );
    let name = sym!(
        "nvmlDeviceGetName",
        unsafe extern "C" fn(Dev, *mut c_char, c_uint) -> Ret
    );
    let pci = sym!(
        "nvmlDeviceGetPciInfo_v3",
        unsafe extern "C" fn(Dev, *mut PciInfo) -> Ret
    );
    let ecc = sym!(
        "nvmlDeviceGetTotalEccErrors",
        unsafe extern "C" fn(Dev, c_uint, c_uint, *mut c_ulonglong) -> Ret
    );
    let remap = sym!(
        "nvmlDeviceGetRemappedRows",
        unsafe extern "C" fn(Dev, *mut c_uint, *mut c_uint, *mut c_uint, *mut c_uint) -> Ret
    );
    let retired = sym!(
        "nvmlDeviceGetRetiredPages",
        unsafe extern "C" fn(Dev, c_uint, *mut c_uint, *mut c_ulonglong) -> Ret
    );
    let persist = sym!(
        "nvmlDeviceGetPersistenceMode",
        unsafe extern "C" fn(Dev, *mut c_uint) -> Ret
    );
    let nvlink = sym!(
        "nvmlDeviceGetNvLinkState",
        unsafe extern "C" fn(Dev, c_uint, *mut c_uint) -> Ret
    );
    let version = sym!(
        "nvmlSystemGetDriverVersion",
        unsafe extern "C" fn(*mut c_char, c_uint) -> Ret
    );
    let mut buf = [0 as c_char; 96];
    let driver = (version(buf.as_mut_ptr(), 96) == SUCCESS)
        .then(|| CStr::from_ptr(buf.as_ptr()).to_string_lossy().into_owned());
    let mut n: c_uint = 0;
    let r = count(&mut n);
    if r != SUCCESS {
        return Err(err("nvmlDeviceGetCount", r));
    }
    let mut gpus = Vec::new();
    for i in 0..n {
        let mut d: Dev = std::ptr::null_mut();
        let r = handle(i, &mut d);
        if r != SUCCESS {
            return Err(err("nvmlDeviceGetHandleByIndex", r));
        }
        let mut g = GpuHealth {
            index: i,
            ..GpuHealth::default()
        };
        let mut nb = [0 as c_char; 96];
        if name(d, nb.as_mut_ptr(), 96) == SUCCESS {
            g.name = CStr::from_ptr(nb.as_ptr()).to_string_lossy().into_owned();
        }
        let mut p: PciInfo = std::mem::zeroed();
        if pci(d, &mut p) == SUCCESS {
            g.pci = format!("{:04x}:{:02x}:{:02x}.0", p.domain & 0xffff, p.bus, p.device);
        }
        // NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1; NVML_VOLATILE_ECC = 0, NVML_AGGREGATE_ECC = 1.
        let mut v: c_ulonglong = 0;
        g.ecc_uncorrected_volatile = (ecc(d, 1, 0, &mut v) == SUCCESS).then_some(v);
        let mut a: c_ulonglong = 0;
        g.ecc_uncorrected_aggregate = (ecc(d, 1, 1, &mut a) == SUCCESS).then_some(a);
        let (mut corr, mut unc, mut pend, mut fail) = (0, 0, 0, 0);
        if remap(d, &mut corr, &mut unc, &mut pend, &mut fail) == SUCCESS {
            g.remap_pending = Some(pend != 0);
            g.remap_failed = Some(fail != 0);
            g.remapped_rows_uncorrectable = Some(unc);
        }
        // Causes: 0 multiple single-bit ECC errors, 1 double-bit ECC error.
        let mut pages: Option<u32> = None;
        for cause in 0..2 {
            let mut c: c_uint = 0;
            let r = retired(d, cause, &mut c, std::ptr::null_mut());
            if r == SUCCESS || r == INSUFFICIENT_SIZE {
                pages = Some(pages.unwrap_or(0) + c);
            }
        }
        g.retired_pages = pages;
        let mut m: c_uint = 0;
        g.persistence_mode = (persist(d, &mut m) == SUCCESS).then_some(m == 1);
        for l in 0..NVLINK_MAX_LINKS {
            let mut active: c_uint = 0;
            if nvlink(d, l, &mut active) == SUCCESS {
                g.nvlinks += 1;
                if active == 0 {
                    g.nvlinks_down.push(l);
                }
            }
        }
        gpus.push(g);
    }
    Ok(NvmlReport { driver, gpus })
}
