//! A test fixture: a small ext4 filesystem in a file, mounted through a loop
//! device, read back as GRUB reads it (`debugfs`, no journal replay). For the
//! flush tests here and the choice's tests in `apply::durable`; skipped (with
//! a line saying so) where it cannot be mounted.

use super::read::open_dir;
use std::fs::File;
use std::os::fd::AsRawFd;

/// A small ext4 filesystem in a file, mounted through a loop device;
/// `debugfs` reads it as GRUB does: without replaying the journal.
pub(crate) struct Ext4 {
    _dir: tempfile::TempDir,
    img: std::path::PathBuf,
    pub(crate) mnt: std::path::PathBuf,
}

impl Ext4 {
    pub(crate) fn new() -> Option<Ext4> {
        Ext4::with(&[])
    }

    pub(crate) fn with(mkfs_opts: &[&str]) -> Option<Ext4> {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("SKIPPED: mounting an ext4 image needs root (CI runs as root)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("fs.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        let run = |argv: &[&str]| {
            std::process::Command::new(argv[0])
                .args(&argv[1..])
                .output()
                .map(|o| {
                    (
                        o.status.success(),
                        String::from_utf8_lossy(&o.stderr).into_owned(),
                    )
                })
        };
        let img_s = img.to_str()?;
        let mut argv = vec!["mkfs.ext4", "-q", "-F"];
        argv.extend_from_slice(mkfs_opts);
        argv.extend([img_s, "32M"]);
        let mk = run(&argv);
        if !matches!(mk, Ok((true, _))) {
            eprintln!("SKIPPED: mkfs.ext4 (e2fsprogs) is not usable here: {mk:?}");
            return None;
        }
        match run(&["mount", "-o", "loop", img.to_str()?, mnt.to_str()?]) {
            Ok((true, _)) => {}
            other => {
                eprintln!("SKIPPED: no loop mount here: {other:?}");
                return None;
            }
        }
        Some(Ext4 {
            _dir: dir,
            img,
            mnt,
        })
    }

    /// What GRUB would read at `path` (inside the filesystem), or None.
    pub(crate) fn as_grub_reads(&self, path: &str) -> Option<String> {
        let o = std::process::Command::new("debugfs")
            .args(["-R", &format!("cat {path}")])
            .arg(&self.img)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        (!text.is_empty()).then_some(text)
    }

    /// Writes a file as a careful tool would (fsync: committed to the
    /// journal) and checks that GRUB's view does not have it yet.
    pub(crate) fn write_committed(&self, name: &str, text: &str) {
        use std::io::Write;
        let mut f = File::create(self.mnt.join(name)).unwrap();
        f.write_all(text.as_bytes()).unwrap();
        f.sync_all().unwrap();
        assert_eq!(
            self.as_grub_reads(&format!("/{name}")),
            None,
            "precondition: fsync alone leaves the file only in the journal"
        );
    }

    pub(crate) fn dir(&self) -> File {
        open_dir(&self.mnt).unwrap()
    }

    /// The filesystem, as the host layer hands it to `apply::durable`.
    pub(crate) fn filesystem(&self) -> super::Filesystem {
        super::Filesystem::at(&self.mnt)
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        let _ = gdrprov_sys::thaw(self.dir().as_raw_fd());
        let _ = std::process::Command::new("umount").arg(&self.mnt).status();
    }
}
