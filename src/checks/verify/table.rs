//! The checks of `verify`, as a table: each entry a name, what it checks and
//! the function that checks it (the shape of bootc's lints). An entry that
//! does not apply to this host gives no result and is not listed.

use super::cx::Cx;
use super::fabric::{peermem_register, roce_counters, roce_gid, roce_lossless, roce_mtu};
use super::own::{
    acs, boot, configuration, dmabuf_export, efa_devices, efa_fi_info, load_requests, loopback,
    modules, mtu, pair, pcie_path, reboot, requirements, trial,
};
use crate::checks::Check;

/// How an entry checks.
pub enum Run {
    /// Its own function; `None`: does not apply here.
    Own(fn(&Cx) -> Option<Check>),
    /// One of the health checks (src/checks/health), by the entry's name.
    Health,
}

pub struct Entry {
    pub name: &'static str,
    pub description: &'static str,
    pub run: Run,
}

impl Entry {
    pub fn check(&self, cx: &Cx) -> Option<Check> {
        match self.run {
            Run::Own(f) => f(cx),
            Run::Health => cx
                .health
                .checks
                .iter()
                .find(|c| c.name == self.name)
                .cloned(),
        }
    }
}

/// Every check of `verify`, in the order reported.
pub static TABLE: &[Entry] = &[
    Entry {
        name: "requirements",
        description: "the profile's `requires:` against the host",
        run: Run::Own(requirements),
    },
    Entry {
        name: "configuration",
        description: "the plan is empty and no command is owed",
        run: Run::Own(configuration),
    },
    Entry {
        name: "mtu",
        description: "the MTU the profile sets, read back",
        run: Run::Own(mtu),
    },
    Entry {
        name: "acs",
        description: "ACS on the bridges between GPU and NIC as the profile sets it",
        run: Run::Own(acs),
    },
    Entry {
        name: "boot",
        description: "the running command line of a host whose command line is set outside it",
        run: Run::Own(boot),
    },
    Entry {
        name: "trial",
        description: "a pending trial boot runs, boots next, or did not boot",
        run: Run::Own(trial),
    },
    Entry {
        name: "gds",
        description: "GPUDirect Storage runs in the mode the profile's `gds:` wants (a short bench gds)",
        run: Run::Own(super::gds::check),
    },
    Entry {
        name: "pcie-links",
        description: "every GPU, NIC and bridge between them at its maximum link",
        run: Run::Health,
    },
    Entry {
        name: "pcie-path",
        description: "each GPU's BAR1, and MaxReadReq, MaxPayload, relaxed ordering and ATS on the GPU–NIC paths, from config space",
        run: Run::Own(pcie_path),
    },
    Entry {
        name: "copy-bandwidth",
        description: "GPU<->host copy bandwidth against the floors",
        run: Run::Health,
    },
    Entry {
        name: "kernel-log",
        description: "fatal Xids, uncorrected AER errors, links down, port module errors",
        run: Run::Health,
    },
    Entry {
        name: "gpu-health",
        description: "NVML: ECC, row remapping, retired pages, NVLink",
        run: Run::Health,
    },
    Entry {
        name: "nvlink",
        description: "NVLink links per GPU (expected from the device) up, their version and error rate",
        run: Run::Health,
    },
    Entry {
        name: "gpu-fabric",
        description: "NVSwitch boards: every GPU's fabric registered (Fabric Manager)",
        run: Run::Health,
    },
    Entry {
        name: "gpu-p2p",
        description: "every GPU pair: peer access, path and copy bandwidth against the path's floor",
        run: Run::Health,
    },
    Entry {
        name: "nccl-allreduce",
        description: "NCCL all_reduce over every GPU: GPU to GPU (not through host memory), busbw against its floor",
        run: Run::Health,
    },
    Entry {
        name: "rdma-ports",
        description: "RDMA ports ACTIVE at their rate, RoCE v2 GIDs",
        run: Run::Health,
    },
    Entry {
        name: "roce-mtu",
        description: "each RoCE port's active MTU against its largest, its network device's MTU against the profile's",
        run: Run::Own(roce_mtu),
    },
    Entry {
        name: "roce-gid",
        description: "NCCL_IB_GID_INDEX (environment, /etc/nccl.conf) names a routable RoCE v2 GID on every port",
        run: Run::Own(roce_gid),
    },
    Entry {
        name: "roce-lossless",
        description: "PFC per priority, ECN for RoCE and DSCP trust, as the kernel shows them",
        run: Run::Own(roce_lossless),
    },
    Entry {
        name: "gpu-nic-affinity",
        description: "each GPU's nearest NIC on its socket",
        run: Run::Health,
    },
    Entry {
        name: "efa-devices",
        description: "every EFA device has an ACTIVE port",
        run: Run::Own(efa_devices),
    },
    Entry {
        name: "reboot",
        description: "the running kernel has the configured modules, and the configured command line where the host sets it (where it is set outside the host, `boot` judges it)",
        run: Run::Own(reboot),
    },
    Entry {
        name: "modules",
        description: "present modules loaded, absent ones not",
        run: Run::Own(modules),
    },
    Entry {
        name: "load-requests",
        description: "no other file asks to load a module the profile blocks",
        run: Run::Own(load_requests),
    },
    Entry {
        name: "efa-fi-info",
        description: "libfabric's efa provider with FI_HMEM",
        run: Run::Own(efa_fi_info),
    },
    Entry {
        name: "loopback",
        description: "an RDMA WRITE loopback into GPU memory, its data check and line rate",
        run: Run::Own(loopback),
    },
    Entry {
        name: "peermem-register",
        description: "where a peer-memory module is loaded or wanted: GPU memory registered through it (ibv_reg_mr, not dma-buf)",
        run: Run::Own(peermem_register),
    },
    Entry {
        name: "pair",
        description: "with --peer: RDMA WRITE to a bench pair listener on another host, its data check and line rate",
        run: Run::Own(pair),
    },
    Entry {
        name: "roce-counters",
        description: "RoCE retransmission, out-of-sequence and timeout counters over verify's run",
        run: Run::Own(roce_counters),
    },
    Entry {
        name: "dmabuf-export",
        description: "on EFA: GPU memory exported as dma-buf",
        run: Run::Own(dmabuf_export),
    },
];

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = super::TABLE.iter().map(|e| e.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len());
        assert!(super::TABLE.iter().all(|e| !e.description.is_empty()));
    }
}
