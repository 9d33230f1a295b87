//! Desired-state modules: each turns (facts, its part of the profile, what
//! gdrprov already owns) into changes, without side effects.

pub mod cmdline_arg;
pub mod files;
pub mod kmod;
pub mod services;

use crate::plan::Change;

/// What one module wants: whole files (owned through the files module),
/// commands, and reboots or warnings that are facts rather than changes.
#[derive(Debug, Default)]
pub struct Part {
    pub files: Vec<files::ManagedFile>,
    pub commands: Vec<Change>,
    pub reboot_pending: Vec<String>,
    pub warnings: Vec<String>,
}

impl Part {
    pub fn absorb(&mut self, other: Part) {
        self.files.extend(other.files);
        self.commands.extend(other.commands);
        self.reboot_pending.extend(other.reboot_pending);
        self.warnings.extend(other.warnings);
    }
}
