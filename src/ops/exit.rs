//! The exit codes, for the front door (src/commands) and the Ansible module, which
//! import no stage of their own: the table itself is src/exit.rs.

pub use crate::exit::*;
