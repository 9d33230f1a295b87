//! GPUDirect Storage's rules, for a profile with `gds:`: for each mount it names (`/` when it
//! names none), what keeps cuFile from opening files there at all (libcufile, no block device,
//! no udev record) and what keeps the mode wanted from running (IOMMU, file system, mount
//! options, not NVMe, nvidia-fs, cufile.json, kernel, NVMe multipath, GPU and NVMe across
//! sockets). Verify's `gds` check reads the same evaluation ([`evaluate`]).

use super::rules::Cx;
use super::{Finding, Sev};
use crate::facts::gds::GdsMode;
use crate::facts::gds_causes::Cause;
use crate::facts::iommu::IommuState;
use crate::facts::Facts;
use crate::plan::modules::gds::effective;
use crate::profile::gds::GdsWant;

/// One mount's evaluation: the direct mode that can run there (`None`: compat only), and the
/// causes that close the mode wanted.
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub mount: String,
    pub possible: Option<GdsMode>,
    /// Causes that keep cuFile from opening files at all.
    pub open: Vec<Cause>,
    /// Causes that keep the wanted mode (for any-direct: both) from running.
    pub direct: Vec<Cause>,
}

/// The mounts a profile's `gds:` names, or `/`.
pub fn mounts(named: &[String]) -> Vec<String> {
    if named.is_empty() {
        vec!["/".to_string()]
    } else {
        named.to_vec()
    }
}

/// What the host allows of `want` on `mount`.
pub fn evaluate(facts: &Facts, want: GdsWant, mount: &str) -> Evaluation {
    let gds = &facts.gds;
    let m = gds.mount_of(mount);
    let translating = facts.iommu.state == IommuState::Translated;
    let open = gds.open_causes(m);
    let p2p: Vec<Cause> = gds
        .direct_causes(
            GdsMode::P2pdma,
            m,
            translating,
            None,
            &facts.nvidia_params,
            &facts.gpus,
        )
        .into_iter()
        .filter(|c| !open.contains(c))
        // any-direct that plans nvidia-fs (P2PDMA cannot be had here): the driver's P2P
        // memory is not what is missing.
        .filter(|c| c.id != "gds-p2pmem" || effective(facts, want) == GdsMode::P2pdma)
        .collect();
    let nvfs: Vec<Cause> = gds
        .direct_causes(
            GdsMode::Nvfs,
            m,
            translating,
            None,
            &facts.nvidia_params,
            &facts.gpus,
        )
        .into_iter()
        .filter(|c| !open.contains(c))
        .collect();
    let possible = if !open.is_empty() {
        None
    } else if p2p.is_empty() {
        Some(GdsMode::P2pdma)
    } else if nvfs.is_empty() {
        Some(GdsMode::Nvfs)
    } else {
        None
    };
    let direct = match want {
        GdsWant::P2pdma => p2p,
        GdsWant::Nvfs => nvfs,
        GdsWant::AnyDirect if possible.is_some() => Vec::new(),
        GdsWant::AnyDirect => {
            let mut all = p2p;
            for c in nvfs {
                if !all.contains(&c) {
                    all.push(c);
                }
            }
            all
        }
    };
    Evaluation {
        mount: mount.to_string(),
        possible,
        open,
        direct,
    }
}

fn evidence(facts: &Facts, mount: &str) -> String {
    match facts.gds.mount_of(mount) {
        Some(m) => format!(
            "{} on {} ({}, {}, {}; udev record {})",
            m.mountpoint,
            m.source,
            m.fs,
            m.transport.as_deref().unwrap_or("not a block device"),
            m.options.join(","),
            if m.udev.is_some() {
                "present"
            } else {
                "absent"
            }
        ),
        None => format!("no mount found for {mount}"),
    }
}

