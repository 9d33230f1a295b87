//! Guard rails that need facts: a blocked module that drives the root
//! filesystem's disk or the default route's network interface, and a
//! `files:` path that leads, through a symlink, where `files:` may not write.
//! The checks of the profile alone are in `profile::guard`.

use crate::error::{Error, Result};
use crate::plan::modules::Context;

/// Refuses a block of a module the host boots from, unless the profile
/// allows it by name; gives warnings where the facts cannot tell.
pub fn modules(ctx: &Context) -> Result<Vec<String>> {
    let doc = &ctx.desired.doc.modules;
    let mut warnings = Vec::new();
    let Some(b) = &ctx.seen.boot_devices else {
        return Ok(warnings);
    };
    let allowed = |m: &str| doc.allow_blocking.iter().any(|a| super::kmod::norm(a) == m);
    for (m, key) in blocked(ctx) {
        if allowed(&m) {
            continue;
        }
        for (facts, role, then) in [
            (
                &b.root_disk,
                "the disk of the root filesystem",
                "cannot mount / at the next boot",
            ),
            (
                &b.boot_nic,
                "the network interface of the default route",
                "loses its network at the next boot",
            ),
        ] {
            match facts {
                Ok(d) if d.modules.contains(&m) => {
                    return Err(Error::Refused(format!(
                        "{key}: `{m}` drives {role} ({}: {}); blocked, the host {then}. Remove it from {key}; or, if this profile really must block it, say so: `modules.allow-blocking: [{m}]` (nothing was changed)",
                        d.what,
                        d.modules.join(", ")
                    )));
                }
                Ok(_) => {}
                Err(why) => {
                    let class = ctx.seen.driver_classes.get(&m).copied();
                    let relevant = match role {
                        r if r.starts_with("the disk") => class == Some("storage"),
                        _ => class == Some("network"),
                    };
                    if relevant {
                        warnings.push(format!(
                            "{key}: `{m}` is a {} driver, and whether it drives {role} cannot be told here ({why}); check before booting this root, and name it in `modules.allow-blocking` to say it is meant",
                            class.unwrap_or("")
                        ));
                    }
                }
            }
        }
    }
    Ok(warnings)
}

/// Every module the profile blocks, with the key that blocks it
/// (`modules.absent`, or a kernel argument that blocks by another spelling).
fn blocked(ctx: &Context) -> Vec<(String, String)> {
    crate::profile::guard::blocked_modules(ctx.desired)
}

/// Refuses a `files:` path that leads through a symlink where `files:` may
/// not write (gdrprov's state, GRUB's defaults, /proc, ...).
pub fn file_targets(ctx: &Context) -> Result<()> {
    for (i, f) in ctx.desired.doc.files.iter().enumerate() {
        let Some(to) = ctx.seen.file_targets.get(&f.path) else {
            continue;
        };
        if let Err(why) = crate::profile::guard::files_target(to) {
            return Err(Error::Refused(format!(
                "files[{i}].path: {} leads through a symlink to {why} (nothing was changed)",
                ctx.seen.display(&f.path)
            )));
        }
    }
    for (i, f) in ctx.desired.doc.files.iter().enumerate() {
        if let Some((link, names)) = ctx.seen.file_links.get(&f.path) {
            return Err(Error::Refused(link_on_the_way(
                ctx, i, &f.path, link, names,
            )));
        }
    }
    Ok(())
}

/// Why a `files:` path with a symlink on the way (merged /usr's `/lib` ->
/// `usr/lib`) or at the file is refused, and the path to write instead:
/// apply never writes through a link, so the plan does not offer the write.
fn link_on_the_way(ctx: &Context, i: usize, path: &str, link: &str, names: &str) -> String {
    let to = ctx.seen.file_targets.get(path);
    let shown = |p: &str| ctx.seen.display(p);
    let fix = match to {
        Some(to) if link != path => {
            format!("write {to} instead (do not remove the link: the system needs it)")
        }
        Some(to) => {
            format!("name the file it leads to ({to}) or replace the link by a file of its own")
        }
        None => "name the path the link leads to".to_string(),
    };
    format!(
        "files[{i}].path: {} leads through a symlink: {} is a link to {names}, and gdrprov never writes through a link; {fix} (nothing was changed)",
        shown(path),
        shown(link)
    )
}

/// Refuses text that would reach a generated file or a command line and is
/// not one line of printable text (issue 37): the profiles' names (every
/// generated file's header, the verify unit's `ExecStart`), NCCL values and
/// the variables a built-in template renders. Loading checks them too; this
/// is the plan's own check, so a generated file is built from validated
/// pieces whatever made the context.
pub fn text(ctx: &Context) -> Result<()> {
    use crate::profile::text::{check_line, MAX_NAME, MAX_VALUE};
    let refuse = |why: String| Error::Refused(format!("{why} (nothing was changed)"));
    for n in &ctx.desired.names {
        check_line("profile name", n, MAX_NAME).map_err(refuse)?;
    }
    let doc = &ctx.desired.doc;
    for (k, v) in &doc.nccl {
        if let Some(s) = v.as_str() {
            check_line(&format!("nccl.{k}"), s, MAX_VALUE).map_err(refuse)?;
        }
    }
    for f in &doc.files {
        let builtin = f
            .template
            .as_deref()
            .is_some_and(|t| crate::profile::builtin::template(t).is_some());
        if !builtin {
            continue;
        }
        for (k, v) in doc.vars.iter().chain(f.vars.iter()) {
            if let Some(s) = v.as_str() {
                check_line(&format!("vars.{k}"), s, MAX_VALUE).map_err(refuse)?;
            }
        }
    }
    Ok(())
}
