use super::*;
use crate::host::WriteOptions;
use std::os::unix::fs::symlink;
use std::path::Path;

fn host(dir: &Path) -> Host {
    Host::open(dir, true).unwrap()
}

#[test]
fn remove_dir_all_never_follows_a_symlink_by_its_name() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    std::fs::write(r.join("etc/keep"), "x").unwrap();
    std::fs::create_dir_all(r.join("var/g")).unwrap();
    symlink("/etc", r.join("var/g/.1.new")).unwrap();
    let h = host(r);
    let err = h.remove_dir_all("/var/g/.1.new").unwrap_err().to_string();
    assert!(err.contains("symlink"), "{err}");
    assert!(r.join("etc/keep").exists(), "the link's target was removed");
    h.remove_dir_all("/var/g/..").unwrap_err();
    h.remove_dir_all("/var/g/nope").unwrap();
    // A whole tree goes, a link inside it as a link (its target stays).
    std::fs::create_dir_all(r.join("var/g/2/a/b")).unwrap();
    std::fs::write(r.join("var/g/2/a/b/f"), "x").unwrap();
    symlink("/etc", r.join("var/g/2/a/l")).unwrap();
    h.remove_dir_all("/var/g/2").unwrap();
    assert!(!r.join("var/g/2").exists());
    assert!(r.join("etc/keep").exists());
}

#[test]
fn rename_dir_never_replaces_a_directory() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("g/.2.new")).unwrap();
    std::fs::write(r.join("g/.2.new/journal.json"), "{}").unwrap();
    std::fs::create_dir_all(r.join("g/2")).unwrap();
    let h = host(r);
    let err = h.rename_dir("/g/.2.new", "/g/2").unwrap_err().to_string();
    assert!(err.contains("/g/2"), "{err}");
    std::fs::remove_dir(r.join("g/2")).unwrap();
    h.rename_dir("/g/.2.new", "/g/2").unwrap();
    assert!(r.join("g/2/journal.json").is_file());
    assert!(!r.join("g/.2.new").exists());
}

/// Every write the door makes, with a link at the file or on the way: each
/// refused, naming the link and its target, the target untouched.
#[test]
fn every_write_refuses_a_link_at_the_file_or_on_the_way() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("etc/default")).unwrap();
    std::fs::create_dir_all(r.join("var/lib/gdrprov")).unwrap();
    std::fs::create_dir_all(r.join("real")).unwrap();
    std::fs::write(r.join("etc/default/grub"), "GRUB\n").unwrap();
    symlink("/etc/default/grub", r.join("etc/link.conf")).unwrap();
    symlink("../../..", r.join("var/lib/gdrprov/up")).unwrap();
    symlink("/real", r.join("etc/linked.d")).unwrap();
    let h = host(r);
    let before = std::fs::read(r.join("etc/default/grub")).unwrap();
    let write = |p: &str| {
        h.write_atomic(p, b"evil\n", WriteOptions::default())
            .map(drop)
    };
    type Case<'a> = (&'a str, Box<dyn Fn() -> crate::error::Result<()> + 'a>);
    let cases: Vec<Case> = vec![
        ("/etc/link.conf", Box::new(|| write("/etc/link.conf"))),
        (
            "/var/lib/gdrprov/up",
            Box::new(|| write("/var/lib/gdrprov/up/etc/x")),
        ),
        ("/etc/linked.d", Box::new(|| write("/etc/linked.d/x.conf"))),
        ("/etc/link.conf", Box::new(|| h.remove("/etc/link.conf"))),
        (
            "/etc/linked.d",
            Box::new(|| h.create_dir_all("/etc/linked.d/sub", 0o755)),
        ),
        (
            "/etc/link.conf",
            Box::new(|| h.reserve_space("/etc/link.conf", 10)),
        ),
        (
            "/etc/link.conf",
            Box::new(|| h.open_lock_file("/etc/link.conf", true).map(drop)),
        ),
        (
            "/etc/linked.d",
            Box::new(|| h.rename_dir("/etc/linked.d", "/etc/other")),
        ),
        (
            "/var/lib/gdrprov/up",
            Box::new(|| h.refuse_links(["/var/lib/gdrprov/up/x"])),
        ),
    ];
    for (link, case) in cases {
        let err = case().unwrap_err().to_string();
        assert!(
            err.contains(&format!("{}{link} is a symlink to", r.display()))
                && (err.contains("replace the link") || err.contains("instead")),
            "{link}: {err}"
        );
    }
    assert_eq!(std::fs::read(r.join("etc/default/grub")).unwrap(), before);
    assert!(std::fs::read_dir(r.join("real")).unwrap().next().is_none());
    assert!(!r.join("etc/x").exists() && !r.join("etc/other").exists());
}

