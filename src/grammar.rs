//! One grammar per kind of name (issue 43): a node, a rail, a kernel module,
//! a profile. Each kind is a newtype whose only constructor is its parser,
//! so a value of the type has passed the check; every entry takes the type,
//! never a `String` checked somewhere else:
//!
//! - clap: `#[arg(value_parser = NodeName::parse)]` (or any `FromStr` use:
//!   each type implements it), so a new option of that kind is checked by
//!   its type;
//! - serde: each type deserializes through its parser (`try_from =
//!   "String"`), so a new field of that kind is checked by its type;
//! - text read line by line (`--hosts FILE`, a result file's name): call
//!   `parse` on each name.
//!
//! A refusal ([`NameError`]) names the kind, the value shown escaped (a
//! newline, CR or ESC as `\n`, `\r`, `\u{1b}`, at most 80 characters) and
//! the rule. Nothing here imports anything of gdrprov, so every layer may
//! use it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A name refused by its grammar: the kind, the value (escaped), the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameError {
    pub kind: &'static str,
    pub shown: String,
    pub why: String,
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{}\" is not a {}: {}", self.shown, self.kind, self.why)
    }
}

impl std::error::Error for NameError {}

/// `s` for a message: every character that is not plain printable text
/// escaped as Rust writes it (`\n`, `\r`, `\u{1b}`, `\"`), and at most 80
/// characters of it.
pub fn shown(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == 80 {
            out.push('…');
            break;
        }
        out.extend(c.escape_debug());
    }
    out
}

fn refuse<T>(kind: &'static str, s: &str, why: impl Into<String>) -> Result<T, NameError> {
    Err(NameError {
        kind,
        shown: shown(s),
        why: why.into(),
    })
}

/// The rule shared by node and rail names: 1 to `max` bytes of ASCII
/// letters, digits and `extra`, beginning with a letter or digit.
fn plain(
    kind: &'static str,
    s: &str,
    max: usize,
    extra: &str,
    rule: &str,
) -> Result<(), NameError> {
    if s.is_empty() {
        return refuse(kind, s, format!("it is empty; {rule}"));
    }
    if s.len() > max {
        return refuse(
            kind,
            s,
            format!("it is {} bytes long, over {max}; {rule}", s.len()),
        );
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || extra.contains(*c)))
    {
        return refuse(kind, s, format!("it contains {}; {rule}", shown_char(c)));
    }
    if !s.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return refuse(
            kind,
            s,
            format!("it must begin with a letter or digit; {rule}"),
        );
    }
    Ok(())
}

fn shown_char(c: char) -> String {
    match c {
        ' ' => "a space".into(),
        '\n' => "a newline".into(),
        '\r' => "a carriage return".into(),
        c if c.is_control() => format!("the control character U+{:04X}", c as u32),
        c => format!("`{}`", c.escape_debug()),
    }
}

