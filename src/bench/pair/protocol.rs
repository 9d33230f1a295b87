//! The out-of-band channel: one TCP connection carries the authentication, the QP data, the run
//! parameters, the data-check steps and the final report. Each message is a 4-byte big-endian length
//! and a JSON object; every read and write is bounded by the session's deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::error::PairError;
pub use super::kinds::{Op, PortDesc};
use super::report::PairReport;
use crate::bench::report::SizeResult;

/// Bumped whenever a message changes shape; both ends must agree.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest message accepted (the final report of a long sweep is well below).
const MAX_MESSAGE: u32 = 4 << 20;

/// The longest text field a message may hold (host and device names, a
/// failure's message): a longer one is refused, never shown.
pub const MAX_FIELD: usize = 4096;

/// The most of a peer's own words (its `fail` message, a decoding error
/// that quotes it) said back, and only once it has proven the secret.
pub const MAX_SAID: usize = 512;

/// What an authenticated peer said, as one bounded line: its first line, at
/// most [`MAX_SAID`] bytes, with how much was left out. Escaping it is the
/// output layer's (every sink escapes).
pub fn said(text: &str) -> String {
    let first = text.split(['\n', '\r']).next().unwrap_or("");
    let mut end = first.len().min(MAX_SAID);
    while !first.is_char_boundary(end) {
        end -= 1;
    }
    let left = text.len() - end;
    if left == 0 {
        first.to_string()
    } else {
        format!("{}… ({left} more bytes not shown)", &first[..end])
    }
}

/// The longest string anywhere in a JSON value.
fn longest_text(v: &serde_json::Value) -> usize {
    use serde_json::Value;
    match v {
        Value::String(s) => s.len(),
        Value::Array(xs) => xs.iter().map(longest_text).max().unwrap_or(0),
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| k.len().max(longest_text(v)))
            .max()
            .unwrap_or(0),
        _ => 0,
    }
}

/// How long each size runs, on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireLength {
    Seconds(f64),
    Iterations(u64),
}

/// The run parameters, chosen by the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Params {
    pub op: Op,
    pub sizes: Vec<u64>,
    pub length: WireLength,
    pub qps: u32,
    pub tx_depth: u32,
    pub check_iters: u32,
    /// `--all-nics`: the rail of this session (absent in older clients: one NIC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<super::rails::RailTag>,
}

/// One end after its memory is registered and its QPs exist.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub port: PortDesc,
    pub memory: String,
    pub gpu: Option<String>,
    /// The test buffer: the only memory registered for remote access.
    pub addr: u64,
    pub rkey: u32,
    pub len: u64,
    pub qpns: Vec<u32>,
    pub psns: Vec<u32>,
    /// RDMA READs this end can have in flight / serve per QP.
    pub rd_atom: u8,
}

/// Which buffer of an end: its test buffer (remote access) or its local one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Buf {
    Exposed,
    Local,
}

/// A step the client asks the listener to take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "do", rename_all = "snake_case")]
pub enum Cmd {
    Fill {
        buf: Buf,
        seed: u64,
        len: u64,
    },
    Clear {
        buf: Buf,
        len: u64,
    },
    Compare {
        buf: Buf,
        seed: u64,
        len: u64,
    },
    /// One RDMA WRITE of `len` bytes into the client's test buffer on QP `qp`, flushed.
    WriteOnce {
        len: u64,
        qp: u32,
    },
    /// Run the timed loop too (bidirectional): reply Go, then Done when finished.
    Timed {
        op: Op,
        len: u64,
    },
    /// Wait for the client's timed run of `len` bytes (the listener only watches the socket).
    Passive {
        len: u64,
    },
}

/// Result of a compare.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    pub mismatched_bytes: u64,
    /// The first mismatching offsets (at most 16).
    pub offsets: Vec<u64>,
}

