//! Guard rails in profiles (issue 29, case 5) and blocked modules that other
//! files ask to load (case 7), on copies of the example roots.

use crate::common::*;
use crate::util::{gd, Root};
use std::os::unix::fs::symlink;
use std::path::Path;

fn profile(dir: &Path, name: &str, yaml: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, yaml).unwrap();
    p.display().to_string()
}

/// `args` fails with exit 1, names every word on stderr, changes nothing.
#[track_caller]
fn refused(root: &Root, args: &[&str], words: &[&str]) {
    let before = snapshot(root);
    let out = gd(root, args);
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
    for w in words {
        assert!(err.contains(w), "{args:?}: the message lacks {w:?}: {err}");
    }
    assert_eq!(snapshot(root), before, "{args:?} changed the root");
}

#[test]
fn files_may_not_target_state_boot_files_or_kernel_interfaces() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    for (path, words) in [
        (
            "/var/lib/gdrprov/state.json",
            &["gdrprov's own journal"][..],
        ),
        (
            "/etc/default/grub",
            &["GRUB's defaults", "boot.cmdline.present"],
        ),
        ("/etc/default/grub.d/99-x.cfg", &["GRUB's defaults"]),
        ("/boot/loader/entries/x.conf", &["boot loader entries"]),
        ("/etc/kernel/cmdline", &["kernel-install"]),
        (
            "/etc/modprobe.d/gdrprov-blacklist.conf",
            &["modules.present"],
        ),
        ("/proc/sys/kernel/x", &["/proc"]),
        ("/sys/module/x/parameters/y", &["sysfs"]),
        ("/dev/sda", &["device nodes"]),
    ] {
        let p = profile(
            t.path(),
            "p.yaml",
            &format!("files:\n  - path: {path}\n    content: \"x\\n\"\n"),
        );
        let mut all = vec!["files[0].path", path];
        all.extend(words);
        refused(&root, &["plan", &p], &all);
        refused(&root, &["apply", &p, "-y", "--no-exec"], &all);
        let out = gd(&root, &["profile", "validate", &p]);
        assert_eq!(out.status.code(), Some(1), "validate {path}");
    }
    // A path that leads there through a symlink is refused at plan.
    symlink("/var/lib/gdrprov", root.join("etc/gdrprov-state")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/gdrprov")).unwrap();
    let p = profile(
        t.path(),
        "link.yaml",
        "files:\n  - path: /etc/gdrprov-state/state.json\n    content: \"{}\\n\"\n",
    );
    refused(
        &root,
        &["apply", &p, "-y", "--no-exec"],
        &["files[0].path", "symlink", "gdrprov's own journal"],
    );
    // Ordinary files are still fine.
    let p = profile(
        t.path(),
        "ok.yaml",
        "files:\n  - path: /etc/gdr-ok.conf\n    content: \"x\\n\"\n",
    );
    assert!(gd(&root, &["plan", &p]).status.success());
}