#[test]
fn dotdot_is_never_walked() {
    let t = tempfile::tempdir().unwrap();
    let h = host(t.path());
    let err = h
        .write_atomic("/etc/../x", b"x", WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("`..`"), "{err}");
    assert!(!t.path().join("x").exists() && !t.path().join("etc").exists());
}

/// A failed write removes the directories it made, and only those.
#[test]
fn a_refused_write_removes_the_directories_it_made() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("etc/a")).unwrap();
    let h = host(r);
    // A directory where the file goes: refused, the directory kept.
    let err = h
        .write_atomic("/etc/a", b"x", WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("directory"), "{err}");
    assert!(r.join("etc/a").is_dir());
    // A write that fails (a full disk) under two directories it made:
    // both go, /etc (there before) stays.
    let err = h
        .replace("/etc/new1/new2/f", WriteOptions::default(), |_| {
            Err(std::io::Error::other("disk full"))
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("disk full"), "{err}");
    assert!(!r.join("etc/new1").exists(), "made directories were left");
    assert!(r.join("etc/a").is_dir());
}

#[test]
fn a_distribution_link_is_followed_only_to_a_file_of_its_kind() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    for d in [
        "etc/kernel",
        "usr/lib/kernel",
        "proc",
        "var/lib/gdrprov",
        "etc/default",
    ] {
        std::fs::create_dir_all(r.join(d)).unwrap();
    }
    std::fs::write(r.join("usr/lib/kernel/cmdline"), "root=/dev/sda1\n").unwrap();
    std::fs::write(r.join("proc/cmdline"), "ro\n").unwrap();
    std::fs::write(r.join("var/lib/gdrprov/state.json"), "{}\n").unwrap();
    std::fs::write(r.join("etc/default/grub"), "G\n").unwrap();
    let h = host(r);
    let link = r.join("etc/kernel/cmdline");
    symlink("/usr/lib/kernel/cmdline", &link).unwrap();
    assert_eq!(
        h.distro_link("/etc/kernel/cmdline").as_deref(),
        Some("/usr/lib/kernel/cmdline")
    );
    h.refuse_links(["/etc/kernel/cmdline"]).unwrap();
    h.write_atomic(
        "/etc/kernel/cmdline",
        b"root=/dev/sda1 iommu=pt\n",
        WriteOptions::default(),
    )
    .unwrap();
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(r.join("usr/lib/kernel/cmdline")).unwrap(),
        b"root=/dev/sda1 iommu=pt\n"
    );
    for target in [
        "/proc/cmdline",
        "../../proc/cmdline",
        "/var/lib/gdrprov/state.json",
        "/etc/default/grub",
        "/usr/lib/kernel/missing/cmdline",
    ] {
        std::fs::remove_file(&link).unwrap();
        symlink(target, &link).unwrap();
        assert_eq!(h.distro_link("/etc/kernel/cmdline"), None, "{target}");
        let err = h
            .write_atomic("/etc/kernel/cmdline", b"x\n", WriteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("is a symlink to {target}")), "{err}");
    }
    assert_eq!(std::fs::read(r.join("proc/cmdline")).unwrap(), b"ro\n");
    assert_eq!(std::fs::read(r.join("etc/default/grub")).unwrap(), b"G\n");
    // Any other path: never followed, even to a file of its name.
    std::fs::create_dir_all(r.join("usr/lib/modprobe.d")).unwrap();
    std::fs::create_dir_all(r.join("etc/modprobe.d")).unwrap();
    std::fs::write(r.join("usr/lib/modprobe.d/x.conf"), "x\n").unwrap();
    symlink(
        "/usr/lib/modprobe.d/x.conf",
        r.join("etc/modprobe.d/x.conf"),
    )
    .unwrap();
    assert_eq!(h.distro_link("/etc/modprobe.d/x.conf"), None);
}

