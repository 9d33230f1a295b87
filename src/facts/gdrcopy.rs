//! gdrcopy's kernel module `gdrdrv` (UCX and NVSHMEM map GPU memory to the
//! CPU through it): loaded (`/sys/module/gdrdrv`, its version), its device
//! node `/dev/gdrdrv`, and whether it is installed for the kernel (`modinfo`,
//! read once with the module signatures: [`super::signing`]).

use super::kmod::ModuleFacts;
use super::signing::SigningFacts;
use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Default, Serialize)]
pub struct GdrcopyFacts {
    pub loaded: bool,
    /// `/sys/module/gdrdrv/version` when loaded, else the installed module's (`modinfo`).
    pub version: Option<String>,
    /// Installed for the kernel: `Some` when `modinfo` could be asked.
    pub installed: Option<bool>,
    /// `/dev/gdrdrv` exists (the node gdrcopy's library opens).
    pub device: bool,
}

impl GdrcopyFacts {
    pub fn present(&self) -> bool {
        self.loaded || self.installed == Some(true)
    }
}

pub fn probe(host: &Host, modules: &ModuleFacts, signing: &SigningFacts) -> GdrcopyFacts {
    let installed = signing.module("gdrdrv");
    let loaded = modules.is_loaded("gdrdrv");
    GdrcopyFacts {
        loaded,
        version: read_trim(host, "/sys/module/gdrdrv/version")
            .or_else(|| installed.and_then(|m| m.version.clone())),
        installed: signing.modinfo.then_some(installed.is_some()),
        device: host.exists("/dev/gdrdrv"),
    }
}
