//! `apply --trial`, the part GRUB and systemd-boot share: the one-shot boot
//! of the trial entry, whether a reboot is still owed for it, and the
//! trial's record in the state. Each boot loader module makes the entry
//! and picks its own one-shot tool.

use super::Part;
use crate::host::CommandSpec;
use crate::journal::Trial;
use crate::names;
use crate::plan::change::Change;
use crate::plan::modules::Context;
use crate::suggest::{Given, Suggest};

/// The reboot the trial owes until it has had its boot, with the next
/// steps for PROFILES (as the user named them).
pub fn reason(id: &str, profiles: &[String]) -> String {
    let none = Given::none();
    format!(
        "trial boot: the next boot (only) uses boot entry {id}; after it, {} then {} make it the default",
        Suggest::new(names::VERIFY).profiles(profiles).shown(&none),
        Suggest::new(names::COMMIT).shown(&none),
    )
}

/// The profiles of the trial being set up (none outside `apply --trial`).
fn profiles<'a>(ctx: &'a Context) -> &'a [String] {
    ctx.trial.as_deref().unwrap_or_default()
}

/// The command that boots entry `id` once: `argv` (`grub-reboot ID`,
/// `bootctl set-oneshot ID.conf`), shown as `how`.
pub fn one_shot(ctx: &Context, module: &str, argv: &[&str], how: &str, id: &str) -> Change {
    Change::run(
        module,
        CommandSpec::new(
            argv,
            format!(
                "Boot entry {id} at the next boot only ({how}); later boots use the default again"
            ),
        ),
        Some(reason(id, profiles(ctx))),
    )
}

/// Records the trial of entry `id` (`base_now` is the default entry's
/// command line now, `base_after` with the profiles' arguments), and owes
/// its reboot while it has not had its boot: not when it is the running
/// boot, nor when the boot loader used the one-shot boot of this same trial
/// and fell back (verify's `trial` check says it did not boot).
pub fn record(
    ctx: &Context,
    part: &mut Part,
    id: String,
    base_now: &[String],
    base_after: Vec<String>,
) {
    let Some(specs) = &ctx.trial else {
        return;
    };
    let had_its_boot = ctx.facts.boot.trial_running
        || (ctx.state.trial.as_ref().is_some_and(|t| t.entry == id)
            && ctx.facts.boot.next_entry.as_deref() != Some(id.as_str()));
    if !had_its_boot {
        part.reboot_pending.push(reason(&id, profiles(ctx)));
    }
    part.trial = Some(Trial {
        profiles: specs.clone(),
        entry: id,
        removed: base_now
            .iter()
            .filter(|a| !base_after.contains(a))
            .cloned()
            .collect(),
        args: base_after,
    });
}
