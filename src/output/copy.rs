//! The GPU <-> host copy report (`bench copy`, and verify's copy-bandwidth
//! check): one line per GPU, the same words in both.

use crate::bench::copy::CopyReport;

/// `bench copy` as text: the method, a line per GPU with its verdict, the result.
pub fn text(r: &CopyReport) -> String {
    let mut s = format!(
        "GPU <-> host copy, {} MiB x {} runs, best run ({})\n",
        r.bytes >> 20,
        r.runs,
        r.method
    );
    for g in &r.gpus {
        s.push_str(&format!(
            "  {}: {}\n",
            g.summary(),
            if g.passed { "PASS" } else { "FAIL" }
        ));
    }
    s.push_str(if r.passed {
        "Result: PASS\n"
    } else {
        "Result: FAIL\n"
    });
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::copy::{GpuCopy, LinkReading};

    fn gpu(passed: bool, floor: Option<f64>) -> GpuCopy {
        GpuCopy {
            index: 0,
            name: "NVIDIA H100 80GB HBM3".into(),
            pci_bus_id: "00000000:1B:00.0".into(),
            pci: "0000:1b:00.0".into(),
            link: LinkReading {
                current_speed: Some("32.0 GT/s PCIe".into()),
                speed_under_load: None,
                current_width: Some(16),
                max_speed: Some("32.0 GT/s PCIe".into()),
                max_width: Some(16),
            },
            bytes: 256 << 20,
            h2d_gbs: 55.3,
            d2h_gbs: 55.2,
            h2d_runs: vec![55.3],
            d2h_runs: vec![55.2],
            floor_gbs: floor,
            floor_source: "Azure's floor for H100/H200 at Gen5 x16".into(),
            numa: crate::facts::numa::choose(Some(1), Some("48-95"), &[48, 49, 50]),
            passed,
        }
    }

    #[test]
    fn bench_and_verify_say_a_gpu_in_the_same_words() {
        let g = gpu(true, Some(48.0));
        let line = g.summary();
        assert!(
            line.starts_with("GPU 0 NVIDIA H100 80GB HBM3 (0000:1b:00.0), link "),
            "{line}"
        );
        assert!(
            line.ends_with(
                ": H2D 55.3 GB/s, D2H 55.2 GB/s, floor 48.0 GB/s (Azure's floor for H100/H200 at Gen5 x16), host memory on NUMA node 1 (CPUs 48-50)"
            ),
            "{line}"
        );
        let r = CopyReport {
            bytes: 256 << 20,
            runs: 10,
            method: "m",
            gpus: vec![g, gpu(false, None)],
            passed: false,
        };
        let t = text(&r);
        assert!(t.contains(&format!("  {line}: PASS\n")), "{t}");
        assert!(t.contains("no floor (Azure's floor"), "{t}");
        assert!(t.ends_with("Result: FAIL\n"), "{t}");
        // verify's check says the same line.
        let check = crate::checks::health::copy::verdict(Ok(&r));
        let shown = serde_json::to_string(&check).unwrap();
        assert!(shown.contains(&line), "{shown}");
    }
}
