//! The session over real loopback TCP, with a fake verbs layer: "RDMA" copies bytes between
//! buffers of this process, found by rkey as a NIC would.

use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use super::auth::{client_handshake, listener_handshake, Secret};
use super::engine::{compare_pattern, Engine, MakeEngine, Xfer};
use super::error::PairError;
use super::protocol::{Buf, Compared, Conn, Msg, Op, Params, PortDesc, Setup, WireLength};
use super::session::{self, incompatibility};
use super::timed::{self, Poster};
use super::*;
use crate::bench::loopback::{fill_pattern, RunLength};
use crate::bench::report::SizeResult;

type Mem = Arc<Mutex<Vec<u8>>>;

fn registry() -> &'static Mutex<HashMap<u32, Mem>> {
    static R: OnceLock<Mutex<HashMap<u32, Mem>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(HashMap::new()))
}

static NEXT_KEY: AtomicU32 = AtomicU32::new(1);

/// A fake end: two buffers; the exposed one is found by rkey. `corrupt`: flip this offset of
/// every WRITE on arrival.
struct Fake {
    exposed: Mem,
    local: Mem,
    rkey: u32,
    remote: Option<u32>,
    desc: PortDesc,
    qps: u32,
    corrupt: Option<usize>,
    done: Vec<(u32, u64)>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Ok(mut r) = registry().lock() {
            r.remove(&self.rkey);
        }
    }
}

fn desc(mtu: u32) -> PortDesc {
    PortDesc {
        host: "h".into(),
        device: "fake0".into(),
        port: 1,
        link_layer: "Ethernet".into(),
        state: "ACTIVE".into(),
        lid: 0,
        gid: Some("::ffff:127.0.0.1".into()),
        gid_raw: None,
        gid_index: Some(1),
        gid_type: Some("RoCE v2".into()),
        mtu,
        netdev: Some("lo".into()),
        netdev_mtu: Some(1500),
        line_rate_gbps: None,
        software: true,
    }
}

impl Fake {
    fn new(p: &Params, mtu: u32, corrupt: Option<usize>) -> Fake {
        let n = p.sizes.iter().copied().max().unwrap_or(0) as usize;
        let rkey = NEXT_KEY.fetch_add(1, Ordering::SeqCst);
        let exposed = Arc::new(Mutex::new(vec![0u8; n]));
        registry().lock().unwrap().insert(rkey, exposed.clone());
        Fake {
            exposed,
            local: Arc::new(Mutex::new(vec![0u8; n])),
            rkey,
            remote: None,
            desc: desc(mtu),
            qps: p.qps,
            corrupt,
            done: Vec::new(),
        }
    }
    fn mem(&self, b: Buf) -> &Mem {
        match b {
            Buf::Exposed => &self.exposed,
            Buf::Local => &self.local,
        }
    }
    fn xfer(&mut self, x: Xfer, len: usize) -> Result<(), u32> {
        let remote = self
            .remote
            .and_then(|k| registry().lock().unwrap().get(&k).cloned())
            .ok_or(12u32)?; // the peer's memory is gone: transport retry exceeded
        let mut r = remote.lock().unwrap();
        let mut l = self.local.lock().unwrap();
        match x {
            Xfer::Write => {
                r[..len].copy_from_slice(&l[..len]);
                if let Some(o) = self.corrupt.filter(|&o| o < len) {
                    r[o] ^= 0x40;
                }
            }
            Xfer::Read => l[..len].copy_from_slice(&r[..len]),
        }
        Ok(())
    }
}

impl Poster for Fake {
    fn qps(&self) -> usize {
        self.qps as usize
    }
    fn depth(&self, _len: u64) -> (u32, u32) {
        (4, 1)
    }
    fn post(&mut self, x: Xfer, i: usize, n: u32, len: u64) -> Result<(), PairError> {
        for _ in 0..n {
            let status = self.xfer(x, len as usize).err().unwrap_or(0);
            self.done.push((status, ((i as u64) << 32) | 1));
        }
        Ok(())
    }
    fn poll(&mut self, out: &mut Vec<(u32, u64)>) {
        out.append(&mut self.done);
    }
}

