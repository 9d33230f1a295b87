//! The one error type every command returns. Each variant's message names the
//! problem and, where there is one, the fix; `main` prints it and exits 1.

pub mod exit;

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}:{line}:{col}: {msg}")]
    ProfileSyntax {
        file: String,
        line: u64,
        col: u64,
        msg: String,
    },

    #[error("{file}: {msg}")]
    ProfileInvalid { file: String, msg: String },

    /// The name shown escaped (`grammar::shown`): a newline in it never
    /// begins a line of the message.
    #[error("unknown profile `{}`: it is neither a built-in profile ({known}) nor a file; run `gdrprov profile list`", crate::grammar::shown(.name))]
    UnknownProfile { name: String, known: String },

    #[error("profiles contradict each other: {what}: {first} says {first_value}, {second} says {second_value}; apply them separately or drop one")]
    ProfileConflict {
        what: String,
        first: String,
        first_value: String,
        second: String,
        second_value: String,
    },

    #[error("profile `extends` loop: {chain}")]
    ExtendsCycle { chain: String },

    #[error("template `{template}` for {path} failed to render: {msg}")]
    Template {
        template: String,
        path: String,
        msg: String,
    },

    #[error(
        "root {0} does not exist or is not a directory; pass an existing directory with --root"
    )]
    RootMissing(PathBuf),

    #[error("path `{path}` is not allowed: {why}")]
    BadPath { path: String, why: String },

    #[error("{action} needs root privileges when the root is / (running as uid {uid}); run it with sudo, or use --root DIR for an image")]
    NotRoot { action: String, uid: u32 },

    #[error("another gdrprov run holds the lock {path}{holder}; wait for it to finish (nothing was changed)")]
    Locked { path: String, holder: String },

    #[error("{op} {path}: {source}{hint}")]
    Io {
        op: &'static str,
        path: String,
        hint: &'static str,
        #[source]
        source: std::io::Error,
    },

    #[error("command `{command}` failed: {msg}")]
    Command { command: String, msg: String },

    #[error("{0}")]
    Refused(String),

    /// Boot arguments a profile asks for that cannot be satisfied (a bad
    /// argument, or one wanted and forbidden).
    #[error(transparent)]
    BootArgs(#[from] gdrprov_boot::desired::DesiredError),

    /// The same, for one extra boot entry or entry file, named first.
    #[error("{within}: {source}")]
    BootArgsIn {
        within: String,
        #[source]
        source: gdrprov_boot::desired::DesiredError,
    },

    /// GRUB's defaults files (in DIR) that gdrprov cannot read or edit safely.
    #[error("{source} (in {dir})")]
    GrubDefaults {
        dir: String,
        #[source]
        source: gdrprov_boot::grub_defaults::GrubError,
    },

    /// `gdrprov bench` could not run or measure.
    #[error(transparent)]
    Bench(#[from] gdrprov_rdma::error::Error),

    #[error("journal: {0}")]
    Journal(String),

    #[error("{0}")]
    Usage(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The error's kind in the JSON error object (`error.kind`), stable for scripts.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::ProfileSyntax { .. } => "profile-syntax",
            Error::ProfileInvalid { .. } => "profile-invalid",
            Error::UnknownProfile { .. } => "unknown-profile",
            Error::ProfileConflict { .. } => "profile-conflict",
            Error::ExtendsCycle { .. } => "extends-cycle",
            Error::Template { .. } => "template",
            Error::RootMissing(_) => "root-missing",
            Error::BadPath { .. } => "bad-path",
            Error::NotRoot { .. } => "not-root",
            Error::Locked { .. } => "locked",
            Error::Io { .. } => "io",
            Error::Command { .. } => "command",
            // Refusals to plan with what the profile or the host's GRUB
            // files say, as before they had their own variants.
            Error::Refused(_)
            | Error::BootArgs(_)
            | Error::BootArgsIn { .. }
            | Error::GrubDefaults { .. } => "refused",
            Error::Bench(_) => "bench",
            Error::Journal(_) => "journal",
            Error::Usage(_) => "usage",
        }
    }

    /// An I/O error with the path it concerns and a hint for the common causes.
    pub fn io(op: &'static str, path: impl Into<String>, source: std::io::Error) -> Self {
        let hint = match source.raw_os_error() {
            Some(libc_enospc) if libc_enospc == nix::libc::ENOSPC => {
                " (the file system is full: free space and run again; nothing was left half-written)"
            }
            Some(e) if e == nix::libc::EROFS => {
                " (the file system is read-only: remount it read-write or use --root on a writable copy)"
            }
            // As root, EPERM is not about privileges: an immutable or append-only file
            // (`lsattr`; `chattr -i` to clear it) or a security module refusing.
            Some(e) if (e == nix::libc::EACCES || e == nix::libc::EPERM) && is_root() => {
                " (refused even to root: an immutable file? `lsattr` shows it, `chattr -i` clears it)"
            }
            Some(e) if e == nix::libc::EACCES || e == nix::libc::EPERM => {
                " (permission denied: run as root)"
            }
            _ => "",
        };
        Error::Io {
            op,
            path: path.into(),
            hint,
            source,
        }
    }
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;
    use gdrprov_boot::desired::DesiredError;
    use gdrprov_boot::grub_defaults::GrubError;

    #[test]
    fn wrapped_errors_keep_their_message_and_a_kind() {
        let conflict = || DesiredError::Conflict {
            wanted: "iommu=pt".into(),
            rule: "iommu=off is forbidden".into(),
        };
        let e = Error::from(conflict());
        assert_eq!(e.to_string(), conflict().to_string());
        assert_eq!(e.kind(), "refused");
        let e = Error::BootArgsIn {
            within: "boot entry `trial`".into(),
            source: conflict(),
        };
        assert_eq!(e.to_string(), format!("boot entry `trial`: {}", conflict()));
        assert_eq!(e.kind(), "refused");
        let e = Error::GrubDefaults {
            dir: "/r/etc/default".into(),
            source: GrubError::NoFiles,
        };
        assert_eq!(
            e.to_string(),
            format!("{} (in /r/etc/default)", GrubError::NoFiles)
        );
        assert_eq!(e.kind(), "refused");
        let bench = || crate::bench::BenchError::NoRdmaDevice {
            why: "no /sys/class/infiniband".into(),
        };
        let e = Error::from(bench());
        assert_eq!(e.to_string(), bench().to_string());
        assert_eq!(e.kind(), "bench");
        assert!(std::error::Error::source(&Error::from(conflict())).is_none());
        assert!(std::error::Error::source(&Error::BootArgsIn {
            within: String::new(),
            source: conflict()
        })
        .is_some());
    }

    #[test]
    fn permission_hint_fits_who_runs_it() {
        let e = Error::io(
            "write",
            "/etc/x",
            std::io::Error::from_raw_os_error(nix::libc::EPERM),
        );
        let msg = e.to_string();
        if nix::unistd::geteuid().is_root() {
            assert!(msg.contains("chattr -i"), "{msg}");
        } else {
            assert!(msg.contains("run as root"), "{msg}");
        }
    }
}
