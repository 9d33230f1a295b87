//! What stands in for the loopback on EFA (SRD queue pairs, no RC): its
//! devices up, libfabric's efa provider with FI_HMEM, GPU memory exported as
//! dma-buf.

use crate::checks::Check;
use crate::facts::rdma::RdmaDevice;

pub const NO_LOOPBACK: &str = "does not apply on EFA: EFA has SRD queue pairs, no RC, and the RDMA loopback needs RC; the efa checks stand in for it";

/// Where the EFA installer (and distributions) put libfabric's `fi_info`.
pub const FI_INFO: [&str; 3] = [
    "/opt/amazon/efa/bin/fi_info",
    "/usr/bin/fi_info",
    "/usr/local/bin/fi_info",
];

/// Every EFA device with at least one ACTIVE port.
pub fn devices_check(devs: &[&RdmaDevice]) -> Check {
    let mut up = Vec::new();
    let mut down = Vec::new();
    for d in devs {
        match d.ports.iter().find(|p| p.is_active()) {
            Some(p) => up.push(format!("{} port {} ACTIVE", d.name, p.port)),
            None => down.push(format!(
                "{} ({})",
                d.name,
                d.ports
                    .iter()
                    .map(|p| format!(
                        "port {} {}",
                        p.port,
                        p.state.as_deref().unwrap_or("state unknown")
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    if down.is_empty() {
        Check::pass("efa-devices", up.join("; "))
    } else {
        Check::fail_with_cause(
            "efa-devices",
            format!(
                "EFA device(s) without an ACTIVE port: {}; check the ENI is an EFA interface attached to this instance and `modprobe efa`",
                down.join("; ")
            ),
        )
    }
}

/// `fi_info -p efa -c FI_HMEM` lists the efa provider: libfabric can hand
/// GPU memory to EFA.
pub fn fi_info_check(tool: Option<&str>, out: Option<&str>) -> Check {
    match (tool, out) {
        (None, _) | (_, None) => Check::skip(
            "efa-fi-info",
            "fi_info not found (the EFA installer puts it in /opt/amazon/efa/bin)",
        ),
        (Some(t), Some(o)) if o.lines().any(|l| l.trim() == "provider: efa") => Check::pass(
            "efa-fi-info",
            format!("`{t} -p efa -c FI_HMEM` lists the efa provider with FI_HMEM"),
        ),
        (Some(t), Some(_)) => Check::fail_with_cause(
            "efa-fi-info",
            format!("`{t} -p efa -c FI_HMEM` lists no efa provider with FI_HMEM: libfabric cannot register GPU memory on EFA; reinstall the EFA installer's libfabric (with CUDA support) and check the efa module is loaded"),
        ),
    }
}

/// GPU 0's memory exported as dma-buf and read back: what EFA needs of the
/// GPU.
pub fn dmabuf_export_check(has_gpu: bool) -> Check {
    const NAME: &str = "dmabuf-export";
    if !has_gpu {
        return Check::skip(NAME, "no GPU");
    }
    match crate::bench::loopback::export_only(0, 8 << 20) {
        Ok(r) if r.passed => Check::pass(
            NAME,
            format!(
                "GPU 0: {} bytes exported as dma-buf and read back",
                r.allocated_bytes
            ),
        ),
        Ok(r) => Check::fail_with_cause(
            NAME,
            format!(
                "GPU 0: the dma-buf export failed (fd valid: {}); EFA cannot register GPU memory: check the open driver and kernel >= 5.12 ({})",
                r.dmabuf_fd_valid,
                crate::suggest::Suggest::new(crate::names::DOCTOR).arg("efa").shown(&crate::suggest::Given::none())
            ),
        ),
        Err(e) => Check::fail_with_cause(NAME, format!("GPU 0: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::Status;
    use crate::facts::rdma::RdmaPort;

    fn dev(name: &str, state: &str) -> RdmaDevice {
        RdmaDevice {
            name: name.into(),
            driver: Some("efa".into()),
            pci: Some("0000:4f:00.0".into()),
            sysfs_path: None,
            numa_node: Some(0),
            ports: vec![RdmaPort {
                port: 1,
                state: Some(state.into()),
                phys_state: Some("LINK_UP".into()),
                link_layer: Some("Unspecified".into()),
                rate: Some("100 Gb/sec (4X EDR)".into()),
                rate_gbps: Some(100.0),
                netdev: None,
                mtu: None,
            }],
        }
    }

    #[test]
    fn efa_devices_must_have_an_active_port() {
        let (a, b) = (dev("rdmap79s0", "ACTIVE"), dev("rdmap80s0", "ACTIVE"));
        let c = devices_check(&[&a, &b]);
        assert_eq!(c.status, Status::Pass);
        assert_eq!(
            c.detail(),
            "rdmap79s0 port 1 ACTIVE; rdmap80s0 port 1 ACTIVE"
        );
        let d = dev("rdmap81s0", "DOWN");
        let c = devices_check(&[&a, &d]);
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.detail().contains("rdmap81s0 (port 1 DOWN)"),
            "{}",
            c.detail()
        );
    }

    #[test]
    fn fi_info_must_list_efa_with_hmem() {
        let t = Some("/opt/amazon/efa/bin/fi_info");
        let listed = "provider: efa\n    fabric: efa\n    domain: rdmap79s0-rdm\n    version: 122.0\n    type: FI_EP_RDM\n    protocol: FI_PROTO_EFA\n";
        assert_eq!(fi_info_check(t, Some(listed)).status, Status::Pass);
        let none = "fi_getinfo: -61 (No data available)\n";
        let c = fi_info_check(t, Some(none));
        assert_eq!(c.status, Status::Fail);
        assert!(c.detail().contains("FI_HMEM"));
        assert_eq!(fi_info_check(None, None).status, Status::Skip);
    }
}
