//! `services:` — systemd units that must be disabled, and stopped on the
//! running system (the nv_peer_mem service conflicts with nvidia_peermem).

use super::files::{self, ManagedFile};
use super::Part;
use crate::error::{Error, Result};
use crate::host::CommandSpec;
use crate::plan::change::Change;
use crate::plan::modules::Context;
use crate::profile::builtin;
use crate::profile::Composed;
use handlebars::Handlebars;

pub const MODULE: &str = "services";

pub const VERIFY_UNIT: &str = "/etc/systemd/system/gdrprov-verify.service";
/// Pulls the unit in at boot. A drop-in rather than the `.wants/` symlink of
/// `systemctl enable`: a whole file gdrprov owns, diffed and rolled back like
/// any other, and it works in an image root without running systemctl.
pub const VERIFY_WANTS: &str = "/etc/systemd/system/multi-user.target.d/gdrprov-verify.conf";

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    if ctx.desired.doc.verify.first_boot == Some(true) {
        part.files.extend(first_boot_unit(ctx)?);
    }
    for name in &ctx.desired.doc.services.disabled {
        let unit = unit_name(name);
        let facts = ctx.seen.units.get(name).copied().unwrap_or_default();
        if !facts.exists {
            continue;
        }
        let enabled = facts.enabled;
        let active = ctx.live_changes && facts.active;
        if !enabled && !active {
            continue;
        }
        let mut argv = vec!["systemctl", "disable"];
        if ctx.live_changes {
            argv.push("--now");
        }
        argv.push(&unit);
        let why = format!(
            "Disable{} {unit} (it conflicts with the profile)",
            if ctx.live_changes { " and stop" } else { "" }
        );
        // Rollback puts back what this changed: enabled again if it was, started again if
        // it ran.
        let undo: &[&str] = match (enabled, active) {
            (true, true) => &["systemctl", "enable", "--now"],
            (true, false) => &["systemctl", "enable"],
            (false, _) => &["systemctl", "start"],
        };
        let undo: Vec<&str> = undo.iter().copied().chain([unit.as_str()]).collect();
        part.commands.push(Change::run(
            MODULE,
            CommandSpec::new(&argv, why).undone_by(&undo),
            None,
        ));
    }
    Ok(part)
}

fn unit_name(name: &str) -> String {
    if name.contains('.') {
        name.to_string()
    } else {
        format!("{name}.service")
    }
}

/// The profiles the unit verifies when vars do not name them: those applied, which must be
/// built-in names (a profile file is not on the host).
fn default_profiles(names: &[String]) -> Result<String> {
    if let Some(n) = names
        .iter()
        .find(|n| crate::profile::builtin::profile(n).is_none())
    {
        return Err(Error::Refused(format!(
            "verify.first-boot: the unit must name the profiles to verify, and `{n}` is not a built-in profile; set vars: {{ first-boot-profiles: /etc/gdrprov/{n}.yaml }} (a copy of the profile on the host)"
        )));
    }
    Ok(names.join(" "))
}

/// The unit's variables go into ExecStart: plain paths and names only, the binary absolute.
fn plain_vars(bin: &str, profiles: &str, textfile: &str) -> Result<()> {
    for (what, v) in [
        ("gdrprov-bin", bin),
        ("first-boot-profiles", profiles),
        ("gdrprov-textfile", textfile),
    ] {
        if let Some(c) = v
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "/._-+:=, ".contains(*c)))
        {
            return Err(Error::Refused(format!(
                "verify.first-boot: vars.{what} {v:?} has {c:?}, which systemd would interpret in ExecStart; use plain paths and names"
            )));
        }
    }
    if !bin.starts_with('/') {
        return Err(Error::Refused(format!(
            "verify.first-boot: vars.gdrprov-bin must be an absolute path, not {bin:?}"
        )));
    }
    Ok(())
}

