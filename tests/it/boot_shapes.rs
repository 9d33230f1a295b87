//! Boot shapes besides GRUB's defaults. First: a host whose kernel command
//! line is set outside it. The roots are `inventory --snapshot`s of the test
//! devices, `tests/fixtures/snapshots/device-h100` (the H100 test machine)
//! and `device-h200` (Ubuntu 24.04, kernel booted directly by Firecracker, no
//! boot loader, no /etc/default/grub).

use crate::common::*;
use crate::util::*;
use std::path::Path;

const BUILTINS: [&str; 4] = [
    "rdma-dmabuf",
    "legacy-peermem",
    "gds-iommu-off",
    "erdma-cloud",
];

const DEVICES: [&str; 2] = ["device-h100", "device-h200"];

fn direct_boot_root() -> (tempfile::TempDir, std::path::PathBuf) {
    device_root("device-h200")
}

fn device_root(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    copy_tree(&repo().join("tests/fixtures/snapshots").join(name), &root);
    // Directories every Ubuntu has, which the snapshot did not record (no
    // probe reads them); rollback leaves the directories apply created.
    for d in ["etc/modprobe.d", "etc/modules-load.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    (t, root)
}

fn run(root: &Path, args: &[&str]) -> std::process::Output {
    let mut c = gdrprov();
    c.args(args).arg("--root").arg(root);
    c.output().unwrap()
}

#[test]
fn every_builtin_profile_gets_a_report_not_an_error() {
    for dev in DEVICES {
        every_builtin_profile_on(dev);
    }
}

fn every_builtin_profile_on(dev: &str) {
    let (_t, root) = device_root(dev);
    let pristine = snapshot(&root);
    for p in BUILTINS {
        let out = run(&root, &["plan", p, "--force", "--format", "json"]);
        assert_eq!(out.status.code(), Some(0), "plan {p}: {}", stderr_of(&out));
        let plan = json_of(&out);
        let has_boot = matches!(p, "rdma-dmabuf" | "gds-iommu-off");
        assert_eq!(
            plan["boot"]["manageable"] == false,
            has_boot,
            "plan {p}: {plan:#}"
        );
        if has_boot {
            assert_eq!(plan["boot"]["starter"], "hypervisor", "{p}");
            assert_eq!(plan["boot"]["satisfied"], false, "{p}");
        }

        let out = run(&root, &["doctor", p, "--format", "json"]);
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "doctor {p}: {}",
            stderr_of(&out)
        );
        let doc = json_of(&out).to_string();
        assert_eq!(
            doc.contains("\"boot-elsewhere\""),
            has_boot,
            "doctor {p}: {doc}"
        );

        let out = run(&root, &["verify", p, "--no-loopback", "--format", "json"]);
        assert_eq!(
            out.status.code(),
            Some(3),
            "verify {p}: {}",
            stderr_of(&out)
        );
        let v = json_of(&out);
        for name in [
            "requirements",
            "configuration",
            "mtu",
            "acs",
            "reboot",
            "modules",
        ] {
            check_named(&v, name);
        }
        if has_boot {
            let b = check_named(&v, "boot");
            assert_eq!(b["status"], "fail", "{p}: {b}");
            assert!(
                b["detail"]
                    .as_str()
                    .unwrap()
                    .contains("hypervisor's kernel arguments"),
                "{b}"
            );
        }
    }
    assert_same(&snapshot(&root), &pristine, "plan, doctor and verify");
}

#[test]
fn apply_without_the_boot_part_needs_the_flag_and_rolls_back_byte_for_byte() {
    for dev in DEVICES {
        apply_on(dev);
    }
}

