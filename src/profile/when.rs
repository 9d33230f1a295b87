//! `when:` conditions. At load, every section or file that carries one is
//! taken out of the profile into [`Conditional`] parts, which `extends` and
//! composition carry along unchanged; at planning, [`resolve`] adds back the
//! parts whose condition holds on the host's facts and says why the others
//! were skipped. Pure: reads facts only.

use super::extend::extend;
use super::merge::Composed;
use super::model::*;
use crate::error::{Error, Result};
use crate::facts::arch::Arch;
use crate::facts::ofed::OfedKindFact;
use crate::facts::platform::VirtFact;
use crate::facts::Facts;
use crate::versions;

/// A conditional part: its condition, what it is ("boot", "files[PATH]"), the part itself.
type Part = (When, String, ProfileDoc);

/// The sections that carry a `when:`, each taken out of `doc` as a part of its own.
fn section_parts(doc: &mut ProfileDoc, label: &str) -> Result<Vec<Part>> {
    let mut parts: Vec<Part> = Vec::new();
    if let Some(w) = doc.boot.when.take() {
        if doc.boot.entry.is_some() {
            return Err(Error::ProfileInvalid {
                file: label.to_string(),
                msg: "boot.when cannot be combined with boot.entry: a boot entry of its own is for every host the profile is applied to; remove one of them".into(),
            });
        }
        let boot = std::mem::take(&mut doc.boot);
        parts.push((
            w,
            "boot".into(),
            ProfileDoc {
                boot,
                ..Default::default()
            },
        ));
    }
    if let Some(w) = doc.modules.when.take() {
        let modules = std::mem::take(&mut doc.modules);
        parts.push((
            w,
            "modules".into(),
            ProfileDoc {
                modules,
                ..Default::default()
            },
        ));
    }
    if let Some(w) = doc.services.when.take() {
        let services = std::mem::take(&mut doc.services);
        parts.push((
            w,
            "services".into(),
            ProfileDoc {
                services,
                ..Default::default()
            },
        ));
    }
    if let Some(w) = doc.network.when.take() {
        let network = std::mem::take(&mut doc.network);
        parts.push((
            w,
            "network".into(),
            ProfileDoc {
                network,
                ..Default::default()
            },
        ));
    }
    if let Some(w) = doc.pcie.when.take() {
        let pcie = std::mem::take(&mut doc.pcie);
        parts.push((
            w,
            "pcie".into(),
            ProfileDoc {
                pcie,
                ..Default::default()
            },
        ));
    }
    Ok(parts)
}

/// The files that carry a `when:`, each taken out of `doc` as a part of its own.
fn file_parts(doc: &mut ProfileDoc) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    let (with, without): (Vec<FileSpec>, Vec<FileSpec>) = std::mem::take(&mut doc.files)
        .into_iter()
        .partition(|f| f.when.is_some());
    doc.files = without;
    for mut f in with {
        if let Some(w) = f.when.take() {
            let what = format!("files[{}]", f.path);
            parts.push((
                w,
                what,
                ProfileDoc {
                    files: vec![f],
                    ..Default::default()
                },
            ));
        }
    }
    parts
}

/// Takes the conditional sections and files out of `doc`, checking their
/// conditions; `label` names the profile in messages.
pub fn split(mut doc: ProfileDoc, label: &str) -> Result<ProfileDoc> {
    let mut parts = section_parts(&mut doc, label)?;
    parts.extend(file_parts(&mut doc));
    for (when, what, part) in parts {
        check(&when, &what, label)?;
        doc.conditional.push(Conditional {
            when,
            what,
            source: label.to_string(),
            doc: part,
        });
    }
    Ok(doc)
}

