//! The kernels planning works for: the running one (or every installed one in an image), their
//! module indexes (`modules.dep`, `modules.builtin`, else the `.ko` files), and the modules in
//! their initramfs.

use super::{norm, KernelModules};
use crate::facts::OsFamily;
use crate::host::Host;
use std::collections::BTreeSet;

/// The module indexes of the kernels a module must work with (see
/// [`PlanFacts::kernels`]); the requirements gate reads them too.
pub fn target_kernel_modules(host: &Host) -> Vec<KernelModules> {
    target_kernels(host)
        .into_iter()
        .map(|k| kernel_modules(host, k))
        .collect()
}

/// The running kernel on the live system, every installed one (with modules)
/// in an image.
fn target_kernels(host: &Host) -> Vec<String> {
    if host.is_live() {
        if let Some(r) = host.read_fact("/proc/sys/kernel/osrelease") {
            return vec![r.trim().to_string()];
        }
    }
    host.list_dir("/lib/modules")
        .into_iter()
        .filter(|k| {
            host.exists(&format!("/lib/modules/{k}/kernel"))
                || host.exists(&format!("/lib/modules/{k}/modules.dep"))
        })
        .collect()
}

/// The module name of a `modules.dep`/`modules.builtin` line or a file name.
pub fn module_of(line: &str) -> Option<String> {
    let path = line.split(':').next().unwrap_or("");
    let file = path.rsplit('/').next().unwrap_or("");
    let stem = file.split(".ko").next().unwrap_or("");
    (!stem.is_empty()).then(|| norm(stem))
}

fn kernel_modules(host: &Host, release: String) -> KernelModules {
    let dir = format!("/lib/modules/{release}");
    let names = |t: String| t.lines().filter_map(module_of).collect::<BTreeSet<_>>();
    let builtin = host.read_fact(&format!("{dir}/modules.builtin")).map(names);
    let index = host
        .read_fact(&format!("{dir}/modules.dep"))
        .filter(|d| !d.trim().is_empty())
        .map(names);
    let mut ko_files = BTreeSet::new();
    if index.is_none() {
        find_ko(host, &dir, 0, &mut ko_files);
    }
    KernelModules {
        has_kernel_dir: host.exists(&format!("{dir}/kernel")),
        release,
        builtin,
        index,
        ko_files,
    }
}

/// An empty or absent index (no depmod run yet): the `.ko` files themselves.
fn find_ko(host: &Host, dir: &str, depth: usize, out: &mut BTreeSet<String>) {
    if depth > 8 {
        return;
    }
    for e in host.list_dir(dir) {
        if e.contains(".ko") {
            if let Some(stem) = e.split(".ko").next() {
                out.insert(norm(stem));
            }
        } else if !e.contains('.') {
            find_ko(host, &format!("{dir}/{e}"), depth + 1, out);
        }
    }
}

/// The modules inside the initramfs of `kernel`, asked of the distribution's
/// own lister. No initramfs, or no lister: `None`.
pub(super) fn initramfs_modules(
    host: &Host,
    family: OsFamily,
    kernel: &str,
) -> Option<BTreeSet<String>> {
    let (image, lister) = match family {
        OsFamily::Rhel => (format!("/boot/initramfs-{kernel}.img"), "lsinitrd"),
        _ => (format!("/boot/initrd.img-{kernel}"), "lsinitramfs"),
    };
    if !host.exists(&image) {
        return None;
    }
    let out = host.query(&[lister, &image])?;
    Some(
        out.stdout
            .lines()
            .filter_map(|l| {
                let file = l.rsplit('/').next().unwrap_or("");
                file.contains(".ko")
                    .then(|| norm(file.split(".ko").next().unwrap_or("")))
            })
            .collect(),
    )
}
