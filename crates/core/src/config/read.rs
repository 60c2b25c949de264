//! Reads the policy into its types (`spec`) from the strict parser's [`Json`] tree (duplicate keys,
//! lone surrogates, trailing data are refused there), by hand: one [`Read`] impl per type, over a
//! few non-generic helpers (`value`), with serde's messages.
//!
//! What it accepts:
//! - a struct or map position accepts only an object (or `null`, which reads as absent for optional
//!   fields and is a type error elsewhere): serde's derived structs would also read an array as a
//!   struct, fields by position, so `"tools":{"x":["deny","why"]}` would load as a deny rule;
//! - every object only its own keys (``unknown field `actoin`, expected one of …``): a misspelt key
//!   in a security policy must fail loudly, never be ignored;
//! - an enum accepts only a string (the variant name);
//! - numbers are read from their exact text: integers within `u64`/`i64` as integers; fractions,
//!   exponents and integers out of range are type errors that quote the text as written (no field of
//!   the policy holds a float);
//! - [`JsonValue`] (a condition's `value`) receives the subtree itself, numbers still exact.
//!
//! Every error carries the JSON path of the value it is about (`tools.x.limits[0].max`, `.` for the
//! root), written as `serde_path_to_error` writes it: the value at which the error surfaced, the
//! struct for a missing field, or the key for an unknown field. Errors stop reading at the first,
//! in document order; missing fields after the struct's members, in declaration order.
//!
//! # Why not serde
//!
//! serde_json reading the same types:
//! - reads an array as a struct, fields by position (`[5]` loads as `{"a":5}`), and `{"deny":null}`
//!   as an enum variant;
//! - keeps the last of two equal keys in a map (`tools`, `gateway.methods`): the strict parser
//!   underneath refuses them at any depth;
//! - prints numbers through `f64` in errors (`1e2` as `floating point 100.0`,
//!   `18446744073709551616` as `1.8446744073709552e+19`) where this quotes the text as written,
//!   and would round a condition's `value` (`123456789012345678901234567890`) before comparing;
//! - says where only as line and column: the JSON path (`tools.x.limits[0]`) needs
//!   `serde_path_to_error` on top.
//!
//! A serde `Deserializer` over the tree avoids all of that, but serde's derived visitors are
//! generic: each type's visitor, and everything the deserializer does for it, is compiled once per
//! type of the policy. Read by hand, each type's reader is one small function (its fields by index)
//! and everything else is compiled once: that took 12,827 B off the module (604,673 → 591,846 B;
//! docs/src/cost-and-size.md, The wasm module's size), and has no serde at all. A list is read by
//! a loop of `push`: a `collect` into `Result<Vec<T>, _>` compiled an iterator adapter for each `T`
//! (2,814 B of the 12,827). Reading through `serde_json::from_slice` made a module of 573,512 B 28,863 B larger, and
//! without serde_json and serde_path_to_error the module is 68.6 KB smaller. `make lint` keeps
//! serde_json out of the wasm32 dependency tree; see `crate::wire::json` for the parser's side.
//!
//! The spec types still derive serde's `Deserialize` in tests: `same_paths_and_messages_as_serde_json`
//! checks that where both read alike, paths and messages are serde_path_to_error's; the schema
//! (`schema` feature) reads the same `#[serde(…)]` attributes. Tests: `read/tests.rs`.

use crate::wire::json::Json;

mod spec;
#[cfg(test)]
mod tests;
mod value;

pub use value::Error;
use value::{invalid_type, members, missing, object, unsigned, variant, Path};

/// A type of the policy, read from its position in the document.
pub trait Read: Sized {
    /// Reads the value `v` at `at`.
    ///
    /// Errors: the first problem met, with the JSON path of its value.
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error>;
}

/// Reads a `T` from a parsed JSON document.
///
/// Errors: the first problem met, with the JSON path of its value.
pub fn from_json<T: Read>(doc: &Json) -> Result<T, Error> {
    T::read(doc, &Path::Root)
}

/// Any JSON value, kept as the strict parser's [`Json`] (numbers as their exact text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonValue(pub Json);

impl Read for JsonValue {
    fn read(v: &Json, _: &Path<'_>) -> Result<Self, Error> {
        Ok(JsonValue(v.clone()))
    }
}

/// For the test oracle's serde-derived readers (`tests.rs`) only.
#[cfg(test)]
impl<'de> serde::Deserialize<'de> for JsonValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = <serde_json::Value as serde::Deserialize>::deserialize(deserializer)?;
        crate::wire::json::parse(value.to_string().as_bytes()).map(JsonValue).map_err(serde::de::Error::custom)
    }
}

impl Read for String {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        match v {
            Json::String(s) => Ok(s.clone()),
            other => Err(invalid_type(at, other, "a string")),
        }
    }
}

impl Read for bool {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        match v {
            Json::Bool(b) => Ok(*b),
            other => Err(invalid_type(at, other, "a boolean")),
        }
    }
}

impl Read for u64 {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        unsigned(v, at, u64::MAX, "u64")
    }
}

impl Read for u32 {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        unsigned(v, at, u32::MAX.into(), "u32").map(|n| u32::try_from(n).unwrap_or(u32::MAX))
    }
}

/// An optional field: absent or `null` is `None`.
impl<T: Read> Read for Option<T> {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        match v {
            Json::Null => Ok(None),
            _ => T::read(v, at).map(Some),
        }
    }
}

impl<T: Read> Read for Vec<T> {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        let Json::Array(items) = v else { return Err(invalid_type(at, v, "a sequence")) };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            out.push(T::read(item, &Path::Index(at, i))?);
        }
        Ok(out)
    }
}

