//! Combining profiles: `compose` is several profiles applied together:
//! nothing wins, and any contradiction is an error naming both sources.
//! (Inheritance, where the child wins, is `super::extend`.)

use super::extend::{args_clash, union};
use super::model::*;
use crate::error::{Error, Result};
use std::collections::BTreeMap;

/// Several profiles applied together. The default boot entry's settings are
/// in `doc.boot`; profiles that name their own `boot.entry` get one each in
/// `entries`, so an RDMA default and a GDS extra entry can live side by side.
#[derive(Debug, Clone)]
pub struct Composed {
    pub names: Vec<String>,
    /// For each of `names`: whether it is a built-in profile (else a file).
    pub builtin: Vec<bool>,
    /// Each profile as a command names it, for the commands gdrprov
    /// suggests (`crate::suggest`): a built-in by its name, a file by its path.
    pub named: Vec<String>,
    pub doc: ProfileDoc,
    pub entries: Vec<(String, Boot)>,
}

pub fn compose(profiles: &[LoadedProfile]) -> Result<Composed> {
    one_profile_per_name(profiles)?;
    let mut c = Composer::default();
    for p in profiles {
        let src = format!("{} ({})", p.name, p.source);
        c.add(&p.doc, &src)?;
    }
    Ok(Composed {
        names: profiles.iter().map(|p| p.name.clone()).collect(),
        builtin: profiles.iter().map(|p| p.builtin).collect(),
        named: profiles
            .iter()
            .map(|p| {
                if p.builtin {
                    p.name.clone()
                } else {
                    p.source.clone()
                }
            })
            .collect(),
        doc: c.doc,
        entries: c.entries.into_iter().map(|(e, b, _)| (e, b)).collect(),
    })
}

/// Two profiles of one name are refused: a file named like a built-in (or
/// like another file) would be merged with it under one name in
/// `state.json`, the generated files' headers and `recheck`. The same
/// profile given twice is one profile.
fn one_profile_per_name(profiles: &[LoadedProfile]) -> Result<()> {
    for (i, p) in profiles.iter().enumerate() {
        if let Some(q) = profiles[..i]
            .iter()
            .find(|q| q.name == p.name && q.source != p.source)
        {
            return Err(Error::Usage(format!(
                "two profiles are named `{}`: {} and {}; give one of them, or a file its own `name:`",
                p.name, q.source, p.source
            )));
        }
    }
    Ok(())
}

/// `network.lossless` with its `pfc-priority`.
type LosslessWish = (Option<Lossless>, Option<u8>);

/// The composition so far, and who set what (for conflict messages).
#[derive(Default)]
struct Composer {
    doc: ProfileDoc,
    entries: Vec<(String, Boot, String)>,
    iommu_src: Option<(IommuMode, String)>,
    arg_src: Vec<(String, bool, String)>,
    module_src: Vec<(String, bool, String)>,
    option_src: BTreeMap<String, (String, String)>,
    file_src: BTreeMap<String, (FileSpec, String)>,
    var_src: BTreeMap<String, (serde_json::Value, String)>,
    nccl_src: BTreeMap<String, (serde_json::Value, String)>,
    mtu_src: Option<(MtuSpec, String)>,
    acs_src: Option<(AcsMode, String)>,
    mrrs_src: Option<(u32, String)>,
    fm_src: Option<(FabricManagerMode, String)>,
    lossless_src: Option<(LosslessWish, String)>,
}

impl Composer {
    /// Adds one profile (`src` names it in messages).
    fn add(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        match &d.boot.entry {
            Some(entry) => self.entry(entry, &d.boot, src)?,
            None => self.boot(&d.boot, src)?,
        }
        self.modules(d, src)?;
        let doc = &mut self.doc;
        doc.services.disabled = union(
            std::mem::take(&mut doc.services.disabled),
            d.services.disabled.clone(),
        );
        self.files(d, src)?;
        let quoted = |v: &serde_json::Value| v.to_string();
        keyed(
            "nccl",
            &mut self.doc.nccl,
            &mut self.nccl_src,
            &d.nccl,
            src,
            quoted,
        )?;
        keyed(
            "vars",
            &mut self.doc.vars,
            &mut self.var_src,
            &d.vars,
            src,
            quoted,
        )?;
        self.network_and_pcie(d, src)?;
        let doc = &mut self.doc;
        doc.requires = and_requires(std::mem::take(&mut doc.requires), d.requires.clone());
        doc.verify.min_line_rate_fraction = match (
            doc.verify.min_line_rate_fraction,
            d.verify.min_line_rate_fraction,
        ) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        doc.verify.loopback = doc.verify.loopback.or(d.verify.loopback);
        doc.verify.first_boot = doc.verify.first_boot.or(d.verify.first_boot);
        doc.gds.merge(&d.gds);
        doc.conditional.extend(d.conditional.iter().cloned());
        Ok(())
    }

