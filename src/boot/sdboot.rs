//! systemd-boot's own files, pure: the `default` line of `loader.conf`
//! (an entry id with `.conf`, or a glob) and its edit, and the order in
//! which systemd-boot shows type #1 entries.

use super::entries::{self, BlsEntry};

/// The value of `default` in loader.conf, if set.
pub fn loader_default(conf: &str) -> Option<String> {
    conf.lines().find_map(|l| {
        let l = l.trim();
        let rest = l.strip_prefix("default")?;
        rest.starts_with([' ', '\t'])
            .then(|| rest.trim().to_string())
            .filter(|v| !v.is_empty())
    })
}

/// loader.conf with `default ID.conf`: the first `default` line replaced,
/// or one appended; every other line as it was.
pub fn set_loader_default(conf: &str, id: &str) -> String {
    let want = format!("default {id}.conf");
    let mut done = false;
    let mut out: Vec<String> = conf
        .lines()
        .map(|l| {
            let t = l.trim();
            if !done
                && t.strip_prefix("default")
                    .is_some_and(|r| r.starts_with([' ', '\t']))
            {
                done = true;
                want.clone()
            } else {
                l.to_string()
            }
        })
        .collect();
    if !done {
        out.push(want);
    }
    let mut s = out.join("\n");
    s.push('\n');
    s
}

/// Whether an entry id matches a loader.conf `default` value: an exact
/// `ID.conf` (or ID), or a glob with `*` and `?`.
pub fn matches_default(pattern: &str, id: &str) -> bool {
    let file = format!("{id}.conf");
    crate::wildcard::matches(pattern, &file) || pattern == id
}

/// The `initrd=` arguments systemd-boot passes for an entry's `initrd`
/// lines: the path on the ESP with backslashes.
pub fn initrd_args(entry: &str) -> Vec<String> {
    entry
        .lines()
        .filter_map(|l| {
            let r = l.trim_start().strip_prefix("initrd")?;
            r.starts_with([' ', '\t'])
                .then(|| format!("initrd={}", r.trim().replace('/', "\\")))
        })
        .collect()
}

/// systemd-boot's menu order for type #1 entries: newest version first
/// (ties by id); the default without `default` is the first.
pub fn sort(es: &mut [BlsEntry]) {
    es.sort_by(|a, b| entries::version_cmp(&b.version, &a.version).then_with(|| a.id.cmp(&b.id)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_conf_default_read_and_set() {
        let c = "timeout 3\n#default old.conf\ndefault  abc-6.1.conf\nconsole-mode keep\n";
        assert_eq!(loader_default(c).as_deref(), Some("abc-6.1.conf"));
        assert_eq!(
            set_loader_default(c, "abc-gdrprov-gds"),
            "timeout 3\n#default old.conf\ndefault abc-gdrprov-gds.conf\nconsole-mode keep\n"
        );
        assert_eq!(
            set_loader_default("timeout 3", "x"),
            "timeout 3\ndefault x.conf\n"
        );
        assert!(matches_default("abc-*", "abc-6.1"));
        assert!(matches_default("abc-6.1.conf", "abc-6.1"));
        assert!(!matches_default("abc-6.1.conf", "abc-6.2"));
        assert_eq!(
            initrd_args("linux /a/linux\ninitrd     /a/6.1/initrd.img\n"),
            vec!["initrd=\\a\\6.1\\initrd.img".to_string()]
        );
    }
}
