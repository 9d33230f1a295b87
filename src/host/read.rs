//! The one door for reading. Everything gdrprov reads comes through here:
//! files inside the root ([`Host::read`] and its kin, resolved in the root)
//! and files named on the command line or found beside one (profiles and
//! their templates, a sweep's pair results, `--verify-dir` reports,
//! `--drained` and `--probation` node lists, host lists, NCCL logs, token
//! files, Ansible's arguments: [`read_local`], [`open_local`]). There is no
//! other way to read a file in gdrprov: `std::fs` is disallowed outside
//! this layer, and in it every read of a file starts here.
//!
//! Every read opens the file with `O_NONBLOCK` (opening a FIFO with no writer
//! returns at once instead of waiting for one), checks the file opened
//! (`fstat`, no race with a rename) and refuses what is not a regular file: a
//! FIFO, socket or device node (`/dev/zero`) would block the read or never
//! end. It then reads at most the stated size for its kind of file
//! ([`ReadLimit`]) and refuses a larger file, naming it and the limit,
//! instead of reading until memory runs out.
//!
//! A file named on the command line is opened as named: a symlink there is
//! followed, as any tool follows a path its user gave (the user chose it; a
//! profile kept in a repository and linked from /etc is common). What it
//! reaches must still be a regular file within the limit. Paths *inside a
//! root* never follow a symlink out of it ([`Host::resolve`]).

mod in_root;

pub(super) use in_root::open_root;

use super::Host;
use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// The kinds of file gdrprov reads, each with the most it reads of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadLimit {
    /// A file of the root (configuration, boot entries, sysfs and procfs,
    /// backups of them). An initramfs or a UKI is copied streamed, never read
    /// whole; the limit is above the largest of them all the same.
    RootFile,
    /// A generation's `journal.json`.
    Journal,
    /// `state.json`.
    State,
    /// The lock file (a process id).
    Lock,
    /// A profile.
    Profile,
    /// A template beside a profile.
    Template,
    /// One `bench pair --format json` result of a sweep (a few kB).
    PairResult,
    /// One `verify --format json` report (`--verify-dir`).
    VerifyReport,
    /// `sinfo` output: drained or probation nodes (`--drained`, `--probation`).
    NodeList,
    /// A host list, one name a line (`--hosts`).
    HostList,
    /// An NCCL debug log (`doctor --nccl-log`).
    NcclLog,
    /// The kernel's log of a root (`var/log/kern.log`).
    Log,
    /// A shared secret (`--token-file`).
    Token,
    /// Ansible's module arguments.
    Args,
}

impl ReadLimit {
    /// The most bytes read of one such file.
    pub const fn max_bytes(self) -> u64 {
        match self {
            ReadLimit::RootFile => 512 * MIB,
            ReadLimit::Journal => 64 * MIB,
            ReadLimit::State => 16 * MIB,
            ReadLimit::Lock => 4 * KIB,
            ReadLimit::Profile | ReadLimit::Template => MIB,
            ReadLimit::PairResult | ReadLimit::VerifyReport => 4 * MIB,
            ReadLimit::NodeList | ReadLimit::HostList => 16 * MIB,
            ReadLimit::NcclLog | ReadLimit::Log => 256 * MIB,
            ReadLimit::Token => 4 * KIB,
            ReadLimit::Args => 4 * MIB,
        }
    }

    /// What the file is, for messages.
    pub const fn what(self) -> &'static str {
        match self {
            ReadLimit::RootFile => "a file of the root",
            ReadLimit::Journal => "a journal",
            ReadLimit::State => "a state file",
            ReadLimit::Lock => "a lock file",
            ReadLimit::Profile => "a profile",
            ReadLimit::Template => "a template",
            ReadLimit::PairResult => "a pair result",
            ReadLimit::VerifyReport => "a verify report",
            ReadLimit::NodeList => "a node list",
            ReadLimit::HostList => "a host list",
            ReadLimit::NcclLog => "an NCCL log",
            ReadLimit::Log => "a log",
            ReadLimit::Token => "a token file",
            ReadLimit::Args => "an arguments file",
        }
    }

    /// The operation named in an I/O error.
    const fn op(self) -> &'static str {
        match self {
            ReadLimit::Profile => "read profile",
            ReadLimit::Template => "read template",
            _ => "read",
        }
    }
}