/// Every message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Msg {
    Hello {
        version: u32,
        tool: String,
        nonce: String,
    },
    Auth {
        version: u32,
        tool: String,
        nonce: String,
        proof: String,
    },
    AuthOk {
        proof: String,
    },
    Refused {
        reason: String,
    },
    Params(Params),
    Setup(Box<Setup>),
    Ready,
    Cmd(Cmd),
    CmdOk {
        compared: Option<Compared>,
    },
    Go,
    Done {
        result: Option<SizeResult>,
    },
    Report(Box<PairReport>),
    Fail {
        message: String,
    },
}

impl Msg {
    pub fn kind(&self) -> &'static str {
        match self {
            Msg::Hello { .. } => "hello",
            Msg::Auth { .. } => "auth",
            Msg::AuthOk { .. } => "auth_ok",
            Msg::Refused { .. } => "refused",
            Msg::Params(_) => "params",
            Msg::Setup(_) => "setup",
            Msg::Ready => "ready",
            Msg::Cmd(_) => "cmd",
            Msg::CmdOk { .. } => "cmd_ok",
            Msg::Go => "go",
            Msg::Done { .. } => "done",
            Msg::Report(_) => "report",
            Msg::Fail { .. } => "fail",
        }
    }
}

/// The connection to the peer, with the session's deadline.
pub struct Conn {
    stream: TcpStream,
    pub peer: String,
    deadline: Instant,
    limit: Duration,
    /// What the session is doing (for a message when the peer goes or the time runs out).
    pub doing: String,
    /// Set once the handshake has proven that the peer holds the secret:
    /// until then nothing it sends is shown (only what kind of message it
    /// was), afterwards only as [`said`] bounds it.
    pub authenticated: bool,
    /// While the handshake runs: its own deadline's length (see
    /// [`Conn::handshake`]), when that deadline comes before the session's,
    /// so that running out names the one that ran out.
    handshake: Option<Duration>,
}

impl Conn {
    pub fn new(stream: TcpStream, peer: String, deadline: Instant, limit: Duration) -> Conn {
        let _ = stream.set_nodelay(true);
        Conn {
            stream,
            peer,
            deadline,
            limit,
            doing: "during the set-up".into(),
            authenticated: false,
            handshake: None,
        }
    }

    /// Runs `f` (the handshake) under a deadline of its own, `limit` from
    /// now (or the session's, if sooner): a peer that accepts or connects and
    /// then says nothing is dropped after `limit`, not after `--timeout`.
    pub fn handshake<T>(
        &mut self,
        limit: Duration,
        f: impl FnOnce(&mut Conn) -> Result<T, PairError>,
    ) -> Result<T, PairError> {
        let session = self.deadline;
        let own = Instant::now() + limit;
        self.deadline = session.min(own);
        // The session's deadline may come first: a listener that waited in
        // accept for most of `--timeout` has less left than `limit`.
        self.handshake = (own <= session).then_some(limit);
        let out = f(self);
        self.deadline = session;
        self.handshake = None;
        out
    }

