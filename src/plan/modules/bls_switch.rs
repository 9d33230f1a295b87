//! The boot switch last on the RHEL family (issue 37): BLS entries in
//! `/boot/loader/entries`, read by grub2's blscfg, their initramfs rebuilt in
//! place by `dracut -f --kver K`, their kernel arguments changed by `grubby
//! --update-kernel=ALL`. Pure: reads facts and `ctx.seen`.
//!
//! grubby cannot be the switch: an entry held on a copy of the old initramfs
//! would get the new options from it while still loading the old initramfs.
//! So each entry that loads `initramfs-K.img` is held during dracut like the
//! others ([`holds`]), and the switch is gdrprov's own whole-file write of the
//! entry's final text ([`switches`]): the options grubby would write
//! (`gdrprov_boot::hold::grubby_options`, from grubby's own arguments) and the
//! initrd naming the rebuilt file again, written after the rebuild and before
//! grubby, which then finds the same arguments and writes the same line.
//! The other entries with literal options that grubby changes are written
//! the same way, so that the journal keeps them all: grubby has no undo, and
//! a rollback puts back the entries' old text.
//!
//! An entry whose options read `$kernelopts` (RHEL 8: the line is grubenv's
//! `kernelopts`, which grubby edits) is held and switched with that line
//! written out: held with grubenv's line as the plan read it, switched to the
//! new one (grubby's arguments applied to it), so grubby's later edit of
//! grubenv cannot reach it. It stays written out (`$tuned_params` and other
//! variables are kept): a rollback puts the entry's `$kernelopts` text back
//! only after its `dracut`, when grubby's journaled undo has already set
//! grubenv's `kernelopts` back (`bootcfg`), so each instant is one side.
//! Where grubenv has no plain `kernelopts` line such an entry is not held,
//! and the plan says so ([`kernelopts_warning`]).

use super::bootcfg::{BLS_DIR, MODULE};
use crate::facts::boot_shape::CmdlineHome;
use crate::facts::OsFamily;
use crate::host::{CommandSpec, Hold};
use crate::plan::change::{Action, Change};
use crate::plan::modules::Context;
use gdrprov_boot::{entries, hold};

/// The image `dracut -f --kver K` writes, as `/boot/NAME`.
fn image(kernel: &str) -> String {
    format!("initramfs-{kernel}.img")
}

/// Whether the BLS entries are this host's boot files: the RHEL family
/// booting through GRUB on the host.
fn is_bls(ctx: &Context) -> bool {
    ctx.facts.os.family == OsFamily::Rhel
        && matches!(ctx.facts.boot.cmdline_home, CmdlineHome::OnHost { .. })
}

/// Whether a file of `/boot/loader/entries` is an entry the distribution
/// wrote (not gdrprov's own extra entries, `MACHINEID-gdrprov-NAME.conf`).
fn is_distribution_entry(name: &str) -> bool {
    name.ends_with(".conf")
        && !name.contains(entries::BLS_INFIX)
        && !name.contains('/')
        && !name.starts_with('.')
}

/// The distribution's entries (not gdrprov's own extra entries, written
/// after grubby) that load the initramfs of `kernel`: path and text.
fn entries_loading<'a>(ctx: &'a Context, kernel: &str) -> Vec<(String, &'a str)> {
    let name = image(kernel);
    ctx.seen
        .grub
        .bls_entries
        .iter()
        .filter(|(n, _)| is_distribution_entry(n))
        .filter(|(_, t)| hold::names(t, &name))
        .map(|(n, t)| (format!("{BLS_DIR}/{n}"), t.as_str()))
        .collect()
}

/// Whether an entry's command line is `$kernelopts` from grubenv (RHEL 8).
fn reads_grubenv(text: &str) -> bool {
    hold::options_of(text).is_some_and(hold::reads_kernelopts)
}

/// grubenv's `kernelopts` as the plan read it (plain values only).
fn kernelopts<'a>(ctx: &'a Context<'_>) -> Option<&'a str> {
    ctx.seen
        .grub
        .grubenv_bls
        .as_deref()
        .and_then(super::bootcfg::kernelopts)
}

/// The entries held on the initramfs of `kernel` while dracut rebuilds it
/// (see the module). An RHEL 8 entry (`$kernelopts`) is held with grubenv's
/// line written out, so that grubby's edit of grubenv cannot reach it; not
/// held where grubenv's line is unknown ([`kernelopts_warning`]).
pub fn holds(ctx: &Context, kernel: &str) -> Vec<Hold> {
    if !is_bls(ctx) {
        return Vec::new();
    }
    entries_loading(ctx, kernel)
        .into_iter()
        .filter_map(|(reader, text)| {
            let kernelopts = match reads_grubenv(text) {
                true => Some(kernelopts(ctx)?.to_string()),
                false => None,
            };
            Some(Hold {
                reader,
                file: format!("/boot/{}", image(kernel)),
                kernelopts,
            })
        })
        .collect()
}

/// grubby's arguments (`--args`, `--remove-args`), when the command is
/// `grubby --update-kernel=ALL`.
fn grubby_args(c: &CommandSpec) -> Option<(Vec<&str>, Vec<&str>)> {
    let tool = c.argv.first()?;
    if tool.rsplit('/').next() != Some("grubby")
        || !c.argv.iter().any(|a| a == "--update-kernel=ALL")
    {
        return None;
    }
    let values = |flag: &str| -> Vec<&str> {
        c.argv
            .iter()
            .filter_map(|a| a.strip_prefix(flag))
            .flat_map(str::split_whitespace)
            .collect()
    };
    Some((values("--args="), values("--remove-args=")))
}

