//! Desired-state modules: each turns (facts, its part of the profile, what
//! gdrprov already owns) into changes, without side effects.

pub mod bootcfg;
pub mod bootcfg_elsewhere;
pub mod files;
pub mod kmod;
pub mod nccl;
pub mod network;
pub mod pcie;
pub mod services;

use crate::plan::Change;

/// What one module wants: whole files (owned through the files module),
/// commands, and reboots or warnings that are facts rather than changes.
#[derive(Debug, Default)]
pub struct Part {
    pub files: Vec<files::ManagedFile>,
    /// Edits of files gdrprov does not own as a whole (GRUB defaults).
    pub edits: Vec<Change>,
    pub commands: Vec<Change>,
    /// Kernel arguments gdrprov owns after the change, when boot is managed.
    pub kernel_args: Option<Vec<String>>,
    pub reboot_pending: Vec<String>,
    pub warnings: Vec<String>,
    /// The trial boot this plan sets up (`apply --trial`); `None` clears one.
    pub trial: Option<crate::journal::Trial>,
    /// Paths whose changes must come after the commands (BLS entries that
    /// grubby would otherwise rewrite), and extra such rewrites.
    pub late_paths: Vec<String>,
    pub late: Vec<Change>,
    /// The keys of /etc/nccl.conf gdrprov owns after the change.
    pub nccl_keys: Option<Vec<String>>,
    /// The boot part on a host whose command line is set outside it.
    pub boot_elsewhere: Option<bootcfg_elsewhere::BootElsewhere>,
}

impl Part {
    pub fn absorb(&mut self, other: Part) {
        self.files.extend(other.files);
        self.edits.extend(other.edits);
        if other.kernel_args.is_some() {
            self.kernel_args = other.kernel_args;
        }
        self.commands.extend(other.commands);
        self.reboot_pending.extend(other.reboot_pending);
        self.warnings.extend(other.warnings);
        if other.trial.is_some() {
            self.trial = other.trial;
        }
        self.late_paths.extend(other.late_paths);
        self.late.extend(other.late);
        if other.nccl_keys.is_some() {
            self.nccl_keys = other.nccl_keys;
        }
        if other.boot_elsewhere.is_some() {
            self.boot_elsewhere = other.boot_elsewhere;
        }
    }
}
