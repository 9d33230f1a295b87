//! The host layer: the only code that touches the machine. Every path is a path
//! *inside* the root (`/` or `--root DIR`), resolved so that neither `..` nor a
//! symlink can reach outside it; every command goes through one runner that
//! chroots into an image root and can be told to run nothing. Everything
//! gdrprov reads comes through one door ([`read`]): regular files only,
//! never blocking, at most a stated size per kind of file.
//!
//! This is the only module that may touch the filesystem and run processes:
//! clippy.toml disallows `std::fs`, `std::process::Command` and `duct` in the
//! rest of the workspace, and Cargo.toml's lints make that an error.
//!
//! It decides nothing (issue 44): how a filesystem is flushed, which boot
//! entry is held on which copy, which command rebuilds an initramfs are
//! decided in `plan` and `apply` (`apply::durable`, `apply::hold`) and handed
//! down as data ([`Filesystem`], [`Hold`], [`CommandSpec`]). Of gdrprov's own
//! code it imports only `error`; its raw system calls (freeze/thaw, ext4
//! checkpoint, the watchdog's fork) are `crates/gdrprov-sys`'s, a leaf crate
//! like nix (tests/house/host_layer.rs).
#![allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    clippy::disallowed_macros,
    reason = "the host layer is the door to the filesystem and to processes"
)]

pub mod child;
pub mod door;
mod flush;
#[cfg(test)]
pub(crate) mod flush_fixture;
mod fs;
mod lock;
mod lockfile;
mod path;
mod read;
mod record;
mod runner;
pub mod snapshot;
pub mod textfile;

pub use door::{
    remove_local, write_local, write_new_private, write_pid, Existing, LocalTree, Scratch,
    DISTRO_LINKS,
};
pub use flush::{sync, Durable, Filesystem, Method as DurableMethod};
pub use fs::{FileMeta, WriteOptions};
pub use lock::FileLock;
pub use lockfile::holder_of;
pub use path::{check_profile_path, InRoot, Visit};
pub use read::{
    canonical_local, is_local_dir, is_local_file, is_local_special, is_unshared_regular_file,
    list_local_dir, local_exists, local_id, log_text, open_local, random_bytes, read_kmsg,
    read_local, read_local_text, LocalId, ReadLimit,
};
pub use record::{RecordedCommand, Recording, KEEP_FILE, SNAPSHOT_DIR};
pub use runner::{shell_quote, CommandOutput, CommandSpec, Hold, Placement};

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Host {
    root: PathBuf,
    live: bool,
    no_exec: bool,
    /// Set by `inventory --snapshot`: every fact read and command run is logged.
    recorder: Option<Arc<Mutex<Recording>>>,
    /// Set when the root is a snapshot: commands are answered from it, never run.
    replay: Option<Arc<Recording>>,
    /// The root, open, for reads resolved by the kernel (`openat2`).
    root_fd: Option<Arc<std::os::fd::OwnedFd>>,
    /// Paths a read refused for not being regular files (a FIFO, socket or
    /// device node where a file should be), for [`Host::refuse_special_files`].
    special: Arc<Mutex<std::collections::BTreeSet<String>>>,
}

impl Host {
    /// Opens a root. `live` is true when the root is the running system's `/`,
    /// which is the only case where running-kernel state (loaded modules, the
    /// current command line) can be changed rather than merely read.
    pub fn open(root: &Path, no_exec: bool) -> Result<Self> {
        let canonical = std::fs::canonicalize(root).map_err(|_| Error::RootMissing(root.into()))?;
        if !canonical.is_dir() {
            return Err(Error::RootMissing(root.into()));
        }
        let live = canonical == Path::new("/");
        let replay = if live {
            None
        } else {
            record::load_replay(&canonical)?.map(Arc::new)
        };
        let root_fd = read::open_root(&canonical).map(Arc::new);
        Ok(Host {
            root: canonical,
            live,
            no_exec,
            recorder: None,
            replay,
            root_fd,
            special: Arc::default(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when the root is the running system.
    pub fn is_live(&self) -> bool {
        self.live
    }

    pub fn no_exec(&self) -> bool {
        self.no_exec
    }

    /// How a path inside the root is shown to people: `/etc/x` for the live
    /// system, `ROOT/etc/x` otherwise.
    pub fn display(&self, path: &str) -> String {
        if self.live {
            path.to_string()
        } else {
            format!("{}{}", self.root.display(), path)
        }
    }
}
