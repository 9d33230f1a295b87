//! The journal's lock where a hostile root put something else (issue 37):
//! a device node, a FIFO, a socket, a directory or a symlink at
//! `var/lib/gdrprov/lock`. Every command that takes or looks at the lock
//! refuses (exit 1), names the lock and the fix, never hangs, and writes no
//! byte into the device. Before: `rollback` then `apply` wrote their pid
//! into the first bytes of a block device placed there.

use crate::common::{gdrprov, stderr_of, stdout_of};
use crate::util::Root;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);
const LOCK: &str = "var/lib/gdrprov/lock";

fn run(root: &Root, args: &[&str]) -> std::process::Output {
    let start = Instant::now();
    let out = gdrprov()
        .timeout(LIMIT)
        .args(args)
        .args(["--root", root.arg()])
        .output()
        .unwrap();
    assert!(
        start.elapsed() < LIMIT && out.status.code().is_some(),
        "gdrprov {} hung with a special file at the lock",
        args.join(" ")
    );
    out
}

fn refuses(root: &Root, args: &[&str], kind: &str) {
    let out = run(root, args);
    let err = stderr_of(&out);
    let named = root.join(LOCK).display().to_string();
    assert_eq!(
        out.status.code(),
        Some(1),
        "gdrprov {} with {kind} at the lock:\nstdout:\n{}\nstderr:\n{err}",
        args.join(" "),
        stdout_of(&out)
    );
    assert!(
        err.contains(&named) && err.contains(kind) && err.contains("regular file"),
        "gdrprov {}: the message must name {named}, {kind} and the fix:\n{err}",
        args.join(" ")
    );
}

fn mknod(p: &Path, kind: nix::sys::stat::SFlag, dev: u64) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    nix::sys::stat::mknod(
        p,
        kind,
        nix::sys::stat::Mode::from_bits_truncate(0o600),
        dev,
    )
    .unwrap();
}

fn plain(root: &Root, args: &[&str], fault: Option<&str>) {
    let mut c = gdrprov();
    if let Some(n) = fault {
        c.env("GDRPROV_FAULT_AFTER_STEP", n);
    }
    let out = c.args(args).args(["--root", root.arg()]).output().unwrap();
    assert_eq!(
        out.status.code().is_some_and(|c| c == 0),
        fault.is_none(),
        "gdrprov {}: {}",
        args.join(" "),
        stderr_of(&out)
    );
}

/// With `make` putting the special file at the lock: apply on a fresh root,
/// rollback after an apply, recover after an interrupted apply, each
/// refused (apply and rollback then name `recover` first: they must end).
fn every_command_refuses(root: &Root, kind: &str, make: &dyn Fn(&Path)) {
    let p = root.join(LOCK);
    let remove = |p: &Path| match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(p).unwrap(),
        Ok(_) => std::fs::remove_file(p).unwrap(),
        Err(_) => {}
    };
    let put = |p: &Path| {
        remove(p);
        make(p);
    };
    let apply = ["apply", "rdma-dmabuf", "--yes", "--no-exec"];
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    put(&p);
    refuses(root, &apply, kind);
    assert!(
        !root.join("etc/modprobe.d/gdrprov-blacklist.conf").exists(),
        "apply went on with {kind} at the lock"
    );
    remove(&p);
    plain(root, &apply, None);
    put(&p);
    refuses(root, &["rollback", "--yes"], kind);
    remove(&p);
    plain(root, &["rollback", "--yes"], None);
    plain(root, &apply, Some("1"));
    put(&p);
    refuses(root, &["recover", "--yes"], kind);
    for args in [&apply[..], &["rollback", "--yes"]] {
        let out = run(root, args);
        assert_eq!(out.status.code(), Some(1), "gdrprov {}", args.join(" "));
    }
    let t = std::fs::symlink_metadata(&p).unwrap().file_type();
    assert!(!t.is_file(), "{kind} at the lock was replaced");
}

#[test]
fn a_fifo_socket_directory_or_symlink_at_the_lock_is_refused_without_hanging() {
    type Make = fn(&Path);
    let cases: [(&str, Make); 4] = [
        ("a FIFO", |p| {
            nix::unistd::mkfifo(p, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap()
        }),
        ("a socket", |p| {
            std::mem::forget(std::os::unix::net::UnixListener::bind(p).unwrap());
        }),
        ("a directory", |p| std::fs::create_dir(p).unwrap()),
        ("a symlink", |p| {
            std::os::unix::fs::symlink("/etc/hostname", p).unwrap()
        }),
    ];
    for (kind, make) in cases {
        let root = Root::example("ubuntu-22.04-h100");
        every_command_refuses(&root, kind, &make);
    }
}

/// A character device (`/dev/null`'s numbers, harmless if written): refused.
#[test]
fn a_character_device_at_the_lock_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: mknod needs root (CI runs as root)");
        return;
    }
    let root = Root::example("ubuntu-22.04-h100");
    let make = |p: &Path| {
        mknod(
            p,
            nix::sys::stat::SFlag::S_IFCHR,
            nix::sys::stat::makedev(1, 3),
        )
    };
    every_command_refuses(&root, "a device node", &make);
    assert!(std::fs::symlink_metadata(root.join(LOCK))
        .unwrap()
        .file_type()
        .is_char_device());
}

/// A real block device (a loop device over a file of zeros): refused, and
/// not one byte of the device changes.
#[test]
fn a_block_device_at_the_lock_is_refused_and_not_written() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("SKIPPED: a loop device needs root (CI runs as root)");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let backing = t.path().join("disk");
    std::fs::write(&backing, vec![0u8; 1 << 20]).unwrap();
    let out = std::process::Command::new("losetup")
        .args(["--find", "--show"])
        .arg(&backing)
        .output();
    let Some(dev) = out
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    else {
        eprintln!("SKIPPED: no loop device here (losetup failed)");
        return;
    };
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = std::process::Command::new("losetup")
                .args(["-d", &self.0])
                .status();
        }
    }
    let _detach = Detach(dev.clone());
    use std::os::unix::fs::MetadataExt;
    let rdev = std::fs::metadata(&dev).unwrap().rdev();
    let root = Root::example("ubuntu-22.04-h100");
    let make = |p: &Path| mknod(p, nix::sys::stat::SFlag::S_IFBLK, rdev);
    every_command_refuses(&root, "a device node", &make);
    let mut head = vec![0u8; 4096];
    {
        use std::io::Read;
        std::fs::File::open(&dev)
            .unwrap()
            .read_exact(&mut head)
            .unwrap();
    }
    assert!(
        head.iter().all(|b| *b == 0),
        "bytes were written into {dev}: {:?}",
        &head[..16]
    );
}
