//! The shared secret and the mutual challenge-response: each end sends a fresh random nonce and
//! proves the secret with HMAC-SHA256 over both nonces (its role first); the secret never travels.

use std::io::Read;
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::error::PairError;
use super::protocol::{Conn, Msg, PROTOCOL_VERSION};

/// The environment variable that may hold the secret.
pub const TOKEN_ENV: &str = "GDRPROV_PAIR_TOKEN";

/// Why a listener refuses a client whose proof is wrong: the one refusal
/// the client repeats (in its own words: these) before the listener has
/// proven the secret.
const WRONG_SECRET: &str = "wrong secret (the proof does not match this listener's secret)";

/// A secret shorter than this is refused (a typo, not a secret).
const MIN_SECRET: usize = 16;

/// The shared secret (never printed, never sent).
#[derive(Clone)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl Secret {
    pub fn from_text(text: &str, origin: &str) -> Result<Secret, PairError> {
        let t = text.trim();
        if let Some(c) = t.chars().find(|c| c.is_control()) {
            return Err(PairError::BadSecret {
                path: origin.to_string(),
                why: format!(
                    "it holds the control character U+{:04X}; a secret is one line of printable text of at least {MIN_SECRET} bytes (make one: `openssl rand -hex 32`)",
                    c as u32
                ),
            });
        }
        if t.len() < MIN_SECRET {
            return Err(PairError::BadSecret {
                path: origin.to_string(),
                why: format!(
                    "{} characters; a secret needs at least {MIN_SECRET}",
                    t.len()
                ),
            });
        }
        Ok(Secret(t.as_bytes().to_vec()))
    }
}

/// `count` random bytes from the kernel.
pub fn random_bytes(count: usize) -> Result<Vec<u8>, PairError> {
    crate::host::random_bytes(count)
        .map_err(|e| PairError::Usage(format!("cannot read /dev/urandom: {e}")))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the secret comes from: a file, the environment, or (listener only) a new one.
#[derive(Debug)]
pub enum SecretSource {
    File(PathBuf),
    Env,
    Generated(PathBuf),
}

/// Read the secret from `--token-file`, else GDRPROV_PAIR_TOKEN; None when neither is given.
pub fn load_secret(file: Option<&Path>) -> Result<Option<(Secret, SecretSource)>, PairError> {
    if let Some(p) = file {
        let text = read_token_file(p)?;
        let s = Secret::from_text(&text, &p.display().to_string())?;
        return Ok(Some((s, SecretSource::File(p.to_path_buf()))));
    }
    match std::env::var(TOKEN_ENV) {
        Ok(v) if !v.trim().is_empty() => {
            Ok(Some((Secret::from_text(&v, TOKEN_ENV)?, SecretSource::Env)))
        }
        _ => Ok(None),
    }
}

/// A token file's text: a regular file (a FIFO or `/dev/zero` is refused at
/// once, through the host layer's guard), at most 4 KiB, owned by the user
/// running gdrprov and readable by that owner only (a secret another user
/// owns or others can read is no secret: refused, with the `chown` or the
/// `chmod 600` fix).
fn read_token_file(p: &Path) -> Result<String, PairError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let bad = |why: String| PairError::BadSecret {
        path: p.display().to_string(),
        why,
    };
    let (file, meta) =
        crate::host::open_local(p, crate::host::ReadLimit::Token).map_err(|e| match e {
            crate::error::Error::BadPath { why, .. } => bad(why),
            other => bad(other.to_string()),
        })?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(bad(format!(
            "it is owned by uid {}, not by the user running gdrprov (uid {me}); a secret must be its owner's only: copy it to a file of your own (`install -m 600 {} NEW`) or run `chown {me} {}`",
            meta.uid(),
            p.display(),
            p.display()
        )));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(bad(format!(
            "group or others can read or write it (mode {mode:04o}); a secret must be its owner's only: run `chmod 600 {}`",
            p.display()
        )));
    }
    let limit = crate::host::ReadLimit::Token.max_bytes();
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(bad(format!(
            "over {limit} bytes: not a secret (give the file the listener wrote)"
        )));
    }
    String::from_utf8(bytes).map_err(|_| bad("it is not text: a secret is printable text".into()))
}

/// Make a new secret and write it to a new file readable by its owner only (mode 0600),
/// named at random in `dir`.
pub fn generate_secret(dir: &Path) -> Result<(Secret, PathBuf), PairError> {
    let path = new_secret_path(dir)?;
    Ok((generate_secret_at(&path)?, path))
}

/// A new secret file's name, at random in `dir`; nothing is written.
pub fn new_secret_path(dir: &Path) -> Result<PathBuf, PairError> {
    let tag = hex(&random_bytes(4)?);
    Ok(dir.join(format!("gdrprov-pair-{tag}.token")))
}

