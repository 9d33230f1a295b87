//! `gdrprov bench pair`: RDMA between two hosts. One host listens (`--listen`), the other connects;
//! the set-up goes over one authenticated TCP connection (as perftest's), then RDMA WRITE, READ or
//! both ways per message size, each size followed by a data check at the receiving end.
//!
//! Why TCP and not librdmacm: the same socket carries the authentication, the QP data, the run
//! parameters, the data-check steps and the report, so both ends can name every failure (wrong
//! secret, MTU or GID type mismatch, port down, peer gone) in one message; the listener binds
//! exactly where it is told; and no second library is loaded at run time.

pub mod allnics;
pub mod auth;
pub mod engine;
pub mod error;
pub mod kinds;
pub mod net;
pub mod protocol;
pub mod rails;
pub mod rdma;
pub mod report;
pub mod session;
pub mod timed;

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub use error::PairError;
use protocol::{Conn, Op, Params, Setup, WireLength};
use report::{Direction, End, PairCheck, PairReport, PairSize};

use crate::bench::loopback::{choose_memory, default_fraction, evaluate_threshold};
use crate::bench::memory::MemoryKind;
use crate::bench::report::SizeResult;
use crate::bench::sysfs::LiveHost;
use crate::bench::verbs::select_port;
use gdrprov_rdma::cuda::Gpu;
use gdrprov_rdma::qp::Side;

/// The TCP port a listener uses unless told otherwise (perftest's is 18515).
pub const DEFAULT_PORT: u16 = 18516;

/// Where a run's progress lines go (standard error, through the output layer).
pub type Notes<'a> = &'a dyn Fn(&str);

/// Everything a pair run needs.
#[derive(Debug, Clone)]
pub struct PairOptions {
    /// Some: listen (the address, "" for the default).
    pub listen: Option<String>,
    pub peer: Option<String>,
    pub port: u16,
    pub token_file: Option<PathBuf>,
    pub timeout: Duration,
    pub device: Option<String>,
    pub dev_port: Option<u8>,
    pub memory: Option<MemoryKind>,
    pub gpu: u32,
    pub op: Op,
    pub sizes: Vec<u64>,
    pub length: WireLength,
    pub qps: u32,
    pub tx_depth: u32,
    pub check_iters: u32,
    pub gid_index: Option<u32>,
    pub min_fraction: Option<f64>,
    pub min_gbps: Option<f64>,
    /// `--all-nics`: one session per rail (allnics.rs runs them).
    pub all_nics: bool,
    /// The rail of this session (set by allnics.rs for each rail).
    pub rail: Option<rails::RailTag>,
    /// The rail's GPU (PCI address), used instead of `gpu` when the memory is GPU memory.
    pub gpu_pci: Option<String>,
    /// Why the rail has no GPU: a GPU run of it fails with this.
    pub rail_note: Option<String>,
}

impl PairOptions {
    /// A client's options with `bench pair`'s defaults (8 MiB WRITEs for 3 s, one QP, depth 128,
    /// 4 checked transfers, a 120-s limit), for `verify --peer`.
    pub fn client(peer: &str) -> PairOptions {
        PairOptions {
            listen: None,
            peer: Some(peer.to_string()),
            port: DEFAULT_PORT,
            token_file: None,
            timeout: Duration::from_secs(120),
            device: None,
            dev_port: None,
            memory: None,
            gpu: 0,
            op: Op::Write,
            sizes: vec![8 << 20],
            length: WireLength::Seconds(3.0),
            qps: 1,
            tx_depth: 128,
            check_iters: 4,
            gid_index: None,
            min_fraction: None,
            min_gbps: None,
            all_nics: false,
            rail: None,
            gpu_pci: None,
            rail_note: None,
        }
    }
}

/// What a run printed from which end.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PairOutcome {
    /// "client" or "listener".
    pub role: &'static str,
    #[serde(flatten)]
    pub report: PairReport,
}