impl Engine for Fake {
    fn setup(&self) -> Setup {
        Setup {
            port: self.desc.clone(),
            memory: "host".into(),
            gpu: None,
            addr: 0,
            rkey: self.rkey,
            len: self.exposed.lock().unwrap().len() as u64,
            qpns: (0..self.qps).collect(),
            psns: (0..self.qps).collect(),
            rd_atom: 16,
        }
    }
    fn connect(&mut self, remote: &Setup) -> Result<(), PairError> {
        self.remote = Some(remote.rkey);
        Ok(())
    }
    fn fill(&mut self, buf: Buf, seed: u64, len: u64) -> Result<(), PairError> {
        fill_pattern(&mut self.mem(buf).lock().unwrap()[..len as usize], seed);
        Ok(())
    }
    fn clear(&mut self, buf: Buf, len: u64) -> Result<(), PairError> {
        self.mem(buf).lock().unwrap()[..len as usize].fill(0);
        Ok(())
    }
    fn compare(&mut self, buf: Buf, seed: u64, len: u64) -> Result<Compared, PairError> {
        Ok(compare_pattern(
            &self.mem(buf).lock().unwrap()[..len as usize],
            seed,
        ))
    }
    fn once(&mut self, x: Xfer, len: u64, _qp: u32) -> Result<(), PairError> {
        self.xfer(x, len as usize)
            .map_err(|s| super::timed::completion(s, 0).unwrap_err())
    }
    fn timed(
        &mut self,
        x: Xfer,
        len: u64,
        l: RunLength,
        d: Instant,
        gone: &dyn Fn() -> bool,
    ) -> Result<SizeResult, PairError> {
        timed::run(self, x, len, l, d, gone)
    }
}

fn secret(s: &str) -> Secret {
    Secret::from_text(s, "test").unwrap()
}

fn params(op: Op) -> Params {
    Params {
        op,
        sizes: vec![4096, 65536],
        length: WireLength::Iterations(50),
        qps: 2,
        tx_depth: 4,
        check_iters: 3,
        rail: None,
    }
}

fn pair_conns(limit: Duration) -> (Conn, Conn) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let c = TcpStream::connect(addr).unwrap();
    let (s, _) = l.accept().unwrap();
    let d = Instant::now() + limit;
    (
        Conn::new(s, "client".into(), d, limit),
        Conn::new(c, addr.to_string(), d, limit),
    )
}

struct Run {
    listener: Result<session::Served, PairError>,
    client: Result<session::Driven, PairError>,
    listener_made_engine: bool,
}

fn run(op: Op, lsecret: &str, csecret: &str, lmtu: u32, corrupt: Option<usize>) -> Run {
    let (mut lc, mut cc) = pair_conns(Duration::from_secs(20));
    let made = Arc::new(AtomicBool::new(false));
    let made2 = made.clone();
    let ls = secret(lsecret);
    let h = thread::spawn(move || {
        listener_handshake(&mut lc, &ls)?;
        let make: MakeEngine<'static> = Box::new(move |p: &Params| {
            made2.store(true, Ordering::SeqCst);
            Ok(Box::new(Fake::new(p, lmtu, None)) as Box<dyn Engine>)
        });
        session::serve(&mut lc, make)
    });
    let client = (|| {
        client_handshake(&mut cc, &secret(csecret))?;
        let p = params(op);
        let make: MakeEngine<'static> =
            Box::new(
                move |p: &Params| Ok(Box::new(Fake::new(p, 1024, corrupt)) as Box<dyn Engine>),
            );
        let d = session::drive(&mut cc, &p, make)?;
        let opts = test_opts(op);
        let r = build_report(&opts, &p, &d, "c".into(), "l".into());
        session::finish(&mut cc, &r)?;
        Ok(d)
    })();
    drop(cc);
    Run {
        listener: h.join().unwrap(),
        client,
        listener_made_engine: made.load(Ordering::SeqCst),
    }
}

fn test_opts(op: Op) -> PairOptions {
    PairOptions {
        listen: None,
        peer: None,
        port: 1,
        token_file: None,
        timeout: Duration::from_secs(20),
        device: None,
        dev_port: None,
        memory: None,
        gpu: 0,
        op,
        sizes: vec![],
        length: WireLength::Iterations(1),
        qps: 2,
        tx_depth: 4,
        check_iters: 3,
        gid_index: None,
        min_fraction: None,
        min_gbps: Some(0.0001),
        all_nics: false,
        rail: None,
        gpu_pci: None,
        rail_note: None,
    }
}

