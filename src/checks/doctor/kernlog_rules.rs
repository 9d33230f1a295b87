//! The kernel log's lines about the modules GPUDirect needs (the facts keep
//! them: `facts::kernlog`'s module lines), one row each in the shape of
//! [`super::modes`]: a peer-memory module built against another RDMA stack,
//! and a module the kernel refuses or taints for its signature.

use super::modes::{Mode, Seen};
use super::{Finding, Sev};
use crate::facts::Facts;

const ROW: Mode = Mode {
    id: "",
    seen: Seen::KernelLog,
    severity: Sev::Error,
    all: &[],
    any: &[],
    not: &[],
    symptom: "",
    title: "",
    cause: "",
    fix: "",
    report: "",
};

/// The peer-memory modules whose symbol errors are one failure mode.
pub const PEERMEM_MODULES: &[&str] = &["nvidia_peermem", "efa_nv_peermem", "nv_peer_mem"];

/// The rows, in the order they are tried.
pub const RULES: &[Mode] = &[
    Mode {
        id: "peermem-symbol-mismatch",
        any: &[
            &["nvidia_peermem: ", "efa_nv_peermem: ", "nv_peer_mem: "],
            &["disagrees about version of symbol", "Unknown symbol"],
        ],
        symptom: "nv_peer_mem: Unknown symbol ib_register_peer_memory_client (err 0)",
        title: "a peer-memory module was built against another ib_core (or NVIDIA driver) than the one loaded",
        cause: "the module was compiled against the RDMA stack (and NVIDIA driver) present when it was built; MLNX_OFED/DOCA-OFED, an inbox rdma-core kernel update or a new driver installed since replaced the symbols it calls, so the kernel refuses it",
        fix: "rebuild it after OFED: reinstall the NVIDIA driver (nvidia_peermem) or the nvidia-peer-memory package (nv_peer_mem), or where DKMS builds it `dkms autoinstall`; or move to dma-buf, which needs no peer-memory module (`gdrprov apply rdma-dmabuf`: open driver, kernel >= 5.12)",
        report: "https://github.com/Mellanox/nv_peer_memory/issues/84",
        ..ROW
    },
    Mode {
        id: "module-signature-rejected",
        any: &[&[
            "Loading of unsigned module is rejected",
            "unsigned module loading is restricted",
            "Loading of module with unavailable key is rejected",
            "Key was rejected by service",
            "Required key not available",
        ]],
        symptom: "Loading of unsigned module is rejected",
        title: "the kernel refused a module for its signature (Secure Boot or lockdown)",
        cause: "with Secure Boot (lockdown) or module.sig_enforce the kernel loads only modules signed by a key it trusts; an out-of-tree module built by DKMS or by hand (nvidia, nvidia_peermem, nv_peer_mem, nvidia-fs, gdrdrv) is unsigned, or signed with a machine owner key (MOK) that was never enrolled",
        fix: "enrol the key DKMS signs with: `mokutil --import /var/lib/dkms/mok.pub` (Ubuntu: /var/lib/shim-signed/mok/MOK.der), reboot and confirm it in MokManager, then `dkms autoinstall` so the modules are signed with it; or sign by hand with the kernel's `scripts/sign-file sha256 KEY CERT MODULE.ko`; or use the distribution's signed prebuilt modules (Ubuntu's linux-modules-nvidia-*)",
        report: "https://github.com/google/gasket-driver/issues/11",
        ..ROW
    },
    Mode {
        id: "module-unsigned-tainting",
        severity: Sev::Info,
        all: &["module verification failed"],
        symptom: "nvidia: module verification failed: signature and/or required key missing - tainting kernel",
        title: "an out-of-tree module loaded without a signature the kernel trusts (refused once Secure Boot is on)",
        cause: "the kernel checks module signatures but does not enforce them (Secure Boot off, no lockdown): an unsigned module, or one signed with a key the kernel does not hold, loads and taints the kernel; the same module is refused as soon as Secure Boot or module.sig_enforce is turned on",
        fix: "before turning Secure Boot on, enrol the DKMS key (`mokutil --import /var/lib/dkms/mok.pub`, reboot, confirm in MokManager) and rebuild the modules so DKMS signs them (`dkms autoinstall`)",
        report: "https://github.com/NVIDIA/k8s-device-plugin/issues/480",
        ..ROW
    },
];

/// The module a rejection line names (`'gasket'`, `nvidia: ...`), if any.
fn module_named(line: &str) -> Option<String> {
    if let Some(quoted) = line.split('\'').nth(1).filter(|m| !m.contains(' ')) {
        return Some(quoted.to_string());
    }
    let mut parts: Vec<&str> = line.split(": ").collect();
    parts.pop();
    parts
        .iter()
        .filter_map(|p| p.split_whitespace().last())
        .filter(|w| {
            w.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                && !["kernel", "Lockdown", "modprobe", "ERROR"].contains(w)
        })
        .map(str::to_string)
        .next()
}

/// The findings of the kernel log's module lines, each kind once (its
/// first line). The symbol mismatch is `super::peermem_symbol_mismatch`'s.
pub fn findings(facts: &Facts) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for m in RULES.iter().filter(|m| m.id != "peermem-symbol-mismatch") {
        if let Some(line) = facts.kernel_log.iter().find(|l| m.matches(l)) {
            let mut f = m.finding(format!("kernel log: {}", line.trim()));
            if let Some(module) = module_named(line) {
                f.title = format!("{} ({module})", f.title);
            }
            out.push(f);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_module_a_line_names() {
        assert_eq!(
            module_named("modprobe: ERROR: could not insert 'gdrdrv': Key was rejected by service")
                .as_deref(),
            Some("gdrdrv")
        );
        assert_eq!(
            module_named("[ 5.1] nvidia: module verification failed: signature and/or required key missing - tainting kernel").as_deref(),
            Some("nvidia")
        );
        assert_eq!(
            module_named("[27532.356706] Loading of unsigned module is rejected"),
            None
        );
        assert_eq!(
            module_named("kernel: Lockdown: modprobe: unsigned module loading is restricted; see man kernel_lockdown.7"),
            None
        );
    }
}
