//! The health measurements in Prometheus text format, appended to verify's
//! metrics (src/output/metrics.rs): copy bandwidth per GPU and direction, the state of
//! every PCIe link, and a warning flag per check.

use crate::checks::health::{HealthReport, Outcome};
use crate::output::exposition::escape_label as esc;
use std::fmt::Write as _;

pub fn prometheus(h: &HealthReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# HELP gdrprov_check_warning 1 when a passed check has something worth a look."
    );
    let _ = writeln!(s, "# TYPE gdrprov_check_warning gauge");
    for c in &h.checks {
        if c.status != Outcome::Skip {
            let _ = writeln!(
                s,
                "gdrprov_check_warning{{check=\"{}\"}} {}",
                esc(&c.name),
                u8::from(c.status == Outcome::Warn)
            );
        }
    }
    if let Some(copy) = &h.copy {
        let _ = writeln!(
            s,
            "# HELP gdrprov_copy_gbytes_per_second Best GPU<->host copy bandwidth (pinned memory), 10^9 bytes/s."
        );
        let _ = writeln!(s, "# TYPE gdrprov_copy_gbytes_per_second gauge");
        for g in &copy.gpus {
            for (dir, v) in [("h2d", g.h2d_gbs), ("d2h", g.d2h_gbs)] {
                let _ = writeln!(
                    s,
                    "gdrprov_copy_gbytes_per_second{{gpu=\"{}\",pci=\"{}\",direction=\"{dir}\"}} {v:.3}",
                    g.index,
                    esc(&g.pci)
                );
            }
        }
    }
    if !h.links.is_empty() {
        let _ = writeln!(
            s,
            "# HELP gdrprov_pcie_link_degraded 1 when the device's PCIe link is below its maximum speed or width."
        );
        let _ = writeln!(s, "# TYPE gdrprov_pcie_link_degraded gauge");
        for l in h
            .links
            .iter()
            .filter(|l| l.state != crate::facts::links::LinkState::Unknown)
        {
            let role = match l.role {
                crate::facts::links::Role::Gpu => "gpu",
                crate::facts::links::Role::Nic => "nic",
                crate::facts::links::Role::Bridge => "bridge",
            };
            let _ = writeln!(
                s,
                "gdrprov_pcie_link_degraded{{device=\"{}\",role=\"{role}\",current=\"{}\",maximum=\"{}\"}} {}",
                esc(&l.address),
                esc(&l.current()),
                esc(&l.maximum()),
                u8::from(l.degraded())
            );
        }
    }
    s
}
