//! The NVML calls `nvml-wrapper` cannot make for us, in one place, each with why; everything
//! else of NVML ([`crate::nvml`], [`crate::nvlink`]) goes through nvml-wrapper's safe API. Each
//! call is made through the wrapper's own loaded library (`Nvml::lib`) on one of its live device
//! handles, after checking that the driver's library has the function: nvml-wrapper-sys's raw
//! methods panic on a missing symbol, so a driver without one answers
//! `NvmlError::FailedToLoadSymbol` here instead (a finding, never a crash). An NVML error code
//! is `Ok(None)`: the counter is unknown.
//!
//! - `nvmlDeviceGetNvLinkRemoteDeviceType`: nvml-wrapper 0.13's `remote_device_type` reads its
//!   answer into a temporary and always says "unknown".
//! - `nvmlDeviceGetFieldValues`: nvml-wrapper's field API cannot set a field's scope (the link).
//! - `nvmlDeviceGetGpuFabricInfo`, `nvmlDeviceGetRemappedRows`: not wrapped in 0.13.
//! - `nvmlDeviceGetRetiredPages` (count only): the wrapper's count query is private, and its
//!   `retired_pages` also asks every page's address through `_v2`.
#![allow(
    unsafe_code,
    reason = "NVML calls nvml-wrapper cannot make, through its loaded library and live handles"
)]

use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Device;
use nvml_wrapper_sys::bindings as sys;

/// The error for a function this driver's library lacks.
fn missing() -> NvmlError {
    NvmlError::FailedToLoadSymbol("not in this driver".into())
}

/// What is at the far end of `link`: NVML's `nvmlIntNvLinkDeviceType_t`.
pub(crate) fn remote_device_type(d: &Device, link: u32) -> Result<Option<u32>, NvmlError> {
    let lib = d.nvml().lib();
    if lib.nvmlDeviceGetNvLinkRemoteDeviceType.is_err() {
        return Err(missing());
    }
    let mut t: sys::nvmlIntNvLinkDeviceType_t = 0xff;
    // SAFETY: the symbol is present (checked above); the handle is a live device of its
    // `Nvml`; `t` is the enum-sized out-parameter the function writes.
    let r = unsafe { lib.nvmlDeviceGetNvLinkRemoteDeviceType(d.handle(), link, &mut t) };
    Ok((r == 0).then_some(t))
}

/// One field value (`NVML_FI_*`) scoped to `scope` (a link), as a whole number.
pub(crate) fn field_value(d: &Device, field: u32, scope: u32) -> Result<Option<u64>, NvmlError> {
    let lib = d.nvml().lib();
    if lib.nvmlDeviceGetFieldValues.is_err() {
        return Err(missing());
    }
    // SAFETY: plain C data; zero is a valid bit pattern for every field of the struct.
    let mut v: sys::nvmlFieldValue_t = unsafe { std::mem::zeroed() };
    v.fieldId = field;
    v.scopeId = scope;
    // SAFETY: symbol present; one value in, one out; the handle is a live device.
    let r = unsafe { lib.nvmlDeviceGetFieldValues(d.handle(), 1, &mut v) };
    if r != 0 || v.nvmlReturn != 0 {
        return Ok(None);
    }
    // SAFETY: the union member read is the one `valueType` names.
    let got = unsafe {
        match v.valueType {
            0 => Some(v.value.dVal as u64),
            1 => Some(u64::from(v.value.uiVal)),
            2 => Some(v.value.ulVal),
            3 => Some(v.value.ullVal),
            4 => u64::try_from(v.value.sllVal).ok(),
            5 => u64::try_from(v.value.siVal).ok(),
            6 => Some(u64::from(v.value.usVal)),
            _ => None,
        }
    };
    Ok(got)
}

/// The GPU's fabric registration (NVSwitch systems): state, status, clique.
pub(crate) fn fabric_info(d: &Device) -> Result<Option<(u32, u32, u32)>, NvmlError> {
    let lib = d.nvml().lib();
    if lib.nvmlDeviceGetGpuFabricInfo.is_err() {
        return Err(missing());
    }
    let mut info = sys::nvmlGpuFabricInfo_t {
        clusterUuid: [0; 16],
        status: 0,
        cliqueId: 0,
        state: 0,
    };
    // SAFETY: the symbol is present (checked above); the handle is a live device of its
    // `Nvml`; `info` is the v1 struct this function fills.
    let r = unsafe { lib.nvmlDeviceGetGpuFabricInfo(d.handle(), &mut info) };
    Ok((r == 0).then_some((u32::from(info.state), info.status, info.cliqueId)))
}

/// Row remapping (A100 and newer): uncorrectable rows, pending, failed.
pub(crate) fn remapped_rows(d: &Device) -> Result<Option<(u32, bool, bool)>, NvmlError> {
    let lib = d.nvml().lib();
    if lib.nvmlDeviceGetRemappedRows.is_err() {
        return Err(missing());
    }
    let (mut corr, mut unc, mut pend, mut fail) = (0, 0, 0, 0);
    // SAFETY: the symbol is present (checked above); the handle is a live device; four
    // unsigned out-parameters.
    let r = unsafe {
        lib.nvmlDeviceGetRemappedRows(d.handle(), &mut corr, &mut unc, &mut pend, &mut fail)
    };
    Ok((r == 0).then_some((unc, pend != 0, fail != 0)))
}

/// How many pages were retired for `cause` (0: multiple single-bit ECC errors, 1: a
/// double-bit one): the count query alone (NVML answers the count with success, or with
/// "insufficient size" when there are pages and no room for their addresses).
pub(crate) fn retired_page_count(d: &Device, cause: u32) -> Result<Option<u32>, NvmlError> {
    const INSUFFICIENT_SIZE: u32 = 7;
    let lib = d.nvml().lib();
    if lib.nvmlDeviceGetRetiredPages.is_err() {
        return Err(missing());
    }
    let mut c = 0;
    // SAFETY: the symbol is present (checked above); the handle is a live device; a null
    // address array with a count asks the count only.
    let r =
        unsafe { lib.nvmlDeviceGetRetiredPages(d.handle(), cause, &mut c, std::ptr::null_mut()) };
    Ok((r == 0 || r == INSUFFICIENT_SIZE).then_some(c))
}