const S: &str = "0123456789abcdef-secret";

#[test]
fn write_read_and_bidir_pass_their_data_check() {
    for op in [Op::Write, Op::Read, Op::Bidir] {
        let r = run(op, S, S, 1024, None);
        let d = r.client.unwrap_or_else(|e| panic!("{op:?}: {e}"));
        let served = r.listener.unwrap();
        let rep = served.report.unwrap();
        assert_eq!(rep.op, op);
        assert!(rep.passed, "{op:?}: {rep:?}");
        assert_eq!(rep.results.len(), 2);
        let per = if op == Op::Bidir { 6 } else { 3 };
        for s in &rep.results {
            assert!(s.data_check.passed);
            assert_eq!(s.data_check.iterations, per);
            assert_eq!(s.data_check.bytes_compared, per as u64 * s.size.bytes);
            assert!(s.size.average_gbps > 0.0);
            assert_eq!(s.directions.len(), if op == Op::Bidir { 2 } else { 1 });
        }
        // Two QPs, 50 transfers each per size.
        assert_eq!(d.sizes[0].0.iterations, 100);
        let text = crate::output::pair::render_text(&rep, "client");
        assert!(text.contains("data check: passed"), "{text}");
        assert!(text.ends_with("result: PASS\n"), "{text}");
        // How the figures were timed: the transfers only, the data check outside.
        assert!(
            text.contains("\ntiming: timed where the transfers are posted: only the RDMA "),
            "{text}"
        );
        assert!(text.contains("of 50 transfers per QP"), "{text}");
        assert!(
            text.contains("the data check (3 transfers per size, each its own pattern, every byte compared at the receiving end) runs after the timed run, outside it"),
            "{text}"
        );
        let v = serde_json::to_value(&rep).unwrap();
        assert_eq!(v["timing"], serde_json::json!(rep.timing));
        assert_eq!(v["results"][0]["data_check"]["passed"], true);
        assert!(v["results"][1]["average_gbps"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn a_corrupted_byte_fails_the_run_with_its_offset() {
    let r = run(Op::Write, S, S, 1024, Some(4000));
    let rep = r.listener.unwrap().report.unwrap();
    assert!(!rep.passed);
    assert!(!rep.data_check.passed);
    let s = &rep.results[0];
    assert_eq!(s.data_check.mismatched_bytes, 3);
    assert_eq!(s.data_check.mismatch_offsets, vec![4000, 4000, 4000]);
    let text = crate::output::pair::render_text(&rep, "listener");
    assert!(
        text.contains("FAILED (3 bytes differ, offsets [4000, 4000, 4000])"),
        "{text}"
    );
    assert!(text.ends_with("result: FAIL\n"), "{text}");
}

#[test]
fn a_wrong_secret_is_refused_before_anything_is_registered() {
    let r = run(Op::Write, S, "another-secret-of-16", 1024, None);
    let le = r.listener.err().unwrap().to_string();
    assert!(le.contains("did not prove the shared secret"), "{le}");
    assert!(le.contains("nothing was registered"), "{le}");
    let ce = r.client.err().unwrap().to_string();
    assert!(ce.contains("refused this client: wrong secret"), "{ce}");
    assert!(!r.listener_made_engine);
}

#[test]
fn an_mtu_mismatch_is_named_at_both_ends_with_both_mtus() {
    let r = run(Op::Write, S, S, 512, None);
    for e in [r.listener.err().unwrap(), r.client.err().unwrap()] {
        let m = e.to_string();
        assert!(m.contains("MTU mismatch"), "{m}");
        assert!(m.contains("MTU 512") || m.contains("has 512"), "{m}");
        assert!(m.contains("1024"), "{m}");
    }
}

#[test]
fn incompatibilities_are_named() {
    let a = desc(1024);
    assert_eq!(incompatibility(&a, &a), None);
    let mut b = desc(1024);
    b.gid_type = Some("IB/RoCE v1".into());
    let m = incompatibility(&a, &b).unwrap();
    assert!(
        m.contains("GID type mismatch") && m.contains("RoCE v2") && m.contains("IB/RoCE v1"),
        "{m}"
    );
    b = desc(1024);
    b.link_layer = "InfiniBand".into();
    assert!(incompatibility(&a, &b)
        .unwrap()
        .contains("link layer mismatch"));
}

#[test]
fn a_client_gone_mid_run_is_reported_by_the_listener_at_once() {
    let (mut lc, mut cc) = pair_conns(Duration::from_secs(20));
    let h = thread::spawn(move || {
        listener_handshake(&mut lc, &secret(S))?;
        let make: MakeEngine<'static> =
            Box::new(|p: &Params| Ok(Box::new(Fake::new(p, 1024, None)) as Box<dyn Engine>));
        session::serve(&mut lc, make).map(|_| ())
    });
    client_handshake(&mut cc, &secret(S)).unwrap();
    let p = params(Op::Write);
    cc.send(&Msg::Params(p.clone())).unwrap();
    let mut f = Fake::new(&p, 1024, None);
    cc.send(&Msg::Setup(Box::new(f.setup()))).unwrap();
    let Msg::Setup(theirs) = cc.recv().unwrap() else {
        panic!()
    };
    f.connect(&theirs).unwrap();
    cc.send(&Msg::Ready).unwrap();
    assert_eq!(cc.recv().unwrap(), Msg::Ready);
    cc.send(&Msg::Cmd(protocol::Cmd::Passive { len: 4096 }))
        .unwrap();
    assert!(matches!(cc.recv().unwrap(), Msg::CmdOk { .. }));
    let t = Instant::now();
    drop(cc); // the client process dies in its timed run
    let e = h.join().unwrap().unwrap_err().to_string();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        e.contains("closed the connection during the client's timed run of 4 KiB"),
        "{e}"
    );
}

#[test]
fn a_listener_gone_mid_run_is_reported_by_the_client() {
    let (mut lc, mut cc) = pair_conns(Duration::from_secs(20));
    let h = thread::spawn(move || {
        listener_handshake(&mut lc, &secret(S)).unwrap();
        let Msg::Params(p) = lc.recv().unwrap() else {
            panic!()
        };
        let mut f = Fake::new(&p, 1024, None);
        lc.send(&Msg::Setup(Box::new(f.setup()))).unwrap();
        let Msg::Setup(theirs) = lc.recv().unwrap() else {
            panic!()
        };
        f.connect(&theirs).unwrap();
        lc.send(&Msg::Ready).unwrap();
        assert_eq!(lc.recv().unwrap(), Msg::Ready);
        // Dies at the first step: its memory and its socket go.
    });
    client_handshake(&mut cc, &secret(S)).unwrap();
    let mut p = params(Op::Write);
    p.length = WireLength::Seconds(3.0);
    let make: MakeEngine<'static> =
        Box::new(|p: &Params| Ok(Box::new(Fake::new(p, 1024, None)) as Box<dyn Engine>));
    let t = Instant::now();
    let e = session::drive(&mut cc, &p, make).err().unwrap().to_string();
    h.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(e.contains("closed the connection"), "{e}");
}

#[test]
fn the_time_limit_ends_a_listener_without_a_client() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let t = Instant::now();
    let e = net::accept_until(&l, t + Duration::from_millis(300), Duration::from_secs(1))
        .err()
        .unwrap()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        e.contains("time limit of 1 s reached waiting for a client"),
        "{e}"
    );
}

#[test]
fn a_silent_peer_hits_the_time_limit() {
    let (_lc, mut cc) = pair_conns(Duration::from_millis(400));
    let t = Instant::now();
    let e = client_handshake(&mut cc, &secret(S))
        .unwrap_err()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(2));
    assert!(
        e.contains("time limit") && e.contains("during the authentication"),
        "{e}"
    );
}