#[test]
fn a_local_file_is_never_written_through_a_link_at_its_name() {
    let t = tempfile::tempdir().unwrap();
    let target = t.path().join("shadow");
    std::fs::write(&target, "secret\n").unwrap();
    let at = t.path().join("out.prom");
    symlink(&target, &at).unwrap();
    let err = write_local(&at, b"metrics\n").unwrap_err().to_string();
    assert!(
        err.contains(&format!(
            "{} is a symlink to {}",
            at.display(),
            target.display()
        )),
        "{err}"
    );
    let err = remove_local(&at).unwrap_err().to_string();
    assert!(err.contains("is a symlink"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"secret\n");
    // Its directory may be a link: the user named it.
    let real = t.path().join("real");
    std::fs::create_dir(&real).unwrap();
    symlink(&real, t.path().join("dir")).unwrap();
    write_local(&t.path().join("dir/m.prom"), b"m\n").unwrap();
    assert_eq!(std::fs::read(real.join("m.prom")).unwrap(), b"m\n");
}

/// A temp file's name already taken (someone else's file, not a link) fails the write with
/// EEXIST, and the file there is left alone: only what the write made is removed.
#[test]
fn a_failed_write_removes_only_the_temp_file_it_made() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("etc")).unwrap();
    let theirs = r.join(format!("etc/.x.conf.gdrprov-{}.tmp", std::process::id()));
    std::fs::write(&theirs, "not ours\n").unwrap();
    let h = host(r);
    let err = h
        .write_atomic("/etc/x.conf", b"new\n", WriteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("/etc/x.conf"), "{err}");
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "not ours\n");
    assert!(!r.join("etc/x.conf").exists());
    // A failure after the create (the filler's) removes the temp file it made.
    std::fs::remove_file(&theirs).unwrap();
    let dir = h.root_dir().unwrap();
    let etc = dir.open_sub("etc", "/etc/x.conf").unwrap().unwrap();
    etc.replace("x.conf", WriteOptions::default(), |_| {
        Err(std::io::Error::other("filler failed"))
    })
    .unwrap_err();
    assert!(!theirs.exists(), "the temp file the write made was left");
}

/// A directory link on the way (merged /usr's /lib -> usr/lib, /var/lib/gdrprov on other
/// storage) is refused with the path to write instead, never "remove it": removing /lib breaks
/// the host. Failed before the fix (the message said to replace or remove the link).
#[test]
fn a_directory_link_on_the_way_names_the_path_to_write_never_its_removal() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    std::fs::create_dir_all(r.join("usr/lib/udev/rules.d")).unwrap();
    std::fs::create_dir_all(r.join("data/g")).unwrap();
    std::fs::create_dir_all(r.join("var/lib")).unwrap();
    symlink("usr/lib", r.join("lib")).unwrap();
    symlink("/data/g", r.join("var/lib/gdrprov")).unwrap();
    let h = host(r);
    for (path, want) in [
        (
            "/lib/udev/rules.d/x.rules",
            "write /usr/lib/udev/rules.d/x.rules instead",
        ),
        ("/var/lib/gdrprov/state.json", "mount the storage there"),
    ] {
        let err = h
            .write_atomic(path, b"x\n", WriteOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains(want) && err.contains("(a directory)"), "{err}");
        assert!(!err.contains("remove it"), "{err}");
    }
    assert!(std::fs::read_dir(r.join("usr/lib/udev/rules.d"))
        .unwrap()
        .next()
        .is_none());
    assert!(std::fs::read_dir(r.join("data/g"))
        .unwrap()
        .next()
        .is_none());
}