fn check(when: &When, what: &str, label: &str) -> Result<()> {
    for (key, spec) in [
        ("nvidia-driver", &when.nvidia_driver),
        ("kernel", &when.kernel),
    ] {
        if let Some(spec) = spec {
            let bad = |e: String| Error::ProfileInvalid {
                file: label.to_string(),
                msg: format!("{what}.when.{key}: {e}"),
            };
            // The one grammar of requires: (versions::parse).
            versions::parse(spec).map_err(bad)?;
        }
    }
    if *when == When::default() {
        return Err(Error::ProfileInvalid {
            file: label.to_string(),
            msg: format!(
                "{what}.when is empty; name at least one fact (nvidia-driver, kernel, arch, virtualization, ofed), or remove `when:`"
            ),
        });
    }
    Ok(())
}

/// Why `when` does not hold on `facts`, or `None` when it does.
pub fn unmet(when: &When, facts: &Facts) -> Option<String> {
    let mut why = Vec::new();
    let version = |name: &str, actual: Option<&str>, spec: &str, why: &mut Vec<String>| match actual
    {
        None => why.push(format!("{name} is not installed or unknown, not {spec}")),
        Some(v) => {
            if !versions::satisfies(v, spec).unwrap_or(false) {
                why.push(format!("{name} {v} is not {spec}"));
            }
        }
    };
    if let Some(spec) = &when.nvidia_driver {
        version(
            "driver",
            facts.nvidia_driver.version.as_deref(),
            spec,
            &mut why,
        );
    }
    if let Some(spec) = &when.kernel {
        version("kernel", facts.kernel.effective(), spec, &mut why);
    }
    if let Some(a) = when.arch {
        let have = match facts.arch.arch {
            Arch::X86_64 => Some(WhenArch::X86_64),
            Arch::Aarch64 => Some(WhenArch::Aarch64),
            Arch::Other | Arch::Unknown => None,
        };
        if have != Some(a) {
            why.push(format!(
                "arch is {}, not {}",
                have.map(arch_name).unwrap_or("unknown"),
                arch_name(a)
            ));
        }
    }
    if let Some(v) = when.virtualization {
        let have = match facts.platform.virtualization {
            VirtFact::None => Some(WhenVirt::None),
            VirtFact::Vm => Some(WhenVirt::Vm),
            VirtFact::Container => Some(WhenVirt::Container),
            VirtFact::Unknown => None,
        };
        if have != Some(v) {
            why.push(format!(
                "virtualization is {}, not {}",
                have.map(virt_name).unwrap_or("unknown"),
                virt_name(v)
            ));
        }
    }
    if let Some(o) = when.ofed {
        let have = match facts.ofed.kind {
            OfedKindFact::Mlnx => WhenOfed::Mlnx,
            OfedKindFact::Inbox => WhenOfed::Inbox,
            OfedKindFact::Absent => WhenOfed::None,
        };
        if have != o {
            why.push(format!("ofed is {}, not {}", ofed_name(have), ofed_name(o)));
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

fn arch_name(a: WhenArch) -> &'static str {
    match a {
        WhenArch::X86_64 => "x86_64",
        WhenArch::Aarch64 => "aarch64",
    }
}

fn virt_name(v: WhenVirt) -> &'static str {
    match v {
        WhenVirt::None => "none",
        WhenVirt::Vm => "vm",
        WhenVirt::Container => "container",
    }
}

fn ofed_name(o: WhenOfed) -> &'static str {
    match o {
        WhenOfed::Mlnx => "mlnx",
        WhenOfed::Inbox => "inbox",
        WhenOfed::None => "none",
    }
}

