//! perftest: its version and whether `ib_write_bw` was built with
//! `--use_cuda_dmabuf` (perftest >= 6.26 with CUDA).

use super::packages::Packages;
use super::util::version_in;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct PerftestFacts {
    pub installed: bool,
    pub version: Option<String>,
    /// `ib_write_bw --help` lists `--use_cuda_dmabuf`; `None` when it could not be asked.
    pub cuda_dmabuf: Option<bool>,
}

pub fn probe(host: &Host, packages: &Packages) -> PerftestFacts {
    let version_out = host.query(&["ib_write_bw", "--version"]);
    let help = host.query(&["ib_write_bw", "--help"]);
    let mut version = version_out
        .as_ref()
        .and_then(|o| version_in(&format!("{}{}", o.stdout, o.stderr)));
    let pkg = packages.version(&["perftest"]);
    if version.is_none() {
        version = pkg.as_ref().map(|(_, v)| v.clone());
    }
    let cuda_dmabuf = help
        .as_ref()
        .map(|o| o.stdout.contains("--use_cuda_dmabuf") || o.stderr.contains("--use_cuda_dmabuf"));
    PerftestFacts {
        installed: version_out.is_some() || help.is_some() || pkg.is_some(),
        version,
        cuda_dmabuf,
    }
}
