//! Combining profiles. `extend` is inheritance: the child wins, lists are
//! unions, and a child's `absent` cancels a parent's `present`. `compose` is
//! several profiles applied together: nothing wins, and any contradiction is
//! an error naming both sources.

use super::model::*;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

pub fn extend(parent: ProfileDoc, child: ProfileDoc) -> ProfileDoc {
    let (modules_present, modules_absent) = union_cancel(
        (parent.modules.present, parent.modules.absent),
        (child.modules.present, child.modules.absent),
        |a, b| a == b,
    );
    let (cmd_present, cmd_absent) = union_cancel(
        (parent.boot.cmdline.present, parent.boot.cmdline.absent),
        (child.boot.cmdline.present, child.boot.cmdline.absent),
        args_clash,
    );
    let mut files = parent.files;
    for f in child.files {
        files.retain(|p| p.path != f.path);
        files.push(f);
    }
    ProfileDoc {
        name: child.name.or(parent.name),
        description: child.description.or(parent.description),
        extends: Vec::new(),
        requires: Requires {
            kernel: child.requires.kernel.or(parent.requires.kernel),
            nvidia_driver: child
                .requires
                .nvidia_driver
                .or(parent.requires.nvidia_driver),
            cuda: child.requires.cuda.or(parent.requires.cuda),
            ofed: child.requires.ofed.or(parent.requires.ofed),
            perftest: child.requires.perftest.or(parent.requires.perftest),
            nccl: child.requires.nccl.or(parent.requires.nccl),
            gpu: child.requires.gpu.or(parent.requires.gpu),
            erdma: child.requires.erdma.or(parent.requires.erdma),
            efa: child.requires.efa.or(parent.requires.efa),
        },
        boot: Boot {
            iommu: child.boot.iommu.or(parent.boot.iommu),
            cmdline: Cmdline {
                present: cmd_present,
                absent: cmd_absent,
            },
            entry: child.boot.entry.or(parent.boot.entry),
            when: None,
        },
        modules: Modules {
            present: modules_present,
            absent: modules_absent,
            options: overlay(parent.modules.options, child.modules.options),
            when: None,
        },
        services: Services {
            disabled: union(parent.services.disabled, child.services.disabled),
            when: None,
        },
        network: Network {
            mtu: child.network.mtu.or(parent.network.mtu),
            when: None,
        },
        pcie: Pcie {
            acs: child.pcie.acs.or(parent.pcie.acs),
            when: None,
        },
        nccl: overlay(parent.nccl, child.nccl),
        files,
        vars: overlay(parent.vars, child.vars),
        verify: Verify {
            min_line_rate_fraction: child
                .verify
                .min_line_rate_fraction
                .or(parent.verify.min_line_rate_fraction),
            loopback: child.verify.loopback.or(parent.verify.loopback),
            first_boot: child.verify.first_boot.or(parent.verify.first_boot),
        },
        conditional: parent
            .conditional
            .into_iter()
            .chain(child.conditional)
            .collect(),
    }
}

/// Two command-line arguments clash when one would remove the other:
/// the same key (`iommu=pt` vs `iommu=off`, or `iommu` meaning any value).
pub fn args_clash(a: &str, b: &str) -> bool {
    let key = |s: &str| s.split('=').next().unwrap_or(s).to_string();
    key(a) == key(b)
}

