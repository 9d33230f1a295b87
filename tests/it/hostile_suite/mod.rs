//! The standing hostile suite (issue 43): each family of hostile input is
//! generated over every entry point it reaches, not listed case by case, so
//! that a new entry point or a new case is one line in a table here.
//!
//! Every case asserts, through [`harness`]: a refusal that names the problem,
//! the documented exit code (docs/commands.md: 1 for every refusal), no panic,
//! and the root unchanged (path, kind, mode, owner, content or link target).
//! The table of families and entry points is in docs/reliability.md.

pub mod harness;

mod boot_lines;
mod cwd;
mod documents;
mod journal;
mod links;
mod names;
mod peer;
