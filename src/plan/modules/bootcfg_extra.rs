//! Extra boot entries (the profiles' `boot.entry` items and the trial's),
//! the part GRUB and systemd-boot share: each entry's command line, derived
//! from the default entry's, and its file in the plan. Each boot loader
//! module supplies only what differs: the default entry's command line now
//! and after the plan, and where and how an entry's file is written.

use crate::error::{Error, Result};
use crate::facts::boot::TRIAL_MARKER;
use crate::plan::change::{ManagedFile, Part};
use gdrprov_boot::desired::{self, BootWants};
use gdrprov_boot::entries;
use gdrprov_boot::line::BootLine;

/// An extra entry to write: its name, its profile's own arguments (for the
/// title) and its whole command line.
pub(super) struct Extra {
    pub(super) name: String,
    pub(super) own: Vec<String>,
    pub(super) args: Vec<String>,
}

/// The extra entries' command lines. Each `boot.entry` (name and what it
/// wants) applies its own profile's rules to the default entry's command
/// line: as it is now (`base_now`) for a trial, else as this plan leaves it
/// (`base_after`). `trial` is the trial's own arguments when this is a
/// trial: its entry is one more, the default entry after the plan and the
/// trial marker.
pub(super) fn command_lines(
    listed: &[(String, BootWants)],
    base_now: &[String],
    base_after: &[String],
    trial: Option<&[String]>,
) -> Result<Vec<Extra>> {
    let base = if trial.is_some() {
        base_now
    } else {
        base_after
    };
    let mut extras = Vec::new();
    for (name, wants) in listed {
        let p =
            desired::plan_args(&BootLine::from_args(base), wants, &[], None).map_err(|source| {
                Error::BootArgsIn {
                    within: format!("boot entry `{name}`"),
                    source,
                }
            })?;
        extras.push(Extra {
            name: name.clone(),
            own: p.wanted,
            args: p.result,
        });
    }
    if let Some(own) = trial {
        extras.push(Extra {
            name: entries::TRIAL_ENTRY.into(),
            own: own.to_vec(),
            // The marker is the kernel's (read back from /proc/cmdline):
            // before a `--`, like every argument gdrprov adds.
            args: BootLine::from_args(base_after)
                .with(&[TRIAL_MARKER.to_string()], &[])
                .args(),
        });
    }
    Ok(extras)
}

/// One entry's file, as the boot loader module places it.
pub(super) struct EntryFile {
    pub(super) path: String,
    pub(super) content: String,
    pub(super) mode: u32,
    /// The entry's id (the trial's is what its one-shot boot names).
    pub(super) id: String,
}

/// The entries' files, in the order of the entries, and the trial entry's id.
pub(super) struct Placed {
    pub(super) files: Vec<EntryFile>,
    pub(super) trial_id: Option<String>,
}

/// Every entry's file, placed by `place`, added to the plan as `module`'s.
/// Refuses two entries that would share a file.
pub(super) fn place(
    module: &'static str,
    extras: &[Extra],
    part: &mut Part,
    mut place: impl FnMut(&Extra) -> Result<EntryFile>,
) -> Result<Placed> {
    let mut placed = Placed {
        files: Vec::new(),
        trial_id: None,
    };
    for x in extras {
        let file = place(x)?;
        if placed.files.iter().any(|f| f.path == file.path) {
            return Err(Error::Refused(format!(
                "two boot entries would share {} (`gdrprov-NAME` and `NAME` name one entry); rename one",
                file.path
            )));
        }
        if x.name == entries::TRIAL_ENTRY {
            placed.trial_id = Some(file.id.clone());
        }
        part.files.push(ManagedFile {
            path: file.path.clone(),
            content: file.content.clone(),
            mode: file.mode,
            module,
            reboot: None,
        });
        placed.files.push(file);
    }
    Ok(placed)
}

/// What a boot loader gives the one core of its extra entries ([`plan`]):
/// GRUB (grub.d scripts, or copies of the default BLS entry) and
/// systemd-boot (copies of its default entry) differ only here.
pub(super) trait Loader {
    /// The default entry's command line now and after this plan.
    fn base(&self) -> Result<(Vec<String>, Vec<String>)>;
    /// The trial's own arguments (its entry's title), when this plan is a trial.
    fn trial_own(&self) -> Option<&[String]>;
    /// Refuses entries this loader cannot boot, before any file is made.
    fn check(&self, _extras: &[Extra]) -> Result<()> {
        Ok(())
    }
    /// One entry's file.
    fn file(&self, x: &Extra) -> Result<EntryFile>;
}

/// The extra entries as planned: their command lines and files, and the
/// default entry's command line now and after this plan.
pub(super) struct Planned {
    pub(super) extras: Vec<Extra>,
    pub(super) placed: Placed,
    pub(super) base_now: Vec<String>,
    pub(super) base_after: Vec<String>,
}

/// The extra entries of either boot loader: each one's command line from
/// the default entry's (the `loader` gives it), checked by the loader,
/// then its file placed in the plan as `module`'s.
pub(super) fn plan(
    module: &'static str,
    loader: &impl Loader,
    listed: &[(String, BootWants)],
    part: &mut Part,
) -> Result<Planned> {
    let (base_now, base_after) = loader.base()?;
    let extras = command_lines(listed, &base_now, &base_after, loader.trial_own())?;
    loader.check(&extras)?;
    let placed = place(module, &extras, part, |x| loader.file(x))?;
    Ok(Planned {
        extras,
        placed,
        base_now,
        base_after,
    })
}
