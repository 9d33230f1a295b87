//! Other files asking to load a module that `modules.absent` blocks
//! (`/etc/modules-load.d/*.conf`, `/usr/lib/modules-load.d`, `/etc/modules`,
//! a unit's `modprobe`): each is reported; with
//! `modules.remove-load-requests: true` the lines in `/etc` are commented out
//! (an edit, journaled and rolled back like every change).

use super::Part;
use crate::error::Result;
use crate::facts::loadreq::{commented, LoadRequest};
use crate::plan::change::Change;
use crate::plan::modules::Context;
use std::collections::BTreeMap;

pub fn plan(ctx: &Context) -> Result<Part> {
    let mut part = Part::default();
    let remove = ctx.desired.doc.modules.remove_load_requests == Some(true);
    let mut by_file: BTreeMap<&str, Vec<&LoadRequest>> = BTreeMap::new();
    for r in &ctx.seen.load_requests {
        if remove && r.editable {
            by_file.entry(r.file.as_str()).or_default().push(r);
        } else {
            part.warnings.push(warning(ctx, r, remove));
        }
    }
    for (file, reqs) in by_file {
        let Some(text) = ctx.seen.file(file)? else {
            continue;
        };
        let lines: Vec<usize> = reqs.iter().map(|r| r.line).collect();
        let after = commented(text, &lines);
        if after == text {
            continue;
        }
        let modules: Vec<&str> = reqs.iter().map(|r| r.module.as_str()).collect();
        part.edits.push(Change::write(
            super::kmod::MODULE,
            format!(
                "Comment out the request to load {} at boot in {file} (modules.absent blocks it; modules.remove-load-requests)",
                modules.join(", ")
            ),
            file,
            Some(text.to_string()),
            after,
            0o644,
            None,
        ));
    }
    Ok(part)
}

/// What to say about a request left in place.
fn warning(ctx: &Context, r: &LoadRequest, remove: bool) -> String {
    let at = format!("{}:{}", ctx.seen.display(&r.file), r.line);
    let m = &r.module;
    let head = format!(
        "{at} asks to load `{m}` at boot, which modules.absent blocks: that load fails at every boot"
    );
    match (r.kind, r.editable) {
        ("unit", _) => format!(
            "{head} (the unit runs `{}`); disable the unit (services.disabled) or override it",
            r.text.trim()
        ),
        (_, true) => format!(
            "{head}; set `modules.remove-load-requests: true` to have apply comment it out (rollback puts it back), or remove the line"
        ),
        (_, false) => {
            let name = r.file.rsplit('/').next().unwrap_or("");
            let also = if remove {
                " (modules.remove-load-requests edits only files in /etc)"
            } else {
                ""
            };
            format!(
                "{head}; the file belongs to a package{also}: hide it with an empty /etc/modules-load.d/{name} (a `files:` entry), or remove the package"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::facts::loadreq::LoadRequest;
    use crate::facts::OsFamily;
    use crate::plan::modules::testkit::{desired, World};

    fn request(file: &str, line: usize, editable: bool) -> LoadRequest {
        LoadRequest {
            file: file.into(),
            line,
            text: "nvidia-peermem".into(),
            module: "nvidia_peermem".into(),
            kind: "modules-load.d",
            editable,
        }
    }

    #[test]
    fn requests_are_reported_or_commented_out() {
        let conf = "/etc/modules-load.d/nvidia-peermem.conf";
        let text = "# peer memory\nnvidia-peermem\n";
        let world = |remove: bool| {
            let extra = if remove {
                "\n  remove-load-requests: true"
            } else {
                ""
            };
            let d = desired(&format!("modules:\n  absent: [nvidia_peermem]{extra}\n"));
            let mut w = World::image(OsFamily::Debian);
            w.seen.load_requests = vec![
                request(conf, 2, true),
                request("/usr/lib/modules-load.d/x.conf", 1, false),
            ];
            w.seen.files.insert(conf.into(), Ok(Some(text.into())));
            (w, d)
        };
        let (w, d) = world(false);
        let p = w.plan(&d).0.unwrap();
        assert!(!p.changes.iter().any(|c| c.path() == Some(conf)));
        assert!(
            p.warnings.iter().any(|x| x.contains(&format!("{conf}:2"))
                && x.contains("modules.remove-load-requests: true")),
            "{:?}",
            p.warnings
        );
        let (w, d) = world(true);
        let p = w.plan(&d).0.unwrap();
        let c = p.changes.iter().find(|c| c.path() == Some(conf)).unwrap();
        match &c.action {
            crate::plan::Action::WriteFile { after, .. } => assert_eq!(
                after,
                "# peer memory\n# gdrprov (modules.absent): nvidia-peermem\n"
            ),
            other => panic!("{other:?}"),
        }
        // The package's file is still only reported.
        assert!(
            p.warnings
                .iter()
                .any(|x| x.contains("/usr/lib/modules-load.d/x.conf:1")
                    && x.contains("edits only files in /etc")),
            "{:?}",
            p.warnings
        );
    }
}
