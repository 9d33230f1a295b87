//! Kubernetes: node-feature-discovery's local feature file. NFD reads every
//! file in `/etc/kubernetes/node-feature-discovery/features.d/`, one
//! `name=value` a line, and labels the node `feature.node.kubernetes.io/NAME`;
//! a `# +expiry-time=RFC3339` comment makes the labels go away after that
//! time, so a "ready" that nobody refreshes dies by itself.

/// The default path of gdrprov's feature file.
pub const DEFAULT_PATH: &str = "/etc/kubernetes/node-feature-discovery/features.d/gdrprov";

/// The RDMA memory path a profile set proves: `dma-buf` or `peermem`.
pub fn rdma_path(
    loopback_memory: Option<&str>,
    modules_present: &[String],
    modules_absent: &[String],
) -> Option<&'static str> {
    match loopback_memory {
        Some("cuda-dmabuf") => return Some("dma-buf"),
        Some("cuda-peermem") => return Some("peermem"),
        _ => {}
    }
    let peermem = |m: &String| m == "nvidia_peermem" || m == "nv_peer_mem";
    if modules_present.iter().any(peermem) {
        Some("peermem")
    } else if modules_absent.iter().any(peermem) {
        Some("dma-buf")
    } else {
        None
    }
}

/// A label value NFD accepts: alphanumerics, `-`, `_`, `.`, at most 63,
/// starting and ending alphanumeric.
pub fn label_value(v: &str) -> String {
    let s: String = v
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    s.trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

/// The file's text: the expiry comment, then the labels.
pub fn features(
    ready: bool,
    profiles: &[String],
    rdma_path: Option<&str>,
    expires: std::time::SystemTime,
) -> String {
    let mut s = format!(
        "# written by gdrprov (verify --nfd-file, recheck)\n# +expiry-time={}\n",
        humantime::format_rfc3339_seconds(expires)
    );
    s.push_str(&format!("gdrprov.ready={ready}\n"));
    s.push_str(&format!(
        "gdrprov.profile={}\n",
        label_value(&profiles.join("_"))
    ));
    if let Some(p) = rdma_path {
        s.push_str(&format!("gdrprov.rdma-path={p}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn the_file_nfd_reads() {
        let t = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let text = features(true, &["rdma-dmabuf".into()], Some("dma-buf"), t);
        assert_eq!(
            text,
            "# written by gdrprov (verify --nfd-file, recheck)\n# +expiry-time=2027-01-15T08:00:00Z\ngdrprov.ready=true\ngdrprov.profile=rdma-dmabuf\ngdrprov.rdma-path=dma-buf\n"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once('=').unwrap();
            assert!(name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
            assert_eq!(label_value(value), value);
        }
    }

    #[test]
    fn paths_and_values() {
        assert_eq!(rdma_path(Some("cuda-peermem"), &[], &[]), Some("peermem"));
        assert_eq!(
            rdma_path(None, &[], &["nvidia_peermem".into()]),
            Some("dma-buf")
        );
        assert_eq!(
            rdma_path(None, &["nvidia_peermem".into()], &[]),
            Some("peermem")
        );
        assert_eq!(rdma_path(Some("host"), &[], &[]), None);
        assert_eq!(label_value("a b/c_"), "a_b_c");
    }
}
