//! Installed package versions. dpkg's database is a text file
//! (`/var/lib/dpkg/status`), read once and parsed here; rpm's is not, so
//! `rpm -q` is asked, and only on a root that has rpm.

use super::util::query_ok;
use crate::host::{CommandOutput, Host};
use std::cell::OnceCell;

const DPKG_STATUS: &str = "/var/lib/dpkg/status";

/// dpkg-query's format for the answer a snapshot keeps (see [`Packages::dpkg`]).
const DPKG_FORMAT: &str = "${db:Status-Abbrev} ${Version}\\n";

/// The package databases of one root, read at most once.
pub struct Packages<'h> {
    host: &'h Host,
    dpkg_status: OnceCell<Option<String>>,
}

impl<'h> Packages<'h> {
    pub fn new(host: &'h Host) -> Self {
        Packages {
            host,
            dpkg_status: OnceCell::new(),
        }
    }

    /// The first of `names` that is installed, with its version.
    pub fn version(&self, names: &[&str]) -> Option<(String, String)> {
        names.iter().find_map(|name| {
            self.dpkg(name)
                .or_else(|| self.rpm(name))
                .map(|v| (name.to_string(), v))
        })
    }

    fn dpkg(&self, name: &str) -> Option<String> {
        let argv = ["dpkg-query", "-W", "-f", DPKG_FORMAT, name];
        let status = self.dpkg_status.get_or_init(|| {
            // Not logged as a file read: the database can be larger than a
            // snapshot copies; the answer is logged below instead.
            let bytes = self.host.read(DPKG_STATUS).ok().flatten()?;
            Some(String::from_utf8_lossy(&bytes).into_owned())
        });
        let Some(status) = status else {
            // No database file (a snapshot keeps dpkg-query's answers).
            return installed_version(&query_ok(self.host, &argv)?);
        };
        let version = dpkg_installed(status, name);
        // A snapshot keeps the answer in dpkg-query's form, as snapshots
        // always have, so that it replays without the database.
        let out = CommandOutput {
            code: Some(if version.is_some() { 0 } else { 1 }),
            stdout: version
                .as_ref()
                .map(|v| format!("ii  {v}\n"))
                .unwrap_or_default(),
            stderr: String::new(),
        };
        self.host.record_answer(&argv, Some(&out));
        version
    }

    fn rpm(&self, name: &str) -> Option<String> {
        let out = query_ok(
            self.host,
            &["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\\n", name],
        )?;
        let v = out.lines().next()?.trim();
        (!v.contains("not installed") && !v.is_empty()).then(|| v.to_string())
    }
}

/// The version in dpkg-query's `${db:Status-Abbrev} ${Version}` output
/// when a line says installed (`ii`).
fn installed_version(out: &str) -> Option<String> {
    out.lines().find_map(|line| {
        let v = line.strip_prefix("ii ")?.trim();
        (!v.is_empty()).then(|| v.to_string())
    })
}

/// The version of `name` in a dpkg status database when it is installed
/// (`Status: install ok installed`, which dpkg-query abbreviates `ii`); the
/// first such stanza when several architectures are.
pub fn dpkg_installed(status: &str, name: &str) -> Option<String> {
    let key = format!("Package: {name}\n");
    let mut from = 0;
    while let Some(at) = status[from..].find(&key).map(|i| i + from) {
        from = at + key.len();
        // Only a field at the start of a line names the package.
        if at > 0 && status.as_bytes()[at - 1] != b'\n' {
            continue;
        }
        let stanza_start = status[..at].rfind("\n\n").map_or(0, |i| i + 2);
        let stanza_end = status[at..].find("\n\n").map_or(status.len(), |i| i + at);
        let stanza = &status[stanza_start..stanza_end];
        let field = |k: &str| {
            stanza.lines().find_map(|l| {
                let (key, v) = l.split_once(':')?;
                (key == k).then(|| v.trim())
            })
        };
        if field("Status") == Some("install ok installed") {
            if let Some(v) = field("Version").filter(|v| !v.is_empty()) {
                return Some(v.to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "\
Package: perftest
Status: deinstall ok config-files
Architecture: amd64
Version: 4.5-0.2
Description: old
 continued: Package: libnccl2

Package: rdma-core
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 44.0-2
Description: RDMA core userspace
 Package: perftest

Package: libibverbs1
Status: install ok installed
Architecture: i386
Version: 44.0-2
";

    #[test]
    fn installed_packages_are_read_from_the_status_file() {
        assert_eq!(
            dpkg_installed(STATUS, "rdma-core").as_deref(),
            Some("44.0-2")
        );
        // The last stanza has no blank line after it.
        assert_eq!(
            dpkg_installed(STATUS, "libibverbs1").as_deref(),
            Some("44.0-2")
        );
        // Removed with its configuration kept (`rc`) is not installed.
        assert_eq!(dpkg_installed(STATUS, "perftest"), None);
        // A name inside a description is no package.
        assert_eq!(dpkg_installed(STATUS, "libnccl2"), None);
        assert_eq!(dpkg_installed(STATUS, "rdma"), None);
    }

    #[test]
    fn dpkg_query_answers_read_the_same() {
        assert_eq!(installed_version("ii  44.0-2\n").as_deref(), Some("44.0-2"));
        assert_eq!(installed_version("rc  4.5-0.2\n"), None);
    }
}
