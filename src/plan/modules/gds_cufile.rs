//! `/etc/cufile.json` for a profile with `gds:`, edited losslessly
//! ([`crate::facts::cufile_json::set_bool`]): gdrprov owns ONE key and every other byte,
//! comment and key NVIDIA ships stays as it is.
//!
//! The keys, decided from NVIDIA's docs ("GDS Support for NVMe Drives Using Linux PCI
//! P2PDMA", "Setting cufile.json Configuration"; the GDS configuration guide's parameter
//! table):
//! - `properties.use_pci_p2pdma` (owned): `true` where the mode gdrprov sets up is P2PDMA
//!   (`mode: p2pdma`, or `any-direct` on a host that can have it): NVIDIA's guide asks for
//!   exactly this key. `false` where the mode is nvidia-fs (`mode: nvfs`, or `any-direct`
//!   without P2PDMA), so that cuFile takes the nvidia-fs path the profile asked for.
//! - `properties.allow_compat_mode` (not owned): `false` would make every cuFile open fail
//!   where no direct path exists, breaking jobs that now only run slower; gdrprov names
//!   compat mode instead (verify's `gds`, `bench gds`, doctor) and leaves the choice to
//!   the site.
//! - `use_poll_mode`, `rdma_dev_addr_list`, the `fs` sections, sizes and logging (not
//!   owned): tuning and RDMA file system settings, site-specific; no mode needs them.
//! - nvidia-fs needs nothing in cufile.json: cuFile uses the module when it is loaded.
//!
//! Where `/etc/cufile.json` is a link through the alternatives system into a package's
//! file (the CUDA packages' `libcufile-X-Y` postinst runs `update-alternatives --install
//! /etc/cufile.json cufile.json /usr/local/cuda-X.Y/gds/cufile.json XY0`, priority 130 for
//! CUDA 13.0, as the lent H200 machine shows), gdrprov never writes through the link into
//! the package's copy (the next CUDA upgrade replaces it): it writes its edited copy to
//! [`COPY`] and installs it as a higher-priority alternative; rollback removes the
//! alternative, so the link points where it did before.

use super::{Context, Part};
use crate::error::{Error, Result};
use crate::facts::cufile_json::{self, set_bool};
use crate::facts::gds::{GdsMode, CUFILE_JSON};
use crate::host::CommandSpec;
use crate::plan::change::{Action, Change, ManagedFile};

pub const MODULE: &str = "gds";
/// gdrprov's edited copy, installed as the `cufile.json` alternative.
pub const COPY: &str = "/etc/gdrprov/cufile.json";
/// The alternatives group the CUDA packages install `/etc/cufile.json` under.
pub const ALTERNATIVE: &str = "cufile.json";
/// Above every CUDA package's (they use major*10+minor: 130 for CUDA 13.0).
pub const PRIORITY: &str = "1000";
/// The one key gdrprov owns.
pub const KEY: &[&str] = &["properties", "use_pci_p2pdma"];

/// Where the alternatives tools keep the group's state: Debian's dpkg, RHEL's chkconfig.
const ADMIN: &[&str] = &[
    "/var/lib/dpkg/alternatives/cufile.json",
    "/var/lib/alternatives/cufile.json",
];

/// The alternatives group as its admin file says: manual mode, and each alternative with
/// its priority.
#[derive(Debug, PartialEq)]
pub struct Group {
    pub manual: bool,
    pub choices: Vec<(String, i64)>,
}

/// Parses an admin file: the mode, the link, `name link` line pairs of slaves up to an empty
/// line, then per alternative its path, its priority and one line per slave.
pub fn parse_group(text: &str) -> Option<Group> {
    let lines: Vec<&str> = text.lines().collect();
    let manual = *lines.first()? == "manual";
    let end = 2 + lines.get(2..)?.iter().position(|l| l.is_empty())?;
    let slaves = (end - 2) / 2;
    let mut choices = Vec::new();
    let mut i = end + 1;
    while let (Some(path), Some(prio)) = (lines.get(i), lines.get(i + 1)) {
        if path.is_empty() {
            break;
        }
        choices.push((path.to_string(), prio.trim().parse().ok()?));
        i += 2 + slaves;
    }
    Some(Group { manual, choices })
}

