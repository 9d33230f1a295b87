//! Every exit code of gdrprov, in one table (docs/commands.md), beside the
//! error type that `main` maps to `ERROR`: the front door (src/commands)
//! reaches them through `error`, which it may import.

/// Success; for `plan --detailed-exitcode`: nothing left to change.
pub const OK: i32 = 0;
/// An error (usage errors included), with nothing changed unless it says so.
pub const ERROR: i32 = 1;
/// `--detailed-exitcode`: changes are pending (files to write or commands owed).
pub const CHANGES: i32 = 2;
/// `verify`: a check failed, the host is not ready; `doctor`: a finding
/// blocks the profile.
pub const NOT_READY: i32 = 3;
/// `plan --detailed-exitcode`: nothing left to change on the host, but its
/// kernel command line, set outside it (hypervisor, PXE, container), lacks
/// what the profile wants.
pub const BOOT_ELSEWHERE: i32 = 4;
