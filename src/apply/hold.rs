//! Holding a boot entry on the initramfs it reads while a command rebuilds
//! that initramfs in place (issue 37, "the boot switch last"; the text edit
//! is `gdrprov_boot::hold`). Before the command: a copy of the initramfs
//! beside it (`NAME.gdrprov-held`, written as every gdrprov file is: temp
//! file, fsync, rename), the boot file (grub.cfg, a loader entry) rewritten
//! to read that copy with its command line unchanged, both made durable where
//! the boot loader reads them. After the command: the rebuilt initramfs made
//! durable, so that the switch that follows (update-grub, the entry's new
//! options) names a file that is whole on disk. Once the switch is durable,
//! [`release_held`] removes the copies nothing names any more.
//!
//! What to hold, the copy's name and the held text are decided here; the host
//! layer only copies, writes, removes and runs ([`run`]).

use super::durable::{is_boot_path, make_boot_durable};
use crate::error::{Error, Result};
use crate::host::{CommandOutput, CommandSpec, Hold, Host, WriteOptions};
use gdrprov_boot::hold::{self, HELD_SUFFIX};

/// The copy `h`'s reader is held on (`FILE.gdrprov-held`).
pub fn held_copy(h: &Hold) -> String {
    format!("{}{HELD_SUFFIX}", h.file)
}

/// The held file's name, as its reader names it.
fn name(h: &Hold) -> &str {
    h.file.rsplit('/').next().unwrap_or(&h.file)
}

/// Runs a command that changes the host, with its holds: each reader held
/// before it runs, and the rebuilt files (and the copies it placed) made
/// durable after it succeeds.
pub fn run(host: &Host, spec: &CommandSpec) -> Result<CommandOutput> {
    if !host.no_exec() {
        hold_readers(host, &spec.hold)?;
    }
    let out = host.run(spec)?;
    if out.success() && !spec.hold.is_empty() {
        let placed: Vec<&str> = spec.place.iter().map(|p| p.to.as_str()).collect();
        settle_rebuilt(host, &spec.hold, &placed)?;
    }
    Ok(out)
}

/// Holds each reader on the initramfs it loads now (see the module).
/// A reader that loads the held copy already (an interrupted run held it,
/// and the file may have been rebuilt since) is left as it is: copying
/// the file again would give it the other side's contents.
fn hold_readers(host: &Host, holds: &[Hold]) -> Result<()> {
    for h in holds {
        // A journal's command names what it holds: only boot files.
        for p in [&h.reader, &h.file] {
            if !is_boot_path(p) {
                return Err(Error::Refused(format!(
                    "{} is not a file a boot loader reads, so gdrprov will not hold a boot entry on it (nothing was changed)",
                    host.display(p)
                )));
            }
        }
        let Some(text) = host.read_text(&h.reader)? else {
            continue;
        };
        let Some(held_text) = hold::hold(&text, name(h)) else {
            continue;
        };
        let held_text = match (&h.kernelopts, hold::options_of(&held_text)) {
            (Some(value), Some(options)) => {
                let literal = hold::with_kernelopts(options, value);
                hold::with_options(&held_text, &literal).unwrap_or(held_text)
            }
            _ => held_text,
        };
        if !host.exists(&h.file) {
            continue;
        }
        let held = held_copy(h);
        host.remove_leftover_temps(&held)?;
        host.copy_atomic(&h.file, &held)?;
        make_boot_durable(host, &[held.as_str()])?;
        host.write_atomic(&h.reader, held_text.as_bytes(), WriteOptions::default())?;
        make_boot_durable(host, &[h.reader.as_str()])?;
    }
    Ok(())
}

/// After the rebuild: the rebuilt files on disk where the boot loader
/// reads them, before anything switches to them.
fn settle_rebuilt(host: &Host, holds: &[Hold], placed: &[&str]) -> Result<()> {
    let mut paths: Vec<&str> = holds.iter().map(|h| h.file.as_str()).collect();
    paths.extend(placed);
    if !paths.is_empty() {
        make_boot_durable(host, &paths)?;
    }
    Ok(())
}

/// Removes the held copies whose reader no longer loads them (the switch
/// is done); gives those kept because their reader still loads them (a
/// switch that did not run: `--no-exec`, a failed update-grub): removing
/// those would leave the boot without its initramfs.
pub fn release_held(host: &Host, holds: &[&Hold]) -> Result<Vec<String>> {
    let mut kept = Vec::new();
    for h in holds {
        let held = held_copy(h);
        if !host.exists(&held) {
            continue;
        }
        let held_name = format!("{}{HELD_SUFFIX}", name(h));
        let text = host.read_text(&h.reader)?.unwrap_or_default();
        if hold::names(&text, &held_name) {
            if !kept.contains(&held) {
                kept.push(held);
            }
            continue;
        }
        host.remove(&held)?;
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_then_release() {
        let t = tempfile::tempdir().unwrap();
        let h = Host::open(t.path(), false).unwrap();
        let opts = WriteOptions::default();
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
        hold_readers(&h, std::slice::from_ref(&hold)).unwrap();
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
        hold_readers(&h, std::slice::from_ref(&hold)).unwrap();
        assert_eq!(
            h.read("/boot/initrd.img-6.1.gdrprov-held")
                .unwrap()
                .unwrap(),
            b"old"
        );
        // Still read: kept.
        let kept = release_held(&h, &[&hold]).unwrap();
        assert_eq!(kept, ["/boot/initrd.img-6.1.gdrprov-held"]);
        assert!(h.exists("/boot/initrd.img-6.1.gdrprov-held"));
        // Switched (update-grub wrote grub.cfg again): released.
        h.write_atomic("/boot/grub/grub.cfg", cfg.as_bytes(), opts)
            .unwrap();
        assert!(release_held(&h, &[&hold]).unwrap().is_empty());
        assert!(!h.exists("/boot/initrd.img-6.1.gdrprov-held"));
    }
}
