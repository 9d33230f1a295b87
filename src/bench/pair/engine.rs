//! What a session needs of the RDMA side of one end. The verbs engine (rdma.rs) is the real one;
//! the tests use a fake one that moves bytes between buffers of one process.

use std::time::Instant;

use super::error::PairError;
use super::protocol::{Buf, Compared, Params, Setup};
use crate::bench::loopback::RunLength;
use crate::bench::report::SizeResult;

/// What travels: an RDMA WRITE from this end, or an RDMA READ by this end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Xfer {
    Write,
    Read,
}

/// One end's RDMA resources, created only after the peer is authenticated.
pub trait Engine {
    /// This end's port, buffer and QPs, for the peer.
    fn setup(&self) -> Setup;
    /// Bring the QPs to RTS against the peer's.
    fn connect(&mut self, remote: &Setup) -> Result<(), PairError>;
    /// Write the check pattern of `seed` into the first `len` bytes of a buffer.
    fn fill(&mut self, buf: Buf, seed: u64, len: u64) -> Result<(), PairError>;
    /// Zero the first `len` bytes of a buffer.
    fn clear(&mut self, buf: Buf, len: u64) -> Result<(), PairError>;
    /// Compare the first `len` bytes of a buffer with the pattern of `seed`, every byte.
    fn compare(&mut self, buf: Buf, seed: u64, len: u64) -> Result<Compared, PairError>;
    /// One transfer of `len` bytes on QP `qp`, waited for; a WRITE is flushed (a READ behind it).
    fn once(&mut self, x: Xfer, len: u64, qp: u32) -> Result<(), PairError>;
    /// The timed run of one size; stops with an error at `deadline`, or with `PairError::Aborted`
    /// as soon as `peer_gone` (checked a few times a second) says the peer's socket closed.
    fn timed(
        &mut self,
        x: Xfer,
        len: u64,
        length: RunLength,
        deadline: Instant,
        peer_gone: &dyn Fn() -> bool,
    ) -> Result<SizeResult, PairError>;
}

/// Makes the engine once the run parameters are known (after the authentication).
pub type MakeEngine<'a> = Box<dyn FnOnce(&Params) -> Result<Box<dyn Engine + 'a>, PairError> + 'a>;

/// Compare `actual` with the pattern of `seed`: mismatching bytes and the first 16 offsets.
pub fn compare_pattern(actual: &[u8], seed: u64) -> Compared {
    let mut expected = vec![0u8; actual.len()];
    crate::bench::loopback::fill_pattern(&mut expected, seed);
    let mut c = Compared::default();
    for (i, (a, b)) in expected.iter().zip(actual).enumerate() {
        if a != b {
            c.mismatched_bytes += 1;
            if c.offsets.len() < 16 {
                c.offsets.push(i as u64);
            }
        }
    }
    c
}
