//! Kernel modules: loaded ones (`/proc/modules`, else `/sys/module/*/initstate`)
//! and blocked ones (`blacklist` / `install X /bin/false` in modprobe.d, and
//! `module_blacklist=` on the command line).

use super::util::read_trim;
use crate::host::Host;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct BlockedModule {
    pub module: String,
    /// `blacklist` (stops alias autoloading only), `install` (stops `modprobe X` too), `cmdline`.
    pub how: String,
    pub file: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModuleFacts {
    /// `/proc/modules`, `/sys/module` or `absent` (an image).
    pub source: String,
    pub loaded: Vec<String>,
    pub blocked: Vec<BlockedModule>,
    /// Which of NCCL's peer-memory detection paths exist.
    pub peermem_paths: Vec<String>,
}

impl ModuleFacts {
    pub fn is_loaded(&self, m: &str) -> bool {
        let m = norm(m);
        self.loaded.contains(&m)
    }
    pub fn is_blocked(&self, m: &str) -> bool {
        let m = norm(m);
        self.blocked.iter().any(|b| b.module == m)
    }
}

pub fn norm(m: &str) -> String {
    m.replace('-', "_")
}

pub const MODPROBE_DIRS: &[&str] = &[
    "/etc/modprobe.d",
    "/run/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/modprobe.d",
];

pub const PEERMEM_PATHS: &[&str] = &[
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
];

pub fn parse_modprobe_conf(text: &str, file: &str, out: &mut Vec<BlockedModule>) {
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut w = line.split_whitespace();
        match (w.next(), w.next()) {
            (Some("blacklist"), Some(m)) => out.push(BlockedModule {
                module: norm(m),
                how: "blacklist".into(),
                file: file.into(),
            }),
            (Some("install"), Some(m)) => {
                let cmd: Vec<&str> = w.collect();
                let refusing = matches!(
                    cmd.first().copied(),
                    Some(
                        "/bin/false"
                            | "/usr/bin/false"
                            | "false"
                            | "/bin/true"
                            | "/usr/bin/true"
                            | "true"
                    )
                ) && cmd.len() == 1;
                if refusing {
                    out.push(BlockedModule {
                        module: norm(m),
                        how: "install".into(),
                        file: file.into(),
                    });
                }
            }
            _ => {}
        }
    }
}

/// The loaded modules, sorted, and where that was read: `/proc/modules`,
/// else `/sys/module/*/initstate`, else `absent` (an image).
pub fn loaded(host: &Host) -> (String, Vec<String>) {
    let (source, mut loaded) = if let Some(pm) = host.read_fact("/proc/modules") {
        (
            "/proc/modules".to_string(),
            pm.lines()
                .filter_map(|l| l.split_whitespace().next())
                .map(norm)
                .collect::<Vec<_>>(),
        )
    } else {
        let names = host.list_dir("/sys/module");
        if names.is_empty() {
            ("absent".to_string(), Vec::new())
        } else {
            let live: Vec<String> = names
                .into_iter()
                .filter(|m| {
                    read_trim(host, &format!("/sys/module/{m}/initstate")).as_deref()
                        == Some("live")
                })
                .collect();
            ("/sys/module".to_string(), live)
        }
    };
    loaded.sort();
    loaded.dedup();
    (source, loaded)
}

pub fn probe(host: &Host, cmdline: Option<&str>) -> ModuleFacts {
    let (source, loaded) = loaded(host);
    let mut blocked: Vec<BlockedModule> = Vec::new();
    let mut seen_dirs: Vec<String> = Vec::new();
    for dir in MODPROBE_DIRS {
        // /lib is /usr/lib on merged-/usr systems: read each directory once.
        let Some(real) = host.canonical(dir) else {
            continue;
        };
        if seen_dirs.contains(&real) {
            continue;
        }
        seen_dirs.push(real);
        for f in host.list_dir(dir) {
            if f.ends_with(".conf") {
                let path = format!("{dir}/{f}");
                if let Some(t) = host.read_fact(&path) {
                    parse_modprobe_conf(&t, &path, &mut blocked);
                }
            }
        }
    }
    for arg in cmdline.unwrap_or("").split_whitespace() {
        if let Some(list) = arg
            .strip_prefix("modprobe.blacklist=")
            .or_else(|| arg.strip_prefix("module_blacklist="))
        {
            for m in list.split(',').filter(|m| !m.is_empty()) {
                blocked.push(BlockedModule {
                    module: norm(m),
                    how: "cmdline".into(),
                    file: "/proc/cmdline".into(),
                });
            }
        }
    }
    let peermem_paths = PEERMEM_PATHS
        .iter()
        .filter(|p| host.exists(p))
        .map(|p| p.to_string())
        .collect();
    ModuleFacts {
        source,
        loaded,
        blocked,
        peermem_paths,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modprobe_d_blocks() {
        let mut v = Vec::new();
        parse_modprobe_conf(
            "# x\nblacklist nv-peer-mem\ninstall nvidia_peermem /bin/false\ninstall foo /sbin/modprobe --ignore-install foo\noptions nvidia x=1\n",
            "/etc/modprobe.d/x.conf",
            &mut v,
        );
        let got: Vec<_> = v
            .iter()
            .map(|b| (b.module.as_str(), b.how.as_str()))
            .collect();
        assert_eq!(
            got,
            [("nv_peer_mem", "blacklist"), ("nvidia_peermem", "install")]
        );
    }
}
