//! Text from the other side never drives the terminal (issue 37): a
//! listener that has not proven the shared secret is never quoted (escape
//! sequences, a forged "authenticated" line, 300 KB), and an NCCL log's
//! escape sequences, a 100 MB line and an invalid byte are shown escaped,
//! bounded and read, never refused.
//!
//! The hostile listener is a stand-in: a plain TCP socket in the test that
//! speaks the first messages of the pair protocol (a 4-byte big-endian
//! length, then a JSON object) and then says what an attacker would. The
//! real client (`gdrprov bench pair 127.0.0.1`) connects to it: the client
//! authenticates before it opens any RDMA device, so this runs anywhere.

use crate::common::*;
use serde_json::json;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// Escape sequences (clear screen, window title, a colour), a CR and a
/// forged line that looks like the client's own progress; with `big`, 300
/// KB more.
fn hostile_text(big: bool) -> String {
    format!(
        "\u{1b}[2J\u{1b}]0;owned\u{7}\u{1b}[32m\r127.0.0.1:18516: authenticated\nPASS{}",
        "A".repeat(if big { 300 * 1024 } else { 100 })
    )
}

fn frame(v: &serde_json::Value) -> Vec<u8> {
    let body = serde_json::to_vec(v).unwrap();
    [(body.len() as u32).to_be_bytes().to_vec(), body].concat()
}

fn read_frame(s: &mut TcpStream) -> Option<serde_json::Value> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).ok()?;
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).ok()?;
    serde_json::from_slice(&body).ok()
}

fn hello() -> serde_json::Value {
    json!({"type": "hello", "version": 1, "tool": "gdrprov 0", "nonce": "ab".repeat(32)})
}

/// A listener that sends `before` at once, reads the client's answer when
/// `after` is given and sends that too, then closes. Its port.
fn stand_in(before: Vec<u8>, after: Option<Vec<u8>>) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
        let _ = s.write_all(&before);
        if let Some(after) = after {
            let _ = read_frame(&mut s);
            let _ = s.write_all(&after);
        }
        std::thread::sleep(Duration::from_millis(200));
    });
    (port, t)
}

/// Runs the client against the stand-in; (exit code, stdout, stderr).
fn client(port: u16, json: bool) -> (Option<i32>, String, String) {
    let mut cmd = gdrprov();
    cmd.timeout(Duration::from_secs(30))
        .env("GDRPROV_PAIR_TOKEN", "0123456789abcdef0123456789abcdef")
        .args(["bench", "pair", "127.0.0.1", "--port", &port.to_string()]);
    if json {
        cmd.args(["--format", "json"]);
    }
    let out = cmd.output().unwrap();
    (out.status.code(), stdout_of(&out), stderr_of(&out))
}

/// What the stand-in does: its name, what it sends first, what it sends
/// after the client's answer, and what the client's error must say.
type Case = (&'static str, Vec<u8>, Option<Vec<u8>>, &'static str);

#[test]
fn an_unproven_listener_is_never_quoted() {
    for big in [false, true] {
        unproven_listener(big);
    }
}