/// The group, from the admin file the root has.
fn group(ctx: &Context) -> Result<Option<Group>> {
    for a in ADMIN {
        if let Some(t) = ctx.seen.file(a)? {
            return Ok(parse_group(t));
        }
    }
    Ok(None)
}

fn install(tool: &str, over: &str) -> CommandSpec {
    CommandSpec::new(
        &[tool, "--install", CUFILE_JSON, ALTERNATIVE, COPY, PRIORITY],
        format!(
            "Install gdrprov's edited copy {COPY} as the `{ALTERNATIVE}` alternative (priority {PRIORITY}, above the package's {over}): {CUFILE_JSON} is a link through /etc/alternatives, and the package's file is left as it is; rollback removes this alternative and the link points where it did before"
        ),
    )
    .undone_by(&[tool, "--remove", ALTERNATIVE, COPY])
}

/// The cufile.json part of a profile with `gds:` (`mode`: the mode gdrprov sets up, p2pdma
/// or nvfs), or the clean-up of gdrprov's alternative when no profile asks for it any more.
pub fn plan(ctx: &Context, mode: Option<GdsMode>) -> Result<Part> {
    let mut part = Part::default();
    // Debian's dpkg `update-alternatives` or RHEL's chkconfig `alternatives` (same
    // arguments), the one the root has.
    let tool = ctx.seen.alternatives.as_deref();
    let Some(mode) = mode else {
        if let Some(tool) = tool.filter(|_| ctx.state.files.contains_key(COPY)) {
            part.commands.push(Change::run(
                MODULE,
                CommandSpec::new(
                    &[tool, "--remove", ALTERNATIVE, COPY],
                    format!("Remove gdrprov's `{ALTERNATIVE}` alternative {COPY} (no profile asks for GDS any more): {CUFILE_JSON} goes back to the package's file"),
                )
                .undone_by(&[tool, "--install", CUFILE_JSON, ALTERNATIVE, COPY, PRIORITY]),
                None,
            ));
        }
        return Ok(part);
    };
    let value = mode == GdsMode::P2pdma;
    let cj = &ctx.facts.gds.cufile_json;
    if !cj.present {
        if ctx.facts.gds.libcufile.is_none() {
            part.warnings.push(format!("{CUFILE_JSON} is not written: libcufile (GPUDirect Storage's library) is not installed here; install the CUDA GDS package (libcufile) and apply again"));
        } else if value {
            // cuFile's defaults hold for every key not set.
            let text = set_bool("{\n}\n", KEY, true).map_err(|e| bad(CUFILE_JSON, &e))?;
            part.files.push(managed(CUFILE_JSON, text));
        }
        return Ok(part);
    }
    match cj.link_target.as_deref() {
        None => {
            let before = ctx.seen.file(CUFILE_JSON)?.unwrap_or_default();
            let after = set_bool(before, KEY, value).map_err(|e| bad(CUFILE_JSON, &e))?;
            part.files.push(managed(CUFILE_JSON, after));
        }
        Some(target) => linked(ctx, &mut part, target, value, tool)?,
    }
    Ok(part)
}

