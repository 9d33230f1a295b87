//! The whole node's reports as text: `bench copy --concurrent`, `bench p2p`, and the GPU
//! topology section of `inventory` (NVLink per GPU, GPU pairs, shared upstream ports, fabric).

use crate::bench::concurrent::ConcurrentReport;
use crate::bench::nccl::NcclReport;
use crate::bench::p2p::P2pReport;
use crate::bench::units::one_decimal;
use crate::facts::gpu_topo::{GpuTopology, LiveTopology};

pub fn concurrent_text(r: &ConcurrentReport) -> String {
    let mut s = format!(
        "Every GPU at once, {} MiB copies ({})\n",
        r.bytes >> 20,
        r.method
    );
    if let Some(n) = &r.note {
        s.push_str(&format!("  {n}\n"));
    }
    for g in &r.gpus {
        s.push_str(&format!(
            "  {}: {}\n",
            g.summary(),
            g.verdict.to_ascii_uppercase()
        ));
        if let Some(f) = &g.finding {
            s.push_str(&format!("    {f}\n"));
        }
    }
    s.push_str(&format!("  {}\n", r.sums()));
    s.push_str(&format!("Result: {}\n", r.verdict.to_ascii_uppercase()));
    s
}

pub fn p2p_text(r: &P2pReport) -> String {
    let mut s = format!("GPU to GPU, {} MiB copies ({})\n", r.bytes >> 20, r.method);
    if let Some(n) = &r.note {
        s.push_str(&format!("  {n}\n"));
    }
    for p in &r.pairs {
        s.push_str(&format!(
            "  {}: {}\n",
            p.summary(),
            p.verdict.to_ascii_uppercase()
        ));
        if let Some(f) = &p.finding {
            s.push_str(&format!("    {f}\n"));
        }
    }
    s.push_str(&format!("Result: {}\n", r.verdict.to_ascii_uppercase()));
    s
}

pub fn nccl_text(r: &NcclReport) -> String {
    let mut s = String::from("NCCL all_reduce, float32 sum, one process over every GPU\n");
    if let Some(n) = &r.note {
        s.push_str(&format!("  {n}\nResult: SKIP\n"));
        return s;
    }
    if let (Some(t), Some(f)) = (&r.timeout, &r.finding) {
        s.push_str(&format!("  {f}\n  Look at:\n"));
        for l in &t.look_at {
            s.push_str(&format!("    - {l}\n"));
        }
        s.push_str("Result: FAIL\n");
        return s;
    }
    s.push_str("  size MiB    time us   algbw GB/s   busbw GB/s\n");
    for z in &r.sizes {
        s.push_str(&format!(
            "  {:>8.1} {:>10.1} {:>12.1} {:>12.1}\n",
            z.bytes as f64 / (1u64 << 20) as f64,
            z.time_us,
            z.algbw_gbs,
            z.busbw_gbs
        ));
    }
    s.push_str(&format!("  {}\n", r.summary()));
    if let Some(f) = &r.finding {
        s.push_str(&format!("  {f}\n"));
    }
    s.push_str(&format!("Result: {}\n", r.verdict.to_ascii_uppercase()));
    s
}

