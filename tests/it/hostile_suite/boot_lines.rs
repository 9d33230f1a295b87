//! Boot lines (issue 43): one model of a boot line for every boot shape
//! (`gdrprov_boot::line`). Generated: every shape (GRUB defaults, RHEL BLS
//! entries, RHEL 8 grubenv `kernelopts`, systemd-boot entries and
//! /etc/kernel/cmdline, a UKI's /etc/kernel/cmdline, a kernel booted from
//! elsewhere) × every hostile line (`-- single` at the end, `--` alone, a line
//! near the kernel's COMMAND_LINE_SIZE and one past it, `root=`, `init=` and
//! `ro` replaced by `present`). Each case ends in the right line (the new
//! arguments before `--`, read back from the applied file) or in the harness's
//! refusal (exit 1, the problem named, the tree unchanged). Then the GRUB
//! drop-in set as grub-mkconfig reads it: a dotfile, a name that is not UTF-8,
//! `.cfg` and not.

use super::harness::{assert_unchanged, refused_unchanged, run_in, tree};
use crate::common::{copy_tree, json_of, repo, stderr_of};
use std::path::{Path, PathBuf};

const ADDED: &str = "iommu=pt intel_iommu=on";
/// The profile every case applies (adds `ADDED` on these Intel/unknown roots).
const PROFILE: &str = "rdma-dmabuf";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Grub,
    Bls,
    Kernelopts,
    SdBoot,
    Uki,
    Direct,
}

const SHAPES: [Shape; 6] = [
    Shape::Grub,
    Shape::Bls,
    Shape::Kernelopts,
    Shape::SdBoot,
    Shape::Uki,
    Shape::Direct,
];

/// How a file holds its boot line.
#[derive(Debug, Clone, Copy)]
enum Holds {
    /// `GRUB_CMDLINE_LINUX="..."`.
    GrubVar,
    /// An entry's `options` line.
    Options,
    /// The whole file (/etc/kernel/cmdline, /proc/cmdline).
    Whole,
    /// grubenv's `kernelopts=` line.
    Kernelopts,
}

/// A root of a shape, kept alive with its temporary directory.
struct Host {
    _keep: tempfile::TempDir,
    root: PathBuf,
    shape: Shape,
}

impl Host {
    fn arg(&self) -> &str {
        self.root.to_str().unwrap()
    }

    /// The files holding the shape's line, and how.
    fn line_files(&self) -> Vec<(PathBuf, Holds)> {
        let entries = |dir: &str| -> Vec<(PathBuf, Holds)> {
            let mut v: Vec<(PathBuf, Holds)> = std::fs::read_dir(self.root.join(dir))
                .unwrap()
                .map(|e| (e.unwrap().path(), Holds::Options))
                .collect();
            v.sort_by(|a, b| a.0.cmp(&b.0));
            v
        };
        let at = |p: &str, h| vec![(self.root.join(p), h)];
        match self.shape {
            Shape::Grub => at("etc/default/grub", Holds::GrubVar),
            Shape::Bls => entries("boot/loader/entries"),
            Shape::Kernelopts => at("boot/grub2/grubenv", Holds::Kernelopts),
            Shape::SdBoot => [
                at("etc/kernel/cmdline", Holds::Whole),
                entries("boot/efi/loader/entries"),
            ]
            .concat(),
            Shape::Uki => at("etc/kernel/cmdline", Holds::Whole),
            Shape::Direct => at("proc/cmdline", Holds::Whole),
        }
    }

    /// Appends `suffix` to the line in every file that holds it.
    fn append(&self, suffix: &str) {
        for (p, holds) in self.line_files() {
            let text = std::fs::read_to_string(&p).unwrap();
            std::fs::write(&p, appended(&text, holds, suffix)).unwrap();
        }
    }
}

