//! Inheritance (`extends`): a child profile over its parent. The child wins,
//! lists are unions, and a child's `absent` cancels a parent's `present`.

use super::model::*;
use std::collections::BTreeMap;

/// The child profile over its parent (`extends`).
pub fn extend(parent: ProfileDoc, child: ProfileDoc) -> ProfileDoc {
    let mut files = parent.files;
    for f in child.files {
        files.retain(|p| p.path != f.path);
        files.push(f);
    }
    let mut gds = parent.gds;
    gds.merge(&child.gds);
    ProfileDoc {
        gds,
        name: child.name.or(parent.name),
        description: child.description.or(parent.description),
        extends: Vec::new(),
        requires: requires(parent.requires, child.requires),
        boot: boot(parent.boot, child.boot),
        modules: modules(parent.modules, child.modules),
        services: Services {
            disabled: union(parent.services.disabled, child.services.disabled),
            fabric_manager: child
                .services
                .fabric_manager
                .or(parent.services.fabric_manager),
            when: None,
        },
        network: Network {
            mtu: child.network.mtu.or(parent.network.mtu),
            lossless: child.network.lossless.or(parent.network.lossless),
            pfc_priority: child.network.pfc_priority.or(parent.network.pfc_priority),
            when: None,
        },
        pcie: Pcie {
            acs: child.pcie.acs.or(parent.pcie.acs),
            max_read_request: child.pcie.max_read_request.or(parent.pcie.max_read_request),
            relaxed_ordering: child.pcie.relaxed_ordering.or(parent.pcie.relaxed_ordering),
            bar1_min_mib: child.pcie.bar1_min_mib.or(parent.pcie.bar1_min_mib),
            when: None,
        },
        nccl: overlay(parent.nccl, child.nccl),
        files,
        vars: overlay(parent.vars, child.vars),
        verify: verify(parent.verify, child.verify),
        conditional: parent
            .conditional
            .into_iter()
            .chain(child.conditional)
            .collect(),
    }
}

fn requires(parent: Requires, child: Requires) -> Requires {
    Requires {
        kernel: child.kernel.or(parent.kernel),
        nvidia_driver: child.nvidia_driver.or(parent.nvidia_driver),
        cuda: child.cuda.or(parent.cuda),
        ofed: child.ofed.or(parent.ofed),
        perftest: child.perftest.or(parent.perftest),
        nccl: child.nccl.or(parent.nccl),
        gpu: child.gpu.or(parent.gpu),
        erdma: child.erdma.or(parent.erdma),
        efa: child.efa.or(parent.efa),
        gdrcopy: child.gdrcopy.or(parent.gdrcopy),
    }
}

fn boot(parent: Boot, child: Boot) -> Boot {
    let (cmd_present, cmd_absent) = union_cancel(
        (parent.cmdline.present, parent.cmdline.absent),
        (child.cmdline.present, child.cmdline.absent),
        args_clash,
    );
    Boot {
        iommu: child.iommu.or(parent.iommu),
        cmdline: Cmdline {
            present: cmd_present,
            absent: cmd_absent,
            allow_removing: union(parent.cmdline.allow_removing, child.cmdline.allow_removing),
        },
        entry: child.entry.or(parent.entry),
        when: None,
    }
}

fn modules(parent: Modules, child: Modules) -> Modules {
    let (modules_present, modules_absent) = union_cancel(
        (parent.present, parent.absent),
        (child.present, child.absent),
        |a, b| a == b,
    );
    Modules {
        present: modules_present,
        absent: modules_absent,
        options: overlay(parent.options, child.options),
        allow_blocking: union(parent.allow_blocking, child.allow_blocking),
        remove_load_requests: child.remove_load_requests.or(parent.remove_load_requests),
        when: None,
    }
}

fn verify(parent: Verify, child: Verify) -> Verify {
    Verify {
        min_line_rate_fraction: child
            .min_line_rate_fraction
            .or(parent.min_line_rate_fraction),
        loopback: child.loopback.or(parent.loopback),
        first_boot: child.first_boot.or(parent.first_boot),
    }
}

/// Two command-line arguments clash when one would remove the other:
/// the same key (`iommu=pt` vs `iommu=off`, or `iommu` meaning any value).
pub fn args_clash(a: &str, b: &str) -> bool {
    let key = |s: &str| s.split('=').next().unwrap_or(s).to_string();
    key(a) == key(b)
}

pub(super) fn union(mut a: Vec<String>, b: Vec<String>) -> Vec<String> {
    for x in b {
        if !a.contains(&x) {
            a.push(x);
        }
    }
    a
}

/// Union of present/absent lists where the child's entries cancel clashing
/// parent entries of the opposite (or same-key) kind.
fn union_cancel(
    parent: (Vec<String>, Vec<String>),
    child: (Vec<String>, Vec<String>),
    clash: fn(&str, &str) -> bool,
) -> (Vec<String>, Vec<String>) {
    let (pp, pa) = parent;
    let (cp, ca) = child;
    let keep = |list: Vec<String>, over: &[String], over2: &[String]| -> Vec<String> {
        list.into_iter()
            .filter(|x| !over.iter().chain(over2).any(|c| clash(x, c)))
            .collect()
    };
    let present = union(keep(pp, &ca, &cp), cp.clone());
    let absent = union(keep(pa, &cp, &[]), ca);
    (present, absent)
}

fn overlay<V>(mut a: BTreeMap<String, V>, b: BTreeMap<String, V>) -> BTreeMap<String, V> {
    a.extend(b);
    a
}