#[test]
fn bind_addresses() {
    let d = desc(1024);
    assert_eq!(
        net::parse_bind("10.0.0.1", 7).unwrap(),
        Some("10.0.0.1:7".parse().unwrap())
    );
    assert_eq!(
        net::parse_bind("10.0.0.1:9", 7).unwrap(),
        Some("10.0.0.1:9".parse().unwrap())
    );
    assert_eq!(net::parse_bind("", 7).unwrap(), None);
    assert!(net::parse_bind("not an address", 7).is_err());
    let mut v2 = d.clone();
    let mut raw = [0u8; 16];
    raw[10] = 0xff;
    raw[11] = 0xff;
    raw[12..].copy_from_slice(&[10, 99, 0, 1]);
    v2.gid_raw = Some(raw);
    assert_eq!(
        net::bind_addr("", 18516, &v2).unwrap(),
        "10.99.0.1:18516".parse().unwrap()
    );
}

#[test]
fn the_timing_says_the_window_of_a_duration_run() {
    let d = |s: f64| crate::bench::loopback::RunLength::Duration(Duration::from_secs_f64(s));
    let t = super::timed::method(Op::Write, d(5.0), 4, false);
    assert!(
        t.contains("only the RDMA WRITEs kept in flight (posts and completion polling; no byte"),
        "{t}"
    );
    assert!(t.contains("each 5 s run from the first completion after its first 0.5 s to the last one before its last 0.5 s"), "{t}");
    // The margin is at most 1 s.
    let t = super::timed::method(Op::Read, d(30.0), 2, true);
    assert!(
        t.contains("RDMA READs") && t.contains("its first 1 s"),
        "{t}"
    );
    let t = super::timed::method(Op::Bidir, d(2.0), 1, false);
    assert!(t.contains("each end times its own"), "{t}");
    assert_eq!(
        super::timed::margin(crate::bench::loopback::RunLength::Iterations(9)),
        Duration::ZERO
    );
}

