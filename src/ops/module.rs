//! What the Ansible module (src/commands/ansible.rs) needs beyond the operations it shares
//! with the command line (`plan`, `apply`, `verify`, `rollback`, each through the same
//! function of `ops` as the command of that name): its arguments file, read through the
//! read door. Its result is rendered by src/output/ansible.rs.

use crate::error::Result;
use std::path::Path;

/// A regular file (not a link) that neither group nor others may write: what Ansible
/// writes a binary module's arguments to (`commands::ansible::is_ansible_args_path`).
pub fn is_unshared_file(path: &Path) -> bool {
    crate::host::is_unshared_regular_file(path)
}

/// The module's arguments file, read up to its kind's limit.
pub fn read_args(path: &Path) -> Result<String> {
    crate::host::read_local_text(path, crate::host::ReadLimit::Args)
}
