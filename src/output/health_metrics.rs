//! The health measurements in Prometheus text format, appended to verify's
//! metrics (src/output/metrics.rs): copy bandwidth per GPU and direction, the state of
//! every PCIe link, and a warning flag per check.

use crate::checks::health::{HealthReport, Outcome};
use crate::facts::links::{PcieLink, Role};
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
            let role = role(l);
            let _ = writeln!(
                s,
                "gdrprov_pcie_link_degraded{{device=\"{}\",role=\"{role}\",current=\"{}\",maximum=\"{}\"}} {}",
                esc(&l.address),
                esc(&l.current()),
                esc(&l.maximum()),
                u8::from(l.degraded())
            );
        }
        link_values(&mut s, h);
    }
    s
}

fn role(l: &PcieLink) -> &'static str {
    match l.role {
        Role::Gpu => "gpu",
        Role::Nic => "nic",
        Role::Bridge => "bridge",
    }
}

/// Each link's speed (GT/s) and width, current and maximum, as values to
/// plot; labels are the device and its role only (stable as the link changes).
fn link_values(s: &mut String, h: &HealthReport) {
    type Value = fn(&PcieLink) -> Option<f64>;
    let metrics: [(&str, &str, Value); 4] = [
        (
            "gdrprov_pcie_link_speed_gts",
            "The PCIe link's current speed, GT/s (32 for Gen5).",
            |l| l.current_gts(),
        ),
        (
            "gdrprov_pcie_link_max_speed_gts",
            "The PCIe link's maximum speed, GT/s.",
            |l| l.max_gts(),
        ),
        (
            "gdrprov_pcie_link_width",
            "The PCIe link's current width, lanes.",
            |l| l.current_width.filter(|w| *w > 0).map(f64::from),
        ),
        (
            "gdrprov_pcie_link_max_width",
            "The PCIe link's maximum width, lanes.",
            |l| l.max_width.filter(|w| *w > 0).map(f64::from),
        ),
    ];
    for (name, help, value) in metrics {
        let samples: Vec<(&PcieLink, f64)> = h
            .links
            .iter()
            .filter_map(|l| value(l).map(|v| (l, v)))
            .collect();
        if samples.is_empty() {
            continue;
        }
        let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (l, v) in samples {
            let _ = writeln!(
                s,
                "{name}{{device=\"{}\",role=\"{}\"}} {v}",
                esc(&l.address),
                role(l)
            );
        }
    }
}
