//! Where a GPU's host memory belongs: the NUMA node of its PCI device (`numa_node` in sysfs) and
//! that node's CPUs (`local_cpulist`), and the choice of CPUs a copy's worker thread runs on.
//!
//! A pinned host buffer's pages are placed on the NUMA node of the CPU that allocates them
//! (`cuMemHostAlloc` populates and pins them in the calling thread; the kernel's default policy
//! is "local"), so a copy bandwidth run allocates and drives each GPU's buffer from a thread
//! bound to that GPU's CPUs; otherwise on a two-socket host half the GPUs would copy across the
//! socket link. A GPU without a node (`numa_node` -1: one node, or a VM that shows none) runs
//! unpinned and says so. The choice is pure ([`choose`]); binding the thread is the bench's.

use crate::host::Host;
use serde::{Deserialize, Serialize};

/// The CPUs a GPU's copies ran on, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    /// Whether the worker thread was bound to the GPU's CPUs.
    pub pinned: bool,
    /// The GPU's `numa_node` as sysfs gives it (-1: none); `None` when unreadable.
    pub numa_node: Option<i64>,
    /// The CPUs the thread was bound to, in the kernel's list form (`0-15,32-47`); empty when
    /// unpinned.
    pub cpus: String,
    /// What was chosen and why, in words.
    pub note: String,
}

impl Placement {
    /// Unpinned, with the reason.
    pub fn unpinned(numa_node: Option<i64>, why: impl Into<String>) -> Placement {
        Placement {
            pinned: false,
            numa_node,
            cpus: String::new(),
            note: why.into(),
        }
    }

    /// The CPU numbers bound to (empty when unpinned).
    pub fn cpu_set(&self) -> Vec<usize> {
        parse_cpulist(&self.cpus).unwrap_or_default()
    }

    /// For a report line: `host memory on NUMA node 0 (CPUs 0-15)` or `host memory unpinned
    /// (why)`.
    pub fn label(&self) -> String {
        if self.pinned {
            format!(
                "host memory on NUMA node {} (CPUs {})",
                self.numa_node.unwrap_or(-1),
                self.cpus
            )
        } else {
            format!("host memory unpinned ({})", self.note)
        }
    }
}

/// The kernel's CPU list form (`0-3,8,10-11`, empty for none) as CPU numbers, sorted, once each.
pub fn parse_cpulist(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.trim().split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |t: &str| {
            t.trim()
                .parse::<usize>()
                .map_err(|_| format!("`{t}` in the CPU list `{}` is not a CPU number", s.trim()))
        };
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(part)?, num(part)?),
        };
        if hi < lo || hi - lo >= 65536 {
            return Err(format!(
                "the range `{part}` in the CPU list `{}` is not one",
                s.trim()
            ));
        }
        out.extend(lo..=hi);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// CPU numbers in the kernel's list form: `[0,1,2,3,8]` -> `0-3,8`.
