//! Kernel command line: parsing, desired-state rules, and the pure editor for
//! `/etc/default/grub` (plus `/etc/default/grub.d/*.cfg`).
//!
//! Everything here is pure: strings in, strings and structs out. Reading and
//! writing the files is the host layer's job. The intended flow:
//!
//! 1. Read `/etc/default/grub`, then every drop-in of
//!    [`grub_defaults::dropin_set`] in its order, as `(name, content)` pairs.
//! 2. [`grub_defaults::effective_cmdline`] gives the arguments GRUB puts on a
//!    normal entry (`GRUB_CMDLINE_LINUX` then `GRUB_CMDLINE_LINUX_DEFAULT`).
//! 3. [`desired::plan_args`] on the line as a [`line::BootLine`], with the profile's [`desired::BootWants`], the
//!    owned arguments recorded by the last apply, and the split
//!    `/proc/cmdline` (when the root is the running system) gives what to add
//!    and remove, the new ownership record, and the reboot diff.
//! 4. [`grub_defaults::plan_cmdline_edit`] turns `add`/`remove` into whole new
//!    file contents (only the files that change; none when compliant), already
//!    re-read and checked. Apply writes them, may run `bash -n` on them, then
//!    regenerates `grub.cfg`, and records `ArgPlan::owned`.
//!
//! Every boot shape reads and writes its line through one model,
//! [`line::BootLine`]: the kernel's part ends at `--` (init's follows), added
//! arguments go before it ([`line::edit_text`] for a line kept byte for
//! byte), and [`line::fits`] keeps the whole line, with what the boot loader
//! adds, under the kernel's `COMMAND_LINE_SIZE`. GRUB's drop-ins are the set
//! [`grub_defaults::dropin_set`] gives, as `/bin/sh` globs them.
//!
//! Every error carries the file and line and says what to fix by hand.

pub mod cmdline;
pub mod desired;
pub mod entries;
pub mod grub_defaults;
pub mod hold;
pub mod line;
pub mod sdboot;
mod shell;
pub mod uki;
pub mod wildcard;