fn open_gpu(memory: MemoryKind, index: u32, notes: Notes<'_>) -> Result<Option<Gpu>, PairError> {
    if !memory.is_gpu() {
        return Ok(None);
    }
    let gpu = Gpu::open(index)?;
    if memory == MemoryKind::CudaDmabuf && !gpu.dmabuf_supported {
        return Err(crate::bench::BenchError::GpuNoDmabuf {
            index,
            name: gpu.name.clone(),
        }
        .into());
    }
    // Pre-flight, before any RDMA device is opened: allocate and (for dma-buf) export a little GPU
    // memory, so a host without a NIC still learns how far its GPU half goes.
    let probe = gpu.alloc(2 << 20)?;
    let exported = if memory == MemoryKind::CudaDmabuf {
        let fd = probe.export_dmabuf()?;
        format!(
            ", exported as a dma-buf of {} bytes (exporter {})",
            crate::bench::cuda::dmabuf_size(&LiveHost, &fd).unwrap_or(0),
            crate::bench::cuda::dmabuf_exporter(&LiveHost, &fd).unwrap_or_else(|| "?".into())
        )
    } else {
        String::new()
    };
    drop(probe);
    notes(&format!(
        "GPU {} {} ({}, dma-buf supported: {}): {} memory; allocated 2 MiB{exported}",
        gpu.index,
        gpu.name,
        gpu.pci_bus_id,
        gpu.dmabuf_supported,
        memory.label()
    ));
    Ok(Some(gpu))
}

/// This end's port and GPU: what it needs before any memory is registered.
struct Local {
    side: Side,
    desc: protocol::PortDesc,
    memory: MemoryKind,
    gpu: Option<Gpu>,
}

fn open_local(opts: &PairOptions, notes: Notes<'_>) -> Result<Local, PairError> {
    // The GPU first: it needs no RDMA device (as the loopback does it).
    let (memory, note) = choose_memory(opts.memory);
    if let Some(n) = note {
        notes(&format!("memory: {} ({n})", memory.label()));
    }
    let gpu = if memory.is_gpu() && (opts.rail_note.is_some() || opts.gpu_pci.is_some()) {
        if let Some(n) = &opts.rail_note {
            return Err(PairError::Usage(format!(
                "{memory} memory on this rail: {n}",
                memory = memory.label()
            )));
        }
        let index = allnics::cuda_index(opts.gpu_pci.as_deref().unwrap_or(""))?;
        open_gpu(memory, index, notes)?
    } else {
        open_gpu(memory, opts.gpu, notes)?
    };
    let (ctx, info) = select_port(
        &LiveHost,
        opts.device.as_deref(),
        opts.dev_port,
        opts.gid_index,
    )?;
    let desc = net::port_desc(&info);
    let side = Side::new(ctx, info)?;
    Ok(Local {
        side,
        desc,
        memory,
        gpu,
    })
}

fn new_engine<'g>(
    side: Side,
    desc: protocol::PortDesc,
    memory: MemoryKind,
    gpu: Option<&'g Gpu>,
    params: &Params,
    notes: Notes<'_>,
) -> Result<Box<dyn engine::Engine + 'g>, PairError> {
    let e = rdma::VerbsEngine::new(side, desc, memory, gpu, params)?;
    notes(&format!(
        "registered the test buffer ({} bytes of {} memory, remote write/read) and a local buffer (local write only)",
        params.sizes.iter().max().unwrap_or(&0),
        memory.label()
    ));
    Ok(Box::new(e))
}

/// The listener's socket: on this end's port address (or --listen's, on a rail this end cannot run),
/// and the note saying what it serves.
fn listen_on(
    opts: &PairOptions,
    listen: &str,
    local: &Result<Local, PairError>,
    notes: Notes<'_>,
) -> Result<(TcpListener, SocketAddr), PairError> {
    let addr = match local {
        Ok(l) => net::bind_addr(listen, opts.port, &l.desc)?,
        Err(_) => net::parse_bind(listen, opts.port)?
            .ok_or_else(|| PairError::Usage("--all-nics --listen needs ADDR".into()))?,
    };
    let listener = TcpListener::bind(addr).map_err(|e| {
        PairError::Usage(format!(
            "cannot listen on {addr}: {e} (the address must be one of this host's; another listener on the port?)"
        ))
    })?;
    if let Ok(l) = local {
        notes(&format!(
            "listening on {addr} for one session (time limit {} s): {}:{} {}, MTU {}",
            opts.timeout.as_secs(),
            l.desc.device,
            l.desc.port,
            l.desc.gid.as_deref().unwrap_or(""),
            l.desc.mtu
        ));
    }
    Ok((listener, addr))
}