    /// A boot entry of its own: one set of settings per entry name.
    fn entry(&mut self, entry: &str, boot: &Boot, src: &str) -> Result<()> {
        if let Some((_, _, other)) = self
            .entries
            .iter()
            .find(|(e, b, _)| e == entry && b != boot)
        {
            return Err(conflict(
                format!("boot entry `{entry}`"),
                other,
                "one set of boot settings",
                src,
                "another",
            ));
        }
        if !self.entries.iter().any(|(e, _, _)| e == entry) {
            self.entries
                .push((entry.to_string(), boot.clone(), src.to_string()));
        }
        Ok(())
    }

    /// The default entry's boot settings: one IOMMU mode, arguments that
    /// do not clash.
    fn boot(&mut self, boot: &Boot, src: &str) -> Result<()> {
        let doc = &mut self.doc;
        if let Some(mode) = boot.iommu.filter(|m| *m != IommuMode::Unmanaged) {
            match &self.iommu_src {
                Some((m, other)) if *m != mode => {
                    return Err(conflict(
                        "boot.iommu".into(),
                        other,
                        &format!("{m:?}").to_lowercase(),
                        src,
                        &format!("{mode:?}").to_lowercase(),
                    ));
                }
                _ => self.iommu_src = Some((mode, src.to_string())),
            }
            doc.boot.iommu = Some(mode);
        } else if doc.boot.iommu.is_none() {
            doc.boot.iommu = boot.iommu;
        }
        let arg_src = &mut self.arg_src;
        for (list, present) in [(&boot.cmdline.present, true), (&boot.cmdline.absent, false)] {
            for a in list {
                if let Some((b, _, other)) = arg_src
                    .iter()
                    .find(|(b, bp, _)| args_clash(a, b) && (*bp != present || (present && a != b)))
                {
                    return Err(conflict(
                        format!("kernel argument `{a}`"),
                        other,
                        &describe_arg(b, arg_src.iter().any(|(x, p, _)| x == b && *p)),
                        src,
                        &describe_arg(a, present),
                    ));
                }
                arg_src.push((a.clone(), present, src.to_string()));
            }
        }
        let cmdline = &mut doc.boot.cmdline;
        cmdline.present = union(
            std::mem::take(&mut cmdline.present),
            boot.cmdline.present.clone(),
        );
        cmdline.absent = union(
            std::mem::take(&mut cmdline.absent),
            boot.cmdline.absent.clone(),
        );
        cmdline.allow_removing = union(
            std::mem::take(&mut cmdline.allow_removing),
            boot.cmdline.allow_removing.clone(),
        );
        Ok(())
    }

    /// Modules present or absent (never both), and their options.
    fn modules(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        for (list, present) in [(&d.modules.present, true), (&d.modules.absent, false)] {
            for m in list {
                if let Some((_, _, other)) = self
                    .module_src
                    .iter()
                    .find(|(x, p, _)| x == m && *p != present)
                {
                    return Err(conflict(
                        format!("module `{m}`"),
                        other,
                        if present { "absent" } else { "present" },
                        src,
                        if present { "present" } else { "absent" },
                    ));
                }
                self.module_src.push((m.clone(), present, src.to_string()));
            }
        }
        let modules = &mut self.doc.modules;
        modules.present = union(
            std::mem::take(&mut modules.present),
            d.modules.present.clone(),
        );
        modules.absent = union(
            std::mem::take(&mut modules.absent),
            d.modules.absent.clone(),
        );
        modules.allow_blocking = union(
            std::mem::take(&mut modules.allow_blocking),
            d.modules.allow_blocking.clone(),
        );
        // Removing other files' load requests: asked by any, done for all.
        if d.modules.remove_load_requests == Some(true) {
            modules.remove_load_requests = Some(true);
        } else if modules.remove_load_requests.is_none() {
            modules.remove_load_requests = d.modules.remove_load_requests;
        }
        let quoted = |o: &String| format!("\"{o}\"");
        keyed(
            "modules.options",
            &mut self.doc.modules.options,
            &mut self.option_src,
            &d.modules.options,
            src,
            quoted,
        )
    }

    /// Files: one content per path.
    fn files(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        for f in &d.files {
            if let Some((prev, other)) = self.file_src.get(&f.path) {
                if prev != f {
                    return Err(conflict(
                        format!("file {}", f.path),
                        other,
                        "one content",
                        src,
                        "another",
                    ));
                }
                continue;
            }
            self.file_src
                .insert(f.path.clone(), (f.clone(), src.to_string()));
            self.doc.files.push(f.clone());
        }
        Ok(())
    }

