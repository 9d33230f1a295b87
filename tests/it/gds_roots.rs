//! GPUDirect Storage on snapshot roots (issue 47, "Tests"): the lent H200 machine as it is
//! (tests/fixtures/snapshots/device-h200-gds: ext4 on virtio, no /run/udev, libcufile 1.15.1,
//! cufile.json as CUDA 13.0 ships it through the alternatives, no nvidia-fs), then ONE fact
//! changed per root: each mode gives its plan, each cause of compat its doctor finding, and the
//! fact itself reads as changed in `inventory`. The lent H200's GPU has no `p2pmem/` (its
//! driver registered no P2P memory with the kernel): every root that wants P2PDMA names it,
//! and the root that adds one does not.

use crate::common::{copy_tree, gdrprov, repo, stderr_of, stdout_of};
use serde_json::Value;
use std::path::Path;

const SNAP: &str = "tests/fixtures/snapshots/device-h200-gds";
const KERNEL: &str = "6.18.44-fc-v657-gpu";
const ROOT_LINE: &str =
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534";

/// One root: the fact changed, the mode asked, what doctor and plan must say.
struct Case {
    name: &'static str,
    change: fn(&Path),
    mode: &'static str,
    /// Doctor's GDS finding ids, as "severity id", sorted.
    doctor: &'static [&'static str],
    /// (JSON pointer into inventory's facts, value) proving the fact changed.
    fact: Option<(&'static str, Value)>,
    /// Ok(what the plan's text holds), Err(what the refusal says).
    plan: Result<&'static [&'static str], &'static str>,
    /// What the plan must not hold.
    not: &'static [&'static str],
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn udev(root: &Path) {
    write(
        root,
        "run/udev/data/b254:0",
        "E:ID_FS_USAGE=filesystem\nE:ID_FS_TYPE=ext4\n",
    );
}

fn mountinfo(root: &Path, from: &str, to: &str) {
    let p = root.join("proc/538/mountinfo");
    let t = std::fs::read_to_string(&p).unwrap();
    assert!(t.contains(from));
    std::fs::write(p, t.replace(from, to)).unwrap();
}

