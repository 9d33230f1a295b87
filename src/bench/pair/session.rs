//! One pair session over an authenticated connection: both ends exchange their QP data and check
//! that their ports can talk (link layer, MTU, GID type); the client then drives every size (the
//! timed run, then the data check at the receiving end) and the listener serves its steps.

use std::time::{Duration, Instant};

use super::engine::{Engine, MakeEngine, Xfer};
use super::error::PairError;
use super::protocol::{Buf, Cmd, Compared, Conn, Msg, Op, Params, PortDesc, Setup, WireLength};
use super::report::PairCheck;
use crate::bench::loopback::RunLength;
use crate::bench::report::human_bytes;
use crate::bench::report::SizeResult;

/// Why two ports cannot run RC traffic to each other; None when they can.
pub fn incompatibility(mine: &PortDesc, theirs: &PortDesc) -> Option<String> {
    let name = |p: &PortDesc| {
        let who = if std::ptr::eq(p, mine) {
            "this end"
        } else {
            "the peer"
        };
        format!("{who} ({} {}:{})", p.host, p.device, p.port)
    };
    let netdev = |p: &PortDesc| match (&p.netdev, p.netdev_mtu) {
        (Some(n), Some(m)) => format!(" (netdev {n} MTU {m})"),
        _ => String::new(),
    };
    if mine.link_layer != theirs.link_layer {
        return Some(format!(
            "link layer mismatch: {} is {}, {} is {}; pair ports of the same fabric",
            name(mine),
            mine.link_layer,
            name(theirs),
            theirs.link_layer
        ));
    }
    if mine.mtu != theirs.mtu {
        return Some(format!(
            "MTU mismatch: {} has active MTU {}{}, {} has {}{}; set the same MTU on both ends (and the switch ports between them)",
            name(mine),
            mine.mtu,
            netdev(mine),
            name(theirs),
            theirs.mtu,
            netdev(theirs)
        ));
    }
    if mine.link_layer == "Ethernet" {
        if let (Some(a), Some(b)) = (&mine.gid_type, &theirs.gid_type) {
            if a != b {
                return Some(format!(
                    "GID type mismatch: {} uses {a} (GID index {}), {} uses {b} (GID index {}); choose GIDs of the same RoCE version with --gid-index on one end",
                    name(mine),
                    mine.gid_index.map(|i| i.to_string()).unwrap_or_default(),
                    name(theirs),
                    theirs.gid_index.map(|i| i.to_string()).unwrap_or_default()
                ));
            }
        }
    }
    None
}

/// Make the engine, swap Setups, check the ports, connect, and meet at Ready.
fn establish<'a>(
    conn: &mut Conn,
    params: &Params,
    make: MakeEngine<'a>,
) -> Result<(Box<dyn Engine + 'a>, Setup, Setup), PairError> {
    conn.doing = "during the QP set-up".into();
    let mut engine = match make(params) {
        Ok(e) => e,
        Err(e) => {
            conn.fail(&e.to_string());
            return Err(e);
        }
    };
    let mine = engine.setup();
    conn.send(&Msg::Setup(Box::new(mine.clone())))?;
    let theirs = match conn.recv()? {
        Msg::Setup(s) => *s,
        other => return Err(conn.unexpected("setup", &other)),
    };
    if theirs.qpns.len() != mine.qpns.len()
        || theirs.len < params.sizes.iter().copied().max().unwrap_or(0)
    {
        let m = format!(
            "the peer offers {} QP(s) and {} bytes, this end needs {} and {}",
            theirs.qpns.len(),
            theirs.len,
            mine.qpns.len(),
            params.sizes.iter().max().unwrap_or(&0)
        );
        conn.fail(&m);
        return Err(PairError::Protocol {
            peer: conn.peer.clone(),
            what: m,
        });
    }
    if let Some(m) = incompatibility(&mine.port, &theirs.port) {
        conn.fail(&m);
        return Err(PairError::Mismatch(m));
    }
    if let Err(e) = engine.connect(&theirs) {
        conn.fail(&e.to_string());
        return Err(e);
    }
    conn.send(&Msg::Ready)?;
    match conn.recv()? {
        Msg::Ready => Ok((engine, mine, theirs)),
        other => Err(conn.unexpected("ready", &other)),
    }
}

pub fn run_length(l: WireLength) -> RunLength {
    match l {
        WireLength::Seconds(s) => RunLength::Duration(Duration::from_secs_f64(s)),
        WireLength::Iterations(n) => RunLength::Iterations(n),
    }
}

