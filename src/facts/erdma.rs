//! Alibaba Cloud eRDMA: the driver package (`eadm ver`) and the module.

use super::util::{query_ok, read_trim, version_in};
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ErdmaFacts {
    /// `eadm ver`.
    pub version: Option<String>,
    pub module_loaded: bool,
    /// `/sys/module/erdma/version`.
    pub module_version: Option<String>,
}

impl ErdmaFacts {
    pub fn present(&self) -> bool {
        self.version.is_some() || self.module_loaded
    }
}

pub fn probe(host: &Host, loaded: &[String]) -> ErdmaFacts {
    let version = query_ok(host, &["eadm", "ver"]).and_then(|o| version_in(&o));
    let module_version = read_trim(host, "/sys/module/erdma/version");
    ErdmaFacts {
        version: version.or_else(|| module_version.clone()),
        module_loaded: loaded.iter().any(|m| m == "erdma"),
        module_version,
    }
}
