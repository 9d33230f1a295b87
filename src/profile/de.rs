//! The profile's hand-written deserializers: one value or a list of them
//! (one generic), version constraints checked where they are read (so a bad
//! one is an error at `file:line:col`, not a failed host requirement later),
//! the short and full forms of a requirement, and the MTU. Written by hand
//! rather than `#[serde(untagged)]` so an unknown key inside still gets its
//! own precise error.

use super::model::{MtuValue, NetMatch, VersionReq, VersionReqFull};
use schemars::JsonSchema;
use serde::de::{self, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use std::marker::PhantomData;

/// One value or a list of them (`extends: a` or `extends: [a, b]`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[schemars(rename = "OneOrMany_{T}")]
#[allow(dead_code)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// How a single value of a one-or-many is written.
#[derive(Clone, Copy, PartialEq)]
enum Single {
    /// A scalar: `extends: a`.
    Scalar,
    /// A mapping: `devices: { rdma: "erdma_*" }`.
    Map,
}

/// One value or a list of them, as a list. `expecting` says what in the
/// profile's words; any other shape is refused with it.
fn one_or_many<'de, D, T>(d: D, single: Single, expecting: &'static str) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct V<T>(Single, &'static str, PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str(self.1)
        }
        fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
            if self.0 != Single::Scalar {
                return Err(E::invalid_type(de::Unexpected::Str(s), &self));
            }
            T::deserialize(s.into_deserializer()).map(|x| vec![x])
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            if self.0 != Single::Map {
                return Err(de::Error::invalid_type(de::Unexpected::Map, &self));
            }
            T::deserialize(de::value::MapAccessDeserializer::new(map)).map(|x| vec![x])
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut v = Vec::new();
            while let Some(x) = seq.next_element::<T>()? {
                v.push(x);
            }
            Ok(v)
        }
    }
    d.deserialize_any(V(single, expecting, PhantomData))
}

/// `extends:` — a profile name or a list of them.
pub fn extends<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    one_or_many(
        d,
        Single::Scalar,
        "a profile name or a list of profile names",
    )
}

/// `network.mtu.devices:` — a match or a list of them.
pub fn net_matches<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<NetMatch>, D::Error> {
    one_or_many(
        d,
        Single::Map,
        "a match like `{ rdma: \"erdma_*\" }`, `{ driver: NAME }`, `{ name: IFNAME }`, or a list of them",
    )
}

/// A version constraint (`">= 5.12"`), checked as it is read.
fn checked<E: de::Error>(s: &str) -> Result<String, E> {
    crate::versions::parse(s)
        .map(|_| s.to_string())
        .map_err(E::custom)
}

pub fn constraint<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let s = String::deserialize(d)?;
    checked(&s)
}

pub fn opt_constraint<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    constraint(d).map(Some)
}

/// A string is the short form; a map is the full form.
impl<'de> Deserialize<'de> for VersionReq {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = VersionReq;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a version constraint like \">= 5.12\", or a map with `version` and `severity`",
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                checked(s).map(VersionReq::Short)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                VersionReqFull::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(VersionReq::Full)
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for MtuValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = MtuValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an MTU in bytes (68 to 9216) or `auto`")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<MtuValue, E> {
                if (68..=9216).contains(&n) {
                    Ok(MtuValue::Bytes(n as u32))
                } else {
                    Err(E::custom(format!(
                        "MTU {n} is out of range: give 68 to 9216 bytes, or `auto`"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<MtuValue, E> {
                if n < 0 {
                    return Err(E::custom(format!(
                        "MTU {n} is out of range: give 68 to 9216 bytes, or `auto`"
                    )));
                }
                self.visit_u64(n as u64)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<MtuValue, E> {
                match s {
                    "auto" => Ok(MtuValue::Auto),
                    _ => match s.parse::<u64>() {
                        Ok(n) => self.visit_u64(n),
                        Err(_) => Err(E::custom(format!(
                            "`{s}` is not an MTU: give 68 to 9216 bytes, or `auto`"
                        ))),
                    },
                }
            }
        }
        d.deserialize_any(V)
    }
}
