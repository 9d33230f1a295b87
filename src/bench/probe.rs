//! NIC dma-buf probe without any GPU (NCCL's method): `ibv_reg_dmabuf_mr(pd, 0, 0, 0, fd = -1, 0)`
//! fails with EBADF when the device supports dma-buf MRs (it got as far as looking at the fd) and
//! with EOPNOTSUPP/EPROTONOSUPPORT when it does not.

use serde::Serialize;

use super::error::{errno_name, BenchError};
use super::sysfs::LiveHost;
use gdrprov_rdma::verbs;

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DmabufSupport {
    Supported,
    Unsupported,
    /// An answer the method does not interpret (see `errno`).
    Unknown,
}

/// The dma-buf capability of one RDMA device.
#[derive(Debug, Clone, Serialize)]
pub struct DmabufProbe {
    pub device: String,
    pub support: DmabufSupport,
    /// The errno ibv_reg_dmabuf_mr failed with (None when libibverbs lacks the call).
    pub errno: Option<i32>,
    pub detail: String,
}

/// Interpret the errno of `ibv_reg_dmabuf_mr(.., fd = -1, ..)`.
pub fn classify_probe_errno(errno: i32) -> DmabufSupport {
    match errno {
        libc::EBADF => DmabufSupport::Supported,
        libc::EOPNOTSUPP | libc::EPROTONOSUPPORT | libc::ENOSYS => DmabufSupport::Unsupported,
        _ => DmabufSupport::Unknown,
    }
}

/// Probe one device (by name), or the first device when `device` is None.
pub fn probe_dmabuf_support(device: Option<&str>) -> Result<DmabufProbe, BenchError> {
    let names = verbs::device_names(&LiveHost)?;
    let name = match device {
        Some(d) => d.to_string(),
        None => names.first().cloned().unwrap_or_default(),
    };
    probe_device(&name)
}

/// Probe every device libibverbs sees.
pub fn probe_all() -> Result<Vec<DmabufProbe>, BenchError> {
    verbs::device_names(&LiveHost)?
        .iter()
        .map(|n| probe_device(n))
        .collect()
}

fn probe_device(name: &str) -> Result<DmabufProbe, BenchError> {
    let ctx = verbs::open_device(&LiveHost, name)?;
    if !verbs::libibverbs_has("ibv_reg_dmabuf_mr") {
        return Ok(DmabufProbe {
            device: name.to_string(),
            support: DmabufSupport::Unsupported,
            errno: None,
            detail: "libibverbs has no ibv_reg_dmabuf_mr (rdma-core older than v34)".to_string(),
        });
    }
    let Some(errno) = verbs::reg_dmabuf_mr_errno(&ctx, name)? else {
        return Ok(DmabufProbe {
            device: name.to_string(),
            support: DmabufSupport::Unknown,
            errno: None,
            detail: "ibv_reg_dmabuf_mr accepted fd -1 (unexpected)".to_string(),
        });
    };
    let support = classify_probe_errno(errno);
    let detail = match support {
        DmabufSupport::Supported => format!(
            "ibv_reg_dmabuf_mr(fd=-1) -> {}: the driver accepts dma-buf MRs",
            errno_name(errno)
        ),
        DmabufSupport::Unsupported => {
            format!("ibv_reg_dmabuf_mr(fd=-1) -> {}: this RDMA driver/OFED does not support dma-buf MRs", errno_name(errno))
        }
        DmabufSupport::Unknown => format!(
            "ibv_reg_dmabuf_mr(fd=-1) -> {}: not a known answer",
            errno_name(errno)
        ),
    };
    Ok(DmabufProbe {
        device: name.to_string(),
        support,
        errno: Some(errno),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_meaning() {
        assert_eq!(classify_probe_errno(libc::EBADF), DmabufSupport::Supported);
        assert_eq!(
            classify_probe_errno(libc::EOPNOTSUPP),
            DmabufSupport::Unsupported
        );
        assert_eq!(
            classify_probe_errno(libc::EPROTONOSUPPORT),
            DmabufSupport::Unsupported
        );
        assert_eq!(classify_probe_errno(libc::EINVAL), DmabufSupport::Unknown);
    }
}