/// Merged /usr (Debian 12, Ubuntu >= 21.04, RHEL 9, Fedora: /lib, /bin, /sbin
/// are links into /usr) and a state dir on other storage: a `files:` path
/// through such a link is refused at plan, naming the link and the path to
/// write, never its removal; the same at apply; the path it names plans fine.
/// Failed before the fix: plan showed the write and apply refused it.
#[test]
fn files_through_a_directory_link_are_refused_at_plan_naming_the_path_to_write() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    for d in ["usr/lib/udev/rules.d", "usr/sbin", "data/gdr"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    symlink("usr/sbin", root.join("sbin")).unwrap();
    symlink("/usr/lib/udev", root.join("etc/udev")).unwrap();
    symlink("/data/gdr", root.join("var/lib/gdrdata")).unwrap();
    for (path, link, names, write) in [
        (
            "/sbin/gdr-helper",
            "/sbin",
            "usr/sbin",
            "/usr/sbin/gdr-helper",
        ),
        (
            "/etc/udev/rules.d/99-gdr.rules",
            "/etc/udev",
            "/usr/lib/udev",
            "/usr/lib/udev/rules.d/99-gdr.rules",
        ),
        (
            "/var/lib/gdrdata/x.conf",
            "/var/lib/gdrdata",
            "/data/gdr",
            "/data/gdr/x.conf",
        ),
    ] {
        let p = profile(
            t.path(),
            "p.yaml",
            &format!("files:\n  - path: {path}\n    content: \"x\\n\"\n"),
        );
        let is_a_link = format!("{link} is a link to {names}");
        let instead = format!("write {write} instead");
        let words = ["files[0].path", path, &is_a_link, &instead];
        refused(&root, &["plan", &p], &words);
        refused(&root, &["apply", &p, "-y", "--no-exec"], &words);
        let err = stderr_of(&gd(&root, &["plan", &p]));
        assert!(!err.contains("remove it"), "{err}");
        let ok = profile(
            t.path(),
            "ok.yaml",
            &format!("files:\n  - path: {write}\n    content: \"x\\n\"\n"),
        );
        let out = gd(&root, &["plan", &ok]);
        assert!(out.status.success(), "{write}: {}", stderr_of(&out));
    }
}

#[test]
fn removing_boot_arguments_needs_saying_so() {
    let root = Root::example("ubuntu-22.04-h100");
    let t = tempfile::tempdir().unwrap();
    let p = profile(
        t.path(),
        "p.yaml",
        "boot:\n  cmdline:\n    absent: [quiet, root, ro, init]\n",
    );
    refused(
        &root,
        &["plan", &p],
        &["boot.cmdline.absent", "`root`", "allow-removing: [root]"],
    );
    let out = gd(&root, &["profile", "validate", &p]);
    assert_eq!(out.status.code(), Some(1));
    let p = profile(
        t.path(),
        "ok.yaml",
        "boot:\n  cmdline:\n    absent: [quiet, root, ro, init]\n    allow-removing: [root, ro, init]\n",
    );
    let out = gd(&root, &["plan", &p]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let p = profile(
        t.path(),
        "bad.yaml",
        "boot:\n  cmdline:\n    allow-removing: [quiet]\n",
    );
    refused(&root, &["plan", &p], &["allow-removing: `quiet`"]);
}

fn write(root: &Path, p: &str, text: &str) {
    let f = root.join(p.trim_start_matches('/'));
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, text).unwrap();
}

fn link(root: &Path, p: &str, target: &str) {
    let f = root.join(p.trim_start_matches('/'));
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    symlink(target, f).unwrap();
}

/// The root's / on an NVMe partition, the default route on an mlx5 NIC, as
/// a snapshot of a running host shows them.
pub(crate) fn boot_devices(r: &Path) {
    write(
        r,
        "/proc/self/mountinfo",
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n",
    );
    let pci = "/sys/devices/pci0000:00/0000:00:04.0";
    write(
        r,
        &format!("{pci}/nvme/nvme0/nvme0n1/nvme0n1p2/partition"),
        "2\n",
    );
    link(
        r,
        "/sys/dev/block/259:2",
        &format!("{pci}/nvme/nvme0/nvme0n1/nvme0n1p2"),
    );
    link(r, &format!("{pci}/driver"), "/sys/bus/pci/drivers/nvme");
    link(r, "/sys/bus/pci/drivers/nvme/module", "/sys/module/nvme");
    std::fs::create_dir_all(r.join("sys/module/nvme")).unwrap();
    write(
        r,
        "/proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\nens5\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\n",
    );
    let nic = "/sys/devices/pci0000:00/0000:00:05.0";
    std::fs::create_dir_all(r.join(&nic[1..]).join("net/ens5")).unwrap();
    if !r.join("sys/class/net/ens5").exists() {
        link(r, "/sys/class/net/ens5", &format!("{nic}/net/ens5"));
    }
    link(r, &format!("{nic}/net/ens5/device"), nic);
    link(r, &format!("{nic}/driver"), "/sys/bus/pci/drivers/ena");
    link(r, "/sys/bus/pci/drivers/ena/module", "/sys/module/ena");
    std::fs::create_dir_all(r.join("sys/module/ena")).unwrap();
}