/// `n` bytes as people read them: `4 KiB`, `16 MiB`.
fn size(n: u64) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= KIB && n % KIB == 0 {
        format!("{} KiB", n / KIB)
    } else {
        format!("{n} bytes")
    }
}

/// Reads all of an open file, at most `limit`'s size; more is refused.
pub(super) fn read_capped(file: impl Read, limit: ReadLimit, shown: &str) -> Result<Vec<u8>> {
    let max = limit.max_bytes();
    let mut data = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(limit.op(), shown, e))?;
    if data.len() as u64 > max {
        return Err(too_big(shown, limit));
    }
    Ok(data)
}

fn too_big(shown: &str, limit: ReadLimit) -> Error {
    Error::BadPath {
        path: shown.to_string(),
        why: format!(
            "it is larger than {} (over {} bytes), the most gdrprov reads of {}; name the right file (or a part of it) and run again",
            size(limit.max_bytes()),
            limit.max_bytes(),
            limit.what()
        ),
    }
}

/// The error for a file that is there but is not a regular file.
fn not_regular(shown: &str, meta: &std::fs::Metadata, limit: ReadLimit) -> Error {
    Error::BadPath {
        path: shown.to_string(),
        why: format!(
            "it is {}, not a regular file, so gdrprov will not read it as {} (it could block or never end); name a regular file (save it to one first)",
            kind_of(meta),
            limit.what()
        ),
    }
}

/// The error for an opened file that is not a regular file.
pub(super) fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() || t.is_block_device() {
        "a device node"
    } else if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// The error for a path that is there but is not a regular file (a FIFO,
/// socket, device node or directory where gdrprov reads or writes a file).
pub(super) fn not_regular_file(path: String, meta: &std::fs::Metadata) -> Error {
    let kind = kind_of(meta);
    Error::BadPath {
        path,
        why: format!(
            "it is {kind}, not a regular file, so gdrprov will not read or write it; \
             replace it with a regular file (or remove it) and run again"
        ),
    }
}

/// Whether an error says the path is not there.
pub(super) fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Opens a file named by the user (not in a root) for reading, never
/// blocking (a symlink followed, as a shell would), and checks on the open
/// file that it is a regular file: the file and what `fstat` said of it
/// (its mode, for a token file's check).
pub fn open_local(path: &Path, limit: ReadLimit) -> Result<(std::fs::File, std::fs::Metadata)> {
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        // A socket cannot be opened at all: say what it is all the same.
        .map_err(|e| match std::fs::metadata(path) {
            Ok(m) if !m.is_file() && !m.is_dir() => not_regular(&shown, &m, limit),
            _ => Error::io(limit.op(), &shown, e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(limit.op(), &shown, e))?;
    if !meta.is_file() {
        return Err(not_regular(&shown, &meta, limit));
    }
    Ok((file, meta))
}

/// [`open_local`] for the host layer's own copies (a snapshot of a root):
/// the open regular file, or why not.
pub(super) fn open_regular_local(path: &Path) -> Result<std::fs::File> {
    open_local(path, ReadLimit::RootFile).map(|(f, _)| f)
}

/// Reads a file named on the command line (or found beside one): a regular
/// file of at most `limit`'s size, opened without blocking. One over the
/// limit is refused by its size before a byte is read, and by what is read
/// (a file growing while read is cut at the limit and refused).
pub fn read_local(path: &Path, limit: ReadLimit) -> Result<Vec<u8>> {
    let shown = path.display().to_string();
    let (file, meta) = open_local(path, limit)?;
    if meta.len() > limit.max_bytes() {
        return Err(too_big(&shown, limit));
    }
    read_capped(file, limit, &shown)
}

/// [`read_local`] for text: invalid UTF-8 is refused, naming the file and
/// the offset of the first invalid byte.
pub fn read_local_text(path: &Path, limit: ReadLimit) -> Result<String> {
    String::from_utf8(read_local(path, limit)?).map_err(|e| Error::BadPath {
        path: path.display().to_string(),
        why: format!(
            "it is not UTF-8 text (an invalid byte at offset {}); give {} as gdrprov or the tool wrote it",
            e.utf8_error().valid_up_to(),
            limit.what()
        ),
    })
}

/// The longest line of a log kept whole ([`log_text`]); the rest of a
/// longer line is left out, and the line says how much.
pub const LOG_LINE_MAX: usize = 4096;

/// A log's bytes as text, never refused for its content: each byte that is
/// not UTF-8 shown as `\xNN`, each line cut at [`LOG_LINE_MAX`] bytes (a
/// 100 MB line is one line of 4 KiB and a note). A log is evidence that
/// gdrprov quotes, not a file it edits.
pub fn log_text(bytes: &[u8]) -> String {
    let decoded: std::borrow::Cow<'_, str> = match std::str::from_utf8(bytes) {
        Ok(s) => s.into(),
        Err(_) => {
            let mut out = String::with_capacity(bytes.len() + 16);
            for chunk in bytes.utf8_chunks() {
                out.push_str(chunk.valid());
                for b in chunk.invalid() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            out.into()
        }
    };
    if !decoded.split('\n').any(|l| l.len() > LOG_LINE_MAX) {
        return decoded.into_owned();
    }
    let mut out = String::with_capacity(decoded.len().min(64 << 20));
    for (i, line) in decoded.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if line.len() <= LOG_LINE_MAX {
            out.push_str(line);
            continue;
        }
        let mut end = LOG_LINE_MAX;
        while !line.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&line[..end]);
        out.push_str(&format!(
            " … ({} more bytes of this line not read)",
            line.len() - end
        ));
    }
    out
}