#[test]
fn seeds_differ_per_iteration_size_and_direction() {
    let mut seen = std::collections::HashSet::new();
    for size in [4096u64, 65536] {
        for it in 0..8 {
            for rev in [false, true] {
                assert!(seen.insert(session::check_seed(42, size, it, rev)));
            }
        }
    }
}

#[test]
fn metrics_name_both_ends_and_every_size() {
    let r = run(Op::Write, S, S, 1024, None);
    let rep = r.listener.unwrap().report.unwrap();
    let m = crate::output::pair_metrics::prometheus(&rep, "listener", 1700000000);
    assert!(m.contains("# TYPE gdrprov_pair_gbps gauge"), "{m}");
    assert!(
        m.contains("gdrprov_pair_gbps{role=\"listener\",device=\"fake0\",memory=\"host\",peer=\"c\",peer_host=\"h\",peer_device=\"fake0\",peer_memory=\"host\",op=\"write\",bytes=\"65536\"}"),
        "{m}"
    );
    assert!(m.contains("gdrprov_pair_data_ok{role=\"listener\""), "{m}");
    assert!(m.contains("} 1\n"), "{m}");
    assert!(
        m.contains("gdrprov_pair_timestamp_seconds{") && m.contains("} 1700000000"),
        "{m}"
    );
    assert!(
        !m.contains("gdrprov_pair_line_rate_fraction{"),
        "software devices have none: {m}"
    );
}

#[test]
fn mismatch_messages_say_which_end_is_which() {
    let a = desc(512);
    let b = desc(1024);
    let m = incompatibility(&a, &b).unwrap();
    assert!(
        m.starts_with("MTU mismatch: this end (h fake0:1) has active MTU 512 (netdev lo MTU 1500), the peer (h fake0:1) has 1024"),
        "{m}"
    );
}

/// `verify --peer`'s entry over a fake session on loopback TCP: a good run passes, a corrupted
/// byte fails it, a failed run names the peer and the cause.
#[test]
fn the_verify_pair_entry_judges_a_session() {
    use crate::checks::verify::pair::verdict;
    use crate::checks::Status;
    let rep = run(Op::Write, S, S, 1024, None)
        .listener
        .unwrap()
        .report
        .unwrap();
    let c = verdict("l", Ok(rep));
    assert_eq!((c.name.as_ref(), c.status), ("pair", Status::Pass), "{c:?}");
    assert!(
        c.evidence.starts_with("RDMA WRITE to l") || c.evidence.contains(" to l ("),
        "{}",
        c.evidence
    );
    assert!(c.evidence.contains("data check passed"), "{}", c.evidence);
    let bad = run(Op::Write, S, S, 1024, Some(4000))
        .listener
        .unwrap()
        .report
        .unwrap();
    let c = verdict("l", Ok(bad));
    assert_eq!(c.status, Status::Fail);
    assert!(
        c.evidence.contains("data check FAILED: 6 bytes differ"),
        "{}",
        c.evidence
    );
    let c = verdict("10.0.0.2", Err("the peer refused the secret".into()));
    assert_eq!(c.status, Status::Fail);
    assert_eq!(c.evidence, "to 10.0.0.2: the peer refused the secret");
}

