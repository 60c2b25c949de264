//! Numbers and strings as the server behind the filter will read them.
//!
//! The filter reads a JSON number as its exact decimal (`conditions::cmp_numbers`), but Python
//! (`float`, then pydantic's lax `int`), JavaScript and Go's `float64` read it as the nearest IEEE 754
//! binary64 value: to them `100.00000000000000001` is 100, `9007199254740993` is
//! 9007199254740992, `1e-400` is 0 and `1e999999999` is infinity. Likewise a server may act on a
//! string after NFKC normalization or with zero-width characters dropped.
//!
//! **Design:** a condition is judged on two readings of the arguments ([`Reading`]): as sent (exact
//! decimals, strings as sent), and as a binary64 server reads them (both the argument and the
//! policy's value converted to binary64 and compared as such; strings after `fold::canonical`). A
//! call passes only if it passes on both readings; a `deny_if` fires if it matches on either. A
//! number beyond binary64's range (infinite to the server, or an error) cannot be evaluated in the
//! server's reading: the condition is `Unknown`, which denies.
//!
//! Cost is bounded: binary64 parsing is linear in the text (`f64::from_str`: correctly rounded,
//! exponent saturated, no big-number arithmetic on the exponent), and integers of at most 15 digits,
//! which every binary64 holds exactly, skip it. The arguments' strings are read once for all of a
//! call's conditions, within a budget ([`server_view`]). The second reading is skipped altogether
//! when the arguments hold nothing that can read differently ([`may_read_differently`]).

use std::borrow::Cow;
use std::cmp::Ordering;

use crate::wire::json::Json;

/// Which reading of the arguments a condition is judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Exact decimals, strings as sent.
    Sent,
    /// Numbers as binary64, strings after NFKC without default-ignorable code points (read once,
    /// into the arguments' [`server_view`]).
    Server,
}

impl Reading {
    /// Compare two JSON number texts in this reading; `None` if one cannot be read (an infinite
    /// binary64, or an exponent beyond `i64` for exact decimals).
    pub fn cmp_numbers(self, a: &str, b: &str) -> Option<Ordering> {
        match self {
            Reading::Sent => cmp_numbers(a, b),
            Reading::Server => double(a)?.partial_cmp(&double(b)?),
        }
    }

    /// A string of the policy in this reading. The policy's strings are short and its own, so they
    /// are read without a budget, each time.
    pub fn text(self, s: &str) -> Cow<'_, str> {
        match self {
            Reading::Server => match crate::wire::fold::canonical(s, usize::MAX) {
                Ok(Some(read)) => Cow::Owned(read),
                _ => Cow::Borrowed(s),
            },
            Reading::Sent => Cow::Borrowed(s),
        }
    }
}

/// An argument value as the server reads its strings (`fold::canonical`), all of them together
/// within `budget` bytes, which this takes from; `None` past it, where normalizing stops. Strings
/// that read as sent count their own length: a megabyte of U+FDFA would otherwise read as 11.
pub fn server_view(v: &Json, budget: &mut usize) -> Option<Json> {
    Some(match v {
        Json::String(s) => {
            let read = crate::wire::fold::canonical(s, *budget).ok()?;
            let read = read.unwrap_or_else(|| s.clone());
            *budget -= read.len();
            Json::String(read)
        }
        Json::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(server_view(item, budget)?);
            }
            Json::Array(out)
        }
        Json::Object(members) => {
            let mut out = Vec::with_capacity(members.len());
            for (k, item) in members {
                out.push((k.clone(), server_view(item, budget)?));
            }
            Json::Object(out)
        }
        other => other.clone(),
    })
}

/// The binary64 value of a JSON number text, or `None` when it is infinite (beyond ±1.8e308).
pub fn double(text: &str) -> Option<f64> {
    let d = text.parse::<f64>().ok()?;
    d.is_finite().then_some(d)
}