/// Whether `path` names a regular file (a symlink followed), as
/// `Path::is_file` says.
pub fn is_local_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// Whether `path` is itself a regular file (not a symlink to one) that
/// neither its group nor others may write: only its owner (whoever that is)
/// could have written it. The owner is not asked: under Ansible's `become`
/// the file is the login user's while gdrprov runs as root.
pub fn is_unshared_regular_file(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.mode() & 0o022 == 0)
}

/// Whether `path` names a FIFO, socket or device node (a symlink followed):
/// something there that is neither a regular file nor a directory.
pub fn is_local_special(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// What a path names once symlinks are followed: its (device, inode), the
/// same for every way to reach it, and whether it is a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalId {
    pub dev: u64,
    pub ino: u64,
    pub is_dir: bool,
}

/// [`LocalId`] of `path` (a symlink followed).
pub fn local_id(path: &Path) -> std::io::Result<LocalId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(LocalId {
        dev: m.dev(),
        ino: m.ino(),
        is_dir: m.is_dir(),
    })
}

/// Whether `path` names a directory (a symlink followed).
pub fn is_local_dir(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_dir())
}

/// Whether anything is at `path` (a dangling symlink counts).
pub fn local_exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// The absolute path with every symlink resolved; `None` when it does not
/// exist.
pub fn canonical_local(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// The entries of a directory named by the user, sorted, each with whether
/// it is a directory (a symlink followed).
pub fn list_local_dir(dir: &Path) -> Result<Vec<(PathBuf, bool)>> {
    let shown = || dir.display().to_string();
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io("read", shown(), e))? {
        let p = e.map_err(|e| Error::io("read", shown(), e))?.path();
        let is_dir = is_local_dir(&p);
        out.push((p, is_dir));
    }
    out.sort();
    Ok(out)
}

/// The first `max` bytes at most of a regular file (a script's `#!` line),
/// its path already resolved in the root; `None` when it is not a regular
/// file or cannot be read.
pub(super) fn read_head(real: &Path, max: u64) -> Option<Vec<u8>> {
    let (file, _) = open_local(real, ReadLimit::RootFile).ok()?;
    let mut head = Vec::new();
    file.take(max).read_to_end(&mut head).ok()?;
    Some(head)
}

/// A directory, open for what the host layer does to it as a whole (fsync
/// its entries, `syncfs`, freeze and thaw), never to read its names.
pub(super) fn open_dir(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
        .open(path)
}

/// `count` random bytes from the kernel (`/dev/urandom`: the one device
/// gdrprov reads, and only that count).
pub fn random_bytes(count: usize) -> std::io::Result<Vec<u8>> {
    let mut out = vec![0u8; count];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut out)?;
    Ok(out)
}

