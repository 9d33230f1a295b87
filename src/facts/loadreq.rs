//! Other files that ask for a kernel module to be loaded at boot: the
//! `modules-load.d` directories systemd-modules-load reads (a file in `/etc`
//! or `/run` hides one of the same name in `/usr/lib` or `/lib`), Debian's
//! `/etc/modules`, and systemd units that run `modprobe NAME`. gdrprov's own
//! files are not among them.

use crate::host::Host;
use serde::Serialize;

/// One line asking to load a module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoadRequest {
    /// The file, inside the root.
    pub file: String,
    /// 1-based.
    pub line: usize,
    pub text: String,
    /// The module, `-` and `_` alike (as `_`).
    pub module: String,
    /// `modules-load.d`, `modules` (/etc/modules) or `unit`.
    pub kind: &'static str,
    /// Whether gdrprov may comment the line out (in `/etc`, not a unit).
    pub editable: bool,
}

const LOAD_DIRS: &[&str] = &[
    "/etc/modules-load.d",
    "/run/modules-load.d",
    "/usr/local/lib/modules-load.d",
    "/usr/lib/modules-load.d",
    "/lib/modules-load.d",
];

const UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// gdrprov's own files: what it loads it loads on purpose.
const OWN: &[&str] = &[
    "/etc/modules-load.d/gdrprov.conf",
    "/etc/systemd/system/gdrprov-peermem.service",
];

/// Every request in the root to load one of `modules` at boot.
pub fn scan(host: &Host, modules: &[String]) -> Vec<LoadRequest> {
    let wanted: Vec<String> = modules.iter().map(|m| super::kmod::norm(m)).collect();
    if wanted.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut seen_names: Vec<String> = Vec::new();
    let mut files: Vec<(String, bool)> = Vec::new();
    for dir in LOAD_DIRS {
        for name in host.list_dir(dir) {
            if !name.ends_with(".conf") || seen_names.contains(&name) {
                continue;
            }
            seen_names.push(name.clone());
            files.push((format!("{dir}/{name}"), dir.starts_with("/etc/")));
        }
    }
    for (file, editable) in files
        .iter()
        .filter(|(f, _)| !links_to_another(host, f, &files))
    {
        lines_of(host, file, "modules-load.d", *editable, &wanted, &mut out);
    }
    lines_of(host, "/etc/modules", "modules", true, &wanted, &mut out);
    for dir in UNIT_DIRS {
        for name in host.list_dir(dir) {
            if name.ends_with(".service") {
                unit_lines(host, &format!("{dir}/{name}"), &wanted, &mut out);
            } else if name.ends_with(".service.d") {
                for conf in host.list_dir(&format!("{dir}/{name}")) {
                    if conf.ends_with(".conf") {
                        unit_lines(host, &format!("{dir}/{name}/{conf}"), &wanted, &mut out);
                    }
                }
            }
        }
    }
    out.retain(|r| !OWN.contains(&r.file.as_str()));
    out
}

/// Whether `file` is a symlink to a file the scan reads anyway (resolved
/// inside the root): Debian's kmod ships `/etc/modules-load.d/modules.conf`
/// as a link to `../modules`. Its lines are the target's, found (and edited)
/// there; read through the link they would be edited twice, and through a
/// link the door refuses to write.
fn links_to_another(host: &Host, file: &str, files: &[(String, bool)]) -> bool {
    if host.symlink_at(file).is_none() {
        return false;
    }
    let Some(target) = host.canonical(file) else {
        return false;
    };
    target != file && (target == "/etc/modules" || files.iter().any(|(f, _)| *f == target))
}

/// modules-load.d and /etc/modules: one module per line, `#` and `;` comments.
fn lines_of(
    host: &Host,
    file: &str,
    kind: &'static str,
    editable: bool,
    wanted: &[String],
    out: &mut Vec<LoadRequest>,
) {
    requests_in(host, file, (kind, editable), wanted, out, |t| {
        if t.is_empty() || t.starts_with('#') || t.starts_with(';') {
            return Vec::new();
        }
        // /etc/modules may give parameters after the name.
        vec![t.split_whitespace().next().unwrap_or("")]
    });
}

/// A unit's `Exec*=` lines that run `modprobe NAME` (not `-r`).
fn unit_lines(host: &Host, file: &str, wanted: &[String], out: &mut Vec<LoadRequest>) {
    requests_in(host, file, ("unit", false), wanted, out, |t| {
        let Some((key, value)) = t.split_once('=') else {
            return Vec::new();
        };
        if !key.trim().starts_with("Exec") {
            return Vec::new();
        }
        let words: Vec<&str> = value
            .split(|c: char| c.is_whitespace() || c == ';')
            .filter(|w| !w.is_empty())
            .collect();
        let Some(at) = words.iter().position(|w| w.ends_with("modprobe")) else {
            return Vec::new();
        };
        let args = &words[at + 1..];
        if args.iter().any(|a| *a == "-r" || *a == "--remove") {
            return Vec::new();
        }
        args.iter()
            .filter(|a| !a.starts_with('-'))
            .copied()
            .collect()
    });
}

