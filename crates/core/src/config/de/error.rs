//! The reader's error: serde's message and the JSON path of the value it is about.

use std::fmt;

use serde::de::{self, Expected, Unexpected};

use super::reader::Path;

/// A deserialization error: serde's message, and where (set by the innermost value it passes).
#[derive(Debug)]
pub struct Error {
    message: String,
    path: Option<String>,
}

impl Error {
    pub(super) fn at(mut self, path: &Path<'_>) -> Self {
        if self.path.is_none() {
            let mut text = String::new();
            if !path.write(&mut text) {
                text.push('.');
            }
            self.path = Some(text);
        }
        self
    }

    /// The JSON path of the value the error is about, e.g. `tools.x.limits[0].max`; `.` for the root.
    pub fn path(&self) -> &str {
        self.path.as_deref().unwrap_or(".")
    }

    /// What is wrong, e.g. ``unknown field `actoin`, expected one of …``.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl de::Error for Error {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Error { message: msg.to_string(), path: None }
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