fn appended(text: &str, holds: Holds, suffix: &str) -> String {
    let mut out = String::new();
    let mut done = false;
    for l in text.split_inclusive('\n') {
        let body = l.trim_end_matches('\n');
        let nl = &l[body.len()..];
        let hit = !done
            && match holds {
                Holds::GrubVar => body.starts_with("GRUB_CMDLINE_LINUX=\""),
                Holds::Options => body.starts_with("options"),
                Holds::Whole => true,
                Holds::Kernelopts => body.starts_with("kernelopts="),
            };
        if hit {
            let cut = if matches!(holds, Holds::GrubVar) {
                body.len() - 1
            } else {
                body.len()
            };
            out.push_str(&format!("{}{suffix}{}{nl}", &body[..cut], &body[cut..]));
            done = true;
        } else {
            out.push_str(l);
        }
    }
    assert!(done, "no line to append to in {text:?}");
    out
}

fn host(shape: Shape) -> Host {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("root");
    match shape {
        Shape::Grub => copy_tree(&repo().join("examples/hosts/ubuntu-22.04-h100"), &root),
        Shape::Bls | Shape::Kernelopts => {
            copy_tree(&repo().join("examples/hosts/rocky-9-a100"), &root)
        }
        Shape::SdBoot => {
            let (keep, r) = crate::boot_shapes::sdboot_root("/boot/efi", true);
            copy_tree(&r, &root);
            drop(keep);
        }
        Shape::Uki => {
            let g = crate::hostgen::debian13_uki();
            copy_tree(&g.root, &root);
        }
        Shape::Direct => copy_tree(&repo().join("tests/fixtures/snapshots/device-h200"), &root),
    }
    if shape == Shape::Kernelopts {
        // RHEL 8: the entries read grubenv's kernelopts.
        let line = "root=/dev/mapper/rl-root ro rd.lvm.lv=rl/root rhgb quiet";
        let env = format!("# GRUB Environment Block\nkernelopts={line}\nsaved_entry=x\n");
        let p = root.join("boot/grub2/grubenv");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, env).unwrap();
        for e in std::fs::read_dir(root.join("boot/loader/entries")).unwrap() {
            let p = e.unwrap().path();
            let t = std::fs::read_to_string(&p).unwrap();
            let t: String = t
                .lines()
                .map(|l| match l.starts_with("options ") {
                    true => "options $kernelopts $tuned_params\n".to_string(),
                    false => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&p, t).unwrap();
        }
    }
    for d in ["etc/modprobe.d", "etc/modules-load.d"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    Host {
        _keep: t,
        root,
        shape,
    }
}

/// Whether gdrprov writes this shape's line with `--` placed right (else
/// grubby writes it, and a `--` there is refused).
fn writes_before_separator(shape: Shape) -> bool {
    matches!(shape, Shape::Grub | Shape::SdBoot | Shape::Uki)
}

fn apply(h: &Host, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["apply", PROFILE];
    args.extend_from_slice(extra);
    args.extend(["-y", "--no-exec", "--force", "--root", h.arg()]);
    run_in(None, &args)
}

/// `-- single` at the end of the line, and `--` alone: the arguments go
/// before it where gdrprov writes the line; grubby's shapes are refused
/// naming the file; a line only judged is judged on its kernel part.
#[test]
fn every_shape_with_a_separator_gets_the_arguments_before_it_or_refuses() {
    for shape in SHAPES {
        for init in [" -- single", " --"] {
            let case = format!("{shape:?} with `{}`", init.trim());
            let h = host(shape);
            h.append(init);
            if shape == Shape::Direct {
                // Judged only: what follows `--` is init's, never the kernel's.
                h.append(&format!(" {ADDED}"));
                let out = run_in(
                    None,
                    &["plan", PROFILE, "--format", "json", "--root", h.arg()],
                );
                let v = json_of(&out);
                assert_eq!(v["boot"]["satisfied"], false, "{case}: {v:#}");
                let missing = v["boot"]["missing"].to_string();
                assert!(missing.contains("iommu=pt"), "{case}: {missing}");
                continue;
            }
            if !writes_before_separator(shape) {
                let args = [
                    "apply",
                    PROFILE,
                    "-y",
                    "--no-exec",
                    "--force",
                    "--root",
                    h.arg(),
                ];
                let text = refused_unchanged(&h.root, &args, "grubby");
                assert!(text.contains("`--`"), "{case}: {text}");
                let named = h.line_files()[0].0.clone();
                let name = named.file_name().unwrap().to_str().unwrap();
                assert!(text.contains(name), "{case}: does not name {name}: {text}");
                continue;
            }
            let out = apply(&h, &[]);
            assert_eq!(out.status.code(), Some(0), "{case}: {}", stderr_of(&out));
            let want = format!("{ADDED}{init}");
            for (p, _) in h.line_files() {
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(
                    text.contains(&want),
                    "{case}: {} lacks `{want}`:\n{text}",
                    p.display()
                );
            }
        }
    }
}

/// The line's length: near the kernel's limit it is written; past it
/// (counting what the boot loader adds) it is refused at plan with the
/// length, the limit and the fix, the tree unchanged. A line only judged
/// (direct boot) is never refused for it: gdrprov writes nothing there.
#[test]
fn every_shape_refuses_a_line_past_command_line_size() {
    let pad = |total: usize| -> String {
        (0..total / 400)
            .map(|i| format!(" pad{i}={}", "a".repeat(393)))
            .collect()
    };
    for shape in SHAPES {
        let near = host(shape);
        near.append(&pad(1200));
        let out = run_in(None, &["plan", PROFILE, "--root", near.arg()]);
        let code = out.status.code();
        assert!(
            matches!(code, Some(0 | 2)),
            "{shape:?} near the limit: exit {code:?}: {}",
            stderr_of(&out)
        );
        if shape == Shape::Direct {
            continue;
        }
        let past = host(shape);
        past.append(&pad(2000));
        for cmd in ["plan", "apply"] {
            let args = [
                cmd,
                PROFILE,
                "-y",
                "--no-exec",
                "--force",
                "--root",
                past.arg(),
            ];
            let args = if cmd == "plan" {
                vec![cmd, PROFILE, "--root", past.arg()]
            } else {
                args.to_vec()
            };
            let text = refused_unchanged(&past.root, &args, "COMMAND_LINE_SIZE");
            assert!(text.contains("2048"), "{shape:?}: {text}");
            assert!(text.contains("Remove arguments"), "{shape:?}: {text}");
        }
    }
}

/// arm64's kernels disagree on COMMAND_LINE_SIZE (2048 in mainline for most
/// versions, 4096 in others): a line between the two would be cut silently
/// by one of them, so an arm64 root (the GH200 example) is held to 2048 too.
#[test]
fn an_arm64_line_between_2048_and_4096_bytes_is_refused() {
    let root = crate::util::Root::example("ubuntu-24.04-gh200");
    let grub = root.join("etc/default/grub");
    let text = std::fs::read_to_string(&grub).unwrap();
    let pad: String = (0..6)
        .map(|i| format!(" pad{i}={}", "a".repeat(393)))
        .collect();
    let text = text.replace(
        "GRUB_CMDLINE_LINUX=\"console=ttyAMA0,115200n8 init_on_alloc=0",
        &format!("GRUB_CMDLINE_LINUX=\"console=ttyAMA0,115200n8 init_on_alloc=0{pad}"),
    );
    assert!(text.contains("pad5="), "the example's GRUB line changed");
    std::fs::write(&grub, text).unwrap();
    let args = ["plan", "rdma-dmabuf", "--root", root.arg()];
    let text = refused_unchanged(&root, &args, "COMMAND_LINE_SIZE of 2048");
    assert!(text.contains("Remove arguments"), "{text}");
}

/// `present` replacing a boot-critical argument (`root=`, `init=`, `ro` by
/// `rw`, `rootfstype=`, `rootflags=`) is refused on every shape as `absent`
/// is, unless `allow-removing` names it.
#[test]
fn every_shape_refuses_a_present_that_replaces_a_boot_critical_argument() {
    let t = tempfile::tempdir().unwrap();
    let cases = [
        ("root=/dev/sdb1", "root"),
        ("init=/bin/sh", "init"),
        ("rw", "ro"),
        ("rootfstype=xfs", "rootfstype"),
        ("rootflags=noatime", "rootflags"),
    ];
    for shape in SHAPES {
        let h = host(shape);
        for (arg, key) in cases {
            let p = t.path().join(format!("{key}.yaml"));
            let yaml = format!("boot:\n  cmdline:\n    present: [\"{arg}\"]\n");
            std::fs::write(&p, &yaml).unwrap();
            let file = p.to_str().unwrap();
            let args = [
                "apply",
                file,
                "-y",
                "--no-exec",
                "--force",
                "--root",
                h.arg(),
            ];
            let text = refused_unchanged(&h.root, &args, "allow-removing");
            assert!(
                text.contains(&format!("[{key}]")),
                "{shape:?} {arg}: {text}"
            );
        }
        // Said so: then it is planned (not refused).
        let p = t.path().join("allowed.yaml");
        let yaml =
            "boot:\n  cmdline:\n    present: [\"root=/dev/sdb1\"]\n    allow-removing: [root]\n";
        std::fs::write(&p, yaml).unwrap();
        let out = run_in(None, &["plan", p.to_str().unwrap(), "--root", h.arg()]);
        assert_ne!(out.status.code(), Some(1), "{shape:?}: {}", stderr_of(&out));
    }
}

fn grub_text(root: &Path) -> String {
    std::fs::read_to_string(root.join("etc/default/grub")).unwrap()
}

/// GRUB's drop-ins are exactly what grub-mkconfig sources: `*.cfg` of sh (a
/// dotfile is neither read nor edited; `.cfg.bak` and `.conf` neither), in
/// byte order; a `.cfg` whose name is not UTF-8 is refused by name.
#[test]
fn grub_drop_ins_are_the_set_grub_mkconfig_reads() {
    use std::os::unix::ffi::OsStrExt;
    let self_ref = "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX quiet\"\n";
    // Not sourced: each would take the edit (the last assignment) if read.
    for name in [".zz-hidden.cfg", "99-x.cfg.bak", "99-x.conf", ".cfg"] {
        let h = host(Shape::Grub);
        let p = h.root.join("etc/default/grub.d").join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, self_ref).unwrap();
        let out = apply(&h, &[]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr_of(&out));
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            self_ref,
            "{name} was edited"
        );
        assert!(
            grub_text(&h.root).contains(ADDED),
            "{name}: {}",
            grub_text(&h.root)
        );
    }
    // Sourced, in byte order: the last one takes the edit, before its `--`.
    let h = host(Shape::Grub);
    let d = h.root.join("etc/default/grub.d");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(d.join("Z9.cfg"), self_ref).unwrap();
    let last = "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX -- single\"\n";
    std::fs::write(d.join("a0.cfg"), last).unwrap();
    let out = apply(&h, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
    assert_eq!(std::fs::read_to_string(d.join("Z9.cfg")).unwrap(), self_ref);
    assert_eq!(
        std::fs::read_to_string(d.join("a0.cfg")).unwrap(),
        format!("GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX {ADDED} -- single\"\n")
    );
    // A name that is not UTF-8: sourced when it ends in .cfg, so refused by
    // name; ignored otherwise.
    for (bytes, sourced) in [(&b"50-\xff.cfg"[..], true), (&b"50-\xff.txt"[..], false)] {
        let h = host(Shape::Grub);
        let d = h.root.join("etc/default/grub.d");
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join(std::ffi::OsStr::from_bytes(bytes));
        std::fs::write(&p, "GRUB_CMDLINE_LINUX=\"iommu=off\"\n").unwrap();
        let args = [
            "apply",
            PROFILE,
            "-y",
            "--no-exec",
            "--force",
            "--root",
            h.arg(),
        ];
        if sourced {
            let text = refused_unchanged(&h.root, &args, "not UTF-8");
            assert!(text.contains("grub.d/50-"), "{text}");
        } else {
            let before = tree(&h.root.join("etc/default/grub.d"));
            let out = run_in(None, &args);
            assert_eq!(out.status.code(), Some(0), "{}", stderr_of(&out));
            assert_unchanged(&before, &tree(&h.root.join("etc/default/grub.d")), "txt");
        }
    }
}
