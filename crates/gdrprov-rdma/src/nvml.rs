//! GPU health counters through NVML, by the `nvml-wrapper` crate (which loads
//! libnvidia-ml.so.1 at run time): uncorrectable ECC errors, pending or failed row remapping,
//! retired pages, persistence mode, NVLink links down. gdrprov's `gpu-health` check judges them.
//! The counters nvml-wrapper cannot read (row remapping, the retired pages' count) come from
//! [`crate::nvml_raw`], the one place of raw NVML calls.

use nvml_wrapper::enum_wrappers::device::{EccCounter, MemoryError};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};
use nvml_wrapper_sys::bindings as sys;
use serde::Serialize;

use crate::nvml_raw;

/// `NVML_NVLINK_MAX_LINKS`: links past the device's own answer "not supported" and are left out.
const NVLINK_MAX_LINKS: u32 = 18;

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

/// An NVML call's failure, with NVML's return code.
fn err(what: &str, e: NvmlError) -> String {
    format!("{what} returned NVML error {}", sys::nvmlReturn_t::from(e))
}

/// Why NVML could not be started: the library missing (it comes with the driver), its
/// `nvmlInit_v2` missing, or NVML's own error.
fn init_error(e: NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(e) => {
            format!("libnvidia-ml.so.1 cannot be loaded ({e}); it comes with the NVIDIA driver")
        }
        NvmlError::FailedToLoadSymbol(_) => "libnvidia-ml.so.1 has no nvmlInit_v2".into(),
        e => err("nvmlInit", e),
    }
}

/// Reads every GPU through NVML; Err names what is missing or failed.
pub fn read() -> Result<NvmlReport, String> {
    let nvml = Nvml::init().map_err(init_error)?;
    let driver = nvml.sys_driver_version().ok();
    let n = nvml
        .device_count()
        .map_err(|e| err("nvmlDeviceGetCount", e))?;
    let mut gpus = Vec::new();
    for i in 0..n {
        let d = nvml
            .device_by_index(i)
            .map_err(|e| err("nvmlDeviceGetHandleByIndex", e))?;
        gpus.push(health(i, &d));
    }
    Ok(NvmlReport { driver, gpus })
}

/// One GPU's counters; each one NVML cannot give is `None` (or empty).
fn health(index: u32, d: &Device) -> GpuHealth {
    let ecc = |counter| d.total_ecc_errors(MemoryError::Uncorrected, counter).ok();
    let remap = nvml_raw::remapped_rows(d).ok().flatten();
    // Causes: 0 multiple single-bit ECC errors, 1 double-bit ECC error.
    let retired = [0, 1].map(|cause| nvml_raw::retired_page_count(d, cause).ok().flatten());
    let (nvlinks, nvlinks_down) =
        links((0..NVLINK_MAX_LINKS).map(|l| (l, d.link_wrapper_for(l).is_active().ok())));
    GpuHealth {
        index,
        name: d.name().unwrap_or_default(),
        pci: d
            .pci_info()
            .map(|p| pci_address(p.domain, p.bus, p.device))
            .unwrap_or_default(),
        ecc_uncorrected_volatile: ecc(EccCounter::Volatile),
        ecc_uncorrected_aggregate: ecc(EccCounter::Aggregate),
        remap_pending: remap.map(|(_, pending, _)| pending),
        remap_failed: remap.map(|(_, _, failed)| failed),
        remapped_rows_uncorrectable: remap.map(|(unc, _, _)| unc),
        retired_pages: retired_pages(retired),
        persistence_mode: d.is_in_persistent_mode().ok(),
        nvlinks,
        nvlinks_down,
    }
}

/// The sysfs form of a GPU's PCI address, function 0 (`0000:3b:00.0`).
fn pci_address(domain: u32, bus: u32, device: u32) -> String {
    format!("{:04x}:{:02x}:{:02x}.0", domain & 0xffff, bus, device)
}

/// The pages retired for either cause; `None` when NVML answered neither.
fn retired_pages(by_cause: [Option<u32>; 2]) -> Option<u32> {
    by_cause
        .into_iter()
        .flatten()
        .fold(None, |sum, c| Some(sum.unwrap_or(0) + c))
}

/// The links NVML answers for (link, up?), and which of them are down.
fn links(states: impl Iterator<Item = (u32, Option<bool>)>) -> (u32, Vec<u32>) {
    let mut present = 0;
    let mut down = Vec::new();
    for (l, up) in states {
        if let Some(up) = up {
            present += 1;
            if !up {
                down.push(l);
            }
        }
    }
    (present, down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_in_sysfs_form() {
        assert_eq!(pci_address(0, 0x3b, 0), "0000:3b:00.0");
        assert_eq!(pci_address(0x1_0002, 0xc1, 0x1f), "0002:c1:1f.0");
    }

    #[test]
    fn retired_pages_add_up_where_answered() {
        assert_eq!(retired_pages([None, None]), None);
        assert_eq!(retired_pages([Some(0), None]), Some(0));
        assert_eq!(retired_pages([Some(2), Some(3)]), Some(5));
        assert_eq!(retired_pages([None, Some(1)]), Some(1));
    }

    #[test]
    fn links_present_and_down() {
        let states = [
            (0, Some(true)),
            (1, Some(false)),
            (2, None),
            (3, Some(false)),
        ];
        assert_eq!(links(states.into_iter()), (3, vec![1, 3]));
        assert_eq!(links(std::iter::empty()), (0, vec![]));
    }

    #[test]
    fn nvml_errors_keep_their_code() {
        assert_eq!(
            err("nvmlDeviceGetCount", NvmlError::DriverNotLoaded),
            "nvmlDeviceGetCount returned NVML error 9"
        );
        assert_eq!(
            init_error(NvmlError::FailedToLoadSymbol("x".into())),
            "libnvidia-ml.so.1 has no nvmlInit_v2"
        );
        assert_eq!(
            init_error(NvmlError::NoPermission),
            "nvmlInit returned NVML error 4"
        );
    }

    /// Without the NVIDIA driver (this development machine), reading is the one error that
    /// names the library, not a panic; with it, a report.
    #[test]
    fn a_missing_library_is_an_error_not_a_panic() {
        match read() {
            Ok(r) => assert!(r.gpus.iter().all(|g| !g.pci.is_empty())),
            Err(e) => {
                assert!(
                    e.starts_with("libnvidia-ml.so.1 cannot be loaded (")
                        && e.ends_with("); it comes with the NVIDIA driver"),
                    "{e}"
                );
                assert!(e.contains("libnvidia-ml.so.1"), "{e}");
            }
        }
    }

    #[test]
    fn the_report_keeps_its_fields() {
        let g = GpuHealth {
            index: 1,
            remap_pending: Some(false),
            nvlinks: 2,
            nvlinks_down: vec![1],
            ..GpuHealth::default()
        };
        let json = serde_json::to_string(&NvmlReport {
            driver: Some("580.65".into()),
            gpus: vec![g],
        })
        .unwrap_or_default();
        assert_eq!(
            json,
            r#"{"driver":"580.65","gpus":[{"index":1,"name":"","pci":"","ecc_uncorrected_volatile":null,"ecc_uncorrected_aggregate":null,"remap_pending":false,"remap_failed":null,"remapped_rows_uncorrectable":null,"retired_pages":null,"persistence_mode":null,"nvlinks":2,"nvlinks_down":[1]}]}"#
        );
    }
}
