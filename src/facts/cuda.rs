//! CUDA: the toolkit installed in the root (`/usr/local/cuda*/version.json`,
//! `nvcc`), and on a running system the CUDA driver API itself (libcuda,
//! loaded at run time only by `inventory` and `doctor`): its version and,
//! per device, `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`.
//!
//! The runtime answer is a plain struct, [`CudaRuntime`], so another prober
//! (the bench module's cudarc code) can fill it instead of [`libcuda_probe`].

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

/// Asks libcuda, loaded at run time (the binary starts without it).
/// Never fails: a missing library or a failing call is written in `error`.
pub fn libcuda_probe() -> CudaRuntime {
    match dl::probe() {
        Ok(r) => r,
        Err(e) => CudaRuntime {
            error: Some(e),
            ..CudaRuntime::default()
        },
    }
}

mod dl {
    use super::{CudaDevice, CudaRuntime};
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    use std::ffi::{c_char, c_int, CStr};
    use std::mem::ManuallyDrop;

    type CuInit = unsafe extern "C" fn(u32) -> c_int;
    type CuIntOut = unsafe extern "C" fn(*mut c_int) -> c_int;
    type CuDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
    type CuDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
    type CuDeviceGetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;

    const ATTR_CC_MAJOR: c_int = 75;
    const ATTR_CC_MINOR: c_int = 76;
    const ATTR_DMA_BUF_SUPPORTED: c_int = 124;

    /// Never closed: unloading libcuda while its threads run is unsafe.
    struct Lib(ManuallyDrop<Library>);

    impl Lib {
        fn open() -> Result<Lib, String> {
            for name in ["libcuda.so.1", "libcuda.so"] {
                // SAFETY: loading libcuda runs its initialisers, which make
                // no demands on this process.
                if let Ok(lib) = unsafe { Library::open(Some(name), RTLD_NOW | RTLD_LOCAL) } {
                    return Ok(Lib(ManuallyDrop::new(lib)));
                }
            }
            Err("libcuda.so.1 not found (no NVIDIA user-space driver)".into())
        }

        /// Looks a symbol up; `T` must be the symbol's true function type.
        unsafe fn sym<T: Copy>(&self, name: &CStr) -> Result<T, String> {
            // SAFETY: the caller names the right function type for the symbol;
            // the library outlives every use (it is never unloaded).
            unsafe { self.0.get::<T>(name.to_bytes_with_nul()) }
                .map(|s| *s)
                .map_err(|_| format!("libcuda has no {}", name.to_string_lossy()))
        }
    }

    pub fn probe() -> Result<CudaRuntime, String> {
        let lib = Lib::open()?;
        // SAFETY: each type below matches the CUDA driver API declaration in cuda.h.
        let (init, version, count, get, get_name, get_attr, bus_id) = unsafe {
            (
                lib.sym::<CuInit>(c"cuInit")?,
                lib.sym::<CuIntOut>(c"cuDriverGetVersion")?,
                lib.sym::<CuIntOut>(c"cuDeviceGetCount")?,
                lib.sym::<CuDeviceGet>(c"cuDeviceGet")?,
                lib.sym::<CuDeviceGetName>(c"cuDeviceGetName")?,
                lib.sym::<CuDeviceGetAttribute>(c"cuDeviceGetAttribute")?,
                lib.sym::<CuDeviceGetName>(c"cuDeviceGetPCIBusId")?,
            )
        };
        let mut rt = CudaRuntime::default();
        let mut v: c_int = 0;
        // SAFETY: out-pointers to live locals, as the API asks.
        if unsafe { version(&mut v) } == 0 && v > 0 {
            rt.driver_api = Some(format!("{}.{}", v / 1000, (v % 1000) / 10));
        }
        // SAFETY: cuInit(0) is always valid to call.
        let r = unsafe { init(0) };
        if r != 0 {
            rt.error = Some(format!(
                "cuInit failed with CUDA error {r} (no usable GPU?)"
            ));
            return Ok(rt);
        }
        let mut n: c_int = 0;
        // SAFETY: out-pointer to a live local.
        if unsafe { count(&mut n) } != 0 {
            rt.error = Some("cuDeviceGetCount failed".into());
            return Ok(rt);
        }
        for ordinal in 0..n {
            let mut dev: c_int = 0;
            // SAFETY: out-pointer to a live local; ordinal < count.
            if unsafe { get(&mut dev, ordinal) } != 0 {
                continue;
            }
            let text = |f: CuDeviceGetName| {
                let mut buf = [0 as c_char; 256];
                // SAFETY: the buffer is 256 bytes and its length is passed.
                if unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, dev) } != 0 {
                    return None;
                }
                // SAFETY: CUDA wrote a NUL-terminated string into buf (zeroed, so
                // a NUL exists even if it wrote nothing).
                Some(
                    unsafe { CStr::from_ptr(buf.as_ptr()) }
                        .to_string_lossy()
                        .into_owned(),
                )
            };
            let attr = |a: c_int| {
                let mut x: c_int = 0;
                // SAFETY: out-pointer to a live local.
                (unsafe { get_attr(&mut x, a, dev) } == 0).then_some(x)
            };
            rt.devices.push(CudaDevice {
                ordinal,
                name: text(get_name),
                pci_bus_id: text(bus_id),
                compute_capability: match (attr(ATTR_CC_MAJOR), attr(ATTR_CC_MINOR)) {
                    (Some(a), Some(b)) => Some(format!("{a}.{b}")),
                    _ => None,
                },
                dmabuf_supported: attr(ATTR_DMA_BUF_SUPPORTED).map(|x| x == 1),
            });
        }
        Ok(rt)
    }
}