/// An RDMA error on this end: when the peer's socket is closed, the peer went away (say so).
fn rdma_failed(conn: &mut Conn, e: PairError) -> PairError {
    if matches!(e, PairError::Aborted) {
        return conn.gone("");
    }
    if conn.peer_closed() {
        return conn.gone(&format!("; RDMA on this end: {e}"));
    }
    conn.fail(&e.to_string());
    e
}

/// What the listener learned: the client's parameters, both Setups, and the client's report.
pub struct Served {
    pub params: Params,
    pub mine: Setup,
    pub theirs: Setup,
    pub report: Option<super::report::PairReport>,
}

/// The listener's side after the authentication: take the parameters, set up, serve the steps.
pub fn serve(conn: &mut Conn, make: MakeEngine<'_>) -> Result<Served, PairError> {
    let params = match conn.recv()? {
        Msg::Params(p) => p,
        other => return Err(conn.unexpected("params", &other)),
    };
    let (mut engine, mine, theirs) = establish(conn, &params, make)?;
    let deadline = conn.deadline();
    let length = run_length(params.length);
    loop {
        conn.doing = "waiting for the client's next step".into();
        let cmd = match conn.recv()? {
            Msg::Cmd(c) => c,
            Msg::Report(r) => {
                return Ok(Served {
                    params,
                    mine,
                    theirs,
                    report: Some(*r),
                })
            }
            other => return Err(conn.unexpected("cmd", &other)),
        };
        let mut compared = None;
        let step = match cmd {
            Cmd::Fill { buf, seed, len } => engine.fill(buf, seed, len),
            Cmd::Clear { buf, len } => engine.clear(buf, len),
            Cmd::Compare { buf, seed, len } => engine.compare(buf, seed, len).map(|c| {
                compared = Some(c);
            }),
            Cmd::WriteOnce { len, qp } => engine.once(Xfer::Write, len, qp),
            Cmd::Passive { len } => {
                conn.send(&Msg::CmdOk { compared: None })?;
                conn.doing = format!("during the client's timed run of {}", human_bytes(len));
                match conn.recv()? {
                    Msg::Done { .. } => continue,
                    other => return Err(conn.unexpected("done", &other)),
                }
            }
            Cmd::Timed { len, .. } => {
                conn.send(&Msg::Go)?;
                conn.doing = format!("during the bidirectional run of {}", human_bytes(len));
                let watch = |c: &Conn| c.peer_closed();
                let r = {
                    let c: &Conn = conn;
                    engine.timed(Xfer::Write, len, length, deadline, &|| watch(c))
                };
                let r = r.map_err(|e| rdma_failed(conn, e))?;
                conn.send(&Msg::Done { result: Some(r) })?;
                continue;
            }
        };
        if let Err(e) = step {
            return Err(rdma_failed(conn, e));
        }
        conn.send(&Msg::CmdOk { compared })?;
    }
}

/// A step at the listener; its compare result when it was a compare.
fn remote(conn: &mut Conn, cmd: Cmd) -> Result<Option<Compared>, PairError> {
    conn.send(&Msg::Cmd(cmd))?;
    match conn.recv()? {
        Msg::CmdOk { compared } => Ok(compared),
        other => Err(conn.unexpected("cmd_ok", &other)),
    }
}

fn local<T>(conn: &mut Conn, r: Result<T, PairError>) -> Result<T, PairError> {
    r.map_err(|e| rdma_failed(conn, e))
}