fn apply_on(dev: &str) {
    let (_t, root) = device_root(dev);
    let pristine = snapshot(&root);
    for p in BUILTINS {
        if matches!(p, "rdma-dmabuf" | "gds-iommu-off") {
            let before = snapshot(&root);
            let out = run(&root, &["apply", p, "-y", "--no-exec", "--force"]);
            assert_eq!(out.status.code(), Some(1), "{p}");
            let err = stderr_of(&out);
            assert!(
                err.contains("not manageable on this host") && err.contains("--boot-elsewhere"),
                "{err}"
            );
            assert_same(&snapshot(&root), &before, "refused apply");
        }
        let out = run(
            &root,
            &[
                "apply",
                p,
                "-y",
                "--no-exec",
                "--force",
                "--boot-elsewhere",
                "--format",
                "json",
            ],
        );
        assert_eq!(out.status.code(), Some(0), "{p}: {}", stderr_of(&out));
        let report = json_of(&out);
        // gds-iommu-off writes only its GDS mode's files (issue 47: cufile.json, the driver's
        // RegistryDwords or nvidia-fs), where the snapshot has what they need.
        if p != "gds-iommu-off" {
            assert_eq!(report["changed"], true, "{p}: {report:#}");
        }
        // Nothing of the boot part was recorded as owned.
        let state = std::fs::read_to_string(root.join("var/lib/gdrprov/state.json")).unwrap();
        let state: serde_json::Value = serde_json::from_str(&state).unwrap();
        assert!(
            state["kernel_args"].as_array().is_none_or(|a| a.is_empty()),
            "{state:#}"
        );
        // The files match; only the command line is owed, and says so.
        let out = run(&root, &["plan", p, "--force", "--detailed-exitcode"]);
        let want = if matches!(p, "rdma-dmabuf" | "gds-iommu-off") {
            4
        } else {
            0
        };
        assert_eq!(out.status.code(), Some(want), "{p}: {}", stdout_of(&out));
        if report["changed"] == true {
            let out = run(&root, &["rollback", "-y", "--no-exec"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        }
        assert_same(
            &without_state(snapshot(&root)),
            &without_state(pristine.clone()),
            &format!("rollback of {p}"),
        );
    }
}

#[test]
fn a_command_line_already_set_elsewhere_passes() {
    let (_t, root) = direct_boot_root();
    let cmdline = root.join("proc/cmdline");
    let line = std::fs::read_to_string(&cmdline).unwrap();
    std::fs::write(&cmdline, format!("iommu=pt intel_iommu=on {line}")).unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf", "--format", "json"]);
    assert_eq!(json_of(&out)["boot"]["satisfied"], true);
    // No flag needed: nothing of the boot part is owed.
    let out = run(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = json_of(&run(
        &root,
        &["verify", "rdma-dmabuf", "--no-loopback", "--format", "json"],
    ));
    assert_eq!(check_named(&v, "boot")["status"], "pass", "{v:#}");
    assert_eq!(check_named(&v, "configuration")["status"], "pass", "{v:#}");
    // gds wants the opposite: iommu=pt must go, and verify says where.
    let v = json_of(&run(
        &root,
        &[
            "verify",
            "gds-iommu-off",
            "--no-loopback",
            "--format",
            "json",
        ],
    ));
    let b = check_named(&v, "boot");
    assert!(
        b["detail"].as_str().unwrap().contains("remove iommu=pt"),
        "{b}"
    );
}

#[test]
fn boot_entries_and_trial_are_refused_on_such_a_host() {
    let (t, root) = direct_boot_root();
    let p = t.path().join("p.yaml");
    std::fs::write(&p, "boot:\n  iommu: \"off\"\n  entry: gds\n").unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf", p.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("boot.entry (gds)"),
        "{}",
        stderr_of(&out)
    );
    let out = run(&root, &["apply", "rdma-dmabuf", "--trial", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("--trial"), "{}", stderr_of(&out));
}

#[test]
fn verify_reports_every_check_when_the_grub_defaults_cannot_be_read() {
    let root = Root::example("ubuntu-22.04-h100");
    let grub = root.join("etc/default/grub");
    let mut text = std::fs::read(&grub).unwrap();
    text.extend_from_slice(b"GRUB_X=\"a\0b\"\n");
    std::fs::write(&grub, text).unwrap();
    let out = run(
        &root,
        &["verify", "rdma-dmabuf", "--no-loopback", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr_of(&out));
    let v = json_of(&out);
    let c = check_named(&v, "configuration");
    assert_eq!(c["status"], "fail");
    assert!(c["detail"].as_str().unwrap().contains("NUL byte"), "{c}");
    for name in [
        "requirements",
        "mtu",
        "acs",
        "reboot",
        "modules",
        "loopback",
    ] {
        check_named(&v, name);
    }
}

// ---- arm64: an Ubuntu 24.04 GH200 (Grace Hopper) root with GRUB for EFI ----

fn grub_args(root: &Path) -> String {
    let text = std::fs::read_to_string(root.join("etc/default/grub")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("GRUB_CMDLINE_LINUX="))
        .unwrap()
        .trim_matches('"')
        .to_string()
}

#[test]
fn grace_facts_and_doctor_read_the_arm64_root() {
    let root = Root::example("ubuntu-24.04-gh200");
    let inv = json_of(&run(&root, &["inventory", "--format", "json"]));
    let f = if inv["facts"].is_object() {
        &inv["facts"]
    } else {
        &inv
    };
    assert_eq!(f["arch"]["arch"], "aarch64", "{:#}", f["arch"]);
    assert_eq!(f["arch"]["cpu"], "Arm Neoverse-V2 (NVIDIA Grace)");
    assert_eq!(f["gpus"][0]["name"], "NVIDIA GH200 480GB");
    assert_eq!(f["gpus"][0]["arch"], "hopper");
    // Found under /usr/lib/aarch64-linux-gnu.
    assert_eq!(f["nccl"]["version"], "2.23.4");
    let out = run(&root, &["doctor", "rdma-dmabuf"]);
    let text = stdout_of(&out);
    assert!(
        text.contains("(aarch64, Arm Neoverse-V2 (NVIDIA Grace))"),
        "{text}"
    );
}

#[test]
fn grace_gets_iommu_passthrough_1_and_rolls_back_byte_for_byte() {
    let root = Root::example("ubuntu-24.04-gh200");
    let pristine = snapshot(&root);
    let out = run(&root, &["apply", "rdma-dmabuf", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        grub_args(&root),
        "console=ttyAMA0,115200n8 init_on_alloc=0 iommu.passthrough=1"
    );
    // GDS on Grace: translation on, passthrough off; the argument gdrprov
    // added for rdma-dmabuf goes, the user's stay.
    let out = run(&root, &["apply", "gds-iommu-off", "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        stdout_of(&out).contains("`boot.iommu: off` is `iommu.passthrough=0`"),
        "{}",
        stdout_of(&out)
    );
    assert_eq!(
        grub_args(&root),
        "console=ttyAMA0,115200n8 init_on_alloc=0 iommu.passthrough=0"
    );
    for _ in 0..2 {
        let out = run(&root, &["rollback", "-y", "--no-exec"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    }
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of both applies",
    );
}

#[test]
fn grace_refuses_unsafe_and_contradictory_arguments_unchanged() {
    let (t, root) = example_root("ubuntu-24.04-gh200");
    let before = snapshot(&root);
    for (yaml, why) in [
        (
            "boot:\n  cmdline:\n    present: [\"x=$(reboot)\"]\n",
            "dollar sign",
        ),
        (
            "boot:\n  iommu: passthrough\n  cmdline:\n    present: [iommu.passthrough=0]\n",
            "iommu.passthrough=0",
        ),
    ] {
        let p = t.path().join("p.yaml");
        std::fs::write(&p, yaml).unwrap();
        let out = run(&root, &["apply", p.to_str().unwrap(), "-y", "--no-exec"]);
        assert_eq!(out.status.code(), Some(1), "{yaml}");
        assert!(stderr_of(&out).contains(why), "{}", stderr_of(&out));
        assert_same(&snapshot(&root), &before, yaml);
    }
}

#[test]
fn arch_override_for_an_image_whose_root_cannot_tell() {
    let root = Root::example("ubuntu-22.04-h100");
    std::fs::remove_file(root.join("proc/cpuinfo")).unwrap();
    let out = run(&root, &["plan", "rdma-dmabuf"]);
    let text = stdout_of(&out);
    assert!(
        text.contains(
            "+GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 iommu=pt intel_iommu=on\""
        ) && text.contains("--arch aarch64"),
        "{text}"
    );
    let out = run(&root, &["plan", "rdma-dmabuf", "--arch", "arm64"]);
    let text = stdout_of(&out);
    assert!(
        text.contains(
            "+GRUB_CMDLINE_LINUX=\"console=tty1 console=ttyS0,115200n8 iommu.passthrough=1\""
        ) && !text.contains("CPU vendor is unknown"),
        "{text}"
    );
    // An x86 vendor that is neither Intel nor AMD is said, not guessed silently.
    let out = run(&root, &["plan", "rdma-dmabuf", "--cpu-vendor", "other"]);
    assert!(
        stdout_of(&out).contains("neither GenuineIntel nor AuthenticAMD"),
        "{}",
        stdout_of(&out)
    );
}

// ---- systemd-boot with kernel-install; ESP at /boot/efi or /efi; UKIs ----

pub(crate) const MID: &str = "4f1c0a2b9d8e4c7f8a6b5c4d3e2f1a0b";
pub(crate) const ROOT_ARGS: &str = "root=UUID=0c5d6e7f-8a9b-4c1d-9e2f-3a4b5c6d7e8f ro quiet";

pub(crate) fn put(root: &Path, path: &str, content: &str) {
    let p = root.join(path.trim_start_matches('/'));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
}

/// A systemd-boot root as `bootctl install` + kernel-install leave it: the
/// ESP at `esp`, one type #1 entry per kernel, /etc/kernel/cmdline when
/// `kernel_cmdline` (Fedora, Arch) and not (Debian's default).
pub(crate) fn sdboot_root(
    esp: &str,
    kernel_cmdline: bool,
) -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    put(&root, "/etc/os-release", "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nID=debian\n");
    put(&root, "/etc/machine-id", &format!("{MID}\n"));
    put(
        &root,
        "/proc/cpuinfo",
        "processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n",
    );
    put(
        &root,
        &format!("{esp}/loader/loader.conf"),
        "timeout 3\n#console-mode keep\n",
    );
    for k in ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"] {
        put(
            &root,
            &format!("{esp}/loader/entries/{MID}-{k}.conf"),
            &format!("# Boot Loader Specification type#1 entry\n# File created by /usr/lib/kernel/install.d/90-loaderentry.install (systemd 257.8-1~deb13u2)\ntitle      Debian GNU/Linux 13 (trixie)\nversion    {k}\nmachine-id {MID}\nsort-key   debian\noptions    {ROOT_ARGS} systemd.machine_id={MID}\nlinux      /{MID}/{k}/linux\ninitrd     /{MID}/{k}/initrd.img-{k}\n"),
        );
    }
    put(&root, "/proc/cmdline", &format!("initrd=\\{MID}\\6.12.43+deb13-amd64\\initrd.img-6.12.43+deb13-amd64 {ROOT_ARGS} systemd.machine_id={MID}\n"));
    if kernel_cmdline {
        put(&root, "/etc/kernel/cmdline", &format!("{ROOT_ARGS}\n"));
    }
    // Directories every such install has (rollback leaves the ones apply made).
    for d in ["etc/kernel/postinst.d", "etc/modprobe.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    put(&root, "/usr/bin/bootctl", "");
    put(&root, "/usr/bin/kernel-install", "");
    (t, root)
}

fn entry(root: &Path, esp: &str, k: &str) -> String {
    std::fs::read_to_string(root.join(format!(
        "{}/loader/entries/{MID}-{k}.conf",
        esp.trim_start_matches('/')
    )))
    .unwrap()
}

#[test]
fn systemd_boot_edits_kernel_cmdline_and_entries_and_rolls_back() {
    for (esp, kc) in [("/boot/efi", false), ("/efi", true), ("/boot", true)] {
        let (_t, root) = sdboot_root(esp, kc);
        let pristine = snapshot(&root);
        let out = run(
            &root,
            &["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"],
        );
        assert_eq!(out.status.code(), Some(0), "{esp}: {}", stderr_of(&out));
        let kernel_cmdline = std::fs::read_to_string(root.join("etc/kernel/cmdline")).unwrap();
        // From the running line when the file was absent (kernel-install's
        // own fallback), without systemd-boot's initrd=.
        let want = if kc {
            format!("{ROOT_ARGS} iommu=pt intel_iommu=on\n")
        } else {
            format!("{ROOT_ARGS} systemd.machine_id={MID} iommu=pt intel_iommu=on\n")
        };
        assert_eq!(kernel_cmdline, want, "{esp}");
        // The entries as kernel-install writes them from that file: the
        // machine id last where the file has none, else where the file has
        // it (a power cut before kernel-install's own rewrite boots the same).
        let opts = if kc {
            format!("{ROOT_ARGS} iommu=pt intel_iommu=on systemd.machine_id={MID}")
        } else {
            format!("{ROOT_ARGS} systemd.machine_id={MID} iommu=pt intel_iommu=on")
        };
        for k in ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"] {
            assert!(
                entry(&root, esp, k).contains(&format!("options    {opts}\nlinux")),
                "{esp} {k}: {}",
                entry(&root, esp, k)
            );
        }
        // Compliant now: nothing more to do.
        let out = run(
            &root,
            &["plan", "rdma-dmabuf", "--force", "--detailed-exitcode"],
        );
        assert_eq!(out.status.code(), Some(0), "{esp}: {}", stdout_of(&out));
        // gds: the arguments gdrprov added go; iommu=off comes.
        let out = run(
            &root,
            &["apply", "gds-iommu-off", "-y", "--no-exec", "--force"],
        );
        assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        let e = entry(&root, esp, "6.12.43+deb13-amd64");
        let opts = if kc {
            format!("{ROOT_ARGS} iommu=off systemd.machine_id={MID}")
        } else {
            format!("{ROOT_ARGS} systemd.machine_id={MID} iommu=off")
        };
        assert!(e.contains(&format!("options    {opts}\n")), "{e}");
        for _ in 0..2 {
            let out = run(&root, &["rollback", "-y", "--no-exec"]);
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
        }
        assert_same(
            &without_state(snapshot(&root)),
            &without_state(pristine),
            &format!("rollback on ESP {esp}"),
        );
    }
}

#[test]
fn systemd_boot_keeps_the_users_arguments() {
    let (_t, root) = sdboot_root("/efi", true);
    put(
        &root,
        "/etc/kernel/cmdline",
        &format!("{ROOT_ARGS} iommu=pt mitigations=off\n"),
    );
    let out = run(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    // The user's iommu=pt satisfies the profile; gdrprov adds only intel_iommu=on.
    assert_eq!(
        std::fs::read_to_string(root.join("etc/kernel/cmdline")).unwrap(),
        format!("{ROOT_ARGS} iommu=pt mitigations=off intel_iommu=on\n")
    );
    // Dropping boot: gdrprov removes only what it added.
    let out = run(
        &root,
        &["apply", "legacy-peermem", "-y", "--no-exec", "--force"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("etc/kernel/cmdline")).unwrap(),
        format!("{ROOT_ARGS} iommu=pt mitigations=off\n")
    );
}

#[test]
fn uki_is_rebuilt_by_kernel_install_or_refused_with_the_reason() {
    let (_t, root) = sdboot_root("/efi", true);
    for e in std::fs::read_dir(root.join("efi/loader/entries")).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    put(
        &root,
        &format!("/efi/EFI/Linux/{MID}-6.12.43+deb13-amd64.efi"),
        "MZ (a UKI)",
    );
    put(&root, "/usr/lib/modules/6.12.43+deb13-amd64/vmlinuz", "");
    // Not built by kernel-install: refused, nothing changed.
    let before = snapshot(&root);
    let out = run(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--no-exec", "--force"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("carry their kernel command line inside") && err.contains("layout=uki"),
        "{err}"
    );
    assert_same(&snapshot(&root), &before, "refused UKI apply");
    // layout=uki: kernel-install rebuilds it from /etc/kernel/cmdline.
    put(
        &root,
        "/etc/kernel/install.conf",
        "layout=uki\nuki_generator=ukify\n",
    );
    let out = run(
        &root,
        &[
            "apply",
            "rdma-dmabuf",
            "-y",
            "--no-exec",
            "--force",
            "--format",
            "json",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let pending = json_of(&out)["pending_commands"].to_string();
    assert!(
        pending.contains(
            r#""kernel-install","add","6.12.43+deb13-amd64","/usr/lib/modules/6.12.43+deb13-amd64/vmlinuz""#
        ),
        "{pending}"
    );
}

#[test]
fn systemd_boot_extra_entries_sort_after_the_kernels_and_roll_back() {
    let (t, root) = sdboot_root("/efi", true);
    let pristine = snapshot(&root);
    let base = t.path().join("base.yaml");
    std::fs::write(&base, "boot:\n  iommu: passthrough\n").unwrap();
    let p = t.path().join("gds.yaml");
    std::fs::write(&p, "boot:\n  iommu: \"off\"\n  entry: gds\n").unwrap();
    let (base, p) = (base.to_str().unwrap(), p.to_str().unwrap());
    let out = run(&root, &["apply", base, p, "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let new = "6.12.43+deb13-amd64";
    let gds =
        std::fs::read_to_string(root.join(format!("efi/loader/entries/{MID}-gdrprov-gds.conf")))
            .unwrap();
    // A copy of the default (newest) entry: its kernel, version and sort
    // key, its own title and options.
    assert!(
        gds.contains(&format!("\nlinux      /{MID}/{new}/linux\n")),
        "{gds}"
    );
    assert!(gds.contains(&format!("\nversion    {new}\n")), "{gds}");
    assert!(gds.contains("\nsort-key   debian\n"), "{gds}");
    assert!(gds.contains("(gdrprov gds)"), "{gds}");
    let opts = gds.lines().find(|l| l.starts_with("options")).unwrap();
    assert!(
        opts.contains(" iommu=off") && !opts.contains("iommu=pt"),
        "{opts}"
    );
    assert!(
        opts.contains(&format!("systemd.machine_id={MID}")),
        "{opts}"
    );
    // The kernels' entries get the profile's own arguments, not the extra's.
    assert!(entry(&root, "/efi", new).contains("iommu=pt"));
    assert!(!entry(&root, "/efi", new).contains("iommu=off"));
    // systemd-boot's order: the kernels first, so the default is unchanged.
    let v = json_of(&run(&root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["default"], format!("{MID}-{new}"), "{v:#}");
    assert_eq!(v["entries"][1]["id"], format!("{MID}-gdrprov-gds"), "{v:#}");
    assert_eq!(v["entries"][1]["gdrprov"], true);
    // Idempotent, and rolled back byte for byte.
    let v = json_of(&run(&root, &["plan", base, p, "--format", "json"]));
    assert_eq!(v["changes"].as_array().map(Vec::len), Some(0), "{v:#}");
    // Booted once into the extra entry (systemd-boot's EFI variables say so):
    // its arguments are not drift of the default entry; the next boot is
    // the default again.
    let efivar = |name: &str, value: &str| {
        let mut raw = vec![7u8, 0, 0, 0];
        for u in value.encode_utf16().chain([0]) {
            raw.extend(u.to_le_bytes());
        }
        let path = root.join(format!(
            "sys/firmware/efi/efivars/{name}-4a67b082-0a4c-41cf-b6c7-440b29bb8c4f"
        ));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, raw).unwrap();
    };
    efivar("LoaderEntrySelected", &format!("{MID}-gdrprov-gds.conf"));
    efivar(
        "LoaderEntryOneShot",
        &format!("{MID}-6.12.38+deb13-amd64.conf"),
    );
    put(
        &root,
        "/proc/cmdline",
        &format!(
            "{opts_value}\n",
            opts_value = opts.trim_start_matches("options").trim()
        ),
    );
    let v = json_of(&run(&root, &["plan", base, p, "--format", "json"]));
    assert_eq!(v["changes"].as_array().map(Vec::len), Some(0), "{v:#}");
    let text = v.to_string();
    assert!(text.contains("started from the extra boot entry"), "{v:#}");
    assert!(!text.contains("command line differs"), "{v:#}");
    let v = json_of(&run(&root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["entries"][1]["running"], true, "{v:#}");
    assert_eq!(v["entries"][0]["running"], false, "{v:#}");
    assert_eq!(v["entries"][2]["next_boot"], true, "{v:#}");
    std::fs::remove_dir_all(root.join("sys")).unwrap();
    put(
        &root,
        "/proc/cmdline",
        &format!("initrd=\\{MID}\\{new}\\initrd.img-{new} {ROOT_ARGS} systemd.machine_id={MID}\n"),
    );
    let out = run(&root, &["rollback", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of an extra entry",
    );
}

#[test]
fn systemd_boot_refuses_an_entry_that_would_become_the_default() {
    // A hand-written entry with no version and no sort key (as Arch's wiki
    // shows): `arch-gdrprov-gds` would sort before `arch` and boot by default.
    let (t, root) = sdboot_root("/boot", true);
    for k in ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"] {
        std::fs::remove_file(root.join(format!("boot/loader/entries/{MID}-{k}.conf"))).unwrap();
    }
    put(
        &root,
        "/boot/loader/entries/arch.conf",
        &format!("title Arch Linux\nlinux /vmlinuz-linux\ninitrd /initramfs-linux.img\noptions {ROOT_ARGS}\n"),
    );
    put(
        &root,
        "/proc/cmdline",
        &format!("initrd=\\initramfs-linux.img {ROOT_ARGS}\n"),
    );
    let p = t.path().join("p.yaml");
    std::fs::write(&p, "boot:\n  iommu: \"off\"\n  entry: gds\n").unwrap();
    let before = snapshot(&root);
    let out = run(&root, &["apply", p.to_str().unwrap(), "-y"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("would boot the new entry arch-gdrprov-gds by default instead of arch"),
        "{err}"
    );
    assert!(err.contains("gdrprov boot set-default arch"), "{err}");
    assert_same(&snapshot(&root), &before, "refused extra entry");
    // With the default made explicit, the entry is written.
    let out = run(&root, &["boot", "set-default", "arch"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let out = run(&root, &["apply", p.to_str().unwrap(), "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(root
        .join("boot/loader/entries/arch-gdrprov-gds.conf")
        .exists());
    let v = json_of(&run(&root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["default"], "arch", "{v:#}");
}

#[test]
fn systemd_boot_trial_needs_the_running_system_and_unsafe_arguments_are_refused() {
    let (t, root) = sdboot_root("/efi", true);
    let out = run(
        &root,
        &["apply", "rdma-dmabuf", "--trial", "--dry-run", "--force"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.contains("bootctl set-oneshot") && err.contains("is not the running system"),
        "{err}"
    );
    // Unsafe arguments are refused as on GRUB, and nothing changes.
    let p = t.path().join("p.yaml");
    let before = snapshot(&root);
    std::fs::write(&p, "boot:\n  cmdline:\n    present: [\"x=`reboot`\"]\n").unwrap();
    let out = run(&root, &["apply", p.to_str().unwrap(), "-y", "--no-exec"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr_of(&out).contains("backtick"), "{}", stderr_of(&out));
    assert_same(&snapshot(&root), &before, "refused unsafe argument");
}

#[test]
fn systemd_boot_list_set_default_and_once() {
    let (_t, root) = sdboot_root("/boot/efi", false);
    let pristine = snapshot(&root);
    let v = json_of(&run(&root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["loader"], "systemd-boot (/boot/efi)", "{v:#}");
    let old = format!("{MID}-6.12.38+deb13-amd64");
    let new = format!("{MID}-6.12.43+deb13-amd64");
    // Newest first, and it is the default without a `default` line; the
    // running one is found from /proc/cmdline.
    assert_eq!(v["entries"][0]["id"], new.as_str());
    assert_eq!(v["default"], new.as_str());
    assert_eq!(v["entries"][0]["running"], true, "{v:#}");
    let out = run(&root, &["boot", "set-default", &old]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(
        std::fs::read_to_string(root.join("boot/efi/loader/loader.conf")).unwrap(),
        format!("timeout 3\n#console-mode keep\ndefault {old}.conf\n")
    );
    let v = json_of(&run(&root, &["boot", "list", "--format", "json"]));
    assert_eq!(v["default"], old.as_str());
    // The one-shot entry is an EFI variable: only on the running system.
    let out = run(&root, &["boot", "once", &old]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr_of(&out).contains("bootctl set-oneshot"),
        "{}",
        stderr_of(&out)
    );
    let out = run(&root, &["rollback", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_same(
        &without_state(snapshot(&root)),
        &without_state(pristine),
        "rollback of set-default",
    );
}

#[test]
fn ansible_module_takes_boot_elsewhere() {
    let (t, root) = device_root("device-h100");
    let args = t.path().join("args.json");
    let module = |extra: &str| {
        std::fs::write(
            &args,
            format!(
                r#"{{"profile": "rdma-dmabuf", "no_exec": true, "force": true, "root": "{}"{extra}}}"#,
                root.display()
            ),
        )
        .unwrap();
        let out = gdrprov().arg(&args).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code(), v)
    };
    let before = snapshot(&root);
    let (code, v) = module("");
    assert_eq!(
        (code, &v["failed"]),
        (Some(1), &serde_json::json!(true)),
        "{v}"
    );
    assert!(
        v["msg"].as_str().unwrap().contains("boot_elsewhere")
            || v["msg"].as_str().unwrap().contains("--boot-elsewhere"),
        "{v}"
    );
    assert_same(&snapshot(&root), &before, "refused module run");
    let (code, v) = module(r#", "boot_elsewhere": true"#);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["changed"], true, "{v}");
    assert_eq!(v["plan"]["boot"]["manageable"], false, "{v}");
}

/// Debian 12's update-initramfs on systemd-boot runs `kernel-install add` from its hook, which
/// copies the kernel and the initrd onto the FAT ESP by unlink + rewrite without fsync: a power
/// cut there left the ESP's kernel unreadable (systemd-boot power-cut campaign, run 4 cut 9).
/// gdrprov bypasses kernel-install for its update-initramfs and places the initrd itself. Real
/// shell scripts in a chroot (builtins only: no coreutils there) stand in for update-initramfs,
/// Debian's hook and kernel-install (which, as systemd 252's, does nothing under
/// KERNEL_INSTALL_BYPASS=1, and else copies and leaves a mark).
#[test]
fn systemd_boot_initrd_reaches_the_esp_through_gdrprov_not_kernel_install() {
    if !crate::reliability::is_root() {
        eprintln!("SKIPPED: a chroot root needs root (CI runs as root)");
        return;
    }
    let esp = "/boot/efi";
    let (_t, root) = sdboot_root(esp, false);
    crate::reliability::install_with_libs(&root, "/bin/dash", "/bin/sh");
    std::fs::create_dir_all(root.join("run")).unwrap();
    let kernels = ["6.12.38+deb13-amd64", "6.12.43+deb13-amd64"];
    for k in kernels {
        put(
            &root,
            &format!("/lib/modules/{k}/modules.dep"),
            "kernel/drivers/infiniband/nvidia-peermem.ko:\n",
        );
        put(&root, &format!("/boot/initrd.img-{k}"), "initrd 0\n");
        put(
            &root,
            &format!("{esp}/{MID}/{k}/initrd.img-{k}"),
            "initrd 0\n",
        );
        put(
            &root,
            &format!("{esp}/{MID}/{k}/linux"),
            &format!("kernel {k}\n"),
        );
        // What a run killed in the middle of its copy leaves: removed by the next copy.
        put(
            &root,
            &format!("{esp}/{MID}/{k}/.initrd.img-{k}.gdrprov-999.tmp"),
            "half",
        );
    }
    let script = |path: &str, body: &str| {
        std::fs::create_dir_all(root.join(path.trim_start_matches('/')).parent().unwrap()).unwrap();
        crate::reliability::write_script(&root, path, body);
    };
    script(
        "/usr/sbin/lsinitramfs",
        "#!/bin/sh\necho usr/lib/modules/x/kernel/drivers/infiniband/nvidia-peermem.ko\n",
    );
    // Each rebuild gives a new image; then Debian's post-update hooks, as update-initramfs runs them.
    script(
        "/usr/sbin/update-initramfs",
        "#!/bin/sh\nk=$3\nn=0; [ -f /run/n ] && read -r n < /run/n; n=$((n+1)); echo $n > /run/n\necho \"initrd $n\" > /boot/initrd.img-$k\nfor h in /etc/initramfs/post-update.d/*; do $h $k /boot/initrd.img-$k || exit 1; done\n",
    );
    script(
        "/etc/initramfs/post-update.d/systemd-boot",
        "#!/bin/sh\nkernel-install add \"$1\" \"/boot/vmlinuz-$1\" \"$2\"\n",
    );
    script(
        "/usr/bin/kernel-install",
        &format!("#!/bin/sh\nif [ \"$KERNEL_INSTALL_BYPASS\" = 1 ]; then echo skipping; exit 0; fi\necho \"$*\" >> /run/kernel-install.ran\nwhile IFS= read -r l; do echo \"$l\"; done < $4 > {esp}/{MID}/$2/initrd.img-$2\n"),
    );
    let esp_initrd = |k: &str| {
        std::fs::read_to_string(root.join(format!("{}/{MID}/{k}/initrd.img-{k}", &esp[1..])))
            .unwrap()
    };
    let boot_initrd =
        |k: &str| std::fs::read_to_string(root.join(format!("boot/initrd.img-{k}"))).unwrap();

    // The plan shows the command as it runs (and a person may run it so).
    let out = run(&root, &["plan", "rdma-dmabuf", "--force"]);
    let want = format!(
        "$ KERNEL_INSTALL_BYPASS=1 chroot {} update-initramfs -u -k {}",
        root.display(),
        kernels[0]
    );
    assert!(stdout_of(&out).contains(&want), "{}", stdout_of(&out));
    let out = run(
        &root,
        &["apply", "rdma-dmabuf", "-y", "--force", "--format", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    let v = json_of(&out);
    let ran = &v["outcome"]["commands_run"];
    assert_eq!(ran[0]["env"]["KERNEL_INSTALL_BYPASS"], "1", "{v:#}");
    assert!(
        !root.join("run/kernel-install.ran").exists(),
        "kernel-install copied to the ESP"
    );
    for k in kernels {
        assert_ne!(boot_initrd(k), "initrd 0\n", "{k} was not rebuilt");
        assert_eq!(
            esp_initrd(k),
            boot_initrd(k),
            "{k}: the ESP's initrd is not the new one"
        );
        assert_eq!(
            std::fs::read_to_string(root.join(format!("{}/{MID}/{k}/linux", &esp[1..]))).unwrap(),
            format!("kernel {k}\n")
        );
        assert!(
            entry(&root, esp, k).contains("iommu=pt"),
            "{}",
            entry(&root, esp, k)
        );
    }
    let leftovers: Vec<String> = snapshot(&root.join(&esp[1..]))
        .into_keys()
        .filter(|p| p.contains(".gdrprov-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Rollback regenerates the same way: the ESP gets the rebuilt initrd, kernel-install stays out.
    let out = run(&root, &["rollback", "-y"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert!(
        !root.join("run/kernel-install.ran").exists(),
        "kernel-install copied to the ESP"
    );
    for k in kernels {
        assert_eq!(esp_initrd(k), boot_initrd(k), "{k} after rollback");
        assert!(!entry(&root, esp, k).contains("iommu=pt"));
    }
}
