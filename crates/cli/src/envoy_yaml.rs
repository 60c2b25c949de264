//! YAML read as Envoy reads a `.yaml` configuration (`ValueUtil::loadFromYaml`, yaml-cpp underneath),
//! so that `mcp-policy check` sees the values Envoy hands on, not YAML 1.2's.
//!
//! Envoy turns a YAML document into a `google.protobuf.Value` before anything reads it. A quoted or
//! block scalar is a string. A plain one is a boolean when yaml-cpp reads one (`y`, `yes`, `on`,
//! `true` and their `n`/`no`/`off`/`false`, in lower case, upper case or capitalized), else an
//! integer when it reads one (decimal, `0x` hexadecimal, a leading `0` octal; a number only
//! within 32 bits, a string of its decimal digits beyond), else null (`~`, `null`, empty), else a
//! string of its text: a float such as `10.0` becomes the string `"10.0"`. That matters where the
//! value is read as it stands: a `google.protobuf.Struct` policy of the native build, which the
//! module receives as the JSON of that `Value`. Envoy reads the first document only, keeps the last
//! of a repeated key, names a null key `null`, leaves out keys tagged `!ignore`, and applies no
//! merge keys (`<<`). YAML 1.2 readers (serde's) differ on most of these points.

use serde_norway::{Mapping, Number, Value};
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The first document of `text` as Envoy reads it.
pub fn load(text: &str) -> Result<Value, String> {
    let mut builder = Builder::default();
    Parser::new_from_str(text).load(&mut builder, false).map_err(|e| e.to_string())?;
    match (builder.error, builder.done) {
        (Some(e), _) => Err(e),
        (None, Some(doc)) => Ok(doc),
        (None, None) => Ok(Value::Null),
    }
}

/// A collection being built: a sequence, or a mapping with the key read and waiting for its value.
enum Open {
    Seq(Vec<Value>, usize),
    Map(Mapping, Option<Key>, usize),
}

/// A mapping key: its text, or `None` for a key Envoy leaves out (`!ignore`) with its value.
type Key = Option<String>;

#[derive(Default)]
struct Builder {
    stack: Vec<Open>,
    /// Values by anchor id, for aliases.
    anchors: Vec<(usize, Value)>,
    done: Option<Value>,
    error: Option<String>,
}

impl MarkedEventReceiver for Builder {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        if self.error.is_some() || self.done.is_some() {
            return;
        }
        let at_key = matches!(self.stack.last(), Some(Open::Map(_, None, _)));
        match ev {
            Event::SequenceStart(..) | Event::MappingStart(..) if at_key => {
                self.error = Some(format!("a mapping key that is not a scalar at {}", place(mark)));
            }
            Event::SequenceStart(anchor, _) => self.stack.push(Open::Seq(Vec::new(), anchor)),
            Event::MappingStart(anchor, _) => self.stack.push(Open::Map(Mapping::new(), None, anchor)),
            Event::SequenceEnd | Event::MappingEnd => match self.stack.pop() {
                Some(Open::Seq(items, anchor)) => self.value(Value::Sequence(items), anchor),
                Some(Open::Map(map, _, anchor)) => self.value(Value::Mapping(map), anchor),
                None => {}
            },
            // A key is its text as written (`as<std::string>()`), unconverted; a null key is "null".
            Event::Scalar(text, style, anchor, tag) if at_key => {
                let ignored = tag.as_ref().is_some_and(|t| t.handle == "!" && t.suffix == "ignore");
                let text = if is_null(&text, style, tag.as_ref()) { "null".to_owned() } else { text };
                if anchor != 0 {
                    self.anchors.push((anchor, Value::String(text.clone())));
                }
                self.key((!ignored).then_some(text));
            }
            Event::Scalar(text, style, anchor, tag) => self.value(scalar(text, style, tag.as_ref()), anchor),
            Event::Alias(id) => match self.anchors.iter().rev().find(|(a, _)| *a == id).map(|(_, v)| v.clone()) {
                Some(Value::String(text)) if at_key => self.key(Some(text)),
                Some(_) if at_key => {
                    self.error = Some(format!("a mapping key that is not a scalar at {}", place(mark)))
                }
                Some(v) => self.value(v, 0),
                None => self.error = Some(format!("an alias to an unknown anchor at {}", place(mark))),
            },
            _ => {}
        }
    }
}

impl Builder {
    /// A mapping's key read: its value comes next.
    fn key(&mut self, key: Key) {
        if let Some(Open::Map(_, pending, _)) = self.stack.last_mut() {
            *pending = Some(key);
        }
    }

