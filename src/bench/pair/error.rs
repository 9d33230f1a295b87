//! Every way a pair run can fail, each message naming the cause and, where there is one, the fix.

use crate::bench::BenchError;

/// Errors of `gdrprov bench pair`.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    #[error(transparent)]
    Bench(#[from] BenchError),

    #[error("invalid argument: {0}")]
    Usage(String),

    #[error(
        "peer {peer} unreachable: {why}. Is `gdrprov bench pair --listen` running there, on that address and port?"
    )]
    Unreachable { peer: String, why: String },

    #[error(
        "no shared secret: give --token-file FILE (the file the listener wrote, copied here) or set GDRPROV_PAIR_TOKEN"
    )]
    NoSecret,

    #[error("secret {path}: {why}")]
    BadSecret { path: String, why: String },

    #[error(
        "refused {peer}: it did not prove the shared secret (wrong --token-file or GDRPROV_PAIR_TOKEN); nothing was registered"
    )]
    WrongSecret { peer: String },

    #[error("the listener {peer} refused this client: {reason}")]
    RefusedByPeer { peer: String, reason: String },

    #[error(
        "the listener {peer} did not prove the shared secret: it is not the gdrprov listener you meant, or it holds another secret"
    )]
    ListenerUnproven { peer: String },

    /// The peer stopped or refused before it proved the secret: what it
    /// sent is not shown (it could be anyone's text).
    #[error(
        "the peer {peer} {what} before it proved the shared secret; what it sent is not shown, since it is not known to be the gdrprov peer you meant. Check that {peer} runs gdrprov's `bench pair` of the same version, and that both ends use the same secret (--token-file or GDRPROV_PAIR_TOKEN)"
    )]
    Unproven { peer: String, what: String },

    #[error("protocol error with {peer}: {what}")]
    Protocol { peer: String, what: String },

    #[error("the peer {peer} reports: {message}")]
    PeerFailed { peer: String, message: String },

    #[error(
        "the peer {peer} closed the connection {during} (its process ended or was killed){rdma}"
    )]
    PeerGone {
        peer: String,
        during: String,
        rdma: String,
    },

    #[error(
        "time limit of {secs} s reached {during}{peer}: no session completed. Raise --timeout, or check that the peer is running"
    )]
    TimedOut {
        secs: u64,
        during: String,
        peer: String,
    },

    /// The peer connected (or accepted) and did not finish the handshake
    /// within its own deadline (`auth::HANDSHAKE_SECS`), apart from `--timeout`.
    #[error(
        "the peer {peer} did not complete the handshake within its deadline of {secs} s (apart from --timeout): it connected and then said nothing, or too little. Check that {peer} runs gdrprov's `bench pair` of the same version (a client connects to a `--listen`, and the other way round) and that nothing else listens on that port"
    )]
    HandshakeTimedOut { secs: u64, peer: String },

    #[error("{0}")]
    Mismatch(String),

    /// The timed run stopped because the peer's socket closed (the session names the peer).
    #[error("stopped: the peer closed the connection")]
    Aborted,

    #[error("network error with {peer}: {source}")]
    Io {
        peer: String,
        source: std::io::Error,
    },
}

impl From<PairError> for BenchError {
    fn from(e: PairError) -> BenchError {
        match e {
            PairError::Bench(b) => b,
            other => BenchError::Pair(other.to_string()),
        }
    }
}
