//! What every position of the reader shares, none of it generic (each is compiled once): the path,
//! the error, and the readings of an object's members, an enum's name and a number, with serde's
//! messages.

use std::fmt;

use crate::wire::json::Json;

/// Where a value sits in the document: a chain from the value up to the root.
#[derive(Clone, Copy)]
pub enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    /// Appends the path as `serde_path_to_error` displays it; false if it is the root.
    fn write(&self, out: &mut String) -> bool {
        match self {
            Path::Root => false,
            Path::Key(parent, key) => {
                if parent.write(out) {
                    out.push('.');
                }
                out.push_str(key);
                true
            }
            Path::Index(parent, i) => {
                parent.write(out);
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
                true
            }
        }
    }
}

/// A reading error: serde's message, and the JSON path of the value it is about.
///
/// Boxed: every `Result` of the reader carries it, and a pointer moves through each `?` in one
/// store where two strings take six.
pub struct Error(Box<Inner>);

struct Inner {
    message: String,
    path: String,
}

impl Error {
    pub(super) fn new(at: &Path<'_>, message: String) -> Self {
        let mut path = String::new();
        if !at.write(&mut path) {
            path.push('.');
        }
        Error(Box::new(Inner { message, path }))
    }

    /// The JSON path of the value the error is about, e.g. `tools.x.limits[0].max`; `.` for the root.
    pub fn path(&self) -> &str {
        &self.0.path
    }

    /// What is wrong, e.g. ``unknown field `actoin`, expected one of …``.
    pub fn message(&self) -> &str {
        &self.0.message
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error").field("message", &self.0.message).field("path", &self.0.path).finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)
    }
}

impl std::error::Error for Error {}

/// serde's type error: ``invalid type: integer `7`, expected a string``.
pub(super) fn invalid_type(at: &Path<'_>, value: &Json, expected: &str) -> Error {
    Error::new(at, format!("invalid type: {}, expected {expected}", unexpected(value)))
}

/// serde's `missing field` of a struct at `at`.
pub(super) fn missing(at: &Path<'_>, key: &str) -> Error {
    Error::new(at, format!("missing field `{key}`"))
}

/// A JSON value as serde's `Unexpected` names it; numbers by their exact text (`read_number`).
fn unexpected(value: &Json) -> String {
    match value {
        Json::Null => "null".to_owned(),
        Json::Bool(b) => format!("boolean `{b}`"),
        Json::Number(text) => match read_number(text) {
            Number::U64(u) => format!("integer `{u}`"),
            Number::I64(i) => format!("integer `{i}`"),
            Number::Other(what) => what,
        },
        Json::String(s) => format!("string {s:?}"),
        Json::Array(_) => "sequence".to_owned(),
        Json::Object(_) => "map".to_owned(),
    }
}

/// serde's `OneOf`: `` `a` ``, `` `a` or `b` ``, `` one of `a`, `b`, `c` ``.
fn one_of(names: &[&str]) -> String {
    let mut out = String::new();
    if names.len() > 2 {
        out.push_str("one of ");
    }
    for (i, name) in names.iter().enumerate() {
        if i > 0 {
            out.push_str(if names.len() == 2 { " or " } else { ", " });
        }
        out.push('`');
        out.push_str(name);
        out.push('`');
    }
    out
}

/// The members of the object at `at`. A struct or map position holds only an object: `null` is a
/// type error (an optional field reads it as absent before it gets here), any other kind is not an
/// object (serde's derived structs would read an array, fields by position).
pub(super) fn members<'a>(v: &'a Json, at: &Path<'_>, expected: &str) -> Result<&'a [(String, Json)], Error> {
    match v {
        Json::Object(members) => Ok(members),
        Json::Null => Err(invalid_type(at, v, expected)),
        other => Err(Error::new(at, format!("must be an object, not {}", other.type_name()))),
    }
}

/// Reads a struct's members in document order, each by `field` with its index in `fields` (the
/// keys as written) and its path; a key not in `fields` is an error at its own path. The caller
/// then reports missing fields in declaration order, as serde's derived visitors do.
pub(super) fn object(
    v: &Json,
    at: &Path<'_>,
    expected: &str,
    fields: &[&str],
    field: &mut dyn FnMut(usize, &Json, &Path<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    for (key, value) in members(v, at, expected)? {
        let here = Path::Key(at, key);
        let Some(i) = fields.iter().position(|f| f == key) else {
            let message = if fields.is_empty() {
                format!("unknown field `{key}`, there are no fields")
            } else {
                format!("unknown field `{key}`, expected {}", one_of(fields))
            };
            return Err(Error::new(&here, message));
        };
        field(i, value, &here)?;
    }
    Ok(())
}

/// The index in `names` of the enum variant named by the string at `at`; an enum is only ever a
/// string (serde_json would also read `{"deny": null}` as a variant).
pub(super) fn variant(v: &Json, at: &Path<'_>, expected: &str, names: &[&str]) -> Result<usize, Error> {
    let Json::String(s) = v else { return Err(invalid_type(at, v, expected)) };
    names
        .iter()
        .position(|n| n == s)
        .ok_or_else(|| Error::new(at, format!("unknown variant `{s}`, expected {}", one_of(names))))
}

/// An unsigned integer of at most `max`, named `expected` (`u64`, `u32`) in errors: read from the
/// number's exact text; a negative or too large integer is an invalid value, a fraction, an exponent
/// or an integer beyond `u64` and `i64` an invalid type, each quoted as written.
pub(super) fn unsigned(v: &Json, at: &Path<'_>, max: u64, expected: &str) -> Result<u64, Error> {
    let Json::Number(text) = v else { return Err(invalid_type(at, v, expected)) };
    let what = match read_number(text) {
        Number::U64(u) if u <= max => return Ok(u),
        Number::U64(u) => format!("integer `{u}`"),
        Number::I64(i) => format!("integer `{i}`"),
        Number::Other(what) => return Err(Error::new(at, format!("invalid type: {what}, expected {expected}"))),
    };
    Err(Error::new(at, format!("invalid value: {what}, expected {expected}")))
}

/// What a number text reads as, as serde_json would hand it to a visitor.
enum Number {
    U64(u64),
    /// Negative only.
    I64(i64),
    /// Not an integer within `u64` or `i64`: how the type error names it, e.g. ``floating point `1e3` ``.
    Other(String),
}

fn read_number(text: &str) -> Number {
    let integer = !text.contains(['.', 'e', 'E']);
    if integer {
        if let Ok(u) = text.parse::<u64>() {
            return Number::U64(u);
        }
        // `-0` is no integer in serde_json either (it reads it as the float -0.0).
        if let Ok(i @ ..=-1) = text.parse::<i64>() {
            return Number::I64(i);
        }
    }
    let what = if integer && text != "-0" { "integer" } else { "floating point" };
    Number::Other(format!("{what} `{text}`"))
}