/// `/etc/cufile.json` as a link to `target`: through the alternatives, gdrprov's copy and a
/// higher-priority alternative (or the copy remade, where it is in effect); else a warning.
fn linked(
    ctx: &Context,
    part: &mut Part,
    target: &str,
    value: bool,
    tool: Option<&str>,
) -> Result<()> {
    let cj = &ctx.facts.gds.cufile_json;
    let group = group(ctx)?;
    if let Some(g) = group.as_ref().filter(|g| g.manual && target != COPY) {
        part.warnings.push(format!(
            "the `{ALTERNATIVE}` alternatives group is in manual mode (set to {target}): a higher-priority alternative would not switch it, so gdrprov leaves it; run `update-alternatives --auto {ALTERNATIVE}` and apply again ({} alternative(s) known)",
            g.choices.len()
        ));
        return Ok(());
    }
    // gdrprov's copy in effect: it is remade from the package's best file (a CUDA
    // upgrade installs another), not from itself.
    let from = match &group {
        Some(g) if target == COPY => g
            .choices
            .iter()
            .filter(|(p, _)| p != COPY)
            .max_by_key(|(_, prio)| *prio)
            .map_or(target, |(p, _)| p.as_str()),
        _ => target,
    };
    let base = ctx.seen.file(from)?.unwrap_or_default();
    let after = set_bool(base, KEY, value).map_err(|e| bad(from, &e))?;
    if after == base && target != COPY {
        // The package's file already says it: no copy, no alternative.
        return Ok(());
    }
    let key = KEY.join(".");
    match tool.filter(|_| cj.alternatives) {
        Some(_) if target == COPY => part.files.push(managed(COPY, after)),
        Some(tool) => {
            part.files.push(managed(COPY, after));
            part.commands
                .push(Change::run(MODULE, install(tool, target), None));
        }
        None if cj.alternatives => part.warnings.push(format!(
            "{CUFILE_JSON} is a link through /etc/alternatives to {target}, but this root has no update-alternatives (or alternatives): gdrprov does not write through the link; set {key} to {value} in a copy and install it as the `{ALTERNATIVE}` alternative where the tool is"
        )),
        None => part.warnings.push(format!(
            "{CUFILE_JSON} is a link to {target}, not through the alternatives system: gdrprov does not write through it; set {key} to {value} there yourself"
        )),
    }
    Ok(())
}

fn bad(path: &str, why: &str) -> Error {
    Error::Refused(format!(
        "{path} cannot be edited: {why}. Fix the file (it is JSON with // comments), then apply again; nothing was changed"
    ))
}

fn managed(path: &str, content: String) -> ManagedFile {
    ManagedFile {
        path: path.into(),
        content,
        mode: 0o644,
        module: MODULE,
        reboot: None,
    }
}