/// The kernel ring buffer of the running system (`/dev/kmsg`, a character
/// device read record by record), without blocking: at most `max` bytes.
/// `None` when it cannot be opened (not root with dmesg_restrict).
pub fn read_kmsg(max: usize) -> Option<String> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open("/dev/kmsg")
        .ok()?;
    let mut out = String::new();
    let mut buf = vec![0u8; 16 * 1024];
    // Each read gives one record; EAGAIN at the end; EPIPE when records
    // were overwritten while reading (go on with the next).
    for _ in 0..1_000_000 {
        if out.len() >= max {
            break;
        }
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                out.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
            }
            Err(e) if e.raw_os_error() == Some(nix::libc::EPIPE) => continue,
            Err(_) => break,
        }
    }
    Some(out)
}

impl Host {
    /// Reads a file of the root, at most `limit`'s size; `None` when it
    /// does not exist.
    pub fn read_limited(&self, path: &str, limit: ReadLimit) -> Result<Option<Vec<u8>>> {
        // gdrprov's own state and journal are read where they are written:
        // never through a link (the write door refuses one there too), so a
        // link at state.json is named for what it is, not parsed as state.
        if matches!(limit, ReadLimit::State | ReadLimit::Journal) {
            self.refuse_links([path])?;
        }
        let Some((file, logical)) = self.open_regular(path)? else {
            return Ok(None);
        };
        read_capped(file, limit, &self.display(&logical)).map(Some)
    }

    /// [`Host::read_limited`] for a text file that gdrprov may edit; it must
    /// be UTF-8.
    pub fn read_text_limited(&self, path: &str, limit: ReadLimit) -> Result<Option<String>> {
        match self.read_limited(path, limit)? {
            None => Ok(None),
            Some(bytes) => String::from_utf8(bytes)
                .map(Some)
                .map_err(|_| Error::BadPath {
                    path: self.display(path),
                    why: "it is not valid UTF-8 text, so gdrprov will not edit it".into(),
                }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size(4 * KIB), "4 KiB");
        assert_eq!(size(16 * MIB), "16 MiB");
        assert_eq!(size(100), "100 bytes");
    }

    #[test]
    fn a_file_over_its_limit_is_refused_naming_it_and_the_limit() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("token");
        std::fs::write(&p, vec![b'a'; 4097]).unwrap();
        let err = read_local(&p, ReadLimit::Token).unwrap_err().to_string();
        assert!(
            err.contains(&p.display().to_string())
                && err.contains("larger than 4 KiB (over 4096 bytes)")
                && err.contains("a token file"),
            "{err}"
        );
        std::fs::write(&p, vec![b'a'; 4096]).unwrap();
        assert_eq!(read_local(&p, ReadLimit::Token).unwrap().len(), 4096);
    }

    #[test]
    fn a_log_is_read_whatever_its_bytes_with_lines_bounded() {
        assert_eq!(log_text(b"ok\nline"), "ok\nline");
        assert_eq!(log_text(b"a\xffb\xc3\n"), "a\\xffb\\xc3\n");
        let long = [b"x".repeat(LOG_LINE_MAX + 10), b"\nnext".to_vec()].concat();
        let text = log_text(&long);
        let first = text.lines().next().unwrap();
        assert!(first.starts_with(&"x".repeat(LOG_LINE_MAX)), "{first:.20}");
        assert!(
            first.ends_with("(10 more bytes of this line not read)"),
            "{first}"
        );
        assert_eq!(text.lines().nth(1), Some("next"));
    }

    #[test]
    fn text_that_is_not_utf8_is_refused_naming_the_offset() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("hosts");
        std::fs::write(&p, b"n1\nn\xff2\n").unwrap();
        let err = read_local_text(&p, ReadLimit::HostList)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("offset 4") && err.contains("a host list"),
            "{err}"
        );
        std::fs::write(&p, b"ok\n").unwrap();
        assert_eq!(read_local_text(&p, ReadLimit::Token).unwrap(), "ok\n");
    }

    #[test]
    fn a_fifo_or_a_device_is_refused_at_once() {
        let t = tempfile::tempdir().unwrap();
        let start = std::time::Instant::now();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for (p, kind) in [
            (fifo.as_path(), "a FIFO"),
            (Path::new("/dev/zero"), "a device node"),
        ] {
            let err = read_local_text(p, ReadLimit::Log).unwrap_err().to_string();
            assert!(
                err.contains(kind) && err.contains("not a regular file"),
                "{err}"
            );
        }
        let err = read_local(t.path(), ReadLimit::HostList)
            .unwrap_err()
            .to_string();
        assert!(err.contains("a directory"), "{err}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
    }
}