/// Does `text` read the same as a binary64: an integer of at most 15 digits?
fn short_integer(text: &str) -> bool {
    let digits = text.strip_prefix('-').unwrap_or(text);
    digits.len() <= 15 && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Could the server's reading of `v` differ from the exact one: does it hold a number other than a
/// short integer, or a non-ASCII string? (Cheap: no parsing, no allocation.)
pub fn may_read_differently(v: &Json) -> bool {
    match v {
        Json::Null | Json::Bool(_) => false,
        Json::Number(t) => !short_integer(t),
        Json::String(s) => !s.is_ascii(),
        Json::Array(items) => items.iter().any(may_read_differently),
        Json::Object(members) => members.iter().any(|(_, v)| may_read_differently(v)),
    }
}

/// An exact decimal: sign, significant digits without leading/trailing zeros, and the exponent of
/// the last digit. Zero is `(false, "", 0)`.
fn decimal(text: &str) -> Option<(bool, String, i64)> {
    let (neg, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exp) = match rest.find(['e', 'E']) {
        Some(i) => (rest.get(..i)?, rest.get(i + 1..)?.parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: String = int.chars().chain(frac.chars()).collect();
    let mut exp = exp.checked_sub(i64::try_from(frac.len()).ok()?)?;
    let trimmed = digits.trim_start_matches('0').to_owned();
    digits = trimmed;
    while digits.ends_with('0') {
        digits.pop();
        exp = exp.checked_add(1)?;
    }
    if digits.is_empty() {
        return Some((false, String::new(), 0));
    }
    Some((neg, digits, exp))
}

/// Compare two JSON number texts exactly.
pub fn cmp_numbers(a: &str, b: &str) -> Option<Ordering> {
    // The common cases without building decimals (JSON-RPC ids, integer conditions): two integers
    // of at most 15 digits, and two equal texts without an exponent (which `decimal` always reads).
    if short_integer(a) && short_integer(b) {
        if let (Ok(x), Ok(y)) = (a.parse::<i64>(), b.parse::<i64>()) {
            return Some(x.cmp(&y));
        }
    }
    if a == b && !a.contains(['e', 'E']) {
        return Some(Ordering::Equal);
    }
    let (an, ad, ae) = decimal(a)?;
    let (bn, bd, be) = decimal(b)?;
    let sign = |neg: bool, d: &str| {
        if d.is_empty() {
            0
        } else if neg {
            -1
        } else {
            1
        }
    };
    let (sa, sb) = (sign(an, &ad), sign(bn, &bd));
    if sa != sb || sa == 0 {
        return Some(sa.cmp(&sb));
    }
    // Same sign, both non-zero: compare magnitudes by the position of the leading digit, then digits.
    let lead_a = i64::try_from(ad.len()).ok()? + ae;
    let lead_b = i64::try_from(bd.len()).ok()? + be;
    let mag = lead_a.cmp(&lead_b).then_with(|| {
        let n = ad.len().max(bd.len());
        let pad = |d: &str| format!("{d:0<n$}");
        pad(&ad).cmp(&pad(&bd))
    });
    Some(if sa < 0 { mag.reverse() } else { mag })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::json::parse;

    #[test]
    fn server_reading_of_numbers() {
        let s = Reading::Server;
        assert_eq!(s.cmp_numbers("100.00000000000000001", "100"), Some(Ordering::Equal));
        assert_eq!(Reading::Sent.cmp_numbers("100.00000000000000001", "100"), Some(Ordering::Greater));
        assert_eq!(s.cmp_numbers("9007199254740993", "9007199254740992"), Some(Ordering::Equal));
        assert_eq!(s.cmp_numbers("1e-400", "0"), Some(Ordering::Equal));
        assert_eq!(s.cmp_numbers("0.1", "0.1"), Some(Ordering::Equal));
        assert_eq!(s.cmp_numbers("1e999999999", "101"), None);
        assert_eq!(s.cmp_numbers("-1e309", "0"), None);
        assert_eq!(double("1e99999999999999999999999"), None);
        assert_eq!(double("-0"), Some(-0.0));
    }

    #[test]
    fn server_reading_of_strings() {
        assert_eq!(Reading::Server.text("r\u{200b}m"), "rm");
        assert_eq!(Reading::Sent.text("r\u{200b}m"), "r\u{200b}m");
        assert!(matches!(Reading::Server.text("rm"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_server_view_reads_each_string_within_its_budget() {
        let args = parse("{\"a\":[\"\u{fdfa}\",\"r\u{200b}m\"],\"b\":1.5,\"c\":\"ok\"}".as_bytes()).unwrap();
        let mut budget = 100;
        let view = server_view(&args, &mut budget).unwrap();
        let arabic = "\u{635}\u{644}\u{649} \u{627}\u{644}\u{644}\u{647} \u{639}\u{644}\u{64a}\u{647} \u{648}\u{633}\u{644}\u{645}";
        let want = format!("{{\"a\":[\"{arabic}\",\"rm\"],\"b\":1.5,\"c\":\"ok\"}}");
        assert_eq!(view, parse(want.as_bytes()).unwrap());
        // 33 + 2 + 2 bytes taken; member names and numbers take none.
        assert_eq!(budget, 63);
        let mut budget = 36;
        assert_eq!(server_view(&args, &mut budget), None);
        let mut budget = 37;
        assert!(server_view(&args, &mut budget).is_some());
        assert_eq!(budget, 0);
    }

    #[test]
    fn what_may_read_differently() {
        let j = |t: &str| parse(t.as_bytes()).unwrap();
        assert!(!may_read_differently(&j(r#"{"a":1,"b":"x","c":[-999999999999999,true,null]}"#)));
        assert!(may_read_differently(&j(r#"{"a":1.5}"#)));
        assert!(may_read_differently(&j(r#"{"a":1e2}"#)));
        assert!(may_read_differently(&j(r#"{"a":[9999999999999999]}"#)));
        assert!(may_read_differently(&j(r#"{"a":{"b":"é"}}"#)));
    }
}
