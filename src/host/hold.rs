//! Holding a boot entry on the initramfs it reads while a command rebuilds
//! that initramfs in place (issue 37, "the boot switch last"; the text edit
//! is `gdrprov_boot::hold`). Before the command: a copy of the initramfs
//! beside it (`NAME.gdrprov-held`, written as every gdrprov file is: temp
//! file, fsync, rename), the boot file (grub.cfg, a loader entry) rewritten
//! to read that copy with its command line unchanged, both made durable where
//! the boot loader reads them. After the command: the rebuilt initramfs made
//! durable, so that the switch that follows (update-grub, the entry's new
//! options) names a file that is whole on disk. Once the switch is durable,
//! [`Host::release_held`] removes the copies nothing names any more.

use super::runner::Hold;
use super::Host;
use crate::error::Result;
use gdrprov_boot::hold::{self, HELD_SUFFIX};

impl Host {
    /// Holds each reader on the initramfs it loads now (see the module).
    /// A reader that loads the held copy already (an interrupted run held it,
    /// and the file may have been rebuilt since) is left as it is: copying
    /// the file again would give it the other side's contents.
    pub(super) fn hold_readers(&self, holds: &[Hold]) -> Result<()> {
        for h in holds {
            // A journal's command names what it holds: only boot files.
            for p in [&h.reader, &h.file] {
                if !super::is_boot_path(p) {
                    return Err(crate::error::Error::Refused(format!(
                        "{} is not a file a boot loader reads, so gdrprov will not hold a boot entry on it (nothing was changed)",
                        self.display(p)
                    )));
                }
            }
            let Some(text) = self.read_text(&h.reader)? else {
                continue;
            };
            let Some(held_text) = hold::hold(&text, h.name()) else {
                continue;
            };
            let held_text = match (&h.kernelopts, hold::options_of(&held_text)) {
                (Some(value), Some(options)) => {
                    let literal = hold::with_kernelopts(options, value);
                    hold::with_options(&held_text, &literal).unwrap_or(held_text)
                }
                _ => held_text,
            };
            if !self.exists(&h.file) {
                continue;
            }
            let held = h.held();
            self.remove_leftover_temps(&held)?;
            self.copy_atomic(&h.file, &held)?;
            self.make_boot_durable(&[held.as_str()])?;
            self.write_atomic(
                &h.reader,
                held_text.as_bytes(),
                super::WriteOptions::default(),
            )?;
            self.make_boot_durable(&[h.reader.as_str()])?;
        }
        Ok(())
    }

    /// After the rebuild: the rebuilt files on disk where the boot loader
    /// reads them, before anything switches to them.
    pub(super) fn settle_rebuilt(&self, holds: &[Hold], placed: &[&str]) -> Result<()> {
        let mut paths: Vec<&str> = holds.iter().map(|h| h.file.as_str()).collect();
        paths.extend(placed);
        if !paths.is_empty() {
            self.make_boot_durable(&paths)?;
        }
        Ok(())
    }

    /// Removes the held copies whose reader no longer loads them (the switch
    /// is done); gives those kept because their reader still loads them (a
    /// switch that did not run: `--no-exec`, a failed update-grub): removing
    /// those would leave the boot without its initramfs.
    pub fn release_held(&self, holds: &[&Hold]) -> Result<Vec<String>> {
        let mut kept = Vec::new();
        for h in holds {
            let held = h.held();
            if !self.exists(&held) {
                continue;
            }
            let held_name = format!("{}{HELD_SUFFIX}", h.name());
            let text = self.read_text(&h.reader)?.unwrap_or_default();
            if hold::names(&text, &held_name) {
                if !kept.contains(&held) {
                    kept.push(held);
                }
                continue;
            }
            self.remove(&held)?;
        }
        Ok(kept)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_then_release() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::open(t.path(), false).unwrap();
        let opts = super::super::WriteOptions::default();
        let cfg = "menuentry 'D' {\n\tlinux\t/boot/vmlinuz-6.1 ro quiet\n\tinitrd\t/boot/initrd.img-6.1\n}\n";
        h.write_atomic("/boot/grub/grub.cfg", cfg.as_bytes(), opts)
            .unwrap();
        h.write_atomic("/boot/initrd.img-6.1", b"old", opts)
            .unwrap();
        let hold = Hold {
            reader: "/boot/grub/grub.cfg".into(),
            file: "/boot/initrd.img-6.1".into(),
            kernelopts: None,
        };
        h.hold_readers(std::slice::from_ref(&hold)).unwrap();
        let held_cfg = h.read_text("/boot/grub/grub.cfg").unwrap().unwrap();
        assert!(held_cfg.contains("\tinitrd\t/boot/initrd.img-6.1.gdrprov-held\n"));
        assert!(held_cfg.contains("ro quiet\n"));
        assert_eq!(
            h.read("/boot/initrd.img-6.1.gdrprov-held")
                .unwrap()
                .unwrap(),
            b"old"
        );
        // The rebuild, then a second hold (a run interrupted and run again):
        // the held copy keeps the old contents.
        h.write_atomic("/boot/initrd.img-6.1", b"new", opts)
            .unwrap();
        h.hold_readers(std::slice::from_ref(&hold)).unwrap();
        assert_eq!(
            h.read("/boot/initrd.img-6.1.gdrprov-held")
                .unwrap()
                .unwrap(),
            b"old"
        );
        // Still read: kept.
        let kept = h.release_held(&[&hold]).unwrap();
        assert_eq!(kept, ["/boot/initrd.img-6.1.gdrprov-held"]);
        assert!(h.exists("/boot/initrd.img-6.1.gdrprov-held"));
        // Switched (update-grub wrote grub.cfg again): released.
        h.write_atomic("/boot/grub/grub.cfg", cfg.as_bytes(), opts)
            .unwrap();
        assert!(h.release_held(&[&hold]).unwrap().is_empty());
        assert!(!h.exists("/boot/initrd.img-6.1.gdrprov-held"));
    }
}
