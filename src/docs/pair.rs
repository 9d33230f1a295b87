//! A sweep's pair result: the client's `gdrprov bench pair --format json`,
//! one rail (the report's fields at the top) or every rail (`--all-nics`:
//! `rails[]`, each entry with its session's report fields inline), or the
//! error document of a run that failed. Only the fields the sweep reads are
//! typed (docs/fleets.md lists them); the rest, and fields a newer minor
//! format adds, are ignored.

use super::{in_range, typed, Bad, Document};
use crate::host::ReadLimit;
use serde::Deserialize;
use serde_json::Value;

/// No port runs faster than this (Gb/s): a result above it is not a measurement.
pub const MAX_GBPS: f64 = 100_000.0;
/// The largest MTU a port reports (bytes).
pub const MAX_MTU: u64 = 65_536;

/// A run's failure: the envelope's `{kind, message}` or a rail's text.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Failure {
    Text(String),
    Object {
        #[serde(default)]
        kind: Option<String>,
        message: String,
    },
}

/// The data check of a rail or of one size.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct DataCheck {
    pub passed: bool,
}

/// One message size's figures.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Size {
    pub bytes: u64,
    pub average_gbps: f64,
    /// Null when the port reports no line rate.
    #[serde(default)]
    pub line_rate_fraction: Option<f64>,
    #[serde(default)]
    pub data_check: Option<DataCheck>,
}

/// An end's port, as far as the sweep reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Port {
    #[serde(default)]
    pub device: Option<String>,
    #[serde(default)]
    pub mtu: Option<u64>,
}

/// One end (client or listener).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct End {
    #[serde(default)]
    pub port: Option<Port>,
}

/// One rail's report (a one-rail document is one).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Rail {
    #[serde(default)]
    pub rail: Option<String>,
    #[serde(default)]
    pub error: Option<Failure>,
    #[serde(default)]
    pub client: Option<End>,
    #[serde(default)]
    pub listener: Option<End>,
    #[serde(default)]
    pub results: Option<Vec<Size>>,
    #[serde(default)]
    pub data_check: Option<DataCheck>,
}

impl Rail {
    /// The rail's name: `rail`, else the client's device.
    pub fn name(&self) -> Option<&str> {
        self.rail.as_deref().or_else(|| {
            self.client
                .as_ref()
                .and_then(|c| c.port.as_ref())
                .and_then(|p| p.device.as_deref())
        })
    }

    /// The size the sweep judges: the largest.
    pub fn judged(&self) -> Option<&Size> {
        self.results.as_ref()?.iter().max_by_key(|s| s.bytes)
    }

    /// The data check: the rail's, else the judged size's.
    pub fn data_ok(&self) -> Option<bool> {
        self.data_check
            .as_ref()
            .or_else(|| self.judged().and_then(|s| s.data_check.as_ref()))
            .map(|c| c.passed)
    }

    pub fn mtu(end: Option<&End>) -> Option<u64> {
        end.and_then(|e| e.port.as_ref()).and_then(|p| p.mtu)
    }

    fn check(&self, at: &str) -> Result<(), Bad> {
        let f = |name: &str| format!("{at}{name}");
        if let Some(Err(e)) = self.name().map(crate::grammar::RailName::parse) {
            let field = if self.rail.is_some() {
                f("rail")
            } else {
                f("client.port.device")
            };
            return Err(Bad::new(field, e.to_string()));
        }
        for (end, e) in [("client", &self.client), ("listener", &self.listener)] {
            if let Some(m) = Rail::mtu(e.as_ref()).filter(|m| !(1..=MAX_MTU).contains(m)) {
                return Err(Bad::new(
                    f(&format!("{end}.port.mtu")),
                    format!("{m} is not a port's MTU (1 to {MAX_MTU} bytes)"),
                ));
            }
        }
        if self.error.is_some() {
            // A run that failed: a low measurement, nothing more to read.
            return Ok(());
        }
        let sizes = match &self.results {
            Some(s) if !s.is_empty() => s,
            _ => {
                return Err(Bad::new(
                    f("results"),
                    "missing or empty: a run that finished has its sizes there, a failed one has `error`",
                ))
            }
        };
        for (i, s) in sizes.iter().enumerate() {
            let at = |name: &str| f(&format!("results[{i}].{name}"));
            if s.bytes == 0 {
                return Err(Bad::new(at("bytes"), "0 is not a message size"));
            }
            in_range(
                at("average_gbps"),
                s.average_gbps,
                0.0,
                MAX_GBPS,
                "a rate in Gb/s",
            )?;
            if let Some(x) = s.line_rate_fraction {
                in_range(
                    at("line_rate_fraction"),
                    x,
                    0.0,
                    2.0,
                    "a fraction of line rate",
                )?;
            }
        }
        if self.data_ok().is_none() {
            return Err(Bad::new(
                f("data_check"),
                "missing (of the rail, and of its largest size): the sweep cannot tell whether the data arrived intact",
            ));
        }
        Ok(())
    }
}

/// A pair result file.
#[derive(Debug, Clone, PartialEq)]
pub struct PairResult {
    /// The whole run failed (the envelope's `error`).
    pub error: Option<Failure>,
    /// Every rail (one for a one-rail document); empty when `error`.
    pub rails: Vec<Rail>,
    /// Where each rail is in the document (`rails[1].`, or empty).
    at: Vec<String>,
}

/// The fields that say which shape a document is.
#[derive(Deserialize)]
struct Head {
    #[serde(default)]
    error: Option<Failure>,
    #[serde(default)]
    rails: Option<Vec<Value>>,
}

impl<'de> Deserialize<'de> for PairResult {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        PairResult::decode(&v)
            .map_err(|b| serde::de::Error::custom(format!("{}: {}", b.field, b.why)))
    }
}

impl Document for PairResult {
    const WHAT: &'static str = "a pair result";
    const LIMIT: ReadLimit = ReadLimit::PairResult;
    const FIX: &'static str = "the runner must save the client's `bench pair --format json` output there (remove the file, or run that pair again)";

    fn decode(v: &Value) -> Result<Self, Bad> {
        let head: Head = typed(v, "")?;
        if head.error.is_some() {
            return Ok(PairResult {
                error: head.error,
                rails: Vec::new(),
                at: Vec::new(),
            });
        }
        let (rails, at) = match head.rails {
            Some(list) if !list.is_empty() => {
                let mut rails = Vec::new();
                let mut at = Vec::new();
                for (i, r) in list.iter().enumerate() {
                    let p = format!("rails[{i}]");
                    rails.push(typed::<Rail>(r, &p)?);
                    at.push(format!("{p}."));
                }
                (rails, at)
            }
            _ => (vec![typed::<Rail>(v, "")?], vec![String::new()]),
        };
        Ok(PairResult {
            error: None,
            rails,
            at,
        })
    }

    fn check(&self) -> Result<(), Bad> {
        for (r, at) in self.rails.iter().zip(&self.at) {
            r.check(at)?;
        }
        Ok(())
    }
}