/// An `--all-nics` document reads, rail by rail, as the fleet sweep reads pair results.
#[test]
fn all_nics_json_reads_as_the_sweep_reads_it() {
    use crate::bench::pair::allnics::{RailResult, RailsOutcome};
    use crate::bench::pair::rails::Rail;
    use crate::output::pair::render_rails;
    let rep = run(Op::Write, S, S, 1024, None)
        .listener
        .unwrap()
        .report
        .unwrap();
    let rail = |index: usize, nic: &str| Rail {
        index,
        nic: nic.into(),
        gpu_pci: None,
        distance: None,
        note: None,
    };
    let out = RailsOutcome {
        role: "client",
        rails: vec![
            RailResult {
                name: "mlx5_0".into(),
                rail: rail(0, "mlx5_0"),
                report: Some(rep),
                error: None,
            },
            RailResult {
                name: "mlx5_1".into(),
                rail: rail(1, "mlx5_1"),
                report: None,
                error: Some("port mlx5_1:1 is not ACTIVE".into()),
            },
        ],
        passed: false,
    };
    let v = serde_json::to_value(&out).unwrap();
    // The sweep's one reader takes what the writer wrote (strict types).
    let doc =
        crate::docs::parse::<crate::docs::pair::PairResult>("a+b.json", v.to_string().as_bytes())
            .unwrap();
    let recs = crate::fleet::results::read(&doc, "a", "b", None, 1);
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].rail.as_deref(), Some("mlx5_0"));
    assert!(recs[0].gbps > 0.0 && recs[0].data_ok);
    assert_eq!(recs[1].rail.as_deref(), Some("mlx5_1"));
    assert!(!recs[1].data_ok);
    let text = render_rails(&out);
    assert!(text.contains("rail 1 of 2: mlx5_1 <-> no GPU"), "{text}");
    assert!(
        text.contains("  FAIL: port mlx5_1:1 is not ACTIVE"),
        "{text}"
    );
    assert!(text.ends_with("all rails: FAIL\n"), "{text}");
}

/// Issue 43: a peer that connects or accepts and then says nothing is
/// dropped at the handshake's own deadline (10 s), not at the session's
/// (here 300 s, `--timeout`'s default), on both ends at once.
#[test]
fn a_silent_peer_is_dropped_at_the_handshake_deadline_on_both_ends() {
    let limit = Duration::from_secs(300);
    let (mut lc, _silent_client) = pair_conns(limit);
    let (_silent_listener, mut cc) = pair_conns(limit);
    let t = Instant::now();
    let listener = thread::spawn(move || listener_handshake(&mut lc, &secret(S)).unwrap_err());
    let client = client_handshake(&mut cc, &secret(S)).unwrap_err();
    let listener = listener.join().unwrap();
    let took = t.elapsed();
    let deadline = Duration::from_secs(super::auth::HANDSHAKE_SECS);
    assert!(
        took >= deadline - Duration::from_millis(500) && took < deadline + Duration::from_secs(10),
        "{took:?}"
    );
    for e in [client, listener] {
        assert!(
            matches!(e, PairError::HandshakeTimedOut { secs: 10, .. }),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("within its deadline of 10 s (apart from --timeout)"),
            "{e}"
        );
    }
}

/// A listener that waited in accept for most of `--timeout` has less of the
/// session left than the handshake's 10 s: running out then names
/// `--timeout`, the deadline that ran out, not the handshake's.
#[test]
fn the_session_deadline_running_out_in_the_handshake_names_timeout() {
    let limit = Duration::from_secs(300);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let _silent = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    let mut lc = Conn::new(
        s,
        "client".into(),
        Instant::now() + Duration::from_secs(1),
        limit,
    );
    let e = listener_handshake(&mut lc, &secret(S)).unwrap_err();
    assert!(matches!(e, PairError::TimedOut { secs: 300, .. }), "{e}");
    assert!(
        !e.to_string().contains("within its deadline of 10 s"),
        "{e}"
    );
}
