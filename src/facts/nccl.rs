//! NCCL: every copy found (system library, header, package, Python wheel).

use super::packages::Packages;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct NcclInstall {
    pub version: String,
    /// Where it was found.
    pub source: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NcclFacts {
    /// The system NCCL if there is one, else the first one found.
    pub version: Option<String>,
    pub installs: Vec<NcclInstall>,
}

const LIB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/nccl/lib",
];

fn header_version(text: &str) -> Option<String> {
    let def = |name: &str| {
        text.lines().find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("#define") && w.next() == Some(name))
                .then(|| w.next().map(String::from))
                .flatten()
        })
    };
    Some(format!(
        "{}.{}.{}",
        def("NCCL_MAJOR")?,
        def("NCCL_MINOR")?,
        def("NCCL_PATCH")?
    ))
}

/// Python environments that may carry a `nvidia-nccl-cu*` wheel.
fn python_dirs(host: &Host) -> Vec<String> {
    let mut bases = vec![
        "/usr/local/lib".to_string(),
        "/usr/lib".to_string(),
        "/opt/conda/lib".to_string(),
    ];
    for o in host.list_dir("/opt") {
        bases.push(format!("/opt/{o}/.venv/lib"));
        bases.push(format!("/opt/{o}/lib"));
    }
    let mut out = Vec::new();
    for b in bases {
        for py in host.list_dir_prefix(&b, "python3") {
            if py.starts_with("python3") {
                for sp in ["site-packages", "dist-packages"] {
                    out.push(format!("{b}/{py}/{sp}"));
                }
            }
        }
    }
    out.push("/usr/lib/python3/dist-packages".into());
    out
}

pub fn probe(host: &Host, packages: &Packages) -> NcclFacts {
    let mut installs = Vec::new();
    for dir in LIB_DIRS {
        for f in host.list_dir_prefix(dir, "libnccl.so.") {
            if let Some(v) = f.strip_prefix("libnccl.so.") {
                if v.matches('.').count() >= 2 {
                    installs.push(NcclInstall {
                        version: v.to_string(),
                        source: format!("{dir}/{f}"),
                    });
                }
            }
        }
    }
    for h in ["/usr/include/nccl.h", "/usr/local/cuda/include/nccl.h"] {
        if let Some(v) = host.read_fact(h).as_deref().and_then(header_version) {
            if !installs.iter().any(|i| i.version == v) {
                installs.push(NcclInstall {
                    version: v,
                    source: h.to_string(),
                });
            }
        }
    }
    if installs.is_empty() {
        if let Some((pkg, v)) = packages.version(&["libnccl2", "libnccl"]) {
            installs.push(NcclInstall {
                version: v.split(['-', '+']).next().unwrap_or(&v).to_string(),
                source: format!("package {pkg}"),
            });
        }
    }
    for dir in python_dirs(host) {
        for e in host.list_dir_prefix(&dir, "nvidia_nccl_cu") {
            if let Some(rest) = e.strip_prefix("nvidia_nccl_cu") {
                if let Some(v) = rest
                    .strip_suffix(".dist-info")
                    .and_then(|r| r.split_once('-'))
                {
                    installs.push(NcclInstall {
                        version: v.1.to_string(),
                        source: format!("{dir}/{e}"),
                    });
                }
            }
        }
    }
    NcclFacts {
        version: installs.first().map(|i| i.version.clone()),
        installs,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn header_defines() {
        let h = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 23\n#define NCCL_PATCH 4\n";
        assert_eq!(super::header_version(h).as_deref(), Some("2.23.4"));
    }
}
