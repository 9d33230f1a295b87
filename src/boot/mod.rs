//! Kernel command line: parsing, desired-state rules, and the pure editor for
//! `/etc/default/grub` (plus `/etc/default/grub.d/*.cfg`).
//!
//! Everything here is pure: strings in, strings and structs out. Reading and
//! writing the files is the host layer's job.

pub mod cmdline;
pub mod desired;
pub mod grub_defaults;
mod shell;