/// The check seed of one transfer: the session's base, the size, the iteration and the direction,
/// mixed so that no two transfers of a session share a pattern.
pub fn check_seed(base: u64, size: u64, iteration: u32, reverse: bool) -> u64 {
    let mut z = base ^ size.rotate_left(17) ^ (u64::from(iteration) << 1) ^ u64::from(reverse);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn record(check: &mut PairCheck, c: Compared, len: u64) {
    check.add(&PairCheck {
        passed: c.mismatched_bytes == 0,
        iterations: 1,
        bytes_compared: len,
        mismatched_bytes: c.mismatched_bytes,
        mismatch_offsets: c.offsets,
    });
}

/// The data check of one size at the receiving end(s), outside the timed region.
fn check_size(
    conn: &mut Conn,
    engine: &mut dyn Engine,
    params: &Params,
    len: u64,
    base: u64,
) -> Result<PairCheck, PairError> {
    conn.doing = format!("during the data check of {}", human_bytes(len));
    let mut check = PairCheck::default();
    for it in 0..params.check_iters {
        let qp = it % params.qps;
        let seed = check_seed(base, len, it, false);
        match params.op {
            Op::Write | Op::Bidir => {
                local(conn, engine.fill(Buf::Local, seed, len))?;
                remote(
                    conn,
                    Cmd::Clear {
                        buf: Buf::Exposed,
                        len,
                    },
                )?;
                local(conn, engine.once(Xfer::Write, len, qp))?;
                let c = remote(
                    conn,
                    Cmd::Compare {
                        buf: Buf::Exposed,
                        seed,
                        len,
                    },
                )?;
                record(&mut check, c.unwrap_or_default(), len);
            }
            Op::Read => {
                remote(
                    conn,
                    Cmd::Fill {
                        buf: Buf::Exposed,
                        seed,
                        len,
                    },
                )?;
                local(conn, engine.clear(Buf::Local, len))?;
                local(conn, engine.once(Xfer::Read, len, qp))?;
                let c = local(conn, engine.compare(Buf::Local, seed, len))?;
                record(&mut check, c, len);
            }
        }
        if params.op == Op::Bidir {
            let seed = check_seed(base, len, it, true);
            remote(
                conn,
                Cmd::Fill {
                    buf: Buf::Local,
                    seed,
                    len,
                },
            )?;
            local(conn, engine.clear(Buf::Exposed, len))?;
            remote(conn, Cmd::WriteOnce { len, qp })?;
            let c = local(conn, engine.compare(Buf::Exposed, seed, len))?;
            record(&mut check, c, len);
        }
    }
    Ok(check)
}

/// One size's timed run: (this end's result, the listener's for bidir).
fn timed_size(
    conn: &mut Conn,
    engine: &mut dyn Engine,
    params: &Params,
    len: u64,
) -> Result<(SizeResult, Option<SizeResult>), PairError> {
    let length = run_length(params.length);
    let deadline = conn.deadline();
    conn.doing = format!(
        "during the {} run of {}",
        params.op.label(),
        human_bytes(len)
    );
    let x = if params.op == Op::Read {
        Xfer::Read
    } else {
        Xfer::Write
    };
    if params.op == Op::Bidir {
        conn.send(&Msg::Cmd(Cmd::Timed { op: params.op, len }))?;
        match conn.recv()? {
            Msg::Go => {}
            other => return Err(conn.unexpected("go", &other)),
        }
    } else {
        remote(conn, Cmd::Passive { len })?;
    }
    let r = {
        let c: &Conn = conn;
        engine.timed(x, len, length, deadline, &|| c.peer_closed())
    };
    let mine = local(conn, r)?;
    if params.op == Op::Bidir {
        match conn.recv()? {
            Msg::Done { result } => Ok((mine, result)),
            other => Err(conn.unexpected("done", &other)),
        }
    } else {
        conn.send(&Msg::Done {
            result: Some(mine.clone()),
        })?;
        Ok((mine, None))
    }
}

/// What the client measured, per size.
pub struct Driven {
    pub mine: Setup,
    pub theirs: Setup,
    pub sizes: Vec<(SizeResult, Option<SizeResult>, PairCheck)>,
}

/// The client's side after the authentication: parameters, set-up, every size.
pub fn drive(conn: &mut Conn, params: &Params, make: MakeEngine<'_>) -> Result<Driven, PairError> {
    conn.send(&Msg::Params(params.clone()))?;
    let (mut engine, mine, theirs) = establish(conn, params, make)?;
    let base = u64::from_le_bytes(super::auth::random_bytes(8)?.try_into().unwrap_or([7u8; 8]));
    let mut sizes = Vec::new();
    for &len in &params.sizes {
        let (m, peer) = timed_size(conn, engine.as_mut(), params, len)?;
        let check = check_size(conn, engine.as_mut(), params, len, base)?;
        sizes.push((m, peer, check));
    }
    Ok(Driven {
        mine,
        theirs,
        sizes,
    })
}

/// Send the report to the listener (its last message).
pub fn finish(conn: &mut Conn, report: &super::report::PairReport) -> Result<(), PairError> {
    conn.doing = "sending the report".into();
    conn.send(&Msg::Report(Box::new(report.clone())))
}

/// Seconds left before `deadline` (for messages).
pub fn left(deadline: Instant) -> u64 {
    deadline.saturating_duration_since(Instant::now()).as_secs()
}
