//! Desired-state modules: each turns (facts, its part of the profile, what
//! gdrprov already owns) into changes, without side effects.

pub mod cmdline_arg;
pub mod files;