    pub fn local_addr(&self) -> Option<String> {
        self.stream.local_addr().ok().map(|a| a.to_string())
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    fn remaining(&self) -> Result<Duration, PairError> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(self.timed_out());
        }
        Ok(left)
    }

    pub fn timed_out(&self) -> PairError {
        // The handshake's deadline, when it came before the session's.
        if let Some(limit) = self.handshake {
            return PairError::HandshakeTimedOut {
                secs: limit.as_secs(),
                peer: self.peer.clone(),
            };
        }
        PairError::TimedOut {
            secs: self.limit.as_secs(),
            during: self.doing.clone(),
            peer: format!(" (peer {})", self.peer),
        }
    }

    fn io_error(&self, e: std::io::Error) -> PairError {
        match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => self.timed_out(),
            ErrorKind::UnexpectedEof | ErrorKind::ConnectionReset | ErrorKind::BrokenPipe => {
                self.gone("")
            }
            _ => PairError::Io {
                peer: self.peer.clone(),
                source: e,
            },
        }
    }

    /// The peer went away; `rdma` adds what the RDMA side saw.
    pub fn gone(&self, rdma: &str) -> PairError {
        PairError::PeerGone {
            peer: self.peer.clone(),
            during: self.doing.clone(),
            rdma: rdma.to_string(),
        }
    }

    pub fn send(&mut self, msg: &Msg) -> Result<(), PairError> {
        let body = serde_json::to_vec(msg).map_err(|e| PairError::Protocol {
            peer: self.peer.clone(),
            what: format!("cannot encode {}: {e}", msg.kind()),
        })?;
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&l| l <= MAX_MESSAGE)
            .ok_or_else(|| PairError::Protocol {
                peer: self.peer.clone(),
                what: format!("{} message too large", msg.kind()),
            })?;
        let left = self.remaining()?;
        let _ = self.stream.set_write_timeout(Some(left));
        let mut frame = Vec::with_capacity(body.len() + 4);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&body);
        self.stream
            .write_all(&frame)
            .and_then(|_| self.stream.flush())
            .map_err(|e| self.io_error(e))
    }

    fn read_exact(&mut self, buf: &mut [u8]) -> Result<(), PairError> {
        let mut got = 0;
        while got < buf.len() {
            let left = self.remaining()?;
            let _ = self.stream.set_read_timeout(Some(left));
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => return Err(self.gone("")),
                Ok(n) => got += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(self.io_error(e)),
            }
        }
        Ok(())
    }

    /// Read the next message. A `Fail` from the peer becomes the error naming what it said.
    pub fn recv(&mut self) -> Result<Msg, PairError> {
        let mut len = [0u8; 4];
        self.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len);
        if len > MAX_MESSAGE {
            return Err(PairError::Protocol {
                peer: self.peer.clone(),
                what: format!("message of {len} bytes (not a gdrprov pair peer?)"),
            });
        }
        let mut body = vec![0u8; len as usize];
        self.read_exact(&mut body)?;
        self.decode(&body)
    }

    /// A message's body as a message: every text field at most
    /// [`MAX_FIELD`] bytes; a `fail` becomes the error, naming what the
    /// peer said only once it is authenticated.
    fn decode(&self, body: &[u8]) -> Result<Msg, PairError> {
        let unreadable = |e: serde_json::Error| PairError::Protocol {
            peer: self.peer.clone(),
            what: if self.authenticated {
                format!(
                    "unreadable message ({}; another gdrprov version?)",
                    said(&e.to_string())
                )
            } else {
                "unreadable message (not a gdrprov pair peer, or another gdrprov version?)".into()
            },
        };
        let value: serde_json::Value = serde_json::from_slice(body).map_err(unreadable)?;
        let longest = longest_text(&value);
        if longest > MAX_FIELD {
            return Err(PairError::Protocol {
                peer: self.peer.clone(),
                what: format!(
                    "a text field of {longest} bytes in a message (at most {MAX_FIELD}; not a gdrprov pair peer?)"
                ),
            });
        }
        let msg: Msg = serde_json::from_value(value).map_err(unreadable)?;
        match msg {
            Msg::Fail { message } if self.authenticated => Err(PairError::PeerFailed {
                peer: self.peer.clone(),
                message: said(&message),
            }),
            Msg::Fail { .. } => Err(PairError::Unproven {
                peer: self.peer.clone(),
                what: "ended the session".into(),
            }),
            msg => Ok(msg),
        }
    }

    /// Tell the peer why this end stops (best effort: it may be gone already).
    pub fn fail(&mut self, message: &str) {
        let _ = self.send(&Msg::Fail {
            message: message.to_string(),
        });
    }

    /// An unexpected message.
    pub fn unexpected(&self, want: &str, got: &Msg) -> PairError {
        PairError::Protocol {
            peer: self.peer.clone(),
            what: format!("expected {want}, got {}", got.kind()),
        }
    }

    /// True when the peer has closed its end (checked without blocking; for error messages).
    pub fn peer_closed(&self) -> bool {
        let _ = self.stream.set_nonblocking(true);
        let mut b = [0u8; 1];
        let closed = matches!(self.stream.peek(&mut b), Ok(0))
            || matches!(self.stream.peek(&mut b), Err(ref e) if e.kind() == ErrorKind::ConnectionReset);
        let _ = self.stream.set_nonblocking(false);
        closed
    }
}