/// The members of a JSON object by key, in key order (as a `BTreeMap` iterates them): the policy's
/// maps (`tools`, `pins`, `gateway.methods`, `gateway.tool_modes`, a set's `policies`), which are
/// read, looked up and iterated once. A sorted vector: a `BTreeMap` of each of their five value
/// types compiled its own B-tree code into the module, 14,219 B more (docs/src/cost-and-size.md,
/// The wasm module's size).
#[derive(Debug, Clone)]
pub struct Map<T>(Vec<(String, T)>);

impl<T> Default for Map<T> {
    fn default() -> Self {
        Map(Vec::new())
    }
}

impl<T> Map<T> {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&T> {
        let i = self.0.binary_search_by(|(k, _)| k.as_str().cmp(key)).ok()?;
        self.0.get(i).map(|(_, v)| v)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.0.iter().map(|(k, _)| k)
    }

    /// The members, in key order.
    pub fn iter(&self) -> <&Self as IntoIterator>::IntoIter {
        self.into_iter()
    }
}

impl<T> IntoIterator for Map<T> {
    type Item = (String, T);
    type IntoIter = std::vec::IntoIter<(String, T)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a, T> IntoIterator for &'a Map<T> {
    type Item = (&'a String, &'a T);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (String, T)>, fn(&'a (String, T)) -> (&'a String, &'a T)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl<T: Read> Read for Map<T> {
    fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
        let mut out: Vec<(String, T)> = Vec::new();
        for (key, value) in members(v, at, "a map")? {
            let value = T::read(value, &Path::Key(at, key))?;
            // Keys are unique: the strict parser refuses a repeated one.
            let i = out.partition_point(|(k, _)| k < key);
            out.insert(i, (key.clone(), value));
        }
        Ok(Map(out))
    }
}

/// For the test oracle's serde-derived readers (`tests.rs`) only.
#[cfg(test)]
impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Map<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = <std::collections::BTreeMap<String, T> as serde::Deserialize>::deserialize(deserializer)?;
        Ok(Map(map.into_iter().collect()))
    }
}

/// `impl Read` for a struct of the policy (where it is used, `Read`, `Json`, `Path`, `Error`, `object` and
/// `missing` are in scope): every field in declaration order, as `field: "key"`
/// (the key as written) and `required` or `default` (absent: `Default::default()`; for an
/// `Option`, `null` too). The struct's name is serde's `expected struct …` for a `null`.
///
/// `Type into { … }`, for a struct with `Default`: its fields are read into its default value, which
/// one drop undoes on an error, where the other form keeps each field in its own variable, each
/// dropped on its own: 2,296 B less module for the ten structs read so (the others, mostly of
/// required fields, were larger so).
macro_rules! read_struct {
    // A flag for each required field says whether it was present.
    ($ty:ident into { $($field:ident: $key:literal $kind:ident),* $(,)? }) => {
        impl Read for $ty {
            fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
                let mut out = $ty::default();
                $(read_struct!(@flag $kind $field);)*
                let fields = &[$($key),*];
                object(v, at, concat!("struct ", stringify!($ty)), fields, &mut |i: usize, v: &Json, at: &Path<'_>| {
                    let mut n = 0usize;
                    $(
                        if i == n {
                            out.$field = Read::read(v, at)?;
                            read_struct!(@seen $kind $field);
                            return Ok(());
                        }
                        n += 1;
                    )*
                    let _ = n;
                    Ok(())
                })?;
                $(read_struct!(@check $kind $field at $key);)*
                Ok(out)
            }
        }
    };
    ($ty:ident { $($field:ident: $key:literal $kind:ident),* $(,)? }) => {
        impl Read for $ty {
            fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
                $(let mut $field = read_struct!(@init $kind);)*
                let fields = &[$($key),*];
                object(v, at, concat!("struct ", stringify!($ty)), fields, &mut |i: usize, v: &Json, at: &Path<'_>| {
                    let mut n = 0usize;
                    $(
                        if i == n {
                            read_struct!(@set $kind $field v at);
                            return Ok(());
                        }
                        n += 1;
                    )*
                    let _ = n;
                    Ok(())
                })?;
                Ok($ty { $($field: read_struct!(@get $kind $field at $key)),* })
            }
        }
    };
    (@flag required $f:ident) => { let mut $f = false; };
    (@flag default $f:ident) => {};
    (@seen required $f:ident) => { $f = true; };
    (@seen default $f:ident) => {};
    (@check required $f:ident $at:ident $key:literal) => { if !$f { return Err(missing($at, $key)); } };
    (@check default $f:ident $at:ident $key:literal) => {};
    (@init required) => { None };
    (@init default) => { Default::default() };
    (@set required $f:ident $v:ident $at:ident) => { $f = Some(Read::read($v, $at)?) };
    (@set default $f:ident $v:ident $at:ident) => { $f = Read::read($v, $at)? };
    (@get required $f:ident $at:ident $key:literal) => { $f.ok_or_else(|| missing($at, $key))? };
    (@get default $f:ident $at:ident $key:literal) => { $f };
}

/// `impl Read` for an enum of the policy (with `Read`, `Json`, `Path`, `Error`, `variant` and
/// `invalid_type` in scope): its variants by name, and the name serde's messages give
/// it (``expected enum ActionSpec``).
macro_rules! read_enum {
    ($ty:ident $expected:literal { $($variant:ident: $name:literal),* $(,)? }) => {
        impl Read for $ty {
            fn read(v: &Json, at: &Path<'_>) -> Result<Self, Error> {
                let i = variant(v, at, $expected, &[$($name),*])?;
                let all = [$($ty::$variant),*];
                all.get(i).copied().ok_or_else(|| invalid_type(at, v, $expected))
            }
        }
    };
}

use {read_enum, read_struct};