/// The secret the listener expects: the one given, else a new one made at --token-file (or in
/// $TMPDIR), with the note telling the person how to run the client with it.
fn listener_secret(
    opts: &PairOptions,
    given: Option<(auth::Secret, auth::SecretSource)>,
    listen: &str,
    addr: SocketAddr,
    notes: Notes<'_>,
) -> Result<auth::Secret, PairError> {
    let (secret, generated) = match given {
        Some((s, _)) => (s, None),
        None => match &opts.token_file {
            Some(p) => (auth::generate_secret_at(p)?, Some(p.clone())),
            None => {
                let (s, p) = auth::generate_secret(&std::env::temp_dir())?;
                (s, Some(p))
            }
        },
    };
    if let Some(p) = &generated {
        // On a rail of --all-nics the client runs every rail, from --listen's address.
        let client = crate::suggest::Suggest::new(crate::names::BENCH_PAIR);
        let client = match &opts.rail {
            Some(_) => client.arg(listen.to_string()).arg("--all-nics"),
            None => client.arg(addr.to_string()),
        };
        notes(&format!(
            "no secret was given: a new one is in {} (mode 0600). Copy that file to the other host, then run there:\n  {}",
            p.display(),
            client
                .arg("--token-file")
                .arg(p.display().to_string())
                .line(&crate::suggest::Given::none())
        ));
    }
    Ok(secret)
}

/// `gdrprov bench pair --listen`: serve one session, then exit.
pub fn run_listener(opts: &PairOptions, notes: Notes<'_>) -> Result<PairOutcome, PairError> {
    let start = Instant::now();
    let deadline = start + opts.timeout;
    // A secret given is read now; one to make is made once the listener
    // is bound (a listener that cannot start leaves no token file behind),
    // at --token-file when that names a file not there yet, else in $TMPDIR.
    let given = match &opts.token_file {
        Some(p) if !crate::host::local_exists(p) => None,
        f => Some(auth::load_secret(f.as_deref())?),
    };
    // On a rail of --all-nics, a rail this end cannot run is still served far enough to tell
    // the client (so both ends move on to the next rail together).
    let local = match open_local(opts, notes) {
        Err(e) if opts.rail.is_none() => return Err(e),
        r => r,
    };
    let listen = opts.listen.as_deref().unwrap_or("");
    let (listener, addr) = listen_on(opts, listen, &local, notes)?;
    let secret = listener_secret(opts, given.flatten(), listen, addr, notes)?;
    let (stream, peer) = net::accept_until(&listener, deadline, opts.timeout)?;
    drop(listener);
    let mut conn = Conn::new(stream, peer.to_string(), deadline, opts.timeout);
    auth::listener_handshake(&mut conn, &secret)?;
    notes(&format!("{peer}: authenticated"));
    let local = match local {
        Ok(l) => l,
        Err(e) => {
            conn.fail(&format!("the listener's end cannot run: {e}"));
            return Err(e);
        }
    };
    let expect = opts.rail.clone();
    // The engine borrows the GPU; the closure takes the rest.
    let gpu_ref = local.gpu.as_ref();
    let served = session::serve(
        &mut conn,
        Box::new(move |p: &Params| {
            rails::check_tag(p.rail.as_ref(), expect.as_ref()).map_err(PairError::Usage)?;
            new_engine(local.side, local.desc, local.memory, gpu_ref, p, notes)
        }),
    )?;
    let report = served.report.ok_or_else(|| PairError::Protocol {
        peer: conn.peer.clone(),
        what: "no report".into(),
    })?;
    Ok(PairOutcome {
        role: "listener",
        report,
    })
}

/// `gdrprov bench pair PEER`: connect, run every size, report.
pub fn run_client(opts: &PairOptions, notes: Notes<'_>) -> Result<PairOutcome, PairError> {
    let deadline = Instant::now() + opts.timeout;
    let (secret, _) = auth::load_secret(opts.token_file.as_deref())?.ok_or(PairError::NoSecret)?;
    let peer = opts.peer.clone().unwrap_or_default();
    let stream = net::connect(&peer, opts.port, deadline)?;
    let peer_addr = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| peer.clone());
    let mut conn = Conn::new(stream, peer_addr.clone(), deadline, opts.timeout);
    auth::client_handshake(&mut conn, &secret)?;
    notes(&format!("{peer_addr}: authenticated"));
    let local = match open_local(opts, notes) {
        Ok(l) => l,
        Err(e) => {
            conn.fail(&format!("the client's end cannot run: {e}"));
            return Err(e);
        }
    };
    let my_addr = conn_local_addr(&conn);
    let params = Params {
        op: opts.op,
        sizes: opts.sizes.clone(),
        length: opts.length,
        qps: opts.qps,
        tx_depth: opts.tx_depth,
        check_iters: opts.check_iters,
        rail: opts.rail.clone(),
    };
    // The engine borrows the GPU; the closure takes the rest.
    let gpu_ref = local.gpu.as_ref();
    let driven = session::drive(
        &mut conn,
        &params,
        Box::new(move |p: &Params| {
            new_engine(local.side, local.desc, local.memory, gpu_ref, p, notes)
        }),
    )?;
    let report = build_report(opts, &params, &driven, my_addr, peer_addr);
    session::finish(&mut conn, &report)?;
    Ok(PairOutcome {
        role: "client",
        report,
    })
}

