//! Files named on the command line, outside any root (a sweep's results,
//! `--verify-dir` reports, `--drained`, `--nccl-log`, `--token-file`, a
//! host list): opened without blocking, refused unless a regular file, and
//! read up to a stated size per kind (issue 37: a FIFO hung, `/dev/zero`
//! read until out of memory). A small guard until every read goes through
//! one door in this layer (issue 34), which can take these kinds over.

use crate::error::{Error, Result};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// A kind of input, with the most bytes gdrprov reads of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// One `bench pair --format json` result (a few kB).
    PairResult,
    /// One `verify --format json` report.
    VerifyReport,
    /// `sinfo` output: drained or probation nodes.
    NodeList,
    /// A host list, one name a line.
    HostList,
    /// An NCCL debug log.
    NcclLog,
    /// A shared secret.
    Token,
}

impl Input {
    /// The most bytes read of this kind.
    pub fn limit(self) -> u64 {
        match self {
            Input::PairResult | Input::VerifyReport => 4 << 20,
            Input::NodeList | Input::HostList => 16 << 20,
            Input::NcclLog => 256 << 20,
            Input::Token => 4096,
        }
    }

    fn what(self) -> &'static str {
        match self {
            Input::PairResult => "a pair result",
            Input::VerifyReport => "a verify report",
            Input::NodeList => "a node list",
            Input::HostList => "a host list",
            Input::NcclLog => "an NCCL log",
            Input::Token => "a token file",
        }
    }
}

/// Opens `path` (following symlinks, as a shell would) without blocking and
/// checks, on the open file, that it is a regular file. Refused with the
/// path, what it is, and the fix.
pub fn open_input(path: &Path, kind: Input) -> Result<(std::fs::File, std::fs::Metadata)> {
    let shown = path.display().to_string();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| match std::fs::metadata(path) {
            Ok(m) if !m.is_file() => not_regular(&shown, &m, kind),
            _ => Error::io("read", shown.clone(), e),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io("stat", shown.clone(), e))?;
    if !meta.is_file() {
        return Err(not_regular(&shown, &meta, kind));
    }
    Ok((file, meta))
}

/// Reads `path` whole, as [`open_input`] opens it, refusing one over
/// [`Input::limit`] (by its size and by what is read: a file growing while
/// read is cut at the limit and refused).
pub fn read_input(path: &Path, kind: Input) -> Result<Vec<u8>> {
    let shown = path.display().to_string();
    let (file, meta) = open_input(path, kind)?;
    let limit = kind.limit();
    let over = || {
        Error::Usage(format!(
            "{shown}: over {} bytes, the most gdrprov reads of {}; give the right file (or a part of it)",
            limit,
            kind.what()
        ))
    };
    if meta.len() > limit {
        return Err(over());
    }
    let mut data = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut data)
        .map_err(|e| Error::io("read", shown.clone(), e))?;
    if data.len() as u64 > limit {
        return Err(over());
    }
    Ok(data)
}

/// [`read_input`] as UTF-8 text; invalid bytes refused, naming the file.
pub fn read_input_text(path: &Path, kind: Input) -> Result<String> {
    String::from_utf8(read_input(path, kind)?).map_err(|e| {
        Error::Usage(format!(
            "{}: not UTF-8 text (invalid byte at offset {}); give {} as gdrprov or the tool wrote it",
            path.display(),
            e.utf8_error().valid_up_to(),
            kind.what()
        ))
    })
}

fn not_regular(shown: &str, meta: &std::fs::Metadata, kind: Input) -> Error {
    let is = super::read::kind_of(meta);
    Error::Usage(format!(
        "{shown}: it is {is}, not a regular file, so gdrprov will not read it as {}; save it to a regular file first and give that",
        kind.what()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_and_an_oversized_file_are_refused_at_once() {
        let t = tempfile::tempdir().unwrap();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let start = std::time::Instant::now();
        let e = read_input(&fifo, Input::PairResult)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a FIFO") && e.contains("regular file"), "{e}");
        let e = read_input(Path::new("/dev/zero"), Input::NcclLog)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a device node"), "{e}");
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        let big = t.path().join("big");
        std::fs::write(&big, vec![b'a'; 4097]).unwrap();
        let e = read_input(&big, Input::Token).unwrap_err().to_string();
        assert!(e.contains("over 4096 bytes"), "{e}");
        std::fs::write(&big, b"ok\n").unwrap();
        assert_eq!(read_input_text(&big, Input::Token).unwrap(), "ok\n");
    }
}