fn union(mut a: Vec<String>, b: Vec<String>) -> Vec<String> {
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

/// Several profiles applied together. The default boot entry's settings are
/// in `doc.boot`; profiles that name their own `boot.entry` get one each in
/// `entries`, so an RDMA default and a GDS extra entry can live side by side.
#[derive(Debug, Clone)]
pub struct Composed {
    pub names: Vec<String>,
    pub doc: ProfileDoc,
    pub entries: Vec<(String, Boot)>,
}

pub fn compose(profiles: &[LoadedProfile]) -> Result<Composed> {
    let mut doc = ProfileDoc::default();
    let mut entries: Vec<(String, Boot, String)> = Vec::new();
    // Who set what, for conflict messages.
    let mut iommu_src: Option<(IommuMode, String)> = None;
    let mut arg_src: Vec<(String, bool, String)> = Vec::new();
    let mut module_src: Vec<(String, bool, String)> = Vec::new();
    let mut option_src: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut file_src: BTreeMap<String, (FileSpec, String)> = BTreeMap::new();
    let mut var_src: BTreeMap<String, (serde_json::Value, String)> = BTreeMap::new();
    let mut nccl_src: BTreeMap<String, (serde_json::Value, String)> = BTreeMap::new();
    let mut mtu_src: Option<(MtuSpec, String)> = None;
    let mut acs_src: Option<(AcsMode, String)> = None;

    for p in profiles {
        let src = format!("{} ({})", p.name, p.source);
        let d = &p.doc;
        if let Some(entry) = &d.boot.entry {
            if let Some((_, _, other)) = entries.iter().find(|(e, b, _)| e == entry && *b != d.boot)
            {
                return Err(conflict(
                    format!("boot entry `{entry}`"),
                    other,
                    "one set of boot settings",
                    &src,
                    "another",
                ));
            }
            if !entries.iter().any(|(e, _, _)| e == entry) {
                entries.push((entry.clone(), d.boot.clone(), src.clone()));
            }
        } else {
            if let Some(mode) = d.boot.iommu.filter(|m| *m != IommuMode::Unmanaged) {
                match &iommu_src {
                    Some((m, other)) if *m != mode => {
                        return Err(conflict(
                            "boot.iommu".into(),
                            other,
                            &format!("{m:?}").to_lowercase(),
                            &src,
                            &format!("{mode:?}").to_lowercase(),
                        ));
                    }
                    _ => iommu_src = Some((mode, src.clone())),
                }
                doc.boot.iommu = Some(mode);
            } else if doc.boot.iommu.is_none() {
                doc.boot.iommu = d.boot.iommu;
            }
            for (list, present) in [
                (&d.boot.cmdline.present, true),
                (&d.boot.cmdline.absent, false),
            ] {
                for a in list {
                    if let Some((b, _, other)) = arg_src.iter().find(|(b, bp, _)| {
                        args_clash(a, b) && (*bp != present || (present && a != b))
                    }) {
                        return Err(conflict(
                            format!("kernel argument `{a}`"),
                            other,
                            &describe_arg(b, arg_src.iter().any(|(x, p, _)| x == b && *p)),
                            &src,
                            &describe_arg(a, present),
                        ));
                    }
                    arg_src.push((a.clone(), present, src.clone()));
                }
            }
            doc.boot.cmdline.present =
                union(doc.boot.cmdline.present, d.boot.cmdline.present.clone());
            doc.boot.cmdline.absent = union(doc.boot.cmdline.absent, d.boot.cmdline.absent.clone());
        }
        for (list, present) in [(&d.modules.present, true), (&d.modules.absent, false)] {
            for m in list {
                if let Some((_, _, other)) =
                    module_src.iter().find(|(x, p, _)| x == m && *p != present)
                {
                    return Err(conflict(
                        format!("module `{m}`"),
                        other,
                        if present { "absent" } else { "present" },
                        &src,
                        if present { "present" } else { "absent" },
                    ));
                }
                module_src.push((m.clone(), present, src.clone()));
            }
        }
        doc.modules.present = union(doc.modules.present, d.modules.present.clone());
        doc.modules.absent = union(doc.modules.absent, d.modules.absent.clone());
        for (m, o) in &d.modules.options {
            if let Some((prev, other)) = option_src.get(m) {
                if prev != o {
                    return Err(conflict(
                        format!("modules.options.{m}"),
                        other,
                        &format!("\"{prev}\""),
                        &src,
                        &format!("\"{o}\""),
                    ));
                }
            }
            option_src.insert(m.clone(), (o.clone(), src.clone()));
            doc.modules.options.insert(m.clone(), o.clone());
        }
        doc.services.disabled = union(doc.services.disabled, d.services.disabled.clone());
        for f in &d.files {
            if let Some((prev, other)) = file_src.get(&f.path) {
                if prev != f {
                    return Err(conflict(
                        format!("file {}", f.path),
                        other,
                        "one content",
                        &src,
                        "another",
                    ));
                }
                continue;
            }
            file_src.insert(f.path.clone(), (f.clone(), src.clone()));
            doc.files.push(f.clone());
        }
        for (k, v) in &d.nccl {
            if let Some((prev, other)) = nccl_src.get(k) {
                if prev != v {
                    return Err(conflict(
                        format!("nccl.{k}"),
                        other,
                        &prev.to_string(),
                        &src,
                        &v.to_string(),
                    ));
                }
            }
            nccl_src.insert(k.clone(), (v.clone(), src.clone()));
            doc.nccl.insert(k.clone(), v.clone());
        }
        for (k, v) in &d.vars {
            if let Some((prev, other)) = var_src.get(k) {
                if prev != v {
                    return Err(conflict(
                        format!("vars.{k}"),
                        other,
                        &prev.to_string(),
                        &src,
                        &v.to_string(),
                    ));
                }
            }
            var_src.insert(k.clone(), (v.clone(), src.clone()));
            doc.vars.insert(k.clone(), v.clone());
        }
        if let Some(m) = &d.network.mtu {
            match &mtu_src {
                Some((prev, other)) if prev != m => {
                    let show = |x: &MtuSpec| {
                        let devs: Vec<String> = x.devices.iter().map(|d| d.to_string()).collect();
                        format!("{} for [{}]", x.value, devs.join(", "))
                    };
                    return Err(conflict(
                        "network.mtu".into(),
                        other,
                        &show(prev),
                        &src,
                        &show(m),
                    ));
                }
                Some(_) => {}
                None => mtu_src = Some((m.clone(), src.clone())),
            }
            doc.network.mtu = Some(m.clone());
        }
        if let Some(a) = d.pcie.acs {
            match &acs_src {
                Some((prev, other)) if *prev != a => {
                    return Err(conflict(
                        "pcie.acs".into(),
                        other,
                        &format!("{prev:?}").to_lowercase(),
                        &src,
                        &format!("{a:?}").to_lowercase(),
                    ));
                }
                Some(_) => {}
                None => acs_src = Some((a, src.clone())),
            }
            doc.pcie.acs = Some(a);
        }
        doc.requires = and_requires(doc.requires, d.requires.clone());
        doc.verify.min_line_rate_fraction = match (
            doc.verify.min_line_rate_fraction,
            d.verify.min_line_rate_fraction,
        ) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        doc.verify.loopback = doc.verify.loopback.or(d.verify.loopback);
        doc.verify.first_boot = doc.verify.first_boot.or(d.verify.first_boot);
        doc.conditional.extend(d.conditional.iter().cloned());
    }
    Ok(Composed {
        names: profiles.iter().map(|p| p.name.clone()).collect(),
        doc,
        entries: entries.into_iter().map(|(e, b, _)| (e, b)).collect(),
    })
}

fn describe_arg(a: &str, present: bool) -> String {
    format!("`{a}` {}", if present { "present" } else { "absent" })
}

fn conflict(
    what: String,
    first: &str,
    first_value: &str,
    second: &str,
    second_value: &str,
) -> Error {
    Error::ProfileConflict {
        what,
        first: first.to_string(),
        first_value: first_value.to_string(),
        second: second.to_string(),
        second_value: second_value.to_string(),
    }
}

/// Requirements of profiles applied together must all hold: version
/// constraints are joined with `,` (and) and the stricter severity is kept.
fn and_requires(a: Requires, b: Requires) -> Requires {
    fn ver(a: Option<VersionReq>, b: Option<VersionReq>) -> Option<VersionReq> {
        match (a, b) {
            (Some(x), Some(y)) if x == y => Some(x),
            (Some(x), Some(y)) => Some(VersionReq::Full(VersionReqFull {
                version: format!("{}, {}", x.version(), y.version()),
                severity: if x.severity() == Severity::Error || y.severity() == Severity::Error {
                    Severity::Error
                } else {
                    Severity::Warn
                },
                reason: None,
            })),
            (x, y) => x.or(y),
        }
    }
    Requires {
        kernel: ver(a.kernel, b.kernel),
        cuda: ver(a.cuda, b.cuda),
        perftest: ver(a.perftest, b.perftest),
        nccl: ver(a.nccl, b.nccl),
        erdma: ver(a.erdma, b.erdma),
        efa: ver(a.efa, b.efa),
        nvidia_driver: b.nvidia_driver.or(a.nvidia_driver),
        ofed: b.ofed.or(a.ofed),
        gpu: b.gpu.or(a.gpu),
    }
}