/// A variable of the first-boot unit from the profiles' `vars`, as text.
fn unit_var(desired: &Composed, key: &str) -> Option<String> {
    desired.doc.vars.get(key).map(|v| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The unit's profiles and textfile, refused as `plan` refuses them (a profile file with no
/// `first-boot-profiles`, a variable systemd would interpret): facts play no part.
fn unit_vars(desired: &Composed, bin: &str) -> Result<(String, String)> {
    let textfile = unit_var(desired, "gdrprov-textfile").unwrap_or_default();
    let profiles = match unit_var(desired, "first-boot-profiles") {
        Some(p) => p,
        None => default_profiles(&desired.names)?,
    };
    plain_vars(bin, &profiles, &textfile)?;
    Ok((profiles, textfile))
}

/// What `verify.first-boot` refuses from the profiles alone, before any fact is read:
/// `profile validate` runs it, so that it never says "ok" to what `plan` refuses of the
/// profile alone (issue 45).
pub fn check_profile(desired: &Composed) -> Result<()> {
    if desired.doc.verify.first_boot != Some(true) {
        return Ok(());
    }
    let bin = unit_var(desired, "gdrprov-bin").unwrap_or_else(|| "/usr/local/bin/gdrprov".into());
    unit_vars(desired, &bin).map(|_| ())
}

/// `verify: { first-boot: true }`: the unit and the drop-in that starts it.
/// Variables: `gdrprov-bin` (default: /usr/bin/gdrprov where the package
/// installed it, else /usr/local/bin/gdrprov),
/// `first-boot-profiles` (default: the profiles applied, which must then be
/// built-in names; for a profile file, a copy of it on the host), `gdrprov-textfile` (node-exporter metrics file).
fn first_boot_unit(ctx: &Context) -> Result<Vec<ManagedFile>> {
    let bin = unit_var(ctx.desired, "gdrprov-bin").unwrap_or_else(|| {
        ctx.seen
            .gdrprov_bin
            .unwrap_or("/usr/local/bin/gdrprov")
            .into()
    });
    let (profiles, textfile) = unit_vars(ctx.desired, &bin)?;
    let source = builtin::template("gdrprov-verify.service.hbs").unwrap_or_default();
    let data = serde_json::json!({
        "gdrprov_header": files::header(ctx),
        "gdrprov_bin": bin,
        "gdrprov_textfile": textfile,
        "verify_profiles": profiles,
        "trial": ctx.trial.is_some(),
    });
    let mut hb = Handlebars::new();
    hb.set_strict_mode(true);
    hb.register_escape_fn(handlebars::no_escape);
    let unit = hb
        .render_template(source, &data)
        .map_err(|e| Error::Template {
            template: "gdrprov-verify.service.hbs".into(),
            path: VERIFY_UNIT.into(),
            msg: e.to_string(),
        })?;
    let wants = format!(
        "{}\n[Unit]\nWants=gdrprov-verify.service\n",
        files::header(ctx)
    );
    Ok(vec![
        ManagedFile {
            path: VERIFY_UNIT.into(),
            content: unit,
            mode: 0o644,
            module: MODULE,
            reboot: None,
        },
        ManagedFile {
            path: VERIFY_WANTS.into(),
            content: wants,
            mode: 0o644,
            module: MODULE,
            reboot: None,
        },
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::OsFamily;
    use crate::plan::inputs::UnitFacts;
    use crate::plan::modules::testkit::{commands, desired, undo, written, World};

    const DISABLED: &str = "services: { disabled: [nv_peer_mem, openibd.service] }";

    #[test]
    fn an_enabled_conflicting_service_is_disabled_and_stopped_on_the_live_system() {
        let mut w = World::live(OsFamily::Debian);
        let on = UnitFacts {
            exists: true,
            enabled: true,
            active: true,
        };
        w.seen.units.insert("nv_peer_mem".into(), on);
        let p = w.plan(&desired(DISABLED)).0.unwrap();
        assert_eq!(
            commands(&p),
            ["systemctl disable --now nv_peer_mem.service"]
        );
        assert_eq!(
            undo(&p),
            [Some(
                "systemctl enable --now nv_peer_mem.service".to_string()
            )]
        );
        // In an image (or --no-reboot): disabled, not stopped.
        w.live_changes = false;
        let p = w.plan(&desired(DISABLED)).0.unwrap();
        assert_eq!(commands(&p), ["systemctl disable nv_peer_mem.service"]);
        assert_eq!(
            undo(&p),
            [Some("systemctl enable nv_peer_mem.service".to_string())]
        );
    }

    #[test]
    fn absent_or_already_disabled_services_need_nothing() {
        let mut w = World::live(OsFamily::Rhel);
        w.seen.units.insert(
            "nv_peer_mem".into(),
            UnitFacts {
                exists: true,
                enabled: false,
                active: false,
            },
        );
        assert!(w.plan(&desired(DISABLED)).0.unwrap().changes.is_empty());
    }

    #[test]
    fn first_boot_writes_the_verify_unit_for_built_in_profiles_only() {
        let w = World::image(OsFamily::Debian);
        let mut d = desired("verify: { first-boot: true }");
        let e = w.plan(&d).0.unwrap_err().to_string();
        assert!(e.contains("`test` is not a built-in profile"), "{e}");
        d.names = vec!["rdma-dmabuf".into()];
        let p = w.plan(&d).0.unwrap();
        let unit = written(&p, VERIFY_UNIT).unwrap();
        assert!(
            unit.contains("/usr/local/bin/gdrprov") && unit.contains("rdma-dmabuf"),
            "{unit}"
        );
        assert!(written(&p, VERIFY_WANTS)
            .unwrap()
            .contains("Wants=gdrprov-verify.service"));
        // Installed from the package: the unit runs /usr/bin/gdrprov.
        let mut packaged = World::image(OsFamily::Debian);
        packaged.seen.gdrprov_bin = Some("/usr/bin/gdrprov");
        let packaged_plan = packaged.plan(&d).0.unwrap();
        let unit = written(&packaged_plan, VERIFY_UNIT).unwrap();
        assert!(unit.contains("ExecStart=/usr/bin/gdrprov "), "{unit}");
        let bad = desired("verify: { first-boot: true }\nvars: { first-boot-profiles: \"a;b\" }");
        assert!(w
            .plan(&bad)
            .0
            .unwrap_err()
            .to_string()
            .contains("would interpret in ExecStart"));
    }

    /// `profile validate` refuses, from the profile alone, what `plan` refuses on every host
    /// (issue 45: the docs' example said "ok" and plan refused it).
    #[test]
    fn the_profile_alone_is_refused_as_plan_refuses_it() {
        let w = World::image(OsFamily::Debian);
        for yaml in [
            "verify: { first-boot: true }",
            "verify: { first-boot: true }\nvars: { first-boot-profiles: \"a;b\" }",
            "verify: { first-boot: true }\nvars: { first-boot-profiles: /etc/gdrprov/t.yaml, gdrprov-bin: gdrprov }",
        ] {
            let d = desired(yaml);
            let planned = w.plan(&d).0.unwrap_err().to_string();
            let alone = check_profile(&d).unwrap_err().to_string();
            assert_eq!(alone, planned, "{yaml}");
        }
        let ok = desired(
            "verify: { first-boot: true }\nvars: { first-boot-profiles: /etc/gdrprov/t.yaml }",
        );
        assert!(check_profile(&ok).is_ok() && w.plan(&ok).0.is_ok());
        assert!(check_profile(&desired("verify: { loopback: false }")).is_ok());
    }
}