    /// A value complete: kept under its anchor, then placed in the collection open above it.
    fn value(&mut self, value: Value, anchor: usize) {
        if anchor != 0 {
            self.anchors.push((anchor, value.clone()));
        }
        match self.stack.last_mut() {
            None => self.done = Some(value),
            Some(Open::Seq(items, _)) => items.push(value),
            Some(Open::Map(map, pending, _)) => {
                // Envoy keeps the last value of a repeated key (`struct_fields[key] = …`).
                if let Some(Some(k)) = pending.take() {
                    map.insert(Value::String(k), value);
                }
            }
        }
    }
}

/// One scalar, as Envoy's `parseYamlNode` converts it.
fn scalar(text: String, style: TScalarStyle, tag: Option<&Tag>) -> Value {
    // yaml-cpp tags a quoted or block scalar "!", as it does one written with the non-specific tag
    // `! ` itself: always a string. Another explicit tag replaces that.
    let non_specific = tag.is_some_and(|t| t.handle.is_empty() && t.suffix == "!");
    if non_specific || (style != TScalarStyle::Plain && tag.is_none()) {
        return Value::String(text);
    }
    if is_null(&text, style, tag) {
        return Value::Null;
    }
    if let Some(b) = yaml_cpp_bool(&text) {
        return Value::Bool(b);
    }
    match yaml_cpp_int(&text) {
        Some(n) if i32::try_from(n).is_ok() => Value::Number(Number::from(n)),
        Some(n) => Value::String(n.to_string()),
        None => Value::String(text),
    }
}

/// A plain, untagged `~`, `null` (or `Null`, `NULL`) or nothing: yaml-cpp's null node.
fn is_null(text: &str, style: TScalarStyle, tag: Option<&Tag>) -> bool {
    style == TScalarStyle::Plain && tag.is_none() && matches!(text, "~" | "null" | "Null" | "NULL" | "")
}

/// yaml-cpp's `convert<bool>::decode`.
fn yaml_cpp_bool(text: &str) -> Option<bool> {
    let mut chars = text.chars();
    let first_upper = chars.next().is_some_and(|c| c.is_ascii_uppercase());
    let rest: &str = chars.as_str();
    let all = |s: &str, f: fn(&char) -> bool| s.chars().all(|c| f(&c));
    let flexible = all(text, char::is_ascii_lowercase)
        || (first_upper && (all(rest, char::is_ascii_lowercase) || all(rest, char::is_ascii_uppercase)));
    if !flexible {
        return None;
    }
    match text.to_ascii_lowercase().as_str() {
        "y" | "yes" | "true" | "on" => Some(true),
        "n" | "no" | "false" | "off" => Some(false),
        _ => None,
    }
}

/// yaml-cpp's `convert<int64_t>::decode`: a C++ stream read with the base from the prefix (as
/// `strtoll` with base 0), the whole text consumed but for trailing white space.
fn yaml_cpp_int(text: &str) -> Option<i64> {
    let body = text.trim_end_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match body.as_bytes().first()? {
        b'-' => (true, &body[1..]),
        b'+' => (false, &body[1..]),
        _ => (false, body),
    };
    let (radix, digits) = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        (16, hex)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = i128::from_str_radix(digits, radix).ok()?;
    i64::try_from(if negative { -magnitude } else { magnitude }).ok()
}

fn place(mark: Marker) -> String {
    format!("line {}, column {}", mark.line(), mark.col() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_convert_as_yaml_cpp_reads_them() {
        let int = |t| yaml_cpp_int(t);
        assert_eq!(
            [int("0"), int("010"), int("08"), int("-0x10"), int("+5"), int("1e3"), int("1.0"), int("7 "), int("")],
            [Some(0), Some(8), None, Some(-16), Some(5), None, None, Some(7), None]
        );
        assert_eq!(int("9223372036854775808"), None);
        let b = |t| yaml_cpp_bool(t);
        assert_eq!(
            [b("y"), b("Y"), b("YES"), b("Yes"), b("yEs"), b("On"), b("OFF"), b("n"), b("nope"), b("")],
            [Some(true), Some(true), Some(true), Some(true), None, Some(true), Some(false), Some(false), None, None]
        );
    }

    #[test]
    fn a_document_reads_as_envoy_reads_it() {
        let text = "a: [yes, 'yes', 10.0, 2147483648, 0x10, ~, \"\", ! yes, ! 10, !!str on]\nb: 1\nb: 2\n\
                    !ignore c: 3\n&k d: *k\n~: n\n<<: {e: 1}\n---\n[";
        let json = serde_json::to_string(&load(text).unwrap()).unwrap();
        let want = r#"{"a":[true,"yes","10.0","2147483648",16,null,"","yes","10",true],"b":2,"d":"d","null":false,"<<":{"e":1}}"#;
        assert_eq!(json, want);
        assert!(load("{[a]: 1}").unwrap_err().contains("a mapping key that is not a scalar"));
    }
}
