//! The duplicate-name check of every object, across the parser's ways of keeping member names: up
//! to 8 borrowed from the input, past 8 in a `Vec`, and spilled at the first name that had an
//! escape; read built (`parse`) and skipped (`Parser::skip_value`). Exact values: the error kind
//! and the offset of the object's `{`.

use mcp_policy_core::wire::fold::{clash, Clash};
use mcp_policy_core::wire::json::{parse, parse_again, parse_folded_keys_allowed, ParseError, ParseErrorKind, Parser};

/// Skipped, as the message layer skips what no decision reads: the folded clashes counted.
fn skipped(input: &str) -> Result<usize, ParseError> {
    let mut p = Parser::new(input.as_bytes())?;
    p.skip_value()?;
    p.finish()?;
    Ok(p.folded_clashes())
}

/// `[0,{...}]`: the object's `{` at offset 3; member `m` is named `names[m]` (raw JSON string text).
fn object(names: &[String]) -> String {
    let members: Vec<String> = names.iter().enumerate().map(|(m, n)| format!("\"{n}\":[{m}]")).collect();
    format!("[0,{{{}}}]", members.join(","))
}

#[test]
fn every_pair_of_positions_in_objects_of_2_to_12_members() {
    let dup = ParseError { kind: ParseErrorKind::DuplicateKey, offset: 3 };
    let folded = ParseError { kind: ParseErrorKind::FoldedDuplicateKey, offset: 3 };
    for n in 2..=12 {
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                // (name at i, name at j, clash): `\u006b` is `k`, `\u004b` is `K`.
                let pairs = [
                    (format!("k{i}"), format!("k{i}"), Some(Clash::Exact)),
                    (format!("k{i}"), format!("\\u006b{i}"), Some(Clash::Exact)),
                    (format!("\\u006b{i}"), format!("\\u006b{i}"), Some(Clash::Exact)),
                    (format!("k{i}"), format!("K{i}"), Some(Clash::Folded)),
                    (format!("k{i}"), format!("\\u004b{i}"), Some(Clash::Folded)),
                    (format!("k{i}"), format!("k\\u200b{i}"), Some(Clash::Folded)),
                    (format!("k{i}"), format!("k{i}\\u0000"), Some(Clash::Folded)),
                    (format!("k{i}"), format!("\\u212a{i}"), Some(Clash::Folded)),
                    (format!("k{i}"), format!("\\u006bx{i}"), None),
                    (format!("k{i}"), format!("x{i}"), None),
                ];
                for (a, b, want) in pairs {
                    let mut names: Vec<String> = (0..n).map(|m| format!("k{m}")).collect();
                    names[i] = a;
                    names[j] = b;
                    let text = object(&names);
                    match want {
                        Some(Clash::Exact) => {
                            assert_eq!(parse(text.as_bytes()), Err(dup), "{text}");
                            assert_eq!(parse_folded_keys_allowed(text.as_bytes()), Err(dup), "{text}");
                            assert_eq!(skipped(&text), Err(dup), "{text}");
                        }
                        Some(Clash::Folded) => {
                            assert_eq!(parse(text.as_bytes()), Err(folded), "{text}");
                            assert!(parse_folded_keys_allowed(text.as_bytes()).is_ok(), "{text}");
                            assert_eq!(skipped(&text), Ok(1), "{text}");
                        }
                        None => {
                            assert!(parse(text.as_bytes()).is_ok(), "{text}");
                            assert_eq!(skipped(&text), Ok(0), "{text}");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn the_ascii_pair_check_compares_first_bytes_by_case_only() {
    assert_eq!(folded(&["Ab", "aB"]), Some(Clash::Folded));
    assert_eq!(folded(&["ab", "AB", "x", "ab"]), Some(Clash::Exact));
    assert_eq!(folded(&["", ""]), Some(Clash::Exact));
    assert_eq!(folded(&["", "a"]), None);
    // 0x40/0x60 and 0x5B/0x7B differ by the case bit but are not letters.
    assert_eq!(folded(&["@b", "`b"]), None);
    assert_eq!(folded(&["[", "{"]), None);
    assert_eq!(folded(&["a[", "a{"]), None);
    assert_eq!(folded(&["ab", "ac"]), None);
    assert_eq!(folded(&["abc", "ab"]), None);
    // Non-ASCII names take the folding path: the Kelvin sign folds to `k`.
    assert_eq!(folded(&["k", "\u{212a}"]), Some(Clash::Folded));
}

/// The clash among `keys`, with no budget for their keys.
fn folded(keys: &[&str]) -> Option<Clash> {
    let mut unbounded = usize::MAX;
    clash(keys, &mut unbounded).unwrap()
}

#[test]
fn folded_names_may_take_twice_the_text_plus_64_bytes() {
    // One name of U+FDFA folds to 11 times its length: 3 bytes to 33.
    let object = |n: usize| format!(r#"{{"a":1,"{}":2}}"#, "\u{fdfa}".repeat(n));
    assert!(parse(object(1).as_bytes()).is_ok());
    // Keys of 33·n + 1 bytes against 2·(3·n + 12) + 64: n = 3 fits, n = 4 does not.
    assert!(parse(object(3).as_bytes()).is_ok());
    let too_long = ParseError { kind: ParseErrorKind::FoldedNamesTooLong, offset: 0 };
    assert_eq!(parse(object(4).as_bytes()), Err(too_long));
    assert_eq!(too_long.to_string(), "object keys too long to compare after case folding at byte 0");
    // A member read again on its own (the arguments of a request) is not held to a bound of its
    // own: the whole text's parse bounded its names.
    let args = format!(r#"{{"a":1,"{}":2}}"#, "\u{fdfa}".repeat(30));
    let body = format!(r#"{{"arguments":{args},"pad":"{}"}}"#, "x".repeat(1_000));
    assert!(parse(body.as_bytes()).is_ok());
    assert!(matches!(parse(args.as_bytes()), Err(ParseError { kind: ParseErrorKind::FoldedNamesTooLong, .. })));
    assert!(parse_again(args.as_bytes()).is_ok());
    // The budget is the whole text's: many small objects of such names reach it too, at the object
    // whose names pass it.
    let many = format!("[{}]", vec![r#"{"a":1,"\ufdfa\ufdfa\ufdfa":2}"#; 2_000].join(","));
    assert!(matches!(parse(many.as_bytes()), Err(ParseError { kind: ParseErrorKind::FoldedNamesTooLong, .. })));
    // A name as long that folds to itself is read: CJK ideographs fold to themselves.
    assert!(parse(format!(r#"{{"a":1,"{}":2}}"#, "\u{4e2d}".repeat(100_000)).as_bytes()).is_ok());
}

#[test]
fn str_value_borrows_plain_strings_and_reads_other_values_strictly() {
    let read = |text: &str| {
        let mut p = Parser::new(text.as_bytes())?;
        let v = p.str_value()?.map(|s| (s.clone().into_owned(), matches!(s, std::borrow::Cow::Borrowed(_))));
        p.finish()?;
        Ok::<_, ParseError>((v, p.folded_clashes()))
    };
    assert_eq!(read(r#" "2.0" "#), Ok((Some(("2.0".to_owned(), true)), 0)));
    assert_eq!(read(r#""2\u002e0""#), Ok((Some(("2.0".to_owned(), false)), 0)));
    assert_eq!(read("2.0"), Ok((None, 0)));
    assert_eq!(read(r#"{"A":1,"a":[{}]}"#), Ok((None, 1)));
    assert_eq!(read(r#"{"a":1,"\u0061":2}"#), Err(ParseError { kind: ParseErrorKind::DuplicateKey, offset: 0 }));
    assert_eq!(read(r#""\ud800""#), Err(ParseError { kind: ParseErrorKind::LoneSurrogate, offset: 1 }));
    assert_eq!(read(r#""ab"#), Err(ParseError { kind: ParseErrorKind::UnexpectedEnd, offset: 3 }));
    assert_eq!(read("[1,]"), Err(ParseError { kind: ParseErrorKind::UnexpectedCharacter, offset: 3 }));
}
