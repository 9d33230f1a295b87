//! `bench pair`'s handshake deadline and token owner (issue 43). A peer that
//! connects or accepts and says nothing is dropped after the handshake's own
//! deadline (10 s, `auth::HANDSHAKE_SECS`), not after `--timeout` (300 s by
//! default), on both ends; a 0600 token file another user owns is refused,
//! naming its owner. The silent peers are plain sockets of this test: the
//! client authenticates before it opens any RDMA device, and the listener
//! before it uses the one it found, so this runs anywhere.

use super::harness::assert_refused;
use crate::common::gdrprov;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// The handshake's deadline and the slack a loaded CI machine gets.
const DEADLINE: Duration = Duration::from_secs(10);
const SLACK: Duration = Duration::from_secs(15);

fn token(dir: &Path, uid: Option<u32>) -> String {
    let p = dir.join(format!("token-{uid:?}"));
    std::fs::write(&p, "0123456789abcdef0123456789abcdef\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    if let Some(u) = uid {
        std::os::unix::fs::chown(&p, Some(u), Some(u)).unwrap();
    }
    p.display().to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A client against a socket that accepts and never writes fails within the
/// handshake's deadline, naming it, with the default `--timeout` of 300 s.
/// (The listener's end needs an RDMA device before it binds: its deadline
/// is `bench::pair::tests::a_silent_peer_is_dropped_at_the_handshake_deadline_on_both_ends`.)
#[test]
fn a_silent_listener_is_dropped_at_the_handshake_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let tok = token(dir.path(), None);
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let hold = std::thread::spawn(move || silent.accept().map(|(s, _)| s));
    let t = Instant::now();
    let out = gdrprov()
        .args([
            "bench",
            "pair",
            "127.0.0.1",
            "--port",
            &port,
            "--token-file",
            &tok,
        ])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    let took = t.elapsed();
    let text = assert_refused(
        &out,
        "did not complete the handshake within its deadline of 10 s",
        "client",
    );
    assert!(
        took >= DEADLINE - Duration::from_secs(1),
        "gave up after {took:?}, before the deadline\n{text}"
    );
    assert!(
        took < DEADLINE + SLACK,
        "held for {took:?}, past the handshake deadline\n{text}"
    );
    drop(hold);
}

/// A token file of mode 0600 that another user (uid 65534) owns: refused,
/// naming its owner and the fix, by the client and `verify --peer` alike
/// (one reader of `--token-file`; the listener's refusal is the unit test
/// `bench::pair::auth::tests::hostile_token_files_and_secrets_are_refused`).
#[test]
fn a_token_another_user_owns_is_refused_naming_the_owner() {
    let dir = tempfile::tempdir().unwrap();
    let theirs = token(dir.path(), Some(65534));
    let port = free_port().to_string();
    for args in [
        &[
            "bench",
            "pair",
            "127.0.0.1",
            "--port",
            &port,
            "--token-file",
            &theirs,
        ][..],
        &[
            "bench",
            "pair",
            "--listen",
            "127.0.0.1",
            "--port",
            &port,
            "--token-file",
            &theirs,
        ],
    ] {
        let out = gdrprov()
            .args(args)
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap();
        let text = assert_refused(&out, "owned by uid 65534", &args.join(" "));
        assert!(text.contains("chown"), "{args:?}: no fix named\n{text}");
    }
}
