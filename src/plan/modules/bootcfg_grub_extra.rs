//! GRUB's part of the extra boot entries (bootcfg.rs's `extra_entries`;
//! the core both boot loaders share is bootcfg_extra.rs): the default
//! entry's command line (the GRUB defaults', or on BLS hosts the default
//! entry's), the lines' length, and each entry's file: a `grub.d` script,
//! or a copy of the default BLS entry.

use super::bootcfg_extra::{self as extra, EntryFile, Extra};
use super::bootcfg_grub::{BLS_DIR, DEFAULTS};
use crate::error::{Error, Result};
use crate::plan::inputs::PlanFacts;
use crate::plan::modules::Context;
use gdrprov_boot::desired::{self, BootWants};
use gdrprov_boot::entries;
use gdrprov_boot::line::BootLine;

/// GRUB's part of the extra entries: `grub.d` scripts from the defaults'
/// command line, or (BLS) copies of the default entry.
pub(super) struct GrubExtras<'a, 'c> {
    pub(super) ctx: &'a Context<'c>,
    pub(super) seen: &'a PlanFacts,
    /// The default entry's command line as the GRUB defaults give it now.
    pub(super) current: &'a [String],
    /// The default entry's arguments: wanted, to add, to remove, the result.
    pub(super) args: &'a desired::ArgPlan,
    pub(super) wants: &'a BootWants,
    pub(super) trial: bool,
    /// A BLS host (RHEL family), and its default entry (id, text, parsed): the one copied.
    pub(super) bls: bool,
    pub(super) bls_default: Option<(String, String, entries::BlsEntry)>,
    /// The generated files' header.
    pub(super) header: String,
}

impl extra::Loader for GrubExtras<'_, '_> {
    fn base(&self) -> Result<(Vec<String>, Vec<String>)> {
        Ok(match &self.bls_default {
            Some((_, _, e)) => {
                let after = desired::plan_args(
                    &BootLine::from_args(&e.options),
                    self.wants,
                    &self.ctx.state.kernel_args,
                    None,
                )?
                .result;
                (e.options.clone(), after)
            }
            None => (self.current.to_vec(), self.args.result.clone()),
        })
    }

    fn trial_own(&self) -> Option<&[String]> {
        self.trial.then_some(self.args.wanted.as_slice())
    }

    fn check(&self, extras: &[Extra]) -> Result<()> {
        let seen = self.seen;
        let loader = match &self.bls_default {
            Some((_, _, e)) => vec![format!("BOOT_IMAGE=(hd0,gpt2){}", e.linux)],
            None => super::bootcfg_grub::grub_loader_args(seen),
        };
        for x in extras {
            let within = format!("boot entry `{}`", x.name);
            super::bootcfg_arch::line_fits(&within, &x.args, &loader)?;
        }
        if self.bls && !extras.is_empty() && self.bls_default.is_none() {
            return Err(Error::Refused(format!(
                "no boot entry in {} to derive the extra entries ({}) from; install a kernel first",
                seen.display(BLS_DIR),
                extras
                    .iter()
                    .map(|x| x.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        Ok(())
    }

    fn file(&self, x: &Extra) -> Result<EntryFile> {
        if let Some((default_id, text, e)) = &self.bls_default {
            let id = entries::bls_derived_id(default_id, &e.version, &x.name);
            return Ok(EntryFile {
                path: format!("{BLS_DIR}/{id}.conf"),
                content: entries::bls_derived(text, &id, &x.name, &x.args),
                mode: 0o644,
                id,
            });
        }
        let title = entries::title(&x.name, &x.own);
        let script =
            entries::grubd_script(&self.header, &x.name, &title, &x.args).map_err(|e| {
                Error::Refused(format!(
                    "boot entry `{}`: {e} (it comes from GRUB_CMDLINE_LINUX in {})",
                    x.name,
                    self.seen.display(DEFAULTS)
                ))
            })?;
        Ok(EntryFile {
            path: entries::grubd_path(&x.name),
            content: script,
            mode: 0o755,
            id: x.name.clone(),
        })
    }
}
