//! Builds fixture host roots for the fact and doctor tests: sysfs trees with
//! their symlinks, PCI config space with an ACS capability, /proc files, and
//! recorded command outputs (`.gdrprov-snapshot/commands.json`) so that
//! nothing is ever run against a fixture.
#![allow(dead_code)]

use serde_json::json;
use std::path::{Path, PathBuf};

pub struct HostGen {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    commands: Vec<serde_json::Value>,
    probes: serde_json::Map<String, serde_json::Value>,
}

pub const ACS_SV: u16 = 0x01;
pub const ACS_RR: u16 = 0x04;
pub const ACS_CR: u16 = 0x08;
pub const ACS_UF: u16 = 0x10;

/// A 4096-byte config space: AER at 0x100, then ACS at 0x148 with `ctl`.
pub fn config_space(vendor: u16, device: u16, acs_ctl: Option<u16>) -> Vec<u8> {
    let mut c = vec![0u8; 4096];
    c[0..2].copy_from_slice(&vendor.to_le_bytes());
    c[2..4].copy_from_slice(&device.to_le_bytes());
    let next = if acs_ctl.is_some() { 0x148u32 } else { 0 };
    c[0x100..0x104].copy_from_slice(&(0x0001u32 | (1 << 16) | (next << 20)).to_le_bytes());
    if let Some(ctl) = acs_ctl {
        c[0x148..0x14c].copy_from_slice(&(0x000du32 | (1 << 16)).to_le_bytes());
        c[0x14c..0x14e].copy_from_slice(&0x5fu16.to_le_bytes());
        c[0x14e..0x150].copy_from_slice(&ctl.to_le_bytes());
    }
    c
}