#[test]
fn blocking_the_root_disk_or_boot_nic_module_needs_saying_so() {
    let root = Root::example("ubuntu-22.04-h100");
    boot_devices(&root);
    let t = tempfile::tempdir().unwrap();
    for (m, words) in [
        (
            "nvme",
            &["the disk of the root filesystem", "/ on /dev/nvme0n1p2"][..],
        ),
        (
            "ena",
            &["the network interface of the default route", "ens5"],
        ),
    ] {
        let p = profile(t.path(), "p.yaml", &format!("modules:\n  absent: [{m}]\n"));
        let mut all = vec!["modules.absent", m];
        all.extend(words);
        all.push("modules.allow-blocking");
        refused(&root, &["plan", &p], &all);
        refused(&root, &["apply", &p, "-y", "--no-exec"], &all);
        let p = profile(
            t.path(),
            "ok.yaml",
            &format!("modules:\n  absent: [{m}]\n  allow-blocking: [{m}]\n"),
        );
        let out = gd(&root, &["plan", &p]);
        assert!(out.status.success(), "{m}: {}", stderr_of(&out));
    }
    // rdma-dmabuf blocks nothing the host boots from.
    assert!(gd(&root, &["plan", "rdma-dmabuf"]).status.success());
}

#[test]
fn where_the_root_cannot_tell_a_blocked_storage_driver_is_a_warning() {
    let root = Root::example("ubuntu-22.04-h100");
    let release = std::fs::read_dir(root.join("lib/modules"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let dep = root.join("lib/modules").join(&release).join("modules.dep");
    let mut text = std::fs::read_to_string(&dep).unwrap_or_default();
    text.push_str("kernel/drivers/ata/ahci.ko:\n");
    std::fs::write(&dep, text).unwrap();
    let t = tempfile::tempdir().unwrap();
    let p = profile(t.path(), "p.yaml", "modules:\n  absent: [ahci]\n");
    let v = json_of(&gd(&root, &["plan", &p, "--format", "json"]));
    let w = v["warnings"].to_string();
    assert!(
        w.contains("`ahci` is a storage driver") && w.contains("cannot be told here"),
        "{v:#}"
    );
}

/// Case 7: rdma-dmabuf blocks nvidia_peermem while
/// /etc/modules-load.d/nvidia-peermem.conf and /etc/modules ask to load it.
#[test]
fn a_blocked_module_that_other_files_load_is_reported_and_can_be_commented_out() {
    let root = Root::example("ubuntu-22.04-h100");
    let conf = "etc/modules-load.d/nvidia-peermem.conf";
    write(&root, conf, "# loaded for GPUDirect\nnvidia-peermem\n");
    write(&root, "etc/modules", "loop\nnvidia_peermem\n");
    let pristine = without_state(snapshot(&root));

    let v = json_of(&gd(&root, &["plan", "rdma-dmabuf", "--format", "json"]));
    let w = v["warnings"].to_string();
    for at in [format!("/{conf}:2"), "/etc/modules:2".to_string()] {
        assert!(
            w.contains(&at) && w.contains("modules.remove-load-requests: true"),
            "{at}: {v:#}"
        );
    }
    let out = gd(
        &root,
        &["verify", "rdma-dmabuf", "--no-loopback", "--format", "json"],
    );
    let c = check_named(&json_of(&out), "load-requests");
    assert_eq!(c["status"], "warn", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("/{conf}:2")),
        "{c}"
    );
    let d = json_of(&gd(&root, &["doctor", "rdma-dmabuf", "--format", "json"]));
    let n = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["id"] == "load-request-blocked")
        .count();
    assert_eq!(n, 2, "{d:#}");

    // Asked to, apply comments both lines out; rollback puts them back.
    let t = tempfile::tempdir().unwrap();
    let p = profile(
        t.path(),
        "p.yaml",
        "extends: rdma-dmabuf\nmodules:\n  remove-load-requests: true\n",
    );
    let out = gd(&root, &["apply", &p, "-y", "--no-exec"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(root.join(conf)).unwrap(),
        "# loaded for GPUDirect\n# gdrprov (modules.absent): nvidia-peermem\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("etc/modules")).unwrap(),
        "loop\n# gdrprov (modules.absent): nvidia_peermem\n"
    );
    let v = json_of(&gd(&root, &["plan", &p, "--no-exec", "--format", "json"]));
    assert!(!v["warnings"].to_string().contains("asks to load"), "{v:#}");
    assert!(
        !v["changes"].to_string().contains("nvidia-peermem.conf"),
        "{v:#}"
    );
    let out = gd(&root, &["rollback", "-y", "--no-exec"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(without_state(snapshot(&root)), pristine);
}

/// Debian's kmod ships /etc/modules-load.d/modules.conf as a link to
/// `../modules`: the request in /etc/modules is found once, edited there
/// only, and the link stays a link (apply succeeds). Failed before the fix:
/// the plan also edited modules.conf through the link and apply refused it.
#[test]
fn debian_modules_conf_link_is_edited_through_etc_modules_only() {
    let root = Root::example("ubuntu-22.04-h100");
    write(&root, "etc/modules", "loop\nnvidia_peermem\n");
    std::fs::create_dir_all(root.join("etc/modules-load.d")).unwrap();
    let link = root.join("etc/modules-load.d/modules.conf");
    std::os::unix::fs::symlink("../modules", &link).unwrap();
    let v = json_of(&gd(&root, &["plan", "rdma-dmabuf", "--format", "json"]));
    let w = v["warnings"].to_string();
    assert!(w.contains("/etc/modules:2"), "{v:#}");
    assert!(!w.contains("modules.conf"), "{v:#}");
    let t = tempfile::tempdir().unwrap();
    let p = profile(
        t.path(),
        "p.yaml",
        "extends: rdma-dmabuf\nmodules:\n  remove-load-requests: true\n",
    );
    let out = gd(&root, &["apply", &p, "-y", "--no-exec"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/modules")).unwrap(),
        "loop\n# gdrprov (modules.absent): nvidia_peermem\n"
    );
    let m = std::fs::symlink_metadata(&link).unwrap();
    assert!(m.file_type().is_symlink());
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        std::path::Path::new("../modules")
    );
}

/// Issue 37: the root disk's driver blocked by another spelling than
/// `modules.absent`, on the kernel command line: the kernel's
/// `module_blacklist=`, kmod's `modprobe.blacklist=`, dracut's
/// `rd.driver.blacklist=` (one module among several, `-` for `_`): refused
/// as `modules.absent: [nvme]` is, unless `allow-blocking` names it.
#[test]
fn blocking_the_root_disk_driver_on_the_command_line_needs_saying_so() {
    let root = Root::example("ubuntu-22.04-h100");
    boot_devices(&root);
    let t = tempfile::tempdir().unwrap();
    for arg in [
        "module_blacklist=nvme",
        "modprobe.blacklist=nouveau,nvme",
        "rd.driver.blacklist=nvme",
    ] {
        let p = profile(
            t.path(),
            "p.yaml",
            &format!("boot:\n  cmdline:\n    present: [\"{arg}\"]\n"),
        );
        let words = [
            arg,
            "nvme",
            "the disk of the root filesystem",
            "modules.allow-blocking",
        ];
        refused(&root, &["plan", &p], &words);
        refused(&root, &["apply", &p, "-y", "--no-exec"], &words);
        let p = profile(
            t.path(),
            "ok.yaml",
            &format!(
                "boot:\n  cmdline:\n    present: [\"{arg}\"]\nmodules:\n  allow-blocking: [nvme]\n"
            ),
        );
        let out = gd(&root, &["plan", &p]);
        assert!(out.status.success(), "{arg}: {}", stderr_of(&out));
    }
}

/// Issue 37: `--` ends the kernel's arguments (the rest, the host's own
/// included, goes to init): refused at load, as is a blocked "module" that
/// is no module name.
#[test]
fn a_double_dash_or_a_bad_module_list_in_kernel_arguments_is_refused() {
    let t = tempfile::tempdir().unwrap();
    for (arg, word) in [
        ("--", "ends the kernel's arguments"),
        ("module_blacklist=nv/me", "not a kernel module name"),
    ] {
        let p = profile(
            t.path(),
            "p.yaml",
            &format!("boot:\n  cmdline:\n    present: [\"{arg}\"]\n"),
        );
        let out = gdrprov()
            .args(["profile", "validate", &p])
            .output()
            .unwrap();
        let err = stderr_of(&out);
        assert_eq!(out.status.code(), Some(1), "{arg}: {err}");
        assert!(
            err.contains("boot.cmdline.present") && err.contains(word),
            "{arg}: {err}"
        );
    }
}

/// Issue 37, then 43: a host whose own command line has `--` (init's
/// arguments after it). Before issue 37, `plan rdma-dmabuf` put `iommu=pt
/// intel_iommu=on` after the `--`, where the kernel hands them to init; since
/// issue 43 (one boot-line model, `gdrprov_boot::line`) they go before it.
#[test]
fn a_host_command_line_with_a_double_dash_gets_the_arguments_before_it() {
    let root = Root::example("ubuntu-22.04-h100");
    let grub = root.join("etc/default/grub");
    let text = std::fs::read_to_string(&grub).unwrap().replace(
        "GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8\"",
        "GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 -- single\"",
    );
    assert!(text.contains("-- single"));
    std::fs::write(&grub, text).unwrap();
    let out = gd(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let after = std::fs::read_to_string(&grub).unwrap();
    assert!(
        after.contains("GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on -- single\""),
        "{after}"
    );
}

/// Issue 37: one grammar for version requirements, under `requires:` and
/// `when:` alike; what it does not understand is refused in both (before,
/// `requires: { kernel: "=> 5" }` was read as `= "> 5"`).
#[test]
fn version_requirements_have_one_grammar_in_requires_and_when() {
    let t = tempfile::tempdir().unwrap();
    for spec in [
        "=> 5",
        "~> 5.4",
        "^5.12",
        ">= 5.12 foo",
        "<< 595",
        ">= 5.x || 6",
    ] {
        for yaml in [
            format!("requires:\n  kernel: \"{spec}\"\n"),
            format!("modules:\n  when: {{ kernel: \"{spec}\" }}\n  present: [rdma_ucm]\n"),
        ] {
            let p = profile(t.path(), "v.yaml", &yaml);
            let out = gdrprov()
                .args(["profile", "validate", &p])
                .output()
                .unwrap();
            let err = stderr_of(&out);
            assert_eq!(out.status.code(), Some(1), "{yaml}: {err}");
            assert!(err.contains("is not a version constraint"), "{yaml}: {err}");
        }
    }
}

/// Issue 37 (found by its audit): `--` in `boot.cmdline.absent` would
/// remove the separator from the host's command line and hand init's
/// arguments (`-- single`) to the kernel: refused at load, as in `present`.
#[test]
fn a_double_dash_to_remove_is_refused_too() {
    let t = tempfile::tempdir().unwrap();
    let p = profile(
        t.path(),
        "p.yaml",
        "boot:\n  cmdline:\n    absent: [\"--\"]\n",
    );
    let out = gdrprov()
        .args(["profile", "validate", &p])
        .output()
        .unwrap();
    let err = stderr_of(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("boot.cmdline.absent") && err.contains("the end of them"),
        "{err}"
    );
}
