//! Binding a copy's worker thread to its GPU's NUMA node (the choice is
//! [`crate::facts::numa::choose`]): `sched_setaffinity` on the calling thread only (Linux applies
//! it to the thread whose id is given; 0 is the caller), so the thread that allocates a GPU's
//! pinned host buffer (whose pages then land on that node) and queues its copies runs there,
//! and nothing else of gdrprov moves. Each copy runs in such a worker thread, never gdrprov's
//! main thread.

use crate::facts::numa::{choose, format_cpulist, Placement};
use crate::host::Host;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The CPUs this thread may run on (its affinity mask).
pub fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

/// Where GPU `pci` (sysfs form) should be driven from on the running system, among `allowed`
/// (the worker's CPUs before any binding, [`allowed_cpus`]); unpinned with `--no-numa-pin`
/// (`pin` false).
pub fn placement(pci: &str, pin: bool, allowed: &[usize]) -> Placement {
    if !pin {
        return Placement::unpinned(None, "--no-numa-pin");
    }
    let Ok(host) = Host::open(std::path::Path::new("/"), true) else {
        return Placement::unpinned(None, "cannot read sysfs");
    };
    let (node, list) = crate::facts::numa::read(&host, pci);
    choose(node, list.as_deref(), allowed)
}

/// Binds the calling thread to `cpus`; an empty list leaves it as it is.
pub fn bind_this_thread(cpus: &[usize]) -> Result<(), String> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c).map_err(|e| format!("CPU {c}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| format!("sched_setaffinity({}): {e}", format_cpulist(cpus)))
}

/// Binds the calling thread as `p` says, or back to `free` (its CPUs before any binding) when
/// `p` is unpinned; a bind the kernel refuses makes `p` unpinned with the reason (the copy
/// still runs).
pub fn apply(p: &mut Placement, free: &[usize]) {
    if !p.pinned {
        let _ = bind_this_thread(free);
        return;
    }
    if let Err(e) = bind_this_thread(&p.cpu_set()) {
        *p = Placement::unpinned(p.numa_node, format!("binding failed: {e}"));
        let _ = bind_this_thread(free);
    }
}

/// Runs `f` in a new thread (so that binding it moves nothing else of gdrprov) and waits.
pub fn in_worker<T: Send>(f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|s| {
        s.spawn(f)
            .join()
            .map_err(|_| "the copy's worker thread panicked".to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real bind, on this machine's own CPUs: the worker is moved, the caller is not.
    #[test]
    fn a_worker_is_bound_and_the_caller_is_not() {
        let mine = allowed_cpus();
        assert!(!mine.is_empty());
        let first = mine[0];
        let seen = in_worker(|| {
            bind_this_thread(&[first]).unwrap();
            allowed_cpus()
        })
        .unwrap();
        assert_eq!(seen, vec![first]);
        assert_eq!(allowed_cpus(), mine);
        // A CPU this machine does not have is refused, and the placement says so.
        let mut p = Placement {
            pinned: true,
            numa_node: Some(0),
            cpus: (CpuSet::count() - 1).to_string(),
            note: String::new(),
        };
        if !mine.contains(&(CpuSet::count() - 1)) {
            in_worker(|| apply(&mut p, &mine)).unwrap();
            assert!(!p.pinned);
            assert!(p.note.contains("binding failed"), "{}", p.note);
        }
        assert_eq!(
            placement("0000:00:06.0", false, &mine).note,
            "--no-numa-pin".to_string()
        );
    }
}
