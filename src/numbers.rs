//! Numbers and strings as the server behind the filter will read them.
//!
//! The filter reads a JSON number as its exact decimal (`conditions::cmp_numbers`), but Python
//! (`float`, then pydantic's lax `int`), JavaScript and Go's `float64` read it as the nearest IEEE 754
//! binary64 value: to them `100.00000000000000001` is 100, `9007199254740993` is
//! 9007199254740992, `1e-400` is 0 and `1e999999999` is infinity. Likewise a server may act on a
//! string after NFKC normalization or with zero-width characters dropped.
//!
//! **Design:** a condition is judged on two readings of the arguments: as sent, and as the server
//! reads them ([`server_reading`]: every number replaced by the shortest decimal of its binary64
//! value, every string by `fold::canonical`). A call passes only if it passes on both; a `deny_if`
//! fires if it matches on either. A number whose binary64 value is infinite cannot be evaluated
//! (conditions answer `Unknown`, which denies).
//!
//! Cost is bounded: binary64 parsing is linear in the text (Rust's `f64::from_str`, correctly
//! rounded, exponent saturated), and integers of at most 15 digits, which every binary64 holds
//! exactly, skip it.

use crate::json::Json;

/// The text that stands for a number whose binary64 reading is ±infinity: not a valid JSON number,
/// so every numeric comparison with it is `Unknown`.
pub const INFINITE: &str = "Infinity";

/// How a binary64 server reads one JSON number text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoubleReading {
    /// The binary64 value equals the exact decimal.
    Same,
    /// A different finite value: its shortest round-trip decimal (e.g. `1e2`).
    Finite(String),
    /// Beyond binary64's range: ±infinity (or an error) on the server.
    Infinite,
}

/// The binary64 reading of `text`, a valid JSON number.
pub fn double_reading(text: &str) -> DoubleReading {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.len() <= 15 && digits.bytes().all(|b| b.is_ascii_digit()) {
        return DoubleReading::Same;
    }
    let Ok(d) = text.parse::<f64>() else { return DoubleReading::Infinite };
    if !d.is_finite() {
        return DoubleReading::Infinite;
    }
    let shortest = format!("{d:e}");
    if crate::conditions::cmp_numbers(&shortest, text) == Some(std::cmp::Ordering::Equal) {
        DoubleReading::Same
    } else {
        DoubleReading::Finite(shortest)
    }
}

/// The arguments as the server reads them, or `None` when that is the value as sent (the common
/// case: ASCII strings and exactly representable numbers). Object keys are kept as sent.
pub fn server_reading(v: &Json) -> Option<Json> {
    match v {
        Json::Null | Json::Bool(_) => None,
        Json::Number(t) => match double_reading(t) {
            DoubleReading::Same => None,
            DoubleReading::Finite(s) => Some(Json::Number(s.into())),
            DoubleReading::Infinite => Some(Json::Number(INFINITE.into())),
        },
        Json::String(s) => crate::fold::canonical(s).map(Json::String),
        Json::Array(items) => {
            let read: Vec<Option<Json>> = items.iter().map(server_reading).collect();
            read.iter().any(Option::is_some).then(|| {
                Json::Array(items.iter().zip(read).map(|(orig, r)| r.unwrap_or_else(|| orig.clone())).collect())
            })
        }
        Json::Object(members) => {
            let read: Vec<Option<Json>> = members.iter().map(|(_, v)| server_reading(v)).collect();
            read.iter().any(Option::is_some).then(|| {
                Json::Object(
                    members.iter().zip(read).map(|((k, orig), r)| (k.clone(), r.unwrap_or_else(|| orig.clone()))).collect(),
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn double_readings() {
        use DoubleReading::*;
        assert_eq!(double_reading("100"), Same);
        assert_eq!(double_reading("-999999999999999"), Same);
        assert_eq!(double_reading("100.0"), Same);
        assert_eq!(double_reading("1e2"), Same);
        assert_eq!(double_reading("0.5"), Same);
        assert_eq!(double_reading("100.00000000000000001"), Finite("1e2".into()));
        assert_eq!(double_reading("9007199254740993"), Finite("9.007199254740992e15".into()));
        assert_eq!(double_reading("9007199254740992"), Same);
        assert_eq!(double_reading("1e-400"), Finite("0e0".into()));
        assert_eq!(double_reading("1e999999999"), Infinite);
        assert_eq!(double_reading("-1e309"), Infinite);
        assert_eq!(double_reading("1e99999999999999999999999"), Infinite);
        // 0.1 is not exactly a binary64, but its shortest round-trip decimal is 0.1 itself.
        assert_eq!(double_reading("0.1"), Same);
    }

    #[test]
    fn server_readings() {
        let v = parse(br#"{"a":1,"b":"x","c":[2,3]}"#).unwrap();
        assert_eq!(server_reading(&v), None);
        let v = parse("{\"vmid\":100.00000000000000001,\"cmd\":\"r\u{200b}m\",\"n\":[1e999,2]}".as_bytes()).unwrap();
        let r = server_reading(&v).unwrap();
        assert_eq!(r.get("vmid"), Some(&Json::Number("1e2".into())));
        assert_eq!(r.get("cmd"), Some(&Json::String("rm".into())));
        assert_eq!(r.get("n"), Some(&Json::Array(vec![Json::Number(INFINITE.into()), Json::Number("2".into())])));
    }
}