/// Every line of `file` (unless it is masked) that names a wanted module, as `names` reads the
/// line (trimmed), as a request of `kind` (and whether gdrprov may edit the file).
fn requests_in(
    host: &Host,
    file: &str,
    (kind, editable): (&'static str, bool),
    wanted: &[String],
    out: &mut Vec<LoadRequest>,
    names: impl Fn(&str) -> Vec<&str>,
) {
    let Some(text) = unmasked_text(host, file) else {
        return;
    };
    for (i, line) in text.lines().enumerate() {
        for name in names(line.trim()) {
            let m = super::kmod::norm(name);
            if wanted.contains(&m) {
                out.push(LoadRequest {
                    file: file.to_string(),
                    line: i + 1,
                    text: line.to_string(),
                    module: m,
                    kind,
                    editable,
                });
            }
        }
    }
}

/// A file's text, unless it is masked: linked to /dev/null (`systemctl mask`, or a modules-load.d
/// entry turned off), systemd reads nothing there, and the device node is not a hostile root's
/// trick.
fn unmasked_text(host: &Host, file: &str) -> Option<String> {
    if host.canonical(file).as_deref() == Some("/dev/null") {
        return None;
    }
    host.read_fact(file)
}

/// `text` with the request lines (1-based) commented out, each saying why.
pub fn commented(text: &str, lines: &[usize]) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if lines.contains(&(i + 1)) {
            out.push_str("# gdrprov (modules.absent): ");
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    fn write(root: &std::path::Path, p: &str, text: &str) {
        let f = root.join(p.trim_start_matches('/'));
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, text).unwrap();
    }

    #[test]
    fn requests_are_found_where_boot_reads_them() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        write(
            r,
            "/etc/modules-load.d/nvidia-peermem.conf",
            "# peer memory\nnvidia-peermem\n",
        );
        // Hidden by the /etc file of the same name.
        write(
            r,
            "/usr/lib/modules-load.d/nvidia-peermem.conf",
            "nvidia_peermem\n",
        );
        write(
            r,
            "/usr/lib/modules-load.d/other.conf",
            "nv_peer_mem\nloop\n",
        );
        write(r, "/etc/modules", "loop\nnvidia_peermem debug=1\n");
        write(r, "/etc/modules-load.d/gdrprov.conf", "nvidia_peermem\n");
        write(r, "/etc/systemd/system/peer.service", "[Service]\nExecStart=/sbin/modprobe -q nvidia-peermem\nExecStop=/sbin/modprobe -r nvidia-peermem\n");
        let host = Host::open(r, true).unwrap();
        let found = scan(&host, &["nvidia_peermem".into(), "nv-peer-mem".into()]);
        let got: Vec<(String, usize, &str, bool)> = found
            .iter()
            .map(|q| (q.file.clone(), q.line, q.kind, q.editable))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "/etc/modules-load.d/nvidia-peermem.conf".into(),
                    2,
                    "modules-load.d",
                    true
                ),
                (
                    "/usr/lib/modules-load.d/other.conf".into(),
                    1,
                    "modules-load.d",
                    false
                ),
                ("/etc/modules".into(), 2, "modules", true),
                ("/etc/systemd/system/peer.service".into(), 2, "unit", false),
            ]
        );
        assert!(scan(&host, &[]).is_empty());
    }

    /// Masked units and modules-load.d entries (links to /dev/null, as Debian 13 ships several)
    /// are skipped, not read: the null device is not a hostile root (found on the UKI guest).
    #[test]
    fn masked_files_are_not_read() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: mknod needs root (CI runs as root)");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("dev")).unwrap();
        nix::sys::stat::mknod(
            &r.join("dev/null"),
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::Mode::from_bits_truncate(0o666),
            nix::sys::stat::makedev(1, 3),
        )
        .unwrap();
        for p in [
            "etc/systemd/system/hwclock.service",
            "etc/modules-load.d/nvidia-peermem.conf",
        ] {
            std::fs::create_dir_all(r.join(p).parent().unwrap()).unwrap();
            std::os::unix::fs::symlink("/dev/null", r.join(p)).unwrap();
        }
        let host = Host::open(r, true).unwrap();
        assert!(scan(&host, &["nvidia_peermem".into()]).is_empty());
        assert!(host.refuse_special_files().is_ok());
    }

    #[test]
    fn commenting_keeps_every_other_byte() {
        assert_eq!(
            commented("loop\nnvidia_peermem\nx", &[2]),
            "loop\n# gdrprov (modules.absent): nvidia_peermem\nx"
        );
        assert_eq!(commented("a\n", &[]), "a\n");
    }
}
