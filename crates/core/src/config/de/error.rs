//! The reader's error: serde's message and the JSON path of the value it is about.

use std::fmt;

use serde::de::{self, Expected, Unexpected};

use super::reader::Path;

/// A deserialization error: serde's message, and where (set by the innermost value it passes).
///
/// Boxed: every `Result` of the reader carries it, and a pointer moves through each `?` of the
/// derived visitors in one store where two strings took six: 28 KB of the .wasm (BENCHMARKS.md).
pub struct Error(Box<Inner>);

struct Inner {
    message: String,
    path: Option<String>,
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("message", &self.0.message).field("path", &self.0.path).finish()
    }
}

impl Error {
    pub(super) fn at(mut self, path: &Path<'_>) -> Self {
        if self.0.path.is_none() {
            let mut text = String::new();
            if !path.write(&mut text) {
                text.push('.');
            }
            self.0.path = Some(text);
        }
        self
    }

    /// The JSON path of the value the error is about, e.g. `tools.x.limits[0].max`; `.` for the root.
    pub fn path(&self) -> &str {
        self.0.path.as_deref().unwrap_or(".")
    }

    /// What is wrong, e.g. ``unknown field `actoin`, expected one of …``.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error(Box::new(Inner { message: msg.to_string(), path: None }))
    }

    // serde's defaults print `Unexpected` with its own `Display`, which formats floats and would link
    // the float formatting machinery; this deserializer never reports a float value.
    fn invalid_type(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        de::Error::custom(format_args!("invalid type: {}, expected {exp}", unexpected(unexp)))
    }

    fn invalid_value(unexp: Unexpected<'_>, exp: &dyn Expected) -> Self {
        de::Error::custom(format_args!("invalid value: {}, expected {exp}", unexpected(unexp)))
    }
}

/// `Unexpected` as serde prints it, but floats without their value.
fn unexpected(u: Unexpected<'_>) -> String {
    match u {
        Unexpected::Bool(b) => format!("boolean `{b}`"),
        Unexpected::Unsigned(i) => format!("integer `{i}`"),
        Unexpected::Signed(i) => format!("integer `{i}`"),
        Unexpected::Float(_) => "floating point".to_owned(),
        Unexpected::Char(c) => format!("character `{c}`"),
        Unexpected::Str(s) => format!("string {s:?}"),
        Unexpected::Bytes(_) => "byte array".to_owned(),
        Unexpected::Unit => "null".to_owned(),
        Unexpected::Option => "Option value".to_owned(),
        Unexpected::NewtypeStruct => "newtype struct".to_owned(),
        Unexpected::Seq => "sequence".to_owned(),
        Unexpected::Map => "map".to_owned(),
        Unexpected::Enum => "enum".to_owned(),
        Unexpected::UnitVariant => "unit variant".to_owned(),
        Unexpected::NewtypeVariant => "newtype variant".to_owned(),
        Unexpected::TupleVariant => "tuple variant".to_owned(),
        Unexpected::StructVariant => "struct variant".to_owned(),
        Unexpected::Other(other) => other.to_owned(),
    }
}