/// Make a new secret and write it to `path`, which must not exist yet
/// (never follows a symlink there), mode 0600: where the command says.
pub fn generate_secret_at(path: &Path) -> Result<Secret, PairError> {
    let text = hex(&random_bytes(32)?);
    crate::host::write_new_private(path, &format!("{text}\n")).map_err(|e| {
        PairError::BadSecret {
            path: path.display().to_string(),
            why: format!("cannot create it: {e}"),
        }
    })?;
    Ok(Secret(text.into_bytes()))
}

/// The HMAC-SHA256 of one end's proof: keyed by the secret, over the protocol's tag, the end's role
/// and the two nonces.
fn mac(
    secret: &Secret,
    role: &str,
    first: &str,
    second: &str,
) -> Result<Hmac<Sha256>, hmac::digest::InvalidLength> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&secret.0)?;
    mac.update(b"gdrprov-pair v1 ");
    mac.update(role.as_bytes());
    mac.update(b" ");
    mac.update(first.as_bytes());
    mac.update(b" ");
    mac.update(second.as_bytes());
    Ok(mac)
}

fn proof(secret: &Secret, role: &str, first: &str, second: &str) -> Result<String, PairError> {
    let mac =
        mac(secret, role, first, second).map_err(|e| PairError::Usage(format!("HMAC key: {e}")))?;
    Ok(hex(&mac.finalize().into_bytes()))
}