/// Doctor's GDS findings, for a profile with `gds.mode`.
pub(super) fn gds(cx: &Cx, out: &mut Vec<Finding>) {
    let Some(want) = cx.intent.gds else { return };
    if !cx.sure {
        return;
    }
    for mount in mounts(&cx.intent.gds_mounts) {
        let e = evaluate(cx.facts, want, &mount);
        let ev = evidence(cx.facts, &mount);
        for c in &e.open {
            // A library can be installed after the profile is applied; the rest is not its doing.
            let sev = if c.id == "gds-libcufile-missing" {
                Sev::Warn
            } else {
                Sev::Error
            };
            out.push(Finding::new(
                c.id,
                sev,
                c.what.clone(),
                ev.clone(),
                "cuFile refuses every file there (cuFileHandleRegister fails), in every mode",
                c.fix.clone(),
            ));
        }
        let sev = if want == GdsWant::AnyDirect {
            Sev::Warn
        } else {
            Sev::Error
        };
        for c in &e.direct {
            let cause = format!(
                "GDS would run in compat mode (POSIX reads through host memory), not {}",
                want.name()
            );
            out.push(Finding::new(
                c.id,
                sev,
                c.what.clone(),
                ev.clone(),
                cause,
                c.fix.clone(),
            ));
        }
        if let Some(mode) = e.possible {
            out.push(Finding::new(
                "gds-direct",
                Sev::Info,
                format!("GDS can run in {} mode on {mount}", mode.name()),
                ev.clone(),
                "nothing closes it",
                "prove it with `gdrprov bench gds --dir DIR` on that mount",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    //! The snapshot of the lent GPU machine as it is (tests/fixtures/snapshots/device-h200-gds:
    //! ext4 on virtio, no /run/udev, libcufile 1.15.1, cufile.json as CUDA 13.0 ships it, no
    //! nvidia-fs), then one fact changed per case: each mode and each cause gives its finding.
    use super::*;
    use crate::facts::gds::{Mount, NvmeController, UdevRecord};
    use crate::facts::gpu::P2pMem;
    use crate::facts::pcie::Distance;
    use crate::host::Host;
    use std::path::Path;

    fn device() -> Facts {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/snapshots/device-h200-gds");
        let host = Host::open(&root, true).unwrap();
        Facts::gather(&host, None)
    }

    fn root_mount(f: &mut Facts) -> &mut Mount {
        f.gds
            .mounts
            .iter_mut()
            .rev()
            .find(|m| m.mountpoint == "/")
            .unwrap()
    }

    fn with_udev(mut f: Facts) -> Facts {
        root_mount(&mut f).udev = Some(UdevRecord {
            fs_usage: Some("filesystem".into()),
            fs_type: Some("ext4".into()),
        });
        f
    }

    fn ids(c: &[Cause]) -> Vec<&str> {
        c.iter().map(|c| c.id).collect()
    }

    /// NVMe under the GPU's switch, nvidia-fs loaded: what a direct mode needs on this machine.
    fn nvme(mut f: Facts) -> Facts {
        let m = root_mount(&mut f);
        m.transport = Some("nvme".into());
        m.nvme_controller = Some("nvme0".into());
        f.gds.nvme.push(NvmeController {
            name: "nvme0".into(),
            pci: Some("0000:00:05.0".into()),
            numa_node: None,
            to_gpus: vec![("0000:00:06.0".into(), Distance::PHB)],
        });
        f
    }

    #[test]
    fn the_machine_as_it_is_names_the_missing_udev_record() {
        let f = device();
        assert_eq!(
            f.gds.libcufile.as_ref().and_then(|l| l.version.as_deref()),
            Some("1.15.1")
        );
        let j = &f.gds.cufile_json;
        assert!(
            j.alternatives
                && j.link_target.as_deref() == Some("/usr/local/cuda-13.0/gds/cufile.json")
        );
        assert_eq!(
            j.config.as_ref().and_then(|c| c.use_pci_p2pdma),
            Some(false)
        );
        let e = evaluate(&f, GdsWant::AnyDirect, "/");
        assert_eq!(ids(&e.open), ["gds-udev-missing"]);
        assert!(e.open[0].fix.contains("/run/udev"), "{:?}", e.open);
        assert_eq!(e.possible, None);
    }

    #[test]
    fn with_the_udev_record_compat_and_each_cause() {
        let f = with_udev(device());
        let e = evaluate(&f, GdsWant::AnyDirect, "/");
        assert!(e.open.is_empty());
        assert_eq!(
            ids(&e.direct),
            [
                "gds-not-nvme",
                "gds-cufile-json",
                "gds-p2pmem",
                "gds-nvfs-missing"
            ]
        );
        // One fact changed each.
        let mut g = f.clone();
        g.iommu.state = IommuState::Translated;
        assert!(ids(&evaluate(&g, GdsWant::Nvfs, "/").direct).contains(&"gds-iommu"));
        let mut g = f.clone();
        root_mount(&mut g).options.push("data=journal".into());
        assert!(ids(&evaluate(&g, GdsWant::Nvfs, "/").direct).contains(&"gds-mount-options"));
        let mut g = f.clone();
        root_mount(&mut g).fs = "btrfs".into();
        assert!(ids(&evaluate(&g, GdsWant::Nvfs, "/").direct).contains(&"gds-fs-unsupported"));
        let mut g = f.clone();
        g.gds.libcufile = None;
        assert_eq!(
            ids(&evaluate(&g, GdsWant::Nvfs, "/").open),
            ["gds-libcufile-missing"]
        );
        let mut g = f.clone();
        g.gds.p2pdma.kernel_config = Some(false);
        g.gds.p2pdma.nvme_multipath = Some(true);
        let d = ids(&evaluate(&g, GdsWant::P2pdma, "/").direct).join(" ");
        assert!(
            d.contains("gds-kernel-p2pdma") && d.contains("gds-nvme-multipath"),
            "{d}"
        );
        let mut g = f.clone();
        root_mount(&mut g).transport = None;
        assert_eq!(
            ids(&evaluate(&g, GdsWant::Nvfs, "/").open),
            ["gds-not-block"]
        );
    }

    /// The GPU's driver registered its BAR1 as P2P memory (what the lent H200 lacks).
    fn p2pmem(mut f: Facts) -> Facts {
        f.gpus[0].p2pmem = Some(P2pMem {
            size: Some(1 << 30),
            available: Some(1 << 30),
            published: Some(false),
        });
        f
    }

    #[test]
    fn a_gpu_without_p2p_memory_closes_p2pdma() {
        // The lent H200 as it is: the driver registered no P2P memory with the kernel.
        let f = nvme(with_udev(device()));
        assert_eq!(f.gpus[0].p2pmem, None);
        let e = evaluate(&f, GdsWant::P2pdma, "/");
        assert_eq!(ids(&e.direct), ["gds-cufile-json", "gds-p2pmem"]);
        let c = &e.direct[1];
        assert!(
            c.what
                .starts_with("GPU 0000:00:06.0 has registered no P2P memory with the kernel")
                && c.what.contains("/sys/bus/pci/devices/0000:00:06.0/p2pmem")
                && c.fix.contains("RMForceStaticBar1=1")
                && c.fix.contains("reboot"),
            "{c:?}"
        );
        // any-direct resolved to p2pdma names it too; resolved to nvfs (no P2PDMA driver), not.
        assert!(ids(&evaluate(&f, GdsWant::AnyDirect, "/").direct).contains(&"gds-p2pmem"));
        let mut g = f.clone();
        g.nvidia_driver.flavor = crate::facts::nvidia::Flavor::Proprietary;
        assert!(!ids(&evaluate(&g, GdsWant::AnyDirect, "/").direct).contains(&"gds-p2pmem"));
        // A kernel without P2PDMA: that cause is named, not this one.
        let mut g = f.clone();
        g.gds.p2pdma.kernel_config = Some(false);
        assert!(!ids(&evaluate(&g, GdsWant::P2pdma, "/").direct).contains(&"gds-p2pmem"));
        // With p2pmem: gone.
        assert_eq!(
            ids(&evaluate(&p2pmem(f), GdsWant::P2pdma, "/").direct),
            ["gds-cufile-json"]
        );
    }

    #[test]
    fn each_direct_mode_where_the_host_allows_it() {
        let mut f = p2pmem(nvme(with_udev(device())));
        f.gds.nvidia_fs.loaded = true;
        let e = evaluate(&f, GdsWant::AnyDirect, "/");
        assert_eq!((e.possible, e.direct.len()), (Some(GdsMode::Nvfs), 0));
        // P2PDMA wanted: only cufile.json stands in the way, then nothing.
        assert_eq!(
            ids(&evaluate(&f, GdsWant::P2pdma, "/").direct),
            ["gds-cufile-json"]
        );
        if let Some(c) = f.gds.cufile_json.config.as_mut() {
            c.use_pci_p2pdma = Some(true);
        }
        assert_eq!(
            evaluate(&f, GdsWant::P2pdma, "/").possible,
            Some(GdsMode::P2pdma)
        );
        // The driver's registry keys, once the driver shows its parameters (issue 46's fact).
        let mut g = f.clone();
        g.nvidia_params.source = Some("/proc/driver/nvidia/params".into());
        g.nvidia_params.registry_dwords = vec![("RMForceStaticBar1".into(), "1".into())];
        let e = evaluate(&g, GdsWant::P2pdma, "/");
        assert_eq!(ids(&e.direct), ["gds-registry"]);
        assert!(
            e.direct[0].what.contains("RmForceDisableIomapWC=1"),
            "{:?}",
            e.direct
        );
        g.nvidia_params
            .registry_dwords
            .push(("RmForceDisableIomapWC".into(), "1".into()));
        assert_eq!(
            evaluate(&g, GdsWant::P2pdma, "/").possible,
            Some(GdsMode::P2pdma)
        );
        // The drive on the other socket.
        f.gds.nvme[0].to_gpus[0].1 = Distance::SYS;
        assert!(ids(&evaluate(&f, GdsWant::P2pdma, "/").direct).contains(&"gds-across-sockets"));
    }
}