impl HostGen {
    pub fn new() -> HostGen {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("sys/class/infiniband")).unwrap();
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        std::fs::create_dir_all(root.join("sys/kernel")).unwrap();
        let g = HostGen {
            dir,
            root,
            commands: Vec::new(),
            probes: serde_json::Map::new(),
        };
        g.file("/proc/cmdline", "BOOT_IMAGE=/vmlinuz ro quiet\n");
        g.file(
            "/proc/cpuinfo",
            "processor\t: 0\nvendor_id\t: GenuineIntel\n",
        );
        g.file("/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         unlimited            unlimited            bytes\n");
        g
    }

    pub fn file(&self, path: &str, content: impl AsRef<[u8]>) -> &Self {
        let p = self.root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        self
    }

    pub fn link(&self, path: &str, target: &str) -> &Self {
        let p = self.root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink(target, p).unwrap();
        self
    }

    pub fn dir(&self, path: &str) -> &Self {
        std::fs::create_dir_all(self.root.join(path.trim_start_matches('/'))).unwrap();
        self
    }

    pub fn ubuntu(&self, version: &str) -> &Self {
        self.file(
            "/etc/default/grub",
            "GRUB_DEFAULT=0\nGRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet splash\"\nGRUB_CMDLINE_LINUX=\"\"\n",
        );
        self.file(
            "/etc/os-release",
            format!("ID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"{version}\"\nPRETTY_NAME=\"Ubuntu {version} LTS\"\n"),
        )
    }

    pub fn kernel(&self, v: &str) -> &Self {
        self.file("/proc/sys/kernel/osrelease", format!("{v}\n"));
        self.file(&format!("/lib/modules/{v}/modules.dep"), "")
    }

    pub fn driver(&self, version: &str, open: bool) -> &Self {
        let line = if open {
            format!("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  Release Build  (dvs-builder@U16)  Tue Oct  8 2024\n")
        } else {
            format!("NVRM version: NVIDIA UNIX x86_64 Kernel Module  {version}  Thu Oct 10 20:00:00 UTC 2024\n")
        };
        self.file(
            "/proc/driver/nvidia/version",
            format!("{line}GCC version:  gcc version 12.3.0\n"),
        )
    }

    pub fn modules(&self, names: &[&str]) -> &Self {
        let text: String = names
            .iter()
            .map(|n| format!("{n} 12345 0 - Live 0x0000000000000000\n"))
            .collect();
        self.file("/proc/modules", text)
    }

    /// A PCI function at `path` (`pci0000:00/0000:00:01.0/.../0000:3b:00.0`),
    /// with every bridge on the way created as a PCI bridge.
    pub fn pci(
        &self,
        path: &str,
        vendor: u16,
        device: u16,
        class: u32,
        numa: i64,
        driver: Option<&str>,
    ) -> &Self {
        let parts: Vec<&str> = path.split('/').collect();
        for i in 1..parts.len() {
            let sub = parts[..=i].join("/");
            let addr = parts[i];
            let d = format!("/sys/devices/{sub}");
            let is_dev = i == parts.len() - 1;
            if !is_dev
                && self
                    .root
                    .join(d.trim_start_matches('/'))
                    .join("class")
                    .exists()
            {
                continue;
            }
            let (v, dv, cl) = if is_dev {
                (vendor, device, class)
            } else {
                (0x10b5, 0x8796, 0x060400)
            };
            self.file(&format!("{d}/vendor"), format!("{v:#06x}\n"));
            self.file(&format!("{d}/device"), format!("{dv:#06x}\n"));
            self.file(&format!("{d}/class"), format!("{cl:#08x}\n"));
            self.file(&format!("{d}/numa_node"), format!("{numa}\n"));
            self.file(&format!("{d}/config"), config_space(v, dv, None));
            self.link(&format!("/sys/bus/pci/devices/{addr}"), &d);
            if is_dev {
                if let Some(drv) = driver {
                    self.dir(&format!("/sys/bus/pci/drivers/{drv}"));
                    self.link(
                        &format!("{d}/driver"),
                        &format!("/sys/bus/pci/drivers/{drv}"),
                    );
                }
            }
        }
        self
    }

    /// Sets the ACS control register of a bridge created by `pci`.
    pub fn acs(&self, addr: &str, ctl: u16) -> &Self {
        let t = std::fs::read_link(self.root.join(format!("sys/bus/pci/devices/{addr}"))).unwrap();
        let dir = self.root.join(t.strip_prefix("/").unwrap());
        std::fs::write(dir.join("config"), config_space(0x10b5, 0x8796, Some(ctl))).unwrap();
        self
    }

    pub fn h100(&self, path: &str, numa: i64) -> &Self {
        self.pci(path, 0x10de, 0x2330, 0x030200, numa, Some("nvidia"))
    }

    /// An RDMA device on a PCI function (or a soft one when `pci_path` is None).
    pub fn rdma(
        &self,
        name: &str,
        pci_path: Option<&str>,
        numa: i64,
        driver: &str,
        ports: &[(&str, &str, &str, &str, u32)],
    ) -> &Self {
        let base = match pci_path {
            Some(p) => {
                let addr = p.rsplit('/').next().unwrap();
                let dev = match driver {
                    "erdma" => 0x107f,
                    _ => 0x101d,
                };
                let vendor = if driver == "erdma" { 0x1ded } else { 0x15b3 };
                self.pci(p, vendor, dev, 0x020000, numa, Some(driver));
                let _ = addr;
                format!("/sys/devices/{p}")
            }
            None => "/sys/devices/virtual".to_string(),
        };
        let ib = format!("{base}/infiniband/{name}");
        if pci_path.is_some() {
            self.link(&format!("{ib}/device"), &base);
        }
        self.link(&format!("/sys/class/infiniband/{name}"), &ib);
        for (i, (state, link_layer, rate, netdev, mtu)) in ports.iter().enumerate() {
            let pd = format!("{ib}/ports/{}", i + 1);
            let code = if *state == "ACTIVE" { 4 } else { 1 };
            self.file(&format!("{pd}/state"), format!("{code}: {state}\n"));
            self.file(
                &format!("{pd}/phys_state"),
                if *state == "ACTIVE" {
                    "5: LinkUp\n"
                } else {
                    "3: Disabled\n"
                },
            );
            self.file(&format!("{pd}/link_layer"), format!("{link_layer}\n"));
            self.file(&format!("{pd}/rate"), format!("{rate}\n"));
            if !netdev.is_empty() {
                self.file(&format!("{pd}/gid_attrs/ndevs/0"), format!("{netdev}\n"));
                self.file(&format!("/sys/class/net/{netdev}/mtu"), format!("{mtu}\n"));
                if pci_path.is_some() {
                    self.dir(&format!("{base}/net/{netdev}"));
                }
            }
        }
        self
    }

    pub fn command(&mut self, argv: &[&str], stdout: &str) -> &mut Self {
        self.commands.retain(|c| c["argv"] != json!(argv));
        self.commands
            .push(json!({"argv": argv, "code": 0, "stdout": stdout, "stderr": ""}));
        self
    }

    pub fn command_fails(&mut self, argv: &[&str], code: i32, stderr: &str) -> &mut Self {
        self.commands.retain(|c| c["argv"] != json!(argv));
        self.commands
            .push(json!({"argv": argv, "code": code, "stdout": "", "stderr": stderr}));
        self
    }

    pub fn cuda(&mut self, driver_api: &str, devices: serde_json::Value) -> &mut Self {
        self.probes.insert(
            "cuda".into(),
            json!({"driver_api": driver_api, "devices": devices, "error": null}),
        );
        self
    }

    /// Writes the recorded commands and probes; returns the root.
    pub fn finish(&self) -> &Path {
        let d = self.root.join(".gdrprov-snapshot");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(
            d.join("commands.json"),
            serde_json::to_string_pretty(&self.commands).unwrap(),
        )
        .unwrap();
        std::fs::write(
            d.join("probes.json"),
            serde_json::to_string_pretty(&self.probes).unwrap(),
        )
        .unwrap();
        &self.root
    }
}