/// The plan says which key is gdrprov's: each change of cufile.json (or of gdrprov's copy)
/// names the key, the value cuFile reads now (through the link, where there is one) and
/// after, and that every other byte is kept.
pub fn describe(ctx: &Context, changes: &mut [Change]) {
    let show = |v: Option<bool>| v.map_or("unset".to_string(), |v| v.to_string());
    let was = show(
        ctx.facts
            .gds
            .cufile_json
            .config
            .as_ref()
            .and_then(|c| c.use_pci_p2pdma),
    );
    for c in changes.iter_mut().filter(|c| c.module == MODULE) {
        let Action::WriteFile { path, after, .. } = &c.action else {
            continue;
        };
        if path != CUFILE_JSON && path != COPY {
            continue;
        }
        let now = show(cufile_json::read(after).ok().and_then(|c| c.use_pci_p2pdma));
        let copy = if path == COPY {
            format!(" (gdrprov's copy of the package's file, for the `{ALTERNATIVE}` alternative)")
        } else {
            String::new()
        };
        c.description = format!(
            "{}{copy}: gdrprov's key {}: {was} -> {now}; every other key and comment kept byte for byte",
            c.description,
            KEY.join(".")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::gds::Library;
    use crate::facts::OsFamily;
    use crate::journal::OwnedFile;
    use crate::plan::modules::testkit::{commands, desired, undo, World};

    fn linked(w: &mut World, alternatives: bool) {
        w.facts.nvidia_driver.version = Some("580.95.05".into());
        w.facts.gds.libcufile = Some(Library {
            path: "/usr/lib/libcufile.so.1".into(),
            version: None,
        });
        let cj = &mut w.facts.gds.cufile_json;
        cj.present = true;
        cj.alternatives = alternatives;
        cj.link_target = Some("/usr/local/cuda-13.0/gds/cufile.json".into());
        w.file(
            "/usr/local/cuda-13.0/gds/cufile.json",
            "{ \"properties\": { \"use_pci_p2pdma\": false } }\n",
        );
    }

    #[test]
    fn gdrprovs_alternative_goes_when_no_profile_asks_for_gds() {
        let mut w = World::image(OsFamily::Debian);
        linked(&mut w, true);
        w.seen.alternatives = Some("/usr/bin/update-alternatives".into());
        let p = w.plan(&desired("gds: { mode: p2pdma }")).0.unwrap();
        assert_eq!(
            commands(&p),
            ["/usr/bin/update-alternatives --install /etc/cufile.json cufile.json /etc/gdrprov/cufile.json 1000"]
        );
        assert_eq!(
            undo(&p),
            [Some(
                "/usr/bin/update-alternatives --remove cufile.json /etc/gdrprov/cufile.json"
                    .to_string()
            )]
        );
        w.state
            .files
            .insert(COPY.into(), OwnedFile { original: None });
        w.file(COPY, "{}\n");
        let p = w.plan(&desired("modules: {}")).0.unwrap();
        assert_eq!(
            commands(&p),
            ["/usr/bin/update-alternatives --remove cufile.json /etc/gdrprov/cufile.json"]
        );
        assert!(p.changes.iter().any(|c| c.path() == Some(COPY)));
    }

    #[test]
    fn the_admin_file_gives_the_mode_and_the_choices() {
        let debian = "auto\n/etc/cufile.json\n\n/etc/gdrprov/cufile.json\n1000\n/usr/local/cuda-13.0/gds/cufile.json\n130\n\n";
        assert_eq!(
            parse_group(debian),
            Some(Group {
                manual: false,
                choices: vec![
                    (COPY.into(), 1000),
                    ("/usr/local/cuda-13.0/gds/cufile.json".into(), 130)
                ]
            })
        );
        let slaves = "manual\n/etc/x\ny\n/etc/y\n\n/a\n5\n/a-y\n/b\n7\n/b-y\n\n";
        let g = parse_group(slaves).unwrap();
        assert!(g.manual);
        assert_eq!(g.choices, [("/a".to_string(), 5), ("/b".to_string(), 7)]);
        assert_eq!(parse_group("auto\n"), None);
    }

    #[test]
    fn a_cuda_upgrade_remakes_the_copy_and_manual_mode_is_left_alone() {
        let mut w = World::image(OsFamily::Debian);
        linked(&mut w, true);
        w.seen.alternatives = Some("/usr/bin/update-alternatives".into());
        let d = desired("gds: { mode: p2pdma }");
        // gdrprov's copy in effect; CUDA 13.1 installed since, at 131.
        w.facts.gds.cufile_json.link_target = Some(COPY.into());
        w.file(COPY, "{ \"properties\": { \"use_pci_p2pdma\": true } }\n");
        w.file(
            "/usr/local/cuda-13.1/gds/cufile.json",
            "{ \"new\": 1, \"properties\": { \"use_pci_p2pdma\": false } }\n",
        );
        w.file(ADMIN[0], "auto\n/etc/cufile.json\n\n/etc/gdrprov/cufile.json\n1000\n/usr/local/cuda-13.0/gds/cufile.json\n130\n/usr/local/cuda-13.1/gds/cufile.json\n131\n\n");
        let p = w.plan(&d).0.unwrap();
        assert_eq!(
            crate::plan::modules::testkit::written(&p, COPY),
            Some("{ \"new\": 1, \"properties\": { \"use_pci_p2pdma\": true } }\n")
        );
        assert!(commands(&p).is_empty());
        // Manual mode, set to the package's file: nothing planned, a warning.
        w.facts.gds.cufile_json.link_target = Some("/usr/local/cuda-13.0/gds/cufile.json".into());
        w.file(
            ADMIN[0],
            "manual\n/etc/cufile.json\n\n/usr/local/cuda-13.0/gds/cufile.json\n130\n\n",
        );
        let p = w.plan(&d).0.unwrap();
        assert!(commands(&p).is_empty());
        assert!(
            p.warnings.iter().any(|x| x.contains("manual mode")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn a_link_outside_the_alternatives_is_never_written_through() {
        let mut w = World::image(OsFamily::Debian);
        linked(&mut w, false);
        let p = w.plan(&desired("gds: { mode: p2pdma }")).0.unwrap();
        assert!(
            !p.changes.iter().any(|c| c.module == MODULE
                && c.path().is_some_and(|p| p.ends_with("cufile.json"))),
            "{:?}",
            p.changes
        );
        assert!(
            p.warnings[0].contains("not through the alternatives system"),
            "{:?}",
            p.warnings
        );
    }
}