pub fn format_cpulist(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            v[i].to_string()
        } else {
            format!("{}-{}", v[i], v[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

/// The GPU's `numa_node` and `local_cpulist` (sysfs form of its PCI address, `0000:3b:00.0`).
pub fn read(host: &Host, pci: &str) -> (Option<i64>, Option<String>) {
    let dir = format!("/sys/bus/pci/devices/{pci}");
    let numa = host
        .read_fact(&format!("{dir}/numa_node"))
        .and_then(|s| s.trim().parse::<i64>().ok());
    let cpus = host
        .read_fact(&format!("{dir}/local_cpulist"))
        .map(|s| s.trim().to_string());
    (numa, cpus)
}

/// Which CPUs a GPU's worker thread runs on: the GPU's node's CPUs that this process may use
/// (`allowed`: its affinity mask), or none, with the reason.
pub fn choose(numa_node: Option<i64>, local_cpulist: Option<&str>, allowed: &[usize]) -> Placement {
    let node = match numa_node {
        None => return Placement::unpinned(None, "sysfs gives the GPU no numa_node"),
        Some(n) if n < 0 => {
            return Placement::unpinned(
                numa_node,
                "numa_node -1: the platform gives the GPU no NUMA node (one node, or a VM that shows none)",
            )
        }
        Some(n) => n,
    };
    let Some(list) = local_cpulist else {
        return Placement::unpinned(numa_node, format!("NUMA node {node}: no local_cpulist"));
    };
    let local = match parse_cpulist(list) {
        Ok(l) if !l.is_empty() => l,
        Ok(_) => {
            return Placement::unpinned(
                numa_node,
                format!("NUMA node {node}: local_cpulist is empty"),
            )
        }
        Err(e) => return Placement::unpinned(numa_node, format!("NUMA node {node}: {e}")),
    };
    let usable: Vec<usize> = local
        .iter()
        .copied()
        .filter(|c| allowed.contains(c))
        .collect();
    if usable.is_empty() {
        return Placement::unpinned(
            numa_node,
            format!(
                "none of NUMA node {node}'s CPUs ({}) may be used by this process (taskset or cgroup cpuset)",
                format_cpulist(&local)
            ),
        );
    }
    let cpus = format_cpulist(&usable);
    let note = if usable.len() == local.len() {
        format!("NUMA node {node}, its CPUs {cpus}")
    } else {
        format!(
            "NUMA node {node}, CPUs {cpus} (of its {}; the rest are not this process's)",
            format_cpulist(&local)
        )
    };
    Placement {
        pinned: true,
        numa_node,
        cpus,
        note,
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_as_the_kernel_writes_them() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpulist("5"), Ok(vec![5]));
        assert_eq!(parse_cpulist(""), Ok(vec![]));
        assert_eq!(parse_cpulist("3,1-2,2"), Ok(vec![1, 2, 3]));
        assert!(parse_cpulist("0-x").unwrap_err().contains("`x`"));
        assert!(parse_cpulist("7-3").unwrap_err().contains("`7-3`"));
        assert!(parse_cpulist("0-99999999").is_err());
        assert!(parse_cpulist("ff,ff").is_err());
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[4, 2, 3]), "2-4");
        for s in ["0-47,96-143", "1", "0,2,4", "48-95"] {
            assert_eq!(format_cpulist(&parse_cpulist(s).unwrap()), s);
        }
    }

    #[test]
    fn the_choice_binds_to_the_gpus_node_or_says_why_not() {
        let all: Vec<usize> = (0..192).collect();
        // A two-socket host, the GPU on socket 1.
        let p = choose(Some(1), Some("48-95,144-191"), &all);
        assert!(p.pinned);
        assert_eq!(p.cpus, "48-95,144-191");
        assert_eq!(p.cpu_set().len(), 96);
        assert_eq!(p.label(), "host memory on NUMA node 1 (CPUs 48-95,144-191)");
        // Only part of the node is this process's (taskset 0-63).
        let some: Vec<usize> = (0..64).collect();
        let p = choose(Some(1), Some("48-95"), &some);
        assert!(p.pinned);
        assert_eq!(p.cpus, "48-63");
        assert!(p.note.contains("of its 48-95"), "{}", p.note);
        // None of it.
        let p = choose(Some(1), Some("48-95"), &[0, 1]);
        assert!(!p.pinned);
        assert!(p.note.contains("taskset or cgroup"), "{}", p.note);
        // The lent VMs: numa_node -1.
        let p = choose(Some(-1), Some("0-15"), &all);
        assert!(!p.pinned);
        assert_eq!(p.cpus, "");
        assert!(p.label().starts_with("host memory unpinned (numa_node -1"));
        assert!(!choose(None, None, &all).pinned);
        assert!(!choose(Some(0), None, &all).pinned);
        assert!(!choose(Some(0), Some(""), &all).pinned);
        let p = choose(Some(0), Some("0-q"), &all);
        assert!(
            !p.pinned && p.note.contains("not a CPU number"),
            "{}",
            p.note
        );
    }

    #[test]
    fn read_from_a_root() {
        let d = tempfile::tempdir().unwrap();
        let dev = d.path().join("sys/bus/pci/devices/0000:3b:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("numa_node"), "1\n").unwrap();
        std::fs::write(dev.join("local_cpulist"), "48-95\n").unwrap();
        let host = Host::open(d.path(), true).unwrap();
        assert_eq!(
            read(&host, "0000:3b:00.0"),
            (Some(1), Some("48-95".to_string()))
        );
        assert_eq!(read(&host, "0000:3c:00.0"), (None, None));
    }
}