fn verify(secret: &Secret, role: &str, first: &str, second: &str, got: &str) -> bool {
    let Ok(mac) = mac(secret, role, first, second) else {
        return false;
    };
    match unhex(got) {
        Some(bytes) => mac.verify_slice(&bytes).is_ok(),
        None => false,
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 256 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The handshake's own deadline, in seconds, on both ends, apart from
/// `--timeout`: a peer that connects or accepts and then says nothing is
/// dropped after this long (docs/commands.md, `bench pair`).
pub const HANDSHAKE_SECS: u64 = 10;

fn handshake_limit() -> std::time::Duration {
    std::time::Duration::from_secs(HANDSHAKE_SECS)
}

fn tool() -> String {
    format!("gdrprov {}", env!("CARGO_PKG_VERSION"))
}

/// The listener's half: Hello, check the client's proof, prove its own. On a wrong proof the
/// client is told so and the error says nothing was registered (nothing is before this returns).
pub fn listener_handshake(conn: &mut Conn, secret: &Secret) -> Result<(), PairError> {
    conn.handshake(handshake_limit(), |conn| listener_half(conn, secret))
}

fn listener_half(conn: &mut Conn, secret: &Secret) -> Result<(), PairError> {
    conn.doing = "during the authentication".into();
    let nonce = hex(&random_bytes(32)?);
    conn.send(&Msg::Hello {
        version: PROTOCOL_VERSION,
        tool: tool(),
        nonce: nonce.clone(),
    })?;
    let (version, cnonce, cproof) = match conn.recv()? {
        Msg::Auth {
            version,
            nonce,
            proof,
            ..
        } => (version, nonce, proof),
        other => return Err(conn.unexpected("auth", &other)),
    };
    if version != PROTOCOL_VERSION {
        let reason = format!(
            "protocol version {version}; this listener speaks {PROTOCOL_VERSION} ({}): use the same gdrprov on both hosts",
            tool()
        );
        let _ = conn.send(&Msg::Refused {
            reason: reason.clone(),
        });
        return Err(PairError::Protocol {
            peer: conn.peer.clone(),
            what: reason,
        });
    }
    if cnonce.len() < 32 || cnonce == nonce || !verify(secret, "client", &nonce, &cnonce, &cproof) {
        let _ = conn.send(&Msg::Refused {
            reason: WRONG_SECRET.into(),
        });
        return Err(PairError::WrongSecret {
            peer: conn.peer.clone(),
        });
    }
    let mine = proof(secret, "listener", &cnonce, &nonce)?;
    conn.send(&Msg::AuthOk { proof: mine })?;
    conn.authenticated = true;
    Ok(())
}

/// The client's half: answer the Hello with its own nonce and proof, then check the listener's.
pub fn client_handshake(conn: &mut Conn, secret: &Secret) -> Result<(), PairError> {
    conn.handshake(handshake_limit(), |conn| client_half(conn, secret))
}

fn client_half(conn: &mut Conn, secret: &Secret) -> Result<(), PairError> {
    conn.doing = "during the authentication".into();
    let (version, lnonce) = match conn.recv()? {
        Msg::Hello { version, nonce, .. } => (version, nonce),
        other => return Err(conn.unexpected("hello", &other)),
    };
    if version != PROTOCOL_VERSION {
        return Err(PairError::Protocol {
            peer: conn.peer.clone(),
            what: format!(
                "the listener says it speaks protocol version {version}, this client {PROTOCOL_VERSION} ({}): use the same gdrprov on both hosts",
                tool()
            ),
        });
    }
    let nonce = hex(&random_bytes(32)?);
    let mine = proof(secret, "client", &lnonce, &nonce)?;
    conn.send(&Msg::Auth {
        version: PROTOCOL_VERSION,
        tool: tool(),
        nonce: nonce.clone(),
        proof: mine,
    })?;
    match conn.recv()? {
        Msg::AuthOk { proof } if verify(secret, "listener", &nonce, &lnonce, &proof) => {
            conn.authenticated = true;
            Ok(())
        }
        Msg::AuthOk { .. } => Err(PairError::ListenerUnproven {
            peer: conn.peer.clone(),
        }),
        // Said in this end's own words: the listener has proven nothing yet.
        Msg::Refused { reason } if reason == WRONG_SECRET => Err(PairError::RefusedByPeer {
            peer: conn.peer.clone(),
            reason: WRONG_SECRET.into(),
        }),
        Msg::Refused { .. } => Err(PairError::Unproven {
            peer: conn.peer.clone(),
            what: "refused this client".into(),
        }),
        other => Err(conn.unexpected("auth_ok", &other)),
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "test fixtures"
)]
mod tests {
    use super::*;

    #[test]
    fn proofs_bind_the_secret_the_role_and_both_nonces() {
        let s = Secret::from_text("0123456789abcdef0123", "t").unwrap();
        let other = Secret::from_text("0123456789abcdef0124", "t").unwrap();
        let p = proof(&s, "client", "aa", "bb").unwrap();
        assert!(verify(&s, "client", "aa", "bb", &p));
        assert!(!verify(&other, "client", "aa", "bb", &p));
        assert!(!verify(&s, "listener", "aa", "bb", &p));
        assert!(!verify(&s, "client", "bb", "aa", &p));
        assert!(!verify(&s, "client", "aa", "bb", "zz"));
        assert!(!verify(&s, "client", "aa", "bb", ""));
    }

    #[test]
    fn secrets_are_checked_and_generated_private() {
        assert!(Secret::from_text("short", "x").is_err());
        let dir = tempfile::tempdir().unwrap();
        let (s, path) = generate_secret(dir.path()).unwrap();
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let (back, _) = load_secret(Some(&path)).unwrap().unwrap();
        assert_eq!(back.0, s.0);
        assert_eq!(s.0.len(), 64);
        assert!(format!("{s:?}").contains(".."));
        let e = load_secret(Some(&dir.path().join("nope"))).unwrap_err();
        assert!(e.to_string().contains("nope"), "{e}");
    }

    /// Issue 37: a token others can read, a secret of NUL bytes or other
    /// control characters, a FIFO and /dev/zero as the token file.
    #[test]
    fn hostile_token_files_and_secrets_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t");
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o620] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = load_secret(Some(&p)).unwrap_err().to_string();
            assert!(
                e.contains("chmod 600") && e.contains(&format!("{mode:04o}")),
                "{e}"
            );
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(load_secret(Some(&p)).unwrap().is_some());
        // Issue 43: 0600 but another user's file (root can chown; as
        // another user the fixture cannot be made, and is skipped).
        if nix::unistd::geteuid().is_root() {
            let other = dir.path().join("theirs");
            std::fs::write(&other, "0123456789abcdef0123\n").unwrap();
            std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&other, Some(65534), Some(65534)).unwrap();
            let e = load_secret(Some(&other)).unwrap_err().to_string();
            assert!(
                e.contains("owned by uid 65534") && e.contains("chown"),
                "{e}"
            );
        }
        for bad in [
            "\0".repeat(17),
            "0123456789abcdef\u{1b}[2J".to_string(),
            "a\nb".repeat(9),
        ] {
            let e = Secret::from_text(&bad, "x").unwrap_err().to_string();
            assert!(e.contains("control character"), "{bad:?}: {e}");
        }
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        for p in [fifo.as_path(), Path::new("/dev/zero")] {
            let e = load_secret(Some(p)).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
        let at = dir.path().join("new.token");
        let s = generate_secret_at(&at).unwrap();
        let (back, _) = load_secret(Some(&at)).unwrap().unwrap();
        assert_eq!(back.0, s.0);
        assert!(
            generate_secret_at(&at).is_err(),
            "an existing file is never replaced"
        );
    }
}