/// The kernel a `dracut ... --kver K` rebuilds.
fn kver(c: &CommandSpec) -> Option<&str> {
    let i = c.argv.iter().position(|a| a == "--kver")?;
    c.argv.get(i + 1).map(String::as_str)
}

/// gdrprov's own writes of the entries grubby changes, after the rebuilds
/// and before grubby: each distribution entry with literal options that
/// grubby's arguments change gets its final text (grubby's options; the
/// initrd as it is, so an entry a rebuild holds names the rebuilt file
/// again: its switch). The journal then keeps every entry's old text, and a
/// rollback puts it back (grubby has no undo: without these writes a
/// rollback left the entries with the new arguments). None where nothing runs (`--no-exec`) or
/// no grubby runs (a rebuild then goes in place: the line is the same on both
/// sides).
pub fn switches(ctx: &Context, commands: &[Change]) -> Vec<Change> {
    let runs = || {
        commands.iter().filter_map(|c| match &c.action {
            Action::Run { command } => Some(command),
            _ => None,
        })
    };
    let Some((add, remove)) = runs().find_map(grubby_args) else {
        return Vec::new();
    };
    if !is_bls(ctx) || ctx.no_exec {
        return Vec::new();
    }
    let held: Vec<&Hold> = runs()
        .filter(|c| c.rebuilds_initramfs())
        .flat_map(|c| &c.hold)
        .collect();
    let mut out: Vec<Change> = Vec::new();
    for (name, text) in &ctx.seen.grub.bls_entries {
        if !is_distribution_entry(name) {
            continue;
        }
        let Some(options) = hold::options_of(text) else {
            continue;
        };
        // An RHEL 8 entry a rebuild holds is switched with its new line
        // written out (see `holds`). One not held keeps `$kernelopts`: grubby
        // changes grubenv, not its text, and grubby's undo sets grubenv back.
        let path = format!("{BLS_DIR}/{name}");
        let options = match (reads_grubenv(text), kernelopts(ctx)) {
            (false, _) => options.to_string(),
            (true, Some(value)) if held.iter().any(|h| h.reader == path) => {
                hold::with_kernelopts(options, value)
            }
            (true, _) => continue,
        };
        let new = hold::grubby_options(&options, &add, &remove);
        let Some(after) = hold::with_options(text, &new).filter(|a| a != text) else {
            continue;
        };
        let description = match held.iter().find(|h| h.reader == path) {
            Some(h) => format!(
                "Switch {path} to the rebuilt {} with the new kernel arguments, now that it is on disk (grubby then finds them there and writes the same line)",
                h.file
            ),
            None => format!(
                "Write the new kernel arguments into {path} (grubby then finds them there and writes the same line; the journal keeps the entry for rollback)"
            ),
        };
        out.push(Change::write(
            MODULE,
            description,
            &path,
            Some(text.clone()),
            after,
            0o644,
            None,
        ));
    }
    out
}

/// Why the RHEL 8 entries (`options $kernelopts`) of a rebuilt kernel are
/// not held, when grubby changes their command line.
pub fn kernelopts_warning(ctx: &Context, commands: &[Change]) -> Option<String> {
    let runs: Vec<&CommandSpec> = commands
        .iter()
        .filter_map(|c| match &c.action {
            Action::Run { command } => Some(command),
            _ => None,
        })
        .collect();
    if !is_bls(ctx) || ctx.no_exec || !runs.iter().any(|c| grubby_args(c).is_some()) {
        return None;
    }
    let paths: Vec<String> = runs
        .iter()
        .filter(|c| c.rebuilds_initramfs())
        .filter_map(|c| kver(c))
        .flat_map(|k| entries_loading(ctx, k))
        .filter(|(_, t)| reads_grubenv(t) && kernelopts(ctx).is_none())
        .map(|(p, _)| p)
        .collect();
    (!paths.is_empty()).then(|| {
        format!(
            "the BLS entries {} take their kernel arguments from $kernelopts, and /boot/grub2/grubenv has no plain kernelopts line to write out in their place: gdrprov cannot hold them while dracut rebuilds their initramfs, so a power cut between dracut and grubby boots the old arguments with the rebuilt initramfs; apply where a power cut is unlikely, and reboot once it has finished",
            paths.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::CommandSpec;

    #[test]
    fn grubby_and_dracut_arguments_are_read_from_their_argv() {
        let g = CommandSpec::new(
            &[
                "grubby",
                "--update-kernel=ALL",
                "--args=iommu=pt intel_iommu=on",
                "--remove-args=iommu",
            ],
            "",
        );
        assert_eq!(
            grubby_args(&g),
            Some((vec!["iommu=pt", "intel_iommu=on"], vec!["iommu"]))
        );
        let one = CommandSpec::new(
            &["grubby", "--update-kernel=/boot/vmlinuz-5", "--args=x"],
            "",
        );
        assert_eq!(grubby_args(&one), None);
        let d = CommandSpec::new(&["dracut", "-f", "--kver", "5.14.0"], "");
        assert_eq!(kver(&d), Some("5.14.0"));
        assert!(reads_grubenv("title x\noptions $kernelopts iommu=pt\n"));
        assert!(!reads_grubenv("title x\noptions root=/dev/vda1 ro\n"));
    }
}
