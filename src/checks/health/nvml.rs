//! GPU health through NVML (libnvidia-ml.so.1, loaded at run time; absent =
//! skipped with the reason): uncorrectable ECC errors, pending or failed row
//! remapping, retired pages, persistence mode, NVLink links down.

use super::HealthCheck;
use libloading::{Library, Symbol};
use serde::Serialize;
use std::ffi::{c_char, c_uint, c_ulonglong, c_void, CStr};

pub const NAME: &str = "gpu-health";

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

/// The check on what NVML reported (or why it could not be asked).
pub fn check(report: Result<&NvmlReport, &str>) -> HealthCheck {
    let r = match report {
        Ok(r) => r,
        Err(why) => return HealthCheck::skip(NAME, why.to_string()),
    };
    if r.gpus.is_empty() {
        return HealthCheck::skip(NAME, "NVML sees no GPU");
    }
    let mut bad = Vec::new();
    let mut warn = Vec::new();
    let mut fixes: Vec<&str> = Vec::new();
    let mut ok = Vec::new();
    for g in &r.gpus {
        let who = format!("GPU {} {} ({})", g.index, g.name, g.pci);
        let before = bad.len() + warn.len();
        if let Some(n) = g.ecc_uncorrected_volatile.filter(|n| *n > 0) {
            bad.push(format!(
                "{who}: {n} uncorrectable ECC error(s) since the driver loaded"
            ));
            fixes.push("uncorrectable ECC errors: drain the node, reset the GPU (`nvidia-smi -r`) or reboot; if they recur, replace the GPU");
        } else if let Some(n) = g.ecc_uncorrected_aggregate.filter(|n| *n > 0) {
            warn.push(format!(
                "{who}: {n} uncorrectable ECC error(s) over its life"
            ));
        }
        if g.remap_failed == Some(true) {
            bad.push(format!("{who}: row remapping failed (no spare rows left)"));
            fixes.push(
                "a failed row remap means the GPU's memory is out of spare rows: replace the GPU",
            );
        }
        if g.remap_pending == Some(true) {
            bad.push(format!("{who}: a row remap is pending"));
            fixes.push("a pending row remap takes effect at the next GPU reset: `nvidia-smi -r -i N` with no process on the GPU, or reboot");
        }
        if let Some(n) = g.retired_pages.filter(|n| *n > 0) {
            warn.push(format!("{who}: {n} retired page(s)"));
        }
        if g.persistence_mode == Some(false) {
            warn.push(format!("{who}: persistence mode off"));
        }
        if !g.nvlinks_down.is_empty() {
            bad.push(format!(
                "{who}: NVLink link(s) {:?} of {} down",
                g.nvlinks_down, g.nvlinks
            ));
            fixes.push("NVLink links down: reset the GPUs or reboot; check Fabric Manager (`systemctl status nvidia-fabricmanager`) on NVSwitch systems; if it persists, the baseboard needs service");
        }
        if bad.len() + warn.len() == before {
            ok.push(format!(
                "{who}: ECC uncorrectable {}, row remap {}, persistence {}, NVLink {}",
                g.ecc_uncorrected_volatile
                    .map(|n| n.to_string())
                    .unwrap_or("n/a".into()),
                match (g.remap_pending, g.remap_failed) {
                    (Some(_), Some(_)) => "ok",
                    _ => "n/a",
                },
                match g.persistence_mode {
                    Some(true) => "on",
                    Some(false) => "off",
                    None => "n/a",
                },
                if g.nvlinks == 0 {
                    "none".to_string()
                } else {
                    format!("{} up", g.nvlinks)
                }
            ));
        }
    }
    fixes.dedup();
    if !bad.is_empty() {
        bad.extend(warn);
        return HealthCheck::fail(NAME, bad.join("; "), fixes.join("; "));
    }
    if !warn.is_empty() {
        return HealthCheck::warn(
            NAME,
            warn.join("; "),
            "persistence mode: `nvidia-smi -pm 1` or enable nvidia-persistenced; retired pages and lifetime ECC errors: watch the counts (DCGM), replace the GPU if they grow",
        );
    }
    HealthCheck::pass(NAME, ok.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            check(Err("libnvidia-ml.so.1 cannot be loaded")).status,
            super::super::Outcome::Skip
        );
        let healthy = GpuHealth {
            name: "NVIDIA H100 80GB HBM3".into(),
            pci: "0000:3b:00.0".into(),
            ecc_uncorrected_volatile: Some(0),
            ecc_uncorrected_aggregate: Some(0),
            remap_pending: Some(false),
            remap_failed: Some(false),
            persistence_mode: Some(true),
            ..GpuHealth::default()
        };
        let r = NvmlReport {
            driver: None,
            gpus: vec![healthy.clone()],
        };
        assert_eq!(check(Ok(&r)).status, super::super::Outcome::Pass);
        let mut sick = healthy.clone();
        sick.remap_pending = Some(true);
        sick.nvlinks = 18;
        sick.nvlinks_down = vec![3];
        let r = NvmlReport {
            driver: None,
            gpus: vec![healthy, sick],
        };
        let c = check(Ok(&r));
        assert_eq!(c.status, super::super::Outcome::Fail);
        assert!(
            c.evidence.contains("row remap is pending"),
            "{}",
            c.evidence
        );
        assert!(c.evidence.contains("[3] of 18 down"), "{}", c.evidence);
    }
}