/// A healthy H100 node: Ubuntu 22.04, kernel 5.15, open driver 575, MLNX_OFED
/// 24.10, one H100 and one ConnectX-7 behind the same PCIe switch, port ACTIVE.
pub fn h100_node(open: bool, driver: &str) -> HostGen {
    let mut g = HostGen::new();
    g.ubuntu("22.04")
        .kernel("5.15.0-119-generic")
        .driver(driver, open);
    g.modules(&[
        "nvidia",
        "nvidia_uvm",
        "mlx5_core",
        "mlx5_ib",
        "ib_uverbs",
        "ib_core",
    ]);
    let sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
    g.h100(&format!("{sw}/0000:02:08.0/0000:03:00.0"), 0);
    g.rdma(
        "mlx5_0",
        Some(&format!("{sw}/0000:02:10.0/0000:04:00.0")),
        0,
        "mlx5_core",
        &[("ACTIVE", "InfiniBand", "400 Gb/sec (4X NDR)", "ib0", 4092)],
    );
    g.dir("/sys/kernel/iommu_groups/12");
    g.file("/sys/kernel/iommu_groups/12/type", "identity\n");
    g.file(
        "/etc/default/grub",
        "GRUB_DEFAULT=0\nGRUB_TIMEOUT=0\nGRUB_CMDLINE_LINUX_DEFAULT=\"\"\nGRUB_CMDLINE_LINUX=\"iommu=pt intel_iommu=on\"\n",
    );
    g.file(
        "/usr/local/cuda-12.4/version.json",
        r#"{"cuda": {"name": "CUDA SDK", "version": "12.4.131"}}"#,
    );
    g.link("/usr/local/cuda", "/usr/local/cuda-12.4");
    g.file("/usr/lib/x86_64-linux-gnu/libnccl.so.2.23.4", "");
    g.command(&["ofed_info", "-s"], "MLNX_OFED_LINUX-24.10-3.2.5.0:\n");
    g.command(&["ib_write_bw", "--version"], " Version: 6.26\n");
    g.command(&["ib_write_bw", "--help"], "Usage:\n  --use_cuda=<cuda device id>\n  --use_cuda_dmabuf Use CUDA DMA-BUF for GPUDirect RDMA testing\n");
    let dmabuf = open;
    g.cuda(
        "12.9",
        json!([{"ordinal": 0, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:03:00.0", "compute_capability": "9.0", "dmabuf_supported": dmabuf}]),
    );
    g
}

/// A minimal PE file with these sections, one after the other (what a
/// unified kernel image looks like to a reader of its sections).
pub fn pe_file(sections: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = vec![0u8; 0x80];
    b[..2].copy_from_slice(b"MZ");
    b[0x3c..0x40].copy_from_slice(&0x40u32.to_le_bytes());
    b[0x40..0x44].copy_from_slice(b"PE\0\0");
    let coff = 0x44;
    b[coff + 2..coff + 4].copy_from_slice(&(sections.len() as u16).to_le_bytes());
    b[coff + 16..coff + 18].copy_from_slice(&0u16.to_le_bytes());
    let table = coff + 20;
    b.resize(table + 40 * sections.len(), 0);
    let mut at_data = b.len();
    let mut data = Vec::new();
    for (i, (name, body)) in sections.iter().enumerate() {
        let at = table + 40 * i;
        b[at..at + name.len()].copy_from_slice(name.as_bytes());
        let len = body.len() as u32;
        b[at + 8..at + 12].copy_from_slice(&len.to_le_bytes());
        b[at + 16..at + 20].copy_from_slice(&len.to_le_bytes());
        b[at + 20..at + 24].copy_from_slice(&(at_data as u32).to_le_bytes());
        at_data += body.len();
        data.extend_from_slice(body);
    }
    b.extend(data);
    b
}

/// The machine id of the Debian 13 UKI host.
pub const UKI_MID: &str = "5d1f0e2c3b4a49788a6b5c4d3e2f1a0b";
/// Debian 13's os-release, as ukify puts it into `.osrel`.
pub const TRIXIE_OSREL: &str = "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nVERSION=\"13 (trixie)\"\nVERSION_CODENAME=trixie\nDEBIAN_VERSION_FULL=13.2\nID=debian\n";
/// Its /etc/kernel/cmdline.
pub const UKI_ARGS: &str = "root=UUID=3c9d2e71-5a4b-4f08-b1c6-7d2e9f0a4b13 ro quiet";

impl HostGen {
    /// An EFI variable of systemd-boot's vendor GUID, as efivarfs shows it.
    pub fn loader_var(&self, name: &str, value: &str) -> &Self {
        let raw: Vec<u8> = [7u8, 0, 0, 0]
            .into_iter()
            .chain(value.encode_utf16().chain([0]).flat_map(u16::to_le_bytes))
            .collect();
        self.file(
            &format!("/sys/firmware/efi/efivars/{name}-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"),
            raw,
        )
    }

    /// A unified kernel image of kernel `v` in the ESP at /boot/efi, built
    /// from `args` as kernel-install (layout=uki) names and builds it.
    pub fn uki(&self, v: &str, args: &str) -> &Self {
        let cmdline = format!("{args} systemd.machine_id={UKI_MID}\n");
        self.file(
            &format!("/boot/efi/EFI/Linux/{UKI_MID}-{v}.efi"),
            pe_file(&[
                (".osrel", TRIXIE_OSREL.as_bytes()),
                (".cmdline", cmdline.as_bytes()),
                (".uname", v.as_bytes()),
                (".linux", b"(the kernel)"),
                (".initrd", b"(the initramfs)"),
            ]),
        )
    }
}

/// A Debian 13 (trixie) host booted by systemd-boot 257 from a unified
/// kernel image, as the real one is: `/etc/kernel/install.conf` says
/// `layout=uki`, the kernels are at `/boot/vmlinuz-VERSION` only (their
/// modules in /usr/lib/modules), the UKIs of both kernels in
/// `/boot/efi/EFI/Linux`, no type #1 entry, and the newer one runs
/// (`LoaderEntrySelected`).
pub fn debian13_uki() -> HostGen {
    let g = HostGen::new();
    let (old, new) = ("6.12.41+deb13-amd64", "6.12.57+deb13-amd64");
    g.file("/etc/os-release", TRIXIE_OSREL);
    g.file("/etc/machine-id", format!("{UKI_MID}\n"));
    g.file("/etc/kernel/install.conf", "layout=uki\n");
    g.file("/etc/kernel/cmdline", format!("{UKI_ARGS}\n"));
    for v in [old, new] {
        g.file(&format!("/boot/vmlinuz-{v}"), "(kernel)");
        g.file(&format!("/boot/initrd.img-{v}"), "(initramfs)");
        g.file(&format!("/usr/lib/modules/{v}/modules.dep"), "");
        g.uki(v, UKI_ARGS);
    }
    g.file("/boot/efi/loader/loader.conf", "timeout 0\n");
    g.file("/boot/efi/loader/random-seed", "");
    g.dir("/boot/efi/loader/entries");
    g.file("/usr/bin/kernel-install", "");
    g.file("/usr/bin/bootctl", "");
    g.file("/usr/bin/ukify", "");
    g.dir("/etc/modprobe.d");
    g.dir("/sys/firmware/efi");
    g.file("/proc/sys/kernel/osrelease", format!("{new}\n"));
    g.file(
        "/proc/cmdline",
        format!("{UKI_ARGS} systemd.machine_id={UKI_MID}\n"),
    );
    g.loader_var("LoaderInfo", "systemd-boot 257.8-1~deb13u2");
    g.loader_var("LoaderEntrySelected", &format!("{UKI_MID}-{new}.efi"));
    g
}