/// One GPU's NVLinks: how many are up, their version and speed, what they reach, its fabric state.
fn gpu_line(g: &gdrprov_rdma::nvlink::GpuNode) -> String {
    let up = g.links.iter().filter(|l| l.up).count();
    let remote: Vec<String> = {
        let mut v: Vec<String> = g
            .links
            .iter()
            .filter(|l| l.up)
            .map(|l| {
                l.remote_pci
                    .clone()
                    .or_else(|| l.remote_type.clone())
                    .unwrap_or_else(|| "?".into())
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    format!(
        "GPU {} {} ({}): NVLink {} of {} up{}{}, to {}; fabric {}",
        g.index,
        g.name,
        g.pci,
        up,
        g.links.len(),
        g.links
            .iter()
            .find_map(|l| l.generation.clone())
            .map(|v| format!(", NVLink {v}"))
            .unwrap_or_default(),
        g.link_speed_mbps
            .map(|m| format!(" at {:.2} GB/s each", m as f64 / 1000.0))
            .unwrap_or_default(),
        if remote.is_empty() {
            "nothing".into()
        } else {
            remote.join(", ")
        },
        g.fabric
            .as_ref()
            .map(|f| f.state.clone())
            .unwrap_or_else(|| "n/a".into())
    )
}

/// Each GPU pair: CUDA peer access and the path between them.
fn peer_lines(t: &GpuTopology, l: &LiveTopology, out: &mut Vec<String>) {
    for p in &l.peers {
        let path = crate::bench::p2p::path(t, &p.a_pci, &p.b_pci);
        out.push(format!(
            "GPU {} -> GPU {}: peer access {}, path {}{}{}",
            p.a,
            p.b,
            if p.can_access { "yes" } else { "NO" },
            path.kind,
            if path.nvlinks > 0 {
                format!(" ({} links)", path.nvlinks)
            } else {
                String::new()
            },
            path.common_ancestor
                .map(|c| format!(", common PCIe ancestor {c}"))
                .unwrap_or_default()
        ));
    }
    if let Some(e) = &l.peers_error {
        out.push(format!("CUDA peer access: {e}"));
    }
}

/// The GPU topology section of `inventory`: lines without a heading.
pub fn topology_lines(t: &GpuTopology) -> Vec<String> {
    let mut out = Vec::new();
    match t.live.as_ref().map(|l| &l.nvml) {
        None => out.push("NVLink, fabric, GPU pairs: not asked (not the running system, or a snapshot without them)".into()),
        Some(n) if n.error.is_some() => {
            out.push(format!("NVML: {}", n.error.as_deref().unwrap_or("")))
        }
        Some(n) => {
            out.extend(n.gpus.iter().map(gpu_line));
            for m in &n.missing {
                out.push(format!("NVML lacks {m}"));
            }
        }
    }
    if let Some(l) = &t.live {
        peer_lines(t, l, &mut out);
    }
    for s in &t.shared {
        out.push(format!(
            "{} {} shared by GPUs {}{}{}",
            if s.kind == "bridge" {
                "PCIe port"
            } else {
                "host bridge"
            },
            s.port,
            s.gpus.join(", "),
            if s.nics.is_empty() {
                String::new()
            } else {
                format!(" and NICs {}", s.nics.join(", "))
            },
            s.link
                .as_deref()
                .map(|l| format!(" (uplink {l}, {} GB/s)", one_decimal(s.link_gbs)))
                .unwrap_or_else(|| " (rate not in sysfs)".into())
        ));
    }
    if !t.nvswitches.is_empty() {
        out.push(format!(
            "NVSwitch PCI functions: {}; Fabric Manager package: {}",
            t.nvswitches.join(", "),
            t.fabric_manager
                .as_ref()
                .map_or("none".into(), |(p, v)| format!("{p} {v}"))
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::nccl_child::Timeout;

    #[test]
    fn a_timed_out_all_reduce_says_where_to_look_and_nothing_else() {
        let t = Timeout {
            stage: "ncclCommInitAll".into(),
            limit_s: 60.0,
            waited_s: 60.0,
            child_pid: Some(42),
            reaped: true,
            look_at: vec!["NCCL's log".into(), "`nvidia-smi`".into()],
        };
        let r = NcclReport {
            nccl_version: String::new(),
            ranks: 8,
            sizes: Vec::new(),
            data_ok: false,
            transports: Vec::new(),
            path: "unknown",
            floor_busbw_gbs: None,
            floor_source: String::new(),
            verdict: "fail",
            finding: Some(t.finding(8, Some("x NCCL INFO Bootstrap"))),
            log: None,
            note: None,
            timeout: Some(t),
        };
        let text = nccl_text(&r);
        assert!(text.contains("  ncclCommInitAll did not return within 60 s over 8 GPUs (waited 60.0 s; gdrprov's NCCL child process, pid 42, was killed); NCCL's last log line: x NCCL INFO Bootstrap\n"), "{text}");
        assert!(
            text.contains("  Look at:\n    - NCCL's log\n    - `nvidia-smi`\n"),
            "{text}"
        );
        assert!(!text.contains("busbw"), "{text}");
        assert!(text.ends_with("Result: FAIL\n"), "{text}");
    }
}