    /// One MTU setting and one ACS mode.
    fn network_and_pcie(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        if let Some(m) = &d.network.mtu {
            match &self.mtu_src {
                Some((prev, other)) if prev != m => {
                    let show = |x: &MtuSpec| {
                        let devs: Vec<String> = x.devices.iter().map(|d| d.to_string()).collect();
                        format!("{} for [{}]", x.value, devs.join(", "))
                    };
                    return Err(conflict(
                        "network.mtu".into(),
                        other,
                        &show(prev),
                        src,
                        &show(m),
                    ));
                }
                Some(_) => {}
                None => self.mtu_src = Some((m.clone(), src.to_string())),
            }
            self.doc.network.mtu = Some(m.clone());
        }
        if let Some(a) = d.pcie.acs {
            match &self.acs_src {
                Some((prev, other)) if *prev != a => {
                    return Err(conflict(
                        "pcie.acs".into(),
                        other,
                        &format!("{prev:?}").to_lowercase(),
                        src,
                        &format!("{a:?}").to_lowercase(),
                    ));
                }
                Some(_) => {}
                None => self.acs_src = Some((a, src.to_string())),
            }
            self.doc.pcie.acs = Some(a);
        }
        self.lossless(d, src)?;
        self.pcie_path(d, src)?;
        self.fabric_manager(d, src)
    }

    /// One MaxReadReq; the stricter relaxed-ordering check and the larger BAR1 floor.
    fn pcie_path(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        if let Some(m) = d.pcie.max_read_request {
            match &self.mrrs_src {
                Some((prev, other)) if *prev != m => {
                    return Err(conflict(
                        "pcie.max-read-request".into(),
                        other,
                        &prev.to_string(),
                        src,
                        &m.to_string(),
                    ));
                }
                Some(_) => {}
                None => self.mrrs_src = Some((m, src.to_string())),
            }
            self.doc.pcie.max_read_request = Some(m);
        }
        let p = &mut self.doc.pcie;
        p.relaxed_ordering = match (p.relaxed_ordering, d.pcie.relaxed_ordering) {
            (Some(RelaxedOrdering::Warn), _) | (_, Some(RelaxedOrdering::Warn)) => {
                Some(RelaxedOrdering::Warn)
            }
            (a, b) => a.or(b),
        };
        p.bar1_min_mib = p.bar1_min_mib.max(d.pcie.bar1_min_mib);
        Ok(())
    }

    /// One `network.lossless` wish (with its `pfc-priority`): two that differ conflict.
    fn lossless(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        let n = &d.network;
        if n.lossless.is_none() && n.pfc_priority.is_none() {
            return Ok(());
        }
        let w = (n.lossless, n.pfc_priority);
        let show = |(l, p): LosslessWish| {
            let l = l.map_or("unset", Lossless::word);
            p.map_or(l.to_string(), |p| format!("{l}, pfc-priority {p}"))
        };
        match &self.lossless_src {
            Some((prev, other)) if *prev != w => {
                return Err(conflict(
                    "network.lossless".into(),
                    other,
                    &show(*prev),
                    src,
                    &show(w),
                ))
            }
            Some(_) => {}
            None => self.lossless_src = Some((w, src.to_string())),
        }
        self.doc.network.lossless = n.lossless;
        self.doc.network.pfc_priority = n.pfc_priority;
        Ok(())
    }

    /// `required` is `auto` made strict, so it wins over `auto`; `off` against either is a
    /// contradiction, refused with both sources.
    fn fabric_manager(&mut self, d: &ProfileDoc, src: &str) -> Result<()> {
        use FabricManagerMode::{Auto, Off, Required};
        let Some(m) = d.services.fabric_manager else {
            return Ok(());
        };
        let kept = match &self.fm_src {
            None => m,
            Some((prev, other)) => match (*prev, m) {
                (a, b) if a == b => a,
                (Off, _) | (_, Off) => {
                    return Err(conflict(
                        "services.fabric-manager".into(),
                        other,
                        prev.word(),
                        src,
                        m.word(),
                    ))
                }
                (Required, _) | (_, Required) => Required,
                (Auto, Auto) => Auto,
            },
        };
        if self.fm_src.as_ref().map(|(p, _)| *p) != Some(kept) {
            self.fm_src = Some((kept, src.to_string()));
        }
        self.doc.services.fabric_manager = Some(kept);
        Ok(())
    }
}

/// Adds `key: value` pairs of a section, refusing a key that two profiles
/// set to different values.
fn keyed<V: Clone + PartialEq>(
    section: &str,
    into: &mut BTreeMap<String, V>,
    seen: &mut BTreeMap<String, (V, String)>,
    from: &BTreeMap<String, V>,
    src: &str,
    show: impl Fn(&V) -> String,
) -> Result<()> {
    for (k, v) in from {
        if let Some((prev, other)) = seen.get(k) {
            if prev != v {
                return Err(conflict(
                    format!("{section}.{k}"),
                    other,
                    &show(prev),
                    src,
                    &show(v),
                ));
            }
        }
        seen.insert(k.clone(), (v.clone(), src.to_string()));
        into.insert(k.clone(), v.clone());
    }
    Ok(())
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
        gdrcopy: ver(a.gdrcopy, b.gdrcopy),
        nvidia_driver: b.nvidia_driver.or(a.nvidia_driver),
        ofed: b.ofed.or(a.ofed),
        gpu: b.gpu.or(a.gpu),
    }
}