/// The lent machine has update-alternatives (dpkg); the snapshot kept no binaries. A stub
/// (not a script: no interpreter needed) is enough for planning, which runs nothing.
fn alternatives_tool(root: &Path) {
    use std::os::unix::fs::PermissionsExt;
    write(root, "usr/bin/update-alternatives", "\x7fELF stub\n");
    let p = root.join("usr/bin/update-alternatives");
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn no_alternatives_tool(root: &Path) {
    std::fs::remove_file(root.join("usr/bin/update-alternatives")).unwrap();
}

fn as_is(_: &Path) {}
fn no_p2pdma_kernel(root: &Path) {
    write(
        root,
        &format!("boot/config-{KERNEL}"),
        "# CONFIG_PCI_P2PDMA is not set\n",
    );
}
fn nvidia_fs_installed(root: &Path) {
    write(
        root,
        &format!("lib/modules/{KERNEL}/updates/dkms/nvidia-fs.ko"),
        "",
    );
}
fn cufile_p2pdma_on(root: &Path) {
    let p = root.join("usr/local/cuda-13.0/gds/cufile.json");
    let t = std::fs::read_to_string(&p).unwrap();
    std::fs::write(
        p,
        t.replace("\"use_pci_p2pdma\": false", "\"use_pci_p2pdma\": true"),
    )
    .unwrap();
}
fn no_libcufile(root: &Path) {
    let d = root.join("usr/local/cuda-13.0/targets/x86_64-linux/lib");
    for f in ["libcufile.so", "libcufile.so.0", "libcufile.so.1.15.1"] {
        std::fs::remove_file(d.join(f)).unwrap();
    }
}
fn data_journal(root: &Path) {
    mountinfo(root, ROOT_LINE, &format!("{ROOT_LINE},data=journal"));
}
fn btrfs(root: &Path) {
    mountinfo(
        root,
        ROOT_LINE,
        &ROOT_LINE.replace("- ext4 /dev/vda", "- btrfs /dev/vda"),
    );
}
/// The kernel's `p2pmem/` under the GPU's PCI function, as pci_p2pdma_add_resource makes it
/// when the driver registers BAR1 (32 GiB on the H200) as P2P memory.
fn p2pmem(root: &Path) {
    let dir = "sys/devices/pci0000:00/0000:00:06.0/p2pmem";
    write(root, &format!("{dir}/size"), "34359738368\n");
    write(root, &format!("{dir}/available"), "34359738368\n");
    write(root, &format!("{dir}/published"), "0\n");
}
fn nvme_multipath(root: &Path) {
    write(root, "sys/module/nvme_core/parameters/multipath", "Y\n");
}
fn registry_unset(root: &Path) {
    write(
        root,
        "proc/driver/nvidia/params",
        "EnableMSI: 1\nRegistryDwords: \"\"\n",
    );
}
fn registry_elsewhere(root: &Path) {
    write(
        root,
        "etc/modprobe.d/nvidia.conf",
        "options nvidia NVreg_RegistryDwords=\"RmFoo=2\"\n",
    );
}

/// The plan of the lent machine's P2PDMA setup (any-direct and p2pdma alike).
const P2PDMA_PLAN: &[&str] = &[
    "gdrprov's key properties.use_pci_p2pdma: false -> true",
    "update-alternatives --install /etc/cufile.json cufile.json /etc/gdrprov/cufile.json 1000",
    "+options nvidia NVreg_RegistryDwords=\"RMForceStaticBar1=1;RmForceDisableIomapWC=1\"",
];

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "the lent machine as it is, any-direct",
            change: as_is,
            mode: "any-direct",
            doctor: &["error gds-udev-missing", "warn gds-cufile-json", "warn gds-not-nvme", "warn gds-nvfs-missing", "warn gds-p2pmem"],
            fact: Some(("/gds/cufile_json/alternatives", Value::Bool(true))),
            plan: Ok(P2PDMA_PLAN),
            not: &["modules-load.d"],
        },
        Case {
            name: "no update-alternatives in the root: never written through the link",
            change: no_alternatives_tool,
            mode: "any-direct",
            doctor: &["error gds-udev-missing", "warn gds-cufile-json", "warn gds-not-nvme", "warn gds-nvfs-missing", "warn gds-p2pmem"],
            fact: None,
            plan: Ok(&["but this root has no update-alternatives (or alternatives): gdrprov does not write through the link"]),
            not: &["cufile.json alternative (priority"],
        },
        Case {
            name: "udev record present (compat: virtio, cufile.json, no nvidia-fs)",
            change: udev,
            mode: "any-direct",
            doctor: &["warn gds-cufile-json", "warn gds-not-nvme", "warn gds-nvfs-missing", "warn gds-p2pmem"],
            fact: Some(("/gds/mounts/5/udev/fs_usage", Value::from("filesystem"))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "mode p2pdma",
            change: udev,
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-not-nvme", "error gds-p2pmem"],
            fact: Some(("/gpus/0/p2pmem", Value::Null)),
            plan: Ok(P2PDMA_PLAN),
            not: &["modules-load.d"],
        },
        Case {
            name: "the GPU registered P2P memory with the kernel (p2pmem): that cause goes",
            change: |r| {
                udev(r);
                p2pmem(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-not-nvme"],
            fact: Some(("/gpus/0/p2pmem/size", Value::from(34_359_738_368u64))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "any-direct, the GPU with p2pmem",
            change: |r| {
                udev(r);
                p2pmem(r)
            },
            mode: "any-direct",
            doctor: &["warn gds-cufile-json", "warn gds-not-nvme", "warn gds-nvfs-missing"],
            fact: Some(("/gpus/0/p2pmem/published", Value::Bool(false))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "mode nvfs without nvidia-fs",
            change: udev,
            mode: "nvfs",
            doctor: &["error gds-not-nvme", "error gds-nvfs-missing"],
            fact: Some(("/gds/nvidia_fs/present", Value::Bool(false))),
            plan: Err("asks for `gds: { mode: nvfs }`, but nvidia-fs is not installed"),
            not: &[],
        },
        Case {
            name: "mode nvfs with nvidia-fs installed",
            change: |r| {
                udev(r);
                nvidia_fs_installed(r)
            },
            mode: "nvfs",
            doctor: &["error gds-not-nvme", "error gds-nvfs-missing"],
            fact: Some(("/gds/nvidia_fs/present", Value::Bool(true))),
            plan: Ok(&["Create /etc/modules-load.d/gdrprov-gds.conf", "+nvidia-fs"]),
            not: &["RegistryDwords", "use_pci_p2pdma"],
        },
        Case {
            name: "a kernel without CONFIG_PCI_P2PDMA, any-direct: nvfs, which is missing",
            change: no_p2pdma_kernel,
            mode: "any-direct",
            doctor: &["error gds-udev-missing", "warn gds-cufile-json", "warn gds-kernel-p2pdma", "warn gds-not-nvme", "warn gds-nvfs-missing"],
            fact: Some(("/gds/p2pdma/kernel_config", Value::Bool(false))),
            plan: Ok(&["P2PDMA cannot run here and nvidia-fs is not installed"]),
            not: &["RegistryDwords=", "cufile.json alternative"],
        },
        Case {
            name: "a kernel without CONFIG_PCI_P2PDMA, p2pdma: refused",
            change: no_p2pdma_kernel,
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-kernel-p2pdma", "error gds-not-nvme", "error gds-udev-missing"],
            fact: None,
            plan: Err("a kernel built with CONFIG_PCI_P2PDMA"),
            not: &[],
        },
        Case {
            name: "cufile.json already allows P2PDMA",
            change: |r| {
                udev(r);
                cufile_p2pdma_on(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-not-nvme", "error gds-p2pmem"],
            fact: Some(("/gds/cufile_json/config/use_pci_p2pdma", Value::Bool(true))),
            plan: Ok(&["RMForceStaticBar1=1"]),
            not: &["cufile.json"],
        },
        Case {
            name: "libcufile missing",
            change: |r| {
                udev(r);
                no_libcufile(r)
            },
            mode: "any-direct",
            doctor: &["warn gds-cufile-json", "warn gds-libcufile-missing", "warn gds-not-nvme", "warn gds-nvfs-missing", "warn gds-p2pmem"],
            fact: Some(("/gds/libcufile", Value::Null)),
            plan: Ok(&["RMForceStaticBar1=1"]),
            not: &[],
        },
        Case {
            name: "ext4 with data=journal",
            change: |r| {
                udev(r);
                data_journal(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-mount-options", "error gds-not-nvme", "error gds-p2pmem"],
            fact: None,
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "btrfs",
            change: |r| {
                udev(r);
                btrfs(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-fs-unsupported", "error gds-not-nvme", "error gds-p2pmem"],
            fact: Some(("/gds/mounts/5/fs", Value::from("btrfs"))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "NVMe multipath on",
            change: |r| {
                udev(r);
                nvme_multipath(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-not-nvme", "error gds-nvme-multipath", "error gds-p2pmem"],
            fact: Some(("/gds/p2pdma/nvme_multipath", Value::Bool(true))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "the running driver without P2PDMA's registry keys",
            change: |r| {
                udev(r);
                registry_unset(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-not-nvme", "error gds-p2pmem", "error gds-registry"],
            fact: Some(("/nvidia_params/source", Value::from("/proc/driver/nvidia/params"))),
            plan: Ok(P2PDMA_PLAN),
            not: &[],
        },
        Case {
            name: "NVreg_RegistryDwords set elsewhere: merged",
            change: |r| {
                udev(r);
                registry_elsewhere(r)
            },
            mode: "p2pdma",
            doctor: &["error gds-cufile-json", "error gds-not-nvme", "error gds-p2pmem"],
            fact: Some(("/nvidia_params/module_options/0/value", Value::from("RmFoo=2"))),
            plan: Ok(&["+options nvidia NVreg_RegistryDwords=\"RmFoo=2;RMForceStaticBar1=1;RmForceDisableIomapWC=1\""]),
            not: &[],
        },
    ]
}

fn json(root: &Path, args: &[&str]) -> Value {
    let out = gdrprov()
        .args(["--format", "json"])
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}{}", stdout_of(&out), stderr_of(&out)))
}

fn gds_findings(report: &Value) -> Vec<String> {
    let mut v: Vec<String> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"].as_str().unwrap().starts_with("gds-"))
        .filter(|f| f["id"] != "gds-direct")
        .map(|f| {
            format!(
                "{} {}",
                f["severity"].as_str().unwrap(),
                f["id"].as_str().unwrap()
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn each_mode_and_each_cause_gives_its_plan_and_finding() {
    let mut failed = Vec::new();
    for c in cases() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("root");
        copy_tree(&repo().join(SNAP), &root);
        alternatives_tool(&root);
        (c.change)(&root);
        let profile = t.path().join("gds.yaml");
        std::fs::write(&profile, format!("name: gds-t\ngds:\n  mode: {}\n", c.mode)).unwrap();
        let profile = profile.display().to_string();
        if let Some((ptr, want)) = &c.fact {
            let inv = json(&root, &["inventory"]);
            let got = inv["facts"].pointer(ptr).cloned().unwrap_or(Value::Null);
            if &got != want {
                failed.push(format!("{}: fact {ptr} is {got}, not {want}", c.name));
            }
        }
        let doc = gds_findings(&json(&root, &["doctor", &profile]));
        if doc != c.doctor {
            failed.push(format!(
                "{}: doctor says {doc:?}, not {:?}",
                c.name, c.doctor
            ));
        }
        let out = gdrprov()
            .args(["plan", &profile, "--full-diff", "--root"])
            .arg(&root)
            .output()
            .unwrap();
        let text = format!("{}{}", stdout_of(&out), stderr_of(&out));
        match c.plan {
            Ok(holds) => {
                if !out.status.success() {
                    failed.push(format!("{}: plan failed: {text}", c.name));
                }
                for h in holds.iter().filter(|h| !text.contains(*h)) {
                    failed.push(format!("{}: plan lacks {h:?}:\n{text}", c.name));
                }
            }
            Err(why) => {
                if out.status.code() != Some(1) || !text.contains(why) {
                    failed.push(format!(
                        "{}: plan not refused with {why:?}:\n{text}",
                        c.name
                    ));
                }
            }
        }
        for n in c.not.iter().filter(|n| text.contains(*n)) {
            failed.push(format!("{}: plan holds {n:?}:\n{text}", c.name));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// The kernel's P2PDMA view of the GPU (`p2pmem/`) is a fact of the root: inventory says it per
/// GPU, `inventory --snapshot` keeps its files, and the snapshot reads the same.
#[test]
fn the_gpus_p2p_memory_is_read_said_and_kept_by_a_snapshot() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join(SNAP), &root);
    let text = |root: &Path| {
        let out = gdrprov()
            .arg("inventory")
            .arg("--root")
            .arg(root)
            .output()
            .unwrap();
        stdout_of(&out)
    };
    let none =
        "P2PDMA memory (kernel): none registered (no /sys/bus/pci/devices/0000:00:06.0/p2pmem)";
    assert!(text(&root).contains(none), "{}", text(&root));
    p2pmem(&root);
    let with = "P2PDMA memory (kernel): 32 GiB registered, 32 GiB available, not published";
    assert!(text(&root).contains(with), "{}", text(&root));
    let snap = t.path().join("snap");
    let out = gdrprov()
        .args(["inventory", "--snapshot"])
        .arg(&snap)
        .arg("--root")
        .arg(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    for f in ["size", "available", "published"] {
        let p = snap
            .join("sys/devices/pci0000:00/0000:00:06.0/p2pmem")
            .join(f);
        assert!(p.is_file(), "{} not kept", p.display());
    }
    assert!(text(&snap).contains(with), "{}", text(&snap));
    assert_eq!(
        json(&snap, &["inventory"])["facts"]["gpus"][0]["p2pmem"],
        serde_json::json!({"size": 34_359_738_368u64, "available": 34_359_738_368u64, "published": false})
    );
}