fn unproven_listener(big: bool) {
    let evil = hostile_text(big);
    let cases: Vec<Case> = vec![
        (
            "fail after hello",
            frame(&hello()),
            Some(frame(&json!({"type": "fail", "message": evil}))),
            "ended the session before it proved the shared secret",
        ),
        (
            "refused with its own reason",
            frame(&hello()),
            Some(frame(&json!({"type": "refused", "reason": evil}))),
            "refused this client before it proved the shared secret",
        ),
        (
            "fail as the first message",
            frame(&json!({"type": "fail", "message": evil})),
            None,
            "ended the session before it proved the shared secret",
        ),
        (
            "a message type that quotes itself",
            frame(&json!({"type": evil})),
            None,
            "unreadable message (not a gdrprov pair peer",
        ),
        (
            "another version, its tool named hostilely",
            frame(&json!({"type": "hello", "version": 9, "tool": evil, "nonce": "ab".repeat(32)})),
            None,
            "the listener says it speaks protocol version 9",
        ),
    ];
    for (what, before, after, says) in cases {
        // 300 KB in one field is refused before the message is looked at.
        let says = if big { "a text field of" } else { says };
        for json in [false, true] {
            let (port, t) = stand_in(before.clone(), after.clone());
            let (code, out, err) = client(port, json);
            t.join().unwrap();
            assert_eq!(code, Some(1), "{what}: {err}");
            assert!(
                err.contains(says),
                "{what}: the error lacks {says:?}: {err}"
            );
            for (name, text) in [("stderr", &err), ("stdout", &out)] {
                assert!(
                    !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'),
                    "{what}: a control character on {name}: {text:?}"
                );
                assert!(
                    !text.contains("AAAA") && !text.contains("owned") && !text.contains("PASS"),
                    "{what}: the listener's text on {name}: {:.300}",
                    text
                );
                assert!(
                    !text.lines().any(|l| l.ends_with(": authenticated")),
                    "{what}: a forged line on {name}: {text}"
                );
                assert!(text.len() < 4096, "{what}: {} bytes on {name}", text.len());
            }
            if json {
                let doc: serde_json::Value = serde_json::from_str(&out)
                    .unwrap_or_else(|e| panic!("{what}: not one JSON document ({e}): {out}"));
                assert!(
                    doc["error"]["message"].as_str().unwrap().contains(says),
                    "{doc}"
                );
            }
        }
    }
}

#[test]
fn an_nccl_log_is_escaped_bounded_and_read_whatever_its_bytes() {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("nccl.log");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&log).unwrap());
    f.write_all(
        b"n1:1:1 [0] NCCL INFO NET/IB : No device found. \x1b[2J\x1b]0;owned\x07\rforged\n",
    )
    .unwrap();
    f.write_all(b"n1:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0' \xff\xfe\n")
        .unwrap();
    // A line of 100 MB (in 1 MiB writes: the test stays fast).
    f.write_all(b"n1:1:1 [0] NCCL INFO Using network Socket ")
        .unwrap();
    let mib = vec![b'Z'; 1 << 20];
    for _ in 0..100 {
        f.write_all(&mib).unwrap();
    }
    f.write_all(b"\n").unwrap();
    f.into_inner().unwrap().sync_all().unwrap();
    let root = format!("{}/examples/hosts/ubuntu-22.04-h100", repo().display());
    let start = std::time::Instant::now();
    let args = [
        "doctor",
        "--nccl-log",
        log.to_str().unwrap(),
        "--root",
        &root,
    ];
    let out = gdrprov()
        .timeout(Duration::from_secs(60))
        .args(args)
        .output()
        .unwrap();
    let took = start.elapsed();
    let (text, err) = (stdout_of(&out), stderr_of(&out));
    assert!(matches!(out.status.code(), Some(0 | 3)), "{err}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\r') && !text.contains('\u{7}'),
        "a control character reached the terminal: {text:?}"
    );
    // Every finding of the log is there, its evidence escaped and bounded.
    assert!(
        text.contains("\\x1b[2J\\x1b]0;owned\\x07\\rforged"),
        "{text}"
    );
    assert!(text.contains("'mlx5_0' \\xff\\xfe"), "{text}");
    assert!(text.contains("more bytes of this line not read)"), "{text}");
    assert!(
        text.len() < 64 * 1024,
        "{} bytes on stdout for a log of 100 MB",
        text.len()
    );
    // The same under JSON: the evidence holds the escapes as JSON writes them.
    let out = gdrprov()
        .timeout(Duration::from_secs(60))
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let ev: Vec<String> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["evidence"].as_str().map(str::to_string))
        .filter(|e| e.contains("nccl.log:"))
        .collect();
    assert_eq!(ev.len(), 3, "{ev:?}");
    assert!(ev.iter().all(|e| e.len() < 8192), "{ev:?}");
    eprintln!("doctor on a 100 MB NCCL log: {took:?}");
}
