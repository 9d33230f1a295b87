//! systemd-boot's part of the extra boot entries (bootcfg_sdboot.rs's
//! `extra_entries`; the core both boot loaders share is bootcfg_extra.rs):
//! the default entry they copy, the copies' files, and the check that the
//! default stays the default in systemd-boot's own order.

use super::bootcfg_extra::{self as extra, EntryFile, Extra};
use crate::error::{Error, Result};
use crate::facts::boot_shape::SdBoot;
use crate::plan::modules::Context;
use gdrprov_boot::desired::{self, BootWants};
use gdrprov_boot::entries::{self, BlsEntry};
use gdrprov_boot::line::BootLine;
use gdrprov_boot::sdboot;

/// The default entry the extra entries copy, or the refusal that names
/// them (none, or only unified kernel images).
pub(super) fn default_to_copy(
    ctx: &Context,
    sd: &SdBoot,
    listed: &[(String, BootWants)],
    parsed: &[BlsEntry],
    loader_conf: Option<&str>,
    dir: &str,
) -> Result<BlsEntry> {
    if let Some(default) = sdboot::default_of(parsed, sd.efi_default.as_deref(), loader_conf) {
        return Ok(default.clone());
    }
    let names: Vec<&str> = listed
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(ctx.trial.is_some().then_some(entries::TRIAL_ENTRY))
        .collect();
    let why = if sd.ukis.is_empty() {
        String::new()
    } else {
        format!(
            " (the unified kernel images in {}/EFI/Linux carry their command line inside and cannot be copied with other arguments)",
            sd.esp
        )
    };
    Err(Error::Refused(format!(
        "no boot entry in {} to copy for {}{why}; install a kernel with kernel-install first, or drop them",
        ctx.seen.display(dir),
        names.join(", ")
    )))
}

/// Never the default by accident: systemd-boot's own order over `all` (the
/// kernels' entries and the new ones) still picks `default`.
pub(super) fn stays_the_default(
    ctx: &Context,
    sd: &SdBoot,
    mut all: Vec<BlsEntry>,
    loader_conf: Option<&str>,
    default: &BlsEntry,
) -> Result<()> {
    sdboot::sort(&mut all);
    let after = sdboot::default_of(&all, sd.efi_default.as_deref(), loader_conf);
    if let Some(e) = after.filter(|e| e.id != default.id) {
        return Err(Error::Refused(format!(
            "systemd-boot would boot the new entry {} by default instead of {} (it sorts first, and no `default` in {}/loader/loader.conf or LoaderEntryDefault says otherwise); make the default explicit first with {}, then apply again (nothing was changed)",
            e.id,
            default.id,
            ctx.seen.display(&sd.esp),
            crate::suggest::Suggest::new(crate::names::BOOT_SET_DEFAULT).arg(default.id.as_str()).shown(&crate::suggest::Given::none())
        )));
    }
    Ok(())
}

/// systemd-boot's part of the extra entries: copies of its default entry.
pub(super) struct SdExtras<'a, 'c> {
    pub(super) ctx: &'a Context<'c>,
    pub(super) wants: &'a BootWants,
    /// `ESP/loader/entries`.
    pub(super) dir: &'a str,
    pub(super) default: &'a BlsEntry,
    /// The default entry's file, copied.
    pub(super) text: String,
}

impl extra::Loader for SdExtras<'_, '_> {
    fn base(&self) -> Result<(Vec<String>, Vec<String>)> {
        let base_now = self.default.options.clone();
        let base_line = BootLine::from_args(&base_now);
        let base_after =
            desired::plan_args(&base_line, self.wants, &self.ctx.state.kernel_args, None)
                .map_err(|source| Error::BootArgsIn {
                    within: format!("{}/{}.conf", self.dir, self.default.id),
                    source,
                })?
                .result;
        Ok((base_now, base_after))
    }

    fn trial_own(&self) -> Option<&[String]> {
        self.ctx.trial.is_some().then_some(&[][..])
    }

    fn file(&self, x: &Extra) -> Result<EntryFile> {
        let (base_id, _) = sdboot::split_counter(&self.default.id);
        let id = entries::bls_derived_id(base_id, &self.default.version, &x.name);
        Ok(EntryFile {
            path: format!("{}/{id}.conf", self.dir),
            content: entries::bls_derived(&self.text, &id, &x.name, &x.args),
            mode: 0o644,
            id,
        })
    }
}