fn conn_local_addr(conn: &Conn) -> String {
    conn.local_addr().unwrap_or_else(|| "this host".into())
}

fn end(address: String, s: &Setup) -> End {
    End {
        address,
        port: s.port.clone(),
        memory: s.memory.clone(),
        gpu: s.gpu.clone(),
    }
}

/// Each size's result: this end's direction, the peer's when both sent (their sum is the size's
/// figure), and the size's data check, added to the whole run's.
fn pair_sizes(op: Op, d: &session::Driven, line: Option<f64>) -> (Vec<PairSize>, PairCheck) {
    let mut results = Vec::new();
    let mut check = PairCheck::default();
    for (m, peer, c) in &d.sizes {
        let mut directions = vec![Direction {
            flow: if op == Op::Read {
                "listener -> client"
            } else {
                "client -> listener"
            }
            .into(),
            average_gbps: m.average_gbps,
            peak_gbps: m.peak_gbps,
        }];
        let (mut avg, mut peak, mut iters, mut rate) =
            (m.average_gbps, m.peak_gbps, m.iterations, m.msg_rate_mpps);
        if let Some(p) = peer {
            directions.push(Direction {
                flow: "listener -> client".into(),
                average_gbps: p.average_gbps,
                peak_gbps: p.peak_gbps,
            });
            avg += p.average_gbps;
            peak += p.peak_gbps;
            iters += p.iterations;
            rate += p.msg_rate_mpps;
        }
        check.add(c);
        results.push(PairSize {
            size: SizeResult {
                iterations: iters,
                peak_gbps: peak,
                average_gbps: avg,
                msg_rate_mpps: rate,
                line_rate_fraction: line.map(|l| avg / l),
                ..m.clone()
            },
            directions,
            data_check: c.clone(),
        });
    }
    (results, check)
}

/// The memory the default threshold is judged for: GPU memory when either end used it.
fn memory_of(d: &session::Driven) -> MemoryKind {
    let gpu_used = [&d.mine.memory, &d.theirs.memory]
        .iter()
        .any(|m| m.as_str() != "host");
    if gpu_used {
        MemoryKind::CudaDmabuf
    } else {
        MemoryKind::Host
    }
}

/// The client's report from what it measured.
pub fn build_report(
    opts: &PairOptions,
    params: &Params,
    d: &session::Driven,
    my_addr: String,
    peer_addr: String,
) -> PairReport {
    let (a, b) = (&d.mine.port, &d.theirs.port);
    let software = a.software || b.software;
    let line = match (a.line_rate_gbps, b.line_rate_gbps) {
        (Some(x), Some(y)) if !software => Some(x.min(y)),
        _ => None,
    };
    let (results, check) = pair_sizes(params.op, d, line);
    let as_sizes: Vec<SizeResult> = results.iter().map(|r| r.size.clone()).collect();
    let fraction = opts
        .min_fraction
        .unwrap_or_else(|| default_fraction(memory_of(d)));
    let sw = [a, b]
        .into_iter()
        .find(|p| p.software)
        .map(|p| p.device.as_str());
    let threshold = evaluate_threshold(&as_sizes, line, sw, fraction, opts.min_gbps);
    let passed = check.passed && results.iter().all(|r| r.data_check.passed);
    let threshold_ok = threshold.passed != Some(false);
    PairReport {
        op: params.op,
        client: end(my_addr, &d.mine),
        listener: end(peer_addr, &d.theirs),
        qps: params.qps,
        tx_depth: params.tx_depth,
        line_rate_gbps: line,
        results,
        data_check: check,
        threshold,
        passed: passed && threshold_ok,
        timing: timed::method(
            params.op,
            session::run_length(params.length),
            params.check_iters,
            a.software,
        ),
    }
}

/// Run whichever end the options say.
/// `notes` gets each progress line (the caller shows them through the output layer), the
/// listener's "run this on the client" line among them.
pub fn run(opts: &PairOptions, notes: Notes<'_>) -> Result<PairOutcome, PairError> {
    if opts.listen.is_some() {
        run_listener(opts, notes)
    } else {
        run_client(opts, notes)
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