/// The desired state on this host: the conditional parts that hold added
/// (in profile order, later ones over earlier ones as `extends` does), and
/// one line for each that was skipped.
pub fn resolve(desired: &Composed, facts: &Facts) -> (Composed, Vec<String>) {
    let mut out = desired.clone();
    let parts = std::mem::take(&mut out.doc.conditional);
    let mut skipped = Vec::new();
    for c in parts {
        match unmet(&c.when, facts) {
            None => {
                let (name, desc) = (out.doc.name.take(), out.doc.description.take());
                out.doc = extend(out.doc, c.doc);
                out.doc.name = name;
                out.doc.description = desc;
            }
            Some(why) => skipped.push(format!("{} of {}: skipped: {why}", c.what, c.source)),
        }
    }
    (out, skipped)
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;
    use crate::facts::arch::Arch;
    use crate::facts::ofed::OfedKindFact;
    use crate::facts::platform::VirtFact;
    use crate::facts::OsFamily;
    use crate::plan::modules::kmod::OPTIONS_CONF;
    use crate::plan::modules::testkit::{desired, written, World};

    const GRACE: &str = r#"
modules:
  when: { nvidia-driver: "< 595", virtualization: none, arch: aarch64 }
  options:
    nvidia: "NVreg_GrdmaPciTopoCheckOverride=1"
files:
  - path: /etc/gdr-ofed.conf
    content: "mlnx\n"
    when: { ofed: mlnx }
  - path: /etc/always.conf
    content: "x\n"
"#;

    fn grace(driver: &str) -> World {
        let mut w = World::image(OsFamily::Debian);
        w.facts.nvidia_driver.version = Some(driver.into());
        w.facts.arch.arch = Arch::Aarch64;
        w.facts.platform.virtualization = VirtFact::None;
        w
    }

    #[test]
    fn a_section_applies_only_below_the_driver_version() {
        let d = desired(GRACE);
        let (p, _) = grace("580.95.05").plan(&d);
        let p = p.unwrap();
        assert!(written(&p, OPTIONS_CONF)
            .is_some_and(|t| t.contains("options nvidia NVreg_GrdmaPciTopoCheckOverride=1")));
        assert!(!p.skipped.iter().any(|s| s.starts_with("modules")));

        let (p, _) = grace("595.1").plan(&d);
        let p = p.unwrap();
        assert_eq!(written(&p, OPTIONS_CONF), None);
        assert!(
            p.skipped
                .iter()
                .any(|s| s == "modules of test.yaml: skipped: driver 595.1 is not < 595"),
            "{:?}",
            p.skipped
        );
    }

    #[test]
    fn every_key_must_hold_and_unknown_facts_do_not() {
        let d = desired(GRACE);
        let mut w = grace("580.95.05");
        w.facts.platform.virtualization = VirtFact::Vm;
        w.facts.arch.arch = Arch::X86_64;
        let p = w.plan(&d).0.unwrap();
        assert_eq!(written(&p, OPTIONS_CONF), None);
        assert!(p.skipped.iter().any(
            |s| s.ends_with("skipped: arch is x86_64, not aarch64; virtualization is vm, not none")
        ));
        let mut w = grace("580.95.05");
        w.facts.nvidia_driver.version = None;
        w.facts.platform.virtualization = VirtFact::Unknown;
        let p = w.plan(&d).0.unwrap();
        assert!(p.skipped.iter().any(|s| s.ends_with(
            "driver is not installed or unknown, not < 595; virtualization is unknown, not none"
        )));
    }

    #[test]
    fn a_file_item_carries_its_own_condition() {
        let d = desired(GRACE);
        let mut w = grace("580.95.05");
        w.facts.ofed.kind = OfedKindFact::Inbox;
        let p = w.plan(&d).0.unwrap();
        assert!(written(&p, "/etc/always.conf").is_some());
        assert_eq!(written(&p, "/etc/gdr-ofed.conf"), None);
        assert!(p.skipped.iter().any(
            |s| s == "files[/etc/gdr-ofed.conf] of test.yaml: skipped: ofed is inbox, not mlnx"
        ));
        w.facts.ofed.kind = OfedKindFact::Mlnx;
        let p = w.plan(&d).0.unwrap();
        assert_eq!(written(&p, "/etc/gdr-ofed.conf"), Some("mlnx\n"));
    }

    #[test]
    fn kernel_conditions_read_the_effective_kernel() {
        let d = desired("services:\n  when: { kernel: \">= 6.8\" }\n  disabled: [irqbalance]\n");
        let mut w = World::image(OsFamily::Debian);
        w.facts.kernel.installed = vec!["6.5.0-1-amd64".into()];
        let (resolved, skipped) = resolve(&d, &w.facts);
        assert!(resolved.doc.services.disabled.is_empty());
        assert_eq!(
            skipped,
            vec!["services of test.yaml: skipped: kernel 6.5.0-1-amd64 is not >= 6.8".to_string()]
        );
        w.facts.kernel.installed = vec!["6.8.0-31-generic".into()];
        let (resolved, skipped) = resolve(&d, &w.facts);
        assert_eq!(
            resolved.doc.services.disabled,
            vec!["irqbalance".to_string()]
        );
        assert!(skipped.is_empty());
    }

    fn load_err(yaml: &str) -> String {
        let doc = crate::profile::parse(yaml, "p.yaml");
        match doc.and_then(|d| split(d, "p.yaml")) {
            Ok(_) => panic!("accepted: {yaml}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_conditions_are_refused_in_the_profiles_words() {
        let e = load_err("modules:\n  when: { nvidia-driver: \"<< 595\" }\n  present: [x]\n");
        assert!(e.contains("modules.when.nvidia-driver"), "{e}");
        assert!(e.contains("is not a version constraint"), "{e}");
        let e = load_err("boot:\n  when: {}\n  iommu: passthrough\n");
        assert!(e.contains("boot.when is empty"), "{e}");
        let e = load_err("modules:\n  when: { arch: arm64 }\n  present: [x]\n");
        assert!(e.contains("arm64"), "{e}");
        let e = load_err("boot:\n  when: { arch: aarch64 }\n  entry: gds\n  iommu: off\n");
        assert!(
            e.contains("boot.when cannot be combined with boot.entry"),
            "{e}"
        );
        let e = load_err("modules:\n  when: { gpu: h100 }\n  present: [x]\n");
        assert!(e.contains("gpu"), "{e}");
    }

    #[test]
    fn conditions_survive_extends() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("base.yaml"),
            "modules:\n  when: { virtualization: vm }\n  present: [virtio_vdpa]\n",
        )
        .unwrap();
        let child = dir.path().join("child.yaml");
        std::fs::write(
            &child,
            "extends: base\nmodules:\n  present: [nvidia_peermem]\n  when: { virtualization: none }\n",
        )
        .unwrap();
        let loaded = crate::profile::load(child.to_str().unwrap()).unwrap();
        let c = crate::profile::compose(&[loaded]).unwrap();
        assert!(c.doc.modules.present.is_empty());
        let mut w = World::image(OsFamily::Debian);
        w.facts.platform.virtualization = VirtFact::Vm;
        let (r, skipped) = resolve(&c, &w.facts);
        assert_eq!(r.doc.modules.present, vec!["virtio_vdpa".to_string()]);
        assert_eq!(skipped.len(), 1);
        assert!(skipped[0].contains("child.yaml: skipped: virtualization is vm, not none"));
        w.facts.platform.virtualization = VirtFact::None;
        let (r, _) = resolve(&c, &w.facts);
        assert_eq!(r.doc.modules.present, vec!["nvidia_peermem".to_string()]);
    }

    #[test]
    fn the_schema_describes_when() {
        let schema: serde_json::Value =
            serde_json::from_str(&crate::profile::schema_json()).unwrap();
        let text = schema.to_string();
        let when = &schema["$defs"]["When"];
        assert!(when.is_object(), "{text}");
        for key in ["nvidia-driver", "kernel", "arch", "virtualization", "ofed"] {
            assert!(when["properties"][key].is_object(), "{key}");
        }
        assert_eq!(when["additionalProperties"], false);
        assert!(text.contains("aarch64") && text.contains("container"));
        // Internal only: never in the profile format.
        assert!(!text.contains("\"conditional\""));
    }
}
