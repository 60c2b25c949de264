//! The `Deserializer` over a parsed [`Json`] tree: one value at a time, each knowing its path.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde::forward_to_deserialize_any;

use super::{Error, JSON_VALUE};
use crate::wire::json::{self, Json};

/// Where a value sits in the document: a chain from the value up to the root.
#[derive(Clone, Copy)]
pub(super) enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl Path<'_> {
    /// Appends the path as `serde_path_to_error` displays it; false if it is the root.
    pub(super) fn write(&self, out: &mut String) -> bool {
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

/// Reads one value; errors that pass through it without a path get its path.
#[derive(Clone, Copy)]
pub(super) struct Deserializer<'de, 'p> {
    pub(super) value: &'de Json,
    pub(super) path: &'p Path<'p>,
}

impl<'de> Deserializer<'de, '_> {
    fn any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Null => visitor.visit_unit(),
            Json::Bool(b) => visitor.visit_bool(*b),
            Json::Number(text) => number(text, visitor),
            Json::String(s) => visitor.visit_borrowed_str(s),
            Json::Array(items) => visitor.visit_seq(Seq { items: items.iter(), index: 0, path: self.path }),
            Json::Object(members) => visitor.visit_map(Map { members: members.iter(), value: None, path: self.path }),
        }
    }
}

impl<'de> de::Deserializer<'de> for Deserializer<'de, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.any(visitor).map_err(|e| e.at(self.path))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // Only an object reaches the visitor: its `visit_seq` (a struct read from an array, fields
        // by position) and other `visit_*` methods are not compiled.
        match self.value {
            Json::Object(members) => visitor.visit_map(Map { members: members.iter(), value: None, path: self.path }),
            Json::Null => Err(de::Error::invalid_type(Unexpected::Unit, &visitor)),
            other => Err(not_an_object(other)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.value {
            Json::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            // Only unit variants, named by a string: `{"allow": null}` is not an action.
            other => Err(wrong_kind(other, &visitor)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, Error> {
        if name == JSON_VALUE {
            let mut text = String::new();
            json::write(&mut text, self.value);
            return visitor.visit_string(text).map_err(|e: Error| e.at(self.path));
        }
        visitor.visit_newtype_struct(self)
    }

    // Sequences, strings, booleans and integers: the visitor gets only its own kind (the others
    // are `wrong_kind`), so each derived visitor's methods for other kinds are not compiled.
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Array(items) => visitor.visit_seq(Seq { items: items.iter(), index: 0, path: self.path }),
            other => Err(wrong_kind(other, &visitor)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_str<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::String(s) => visitor.visit_borrowed_str(s),
            other => Err(wrong_kind(other, &visitor)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_string<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Bool(b) => visitor.visit_bool(*b),
            other => Err(wrong_kind(other, &visitor)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.value {
            Json::Number(text) => number(text, visitor),
            other => Err(wrong_kind(other, &visitor)),
        }
        .map_err(|e| e.at(self.path))
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_u64(visitor)
    }

    forward_to_deserialize_any! {
        i8 i16 i128 u128 f32 f64 char
        bytes byte_buf unit unit_struct tuple tuple_struct identifier ignored_any
    }
}

/// The error for a value that is no object where a struct or map is read (not generic: compiled once).
fn not_an_object(value: &Json) -> Error {
    de::Error::custom(format_args!("must be an object, not {}", value.type_name()))
}

/// The error for a value of another JSON kind than a position reads (a string where an enum is
/// read; an array, string, boolean or number where such a type is): the type error the visitor's
/// own `visit_*` method for that kind returns (serde's default for a kind a visitor does not accept),
/// built here once instead of through each visitor.
fn wrong_kind(value: &Json, expected: &dyn de::Expected) -> Error {
    let text;
    let unexpected = match value {
        Json::Null => Unexpected::Unit,
        Json::Bool(b) => Unexpected::Bool(*b),
        Json::Number(t) => match read_number(t) {
            Number::U64(u) => Unexpected::Unsigned(u),
            Number::I64(i) => Unexpected::Signed(i),
            Number::Other(what) => {
                text = what;
                Unexpected::Other(&text)
            }
        },
        Json::String(s) => Unexpected::Str(s),
        Json::Array(_) => Unexpected::Seq,
        Json::Object(_) => Unexpected::Map,
    };
    de::Error::invalid_type(unexpected, expected)
}

/// A number from its exact text: an integer within `u64` or `i64`, else a type error quoting it.
fn number<'de, V: Visitor<'de>>(text: &str, visitor: V) -> Result<V::Value, Error> {
    match read_number(text) {
        Number::U64(u) => visitor.visit_u64(u),
        Number::I64(i) => visitor.visit_i64(i),
        Number::Other(what) => Err(de::Error::invalid_type(Unexpected::Other(&what), &visitor)),
    }
}

/// What a number text reads as (apart from the visitor, so that this is compiled once, not once
/// per visitor type).
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

struct Seq<'de, 'p> {
    items: std::slice::Iter<'de, Json>,
    index: usize,
    path: &'p Path<'p>,
}

impl<'de> SeqAccess<'de> for Seq<'de, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        let Some(value) = self.items.next() else { return Ok(None) };
        let path = Path::Index(self.path, self.index);
        self.index += 1;
        seed.deserialize(Deserializer { value, path: &path }).map(Some)
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.items.len())
    }
}

struct Map<'de, 'p> {
    members: std::slice::Iter<'de, (String, Json)>,
    value: Option<(&'de str, &'de Json)>,
    path: &'p Path<'p>,
}

impl<'de> MapAccess<'de> for Map<'de, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        let Some((key, value)) = self.members.next() else { return Ok(None) };
        self.value = Some((key, value));
        // An unknown field is reported at its own path.
        seed.deserialize(de::value::BorrowedStrDeserializer::new(key))
            .map(Some)
            .map_err(|e: Error| e.at(&Path::Key(self.path, key)))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        let Some((key, value)) = self.value.take() else {
            return Err(de::Error::custom("value requested before its key"));
        };
        seed.deserialize(Deserializer { value, path: &Path::Key(self.path, key) })
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.len())
    }
}
