//! The journal's lock file once open: the pid another run wrote, read back
//! (ours is written by the door, `door::write_pid`).
//! It is opened by the write door ([`Host::open_lock_file`], in `door/lock.rs`),
//! so that nothing but a regular file is ever written: a device node, FIFO,
//! socket or directory placed where the lock goes is refused before one byte
//! is written (issue 37: `19704\n` was written into the first bytes of a
//! block device at `var/lib/gdrprov/lock`).

#[cfg(doc)]
use super::Host;
use std::io::{Read, Seek};

/// At most this much of a lock file is read: a pid and a newline.
const MAX_LOCK_BYTES: u64 = 32;

/// The pid another run wrote into a lock file, as ` (pid N)`; empty when it
/// wrote none (or something that is not a pid). Reads at most a few bytes.
pub fn holder_of(file: &mut std::fs::File) -> String {
    let mut text = String::new();
    let _ = file.rewind();
    let _ = file.take(MAX_LOCK_BYTES).read_to_string(&mut text);
    let pid = text.trim();
    if !pid.is_empty() && pid.len() < 12 && pid.bytes().all(|b| b.is_ascii_digit()) {
        format!(" (pid {pid})")
    } else {
        String::new()
    }
}