macro_rules! name_type {
    ($t:ident) => {
        impl $t {
            pub fn as_str(&self) -> &str {
                &self.0
            }
            pub fn into_string(self) -> String {
                self.0
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl AsRef<str> for $t {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
        impl std::ops::Deref for $t {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }
        impl std::str::FromStr for $t {
            type Err = NameError;
            fn from_str(s: &str) -> Result<Self, NameError> {
                $t::parse(s)
            }
        }
        impl TryFrom<String> for $t {
            type Error = NameError;
            fn try_from(s: String) -> Result<Self, NameError> {
                $t::parse(&s)
            }
        }
        impl From<$t> for String {
            fn from(n: $t) -> String {
                n.0
            }
        }
        impl PartialEq<str> for $t {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

/// A node's name as Slurm and the host know it: a host name (RFC 1123
/// labels: ASCII letters, digits and `-`, joined by `.`; `_` too, which
/// Slurm's node names allow), at most [`NodeName::MAX`] bytes (a DNS
/// name's 253: an Ansible inventory's fully qualified names) and each label
/// at most [`NodeName::LABEL_MAX`] (DNS's 63), beginning and ending with a
/// letter or digit. What a
/// Slurm host list expands to, `--hosts` lines, result file names
/// (`A+B.json`) and report fields read back are all this.
///
/// Refused so by construction: whitespace and newlines (a forged plan
/// line), `$ ( ) ; | & ' "` (a shell), `+` (the result file's separator),
/// `/` and `..` (a path), a leading `-` (an option), controls (a terminal,
/// a Prometheus label).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeName(String);

impl NodeName {
    pub const MAX: usize = 253;
    pub const LABEL_MAX: usize = 63;
    const KIND: &'static str = "node name";
    const RULE: &'static str = "a node name is a host name: letters, digits, `-`, `_` and `.` between labels, at most 253 bytes, each label at most 63";

    pub fn parse(s: &str) -> Result<Self, NameError> {
        plain(Self::KIND, s, Self::MAX, "-_.", Self::RULE)?;
        if let Some(l) = s.split('.').find(|l| l.len() > Self::LABEL_MAX) {
            return refuse(
                Self::KIND,
                s,
                format!(
                    "its label `{}` is {} bytes long, over {}; {}",
                    shown(l),
                    l.len(),
                    Self::LABEL_MAX,
                    Self::RULE
                ),
            );
        }
        if !s.ends_with(|c: char| c.is_ascii_alphanumeric()) {
            return refuse(
                Self::KIND,
                s,
                format!("it must end with a letter or digit; {}", Self::RULE),
            );
        }
        if s.contains("..") || s.contains(".-") || s.contains("-.") {
            return refuse(
                Self::KIND,
                s,
                format!("it has an empty or malformed label; {}", Self::RULE),
            );
        }
        Ok(NodeName(s.to_string()))
    }
}
name_type!(NodeName);

/// A rail: an RDMA device's or a network interface's name (`mlx5_0`,
/// `rxe0`, `efa_0`, `ens1f0np0`): ASCII letters, digits, `_`, `-` and `.`,
/// beginning with a letter or digit, at most [`RailName::MAX`] bytes (the
/// kernel's IB_DEVICE_NAME_MAX); not `all`, which the sweep's plan lines
/// use for "every rail". Optionally a port, `:N` with N from 1 to 255 (a
/// dual-port HCA's rails `mlx4_0:1`, `mlx4_0:2`), by [`rail_port`]'s rule.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RailName(String);

impl RailName {
    pub const MAX: usize = 64;
    const KIND: &'static str = "rail name";
    const RULE: &'static str = "a rail is an RDMA device or interface name such as mlx5_0, with an optional port such as mlx4_0:1: letters, digits, `_`, `-` and `.`, at most 64 bytes, then `:` and a port from 1 to 255";

    pub fn parse(s: &str) -> Result<Self, NameError> {
        let (dev, port) = match s.rsplit_once(':') {
            Some((d, p)) => (d, Some(p)),
            None => (s, None),
        };
        plain(Self::KIND, dev, Self::MAX, "-_.", Self::RULE)?;
        if dev == "all" {
            return refuse(Self::KIND, s, "`all` stands for every rail in the sweep's plan lines; leave --rails out for every rail");
        }
        if port.is_some_and(|p| !is_port_number(p)) {
            return refuse(Self::KIND, s, format!("{PORT_RULE}; {}", Self::RULE));
        }
        Ok(RailName(s.to_string()))
    }
}

/// An RDMA port's number after a device's `:`: 1 to 255, decimal digits.
fn is_port_number(p: &str) -> bool {
    p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u8>().is_ok_and(|p| p > 0)
}

const PORT_RULE: &str =
    "the port must be a number from 1 to 255 after `:` (DEV:PORT, e.g. mlx5_0:1)";
name_type!(RailName);

/// A kernel module's name as modprobe compares it: `-` and `_` are the same
/// character there (`nvidia-peermem` is `nvidia_peermem`), so the name is
/// kept in the form the kernel shows (`/sys/module`, `lsmod`): every `-`
/// written `_`. Two spellings of one module are then one value; equality,
/// ordering and hashing need no other rule. ASCII letters, digits, `_` and
/// `-`, at most [`ModuleName::MAX`] bytes (the kernel's MODULE_NAME_LEN,
/// 64 less a pointer's size).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ModuleName(String);

impl ModuleName {
    pub const MAX: usize = 56;
    const KIND: &'static str = "kernel module name";
    const RULE: &'static str = "letters, digits, `_` or `-`, at most 56";

    pub fn parse(s: &str) -> Result<Self, NameError> {
        plain(Self::KIND, s, Self::MAX, "-_", Self::RULE)?;
        Ok(ModuleName(s.replace('-', "_")))
    }
}
name_type!(ModuleName);

/// A profile's name: what `state.json`, every generated file's header, the
/// verify unit and the fix commands a sweep prints carry. A safe file name:
/// not empty, not `.` or `..`, no `/`, no control character or Unicode
/// line separator, no space at either end, not beginning with `-` (an
/// option), at most [`ProfileName::MAX`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ProfileName(String);

impl ProfileName {
    pub const MAX: usize = 64;
    const KIND: &'static str = "profile name";
    const RULE: &'static str = "a profile name is a safe file name: not empty, not `.` or `..`, no `/`, no control character, not beginning with `-`, at most 64 bytes";

    pub fn parse(s: &str) -> Result<Self, NameError> {
        let k = Self::KIND;
        let why = if s.is_empty() {
            "it is empty".to_string()
        } else if s == "." || s == ".." {
            "it names a directory".to_string()
        } else if let Some(c) = s
            .chars()
            .find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
        {
            format!("it contains {}: remove it", shown_char(c))
        } else if s.contains('/') {
            "it contains `/`".to_string()
        } else if s.starts_with('-') {
            "it begins with `-`, which a command line reads as an option".to_string()
        } else if s.trim() != s {
            "it begins or ends with a space".to_string()
        } else if s.len() > Self::MAX {
            format!("it is {} bytes long, over {}", s.len(), Self::MAX)
        } else {
            return Ok(ProfileName(s.to_string()));
        };
        refuse(k, s, format!("{why}; {}", Self::RULE))
    }
}
name_type!(ProfileName);

/// `DEV[:PORT]` (`--device mlx5_0:1`): a [`RailName`], which is a device
/// and, optionally, a port from 1 to 255; the text as given. A clap
/// `value_parser`.
pub fn rail_port(s: &str) -> Result<String, NameError> {
    RailName::parse(s).map(String::from)
}

/// A peer to connect to (`bench pair PEER`, `verify --peer`): an IP
/// address (`10.0.0.2`, `fe80::1`, `[fe80::1]:18515`) or a host name by
/// the node grammar's characters (a DNS name up to 253 bytes), with an
/// optional `:PORT`; the text as given. A clap `value_parser`.
pub fn peer(s: &str) -> Result<String, NameError> {
    use std::net::{IpAddr, SocketAddr};
    if s.parse::<SocketAddr>().is_ok() || s.parse::<IpAddr>().is_ok() {
        return Ok(s.to_string());
    }
    if let Some(ok) = zoned_ipv6(s) {
        return ok.map(|()| s.to_string());
    }
    let (host, port) = match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    };
    const RULE: &str =
        "give an IP address or a host name (letters, digits, `-`, `_`, `.`), with :PORT if needed";
    plain("peer", host, 253, "-_.", RULE)?;
    if host.contains("..") || !host.ends_with(|c: char| c.is_ascii_alphanumeric()) {
        return refuse("peer", s, RULE);
    }
    if port.is_some_and(|p| !p.parse::<u16>().is_ok_and(|p| p > 0)) {
        return refuse(
            "peer",
            s,
            "the port after `:` must be a number from 1 to 65535",
        );
    }
    Ok(s.to_string())
}

/// An IPv6 address with a zone id (`fe80::1%ib0`, `[fe80::1%ib0]:18515`):
/// `None` when `s` has no `%`; else the address must be IPv6 and the zone
/// an interface's name (a [`RailName`] without a port), and a port, in
/// brackets only, 1 to 65535.
fn zoned_ipv6(s: &str) -> Option<Result<(), NameError>> {
    let (addr, rest) = s.split_once('%')?;
    let (addr, zone, port) = match (addr.strip_prefix('['), rest.split_once(']')) {
        (Some(a), Some((z, p))) => (a, z, Some(p)),
        (None, None) => (addr, rest, None),
        _ => {
            return Some(refuse(
                "peer",
                s,
                "an IPv6 address with a zone is ADDR%IFNAME or [ADDR%IFNAME]:PORT",
            ))
        }
    };
    let port_ok = match port {
        None | Some("") => true,
        Some(p) => p.strip_prefix(':').is_some_and(|p| {
            p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok_and(|p| p > 0)
        }),
    };
    let ok = addr.parse::<std::net::Ipv6Addr>().is_ok()
        && !zone.contains(':')
        && RailName::parse(zone).is_ok()
        && port_ok;
    Some(match ok {
        true => Ok(()),
        false => refuse(
            "peer",
            s,
            "an IPv6 address with a zone is ADDR%IFNAME (an interface's name, e.g. fe80::1%ib0) or [ADDR%IFNAME]:PORT with a port from 1 to 65535",
        ),
    })
}

/// A [`RailName`] as text: a clap `value_parser` for an option whose field
/// stays a `String`.
pub fn rail(s: &str) -> Result<String, NameError> {
    RailName::parse(s).map(String::from)
}

// Numbers an operator gives: finite and in the option's stated range. Each
// is a clap `value_parser` (`#[arg(value_parser = grammar::percent)]`);
// whole numbers use clap's ranged parsers
// (`clap::value_parser!(u32).range(1..=10_000)`), which refuse a value past
// the type instead of wrapping it.

/// A finite number within `lo..=hi` (`lo` itself only when `lo_ok`).
fn number(s: &str, lo: f64, lo_ok: bool, hi: f64, what: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("\"{}\" is not a number; give {what}", shown(s)))?;
    if !v.is_finite() {
        return Err(format!("{v} is not a finite number; give {what}"));
    }
    if v < lo || (v == lo && !lo_ok) || v > hi {
        return Err(format!("{v} is out of range; give {what}"));
    }
    Ok(v)
}

/// A share in percent: 0 to 100.
pub fn percent(s: &str) -> Result<f64, String> {
    number(s, 0.0, true, 100.0, "a percentage from 0 to 100")
}

/// A fraction: 0 to 1.
pub fn fraction(s: &str) -> Result<f64, String> {
    number(s, 0.0, true, 1.0, "a fraction from 0 to 1")
}

/// A pass mark as a fraction: above 0, at most 1.
pub fn fraction_above_zero(s: &str) -> Result<f64, String> {
    number(s, 0.0, false, 1.0, "a fraction above 0, at most 1")
}

/// The most Gb/s (or GB/s) a rate may be: past any port or link.
pub const MAX_RATE: f64 = 100_000.0;

/// A rate (Gb/s or GB/s): above 0, at most [`MAX_RATE`].
pub fn rate(s: &str) -> Result<f64, String> {
    number(s, 0.0, false, MAX_RATE, "a rate above 0, at most 100000")
}

/// Seconds of a run: above 0, below a day.
pub fn seconds(s: &str) -> Result<f64, String> {
    number(
        s,
        0.0,
        false,
        86_399.0,
        "a number of seconds above 0, below 86400 (a day)",
    )
}

/// Parses a non-UTF-8 argument as well: refused, shown lossily (clap's
/// `value_parser` for an `OsStr` entry).
pub fn utf8<'a>(kind: &'static str, s: &'a std::ffi::OsStr) -> Result<&'a str, NameError> {
    s.to_str().ok_or_else(|| NameError {
        kind,
        shown: shown(&s.to_string_lossy()),
        why: "it is not UTF-8 text".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names every kind refuses.
    const HOSTILE: &[&str] = &[
        "",
        "..",
        "a/b",
        "a\nb",
        "a\rb",
        "a\u{1b}[31m",
        "$(id)",
        "a;b",
        "a b",
        "-x",
        "a\u{2028}b",
    ];

    #[test]
    fn every_kind_refuses_every_hostile_name_and_shows_it_escaped() {
        type Parse = fn(&str) -> Result<(), NameError>;
        let kinds: [(&str, Parse); 4] = [
            ("node", |s| NodeName::parse(s).map(drop)),
            ("rail", |s| RailName::parse(s).map(drop)),
            ("module", |s| ModuleName::parse(s).map(drop)),
            ("profile", |s| ProfileName::parse(s).map(drop)),
        ];
        let long = "a".repeat(300);
        for (kind, parse) in kinds {
            for bad in HOSTILE.iter().copied().chain([long.as_str()]) {
                // A profile's name may hold a space, `;` or `$(…)`: it is quoted where it is used.
                if kind == "profile" && ["$(id)", "a;b", "a b"].contains(&bad) {
                    assert!(parse(bad).is_ok(), "{kind} {bad:?}");
                    continue;
                }
                let e = parse(bad)
                    .expect_err(&format!("{kind} {bad:?}"))
                    .to_string();
                assert!(!e.chars().any(char::is_control), "{kind} {bad:?}: {e}");
                assert!(e.contains(kind), "{e}");
            }
        }
    }

    #[test]
    fn real_names_pass() {
        for n in ["gpu001", "node-7", "n_1", "gpu01.cluster.local", "7"] {
            assert_eq!(NodeName::parse(n).unwrap().as_str(), n);
        }
        for bad in ["gpu-", "a..b", "a.-b", "gpu+2", "n1.", "a'b"] {
            assert!(NodeName::parse(bad).is_err(), "{bad}");
        }
        assert!(NodeName::parse(&"a".repeat(63)).is_ok());
        // An Ansible inventory's FQDN: up to 253 bytes, each label up to 63.
        let fqdn = format!(
            "{}.{}.{}.example",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63)
        );
        assert!(fqdn.len() > 64 && fqdn.len() <= 253);
        assert_eq!(NodeName::parse(&fqdn).unwrap().as_str(), fqdn);
        let at_max = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(63),
            "c".repeat(63),
            "d".repeat(61)
        );
        assert_eq!(at_max.len(), 253);
        assert!(NodeName::parse(&at_max).is_ok());
        assert!(NodeName::parse(&format!("{at_max}d")).is_err());
        assert!(NodeName::parse(&format!("{}.lab", "a".repeat(64))).is_err());
        for r in ["mlx5_0", "rxe0", "efa_0", "ens1f0np0", "erdma_0"] {
            assert_eq!(RailName::parse(r).unwrap().as_str(), r);
        }
        assert!(RailName::parse("all").is_err());
        assert_eq!(rail_port("mlx5_0:1").unwrap(), "mlx5_0:1");
        // A dual-port HCA's rails (`--rails mlx4_0:1,mlx4_0:2`): port 1 to 255.
        for r in ["mlx4_0:1", "mlx4_0:2", "mlx5_0:255"] {
            assert_eq!(RailName::parse(r).unwrap().as_str(), r);
        }
        for bad in [
            "mlx4_0:0",
            "mlx4_0:256",
            "mlx4_0:",
            ":1",
            "mlx4_0:+1",
            "mlx4_0:01x",
            "all:1",
            "a:1:1",
            "a/b:1",
            "mlx4_0: 1",
        ] {
            assert!(RailName::parse(bad).is_err(), "{bad}");
        }
        for p in [
            "10.0.0.2",
            "10.0.0.2:18515",
            "fe80::1",
            "[fe80::1]:1",
            "gpu02",
            "gpu02.lab:18515",
            "fe80::1%ib0",
            "fe80::1%eth0",
            "[fe80::1%ib0]:18515",
            "[fe80::1%ens1f0np0]",
        ] {
            assert_eq!(peer(p).unwrap(), p);
        }
        for bad in [
            "fe80::1%",
            "fe80::1%a b",
            "fe80::1%a\nb",
            "10.0.0.2%ib0",
            "gpu02%ib0",
            "[fe80::1%ib0]:0",
            "[fe80::1%ib0]18515",
            "fe80::1%ib0:1",
            "[fe80::1%ib0",
            "fe80::1%$(id)",
        ] {
            assert!(peer(bad).is_err(), "{bad}");
        }
        for bad in [
            "", "a b", "$(id)", "-x", "a;b", "gpu:0", "gpu:x", "a\nb", "a/b", "..",
        ] {
            assert!(peer(bad).is_err(), "{bad}");
        }
        for bad in ["mlx5_0:0", "mlx5_0:", ":1", "a/b:1", "../x", "mlx5_0:1:1"] {
            assert!(rail_port(bad).is_err(), "{bad}");
        }
        for p in ["rdma-dmabuf", "site (test) ü", "a.b"] {
            assert_eq!(ProfileName::parse(p).unwrap().as_str(), p);
        }
    }

    #[test]
    fn module_names_compare_as_modprobe_does() {
        let a = ModuleName::parse("nvidia-peermem").unwrap();
        let b = ModuleName::parse("nvidia_peermem").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "nvidia_peermem");
        assert!(ModuleName::parse(&"m".repeat(57)).is_err());
    }

    #[test]
    fn numbers_are_finite_and_in_range() {
        for bad in ["inf", "-inf", "NaN", "nan", "-5", "101", "1e400", "x", ""] {
            assert!(percent(bad).is_err(), "{bad}");
        }
        assert_eq!(percent("10").unwrap(), 10.0);
        assert_eq!(percent("0").unwrap(), 0.0);
        assert_eq!(percent("100").unwrap(), 100.0);
        assert!(fraction("1.01").is_err() && fraction("0").is_ok());
        assert!(fraction_above_zero("0").is_err() && fraction_above_zero("1").is_ok());
        assert!(rate("0").is_err() && rate("100001").is_err() && rate("400").is_ok());
        assert!(seconds("86400").is_err() && seconds("0.5").is_ok());
    }

    #[test]
    fn serde_and_from_str_go_through_the_parser() {
        let ok: Vec<NodeName> = serde_json::from_str(r#"["gpu1","gpu2"]"#).unwrap();
        assert_eq!(ok[1], "gpu2");
        let e = serde_json::from_str::<NodeName>("\"a\\nb\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a\\nb") && e.contains("node name"), "{e}");
        assert!("a;b".parse::<RailName>().is_err());
        let m: ModuleName = serde_json::from_str("\"ib-core\"").unwrap();
        assert_eq!(serde_json::to_string(&m).unwrap(), "\"ib_core\"");
    }
}
