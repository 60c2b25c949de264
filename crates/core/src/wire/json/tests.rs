use super::*;

fn kind(input: &[u8]) -> ParseErrorKind {
    parse(input).unwrap_err().kind
}

#[test]
fn accepts_every_value_kind() {
    let v = parse(br#" {"a":[1,-2.5e+3,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{}} "#).unwrap();
    assert_eq!(
        v,
        Json::Object(vec![
            (
                "a".into(),
                Json::Array(vec![
                    Json::Number("1".into()),
                    Json::Number("-2.5e+3".into()),
                    Json::Bool(true),
                    Json::Bool(false),
                    Json::Null,
                    Json::String("x\u{e9}\u{1F600}\n".into()),
                ])
            ),
            ("b".into(), Json::Object(vec![])),
        ])
    );
}

#[test]
fn numbers_keep_their_exact_text() {
    assert_eq!(
        parse(b"123456789012345678901234567890").unwrap(),
        Json::Number("123456789012345678901234567890".into())
    );
    assert_eq!(parse(b"-0").unwrap(), Json::Number("-0".into()));
    assert_eq!(parse(b"1E5").unwrap(), Json::Number("1E5".into()));
}

#[test]
fn refuses_what_parsers_disagree_on() {
    assert_eq!(kind(b""), ParseErrorKind::Empty);
    assert_eq!(kind(b"  \n"), ParseErrorKind::Empty);
    assert_eq!(kind(b"\xEF\xBB\xBF{}"), ParseErrorKind::ByteOrderMark);
    assert_eq!(kind(b"{}{}"), ParseErrorKind::TrailingData);
    assert_eq!(kind(b"{} x"), ParseErrorKind::TrailingData);
    assert_eq!(kind(b"NaN"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"[Infinity]"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"+1"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"01"), ParseErrorKind::InvalidNumber);
    assert_eq!(kind(b"1."), ParseErrorKind::InvalidNumber);
    assert_eq!(kind(b".5"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"1e"), ParseErrorKind::InvalidNumber);
    assert_eq!(kind(br#""\ud800""#), ParseErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\udc00""#), ParseErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\ud800\u0041""#), ParseErrorKind::LoneSurrogate);
    assert_eq!(kind(br#""\x""#), ParseErrorKind::InvalidEscape);
    assert_eq!(kind(br#""\u12g4""#), ParseErrorKind::InvalidEscape);
    assert_eq!(kind(b"\"a\tb\""), ParseErrorKind::ControlCharacter);
    assert_eq!(kind(b"\"\xff\""), ParseErrorKind::InvalidUtf8);
    assert_eq!(kind(b"\"\xed\xa0\x80\""), ParseErrorKind::InvalidUtf8);
    assert_eq!(kind(br#"{"a":1,"a":2}"#), ParseErrorKind::DuplicateKey);
    assert_eq!(kind(br#"{"a":1,"\u0061":2}"#), ParseErrorKind::DuplicateKey);
    assert_eq!(kind(br#"[{"x":{"b":1,"c":2,"b":3}}]"#), ParseErrorKind::DuplicateKey);
    assert_eq!(kind(b"[1,]"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(br#"{"a":1,}"#), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"{'a':1}"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"[1"), ParseErrorKind::UnexpectedEnd);
    assert_eq!(kind(b"tru"), ParseErrorKind::UnexpectedEnd);
    assert_eq!(kind(b"trux"), ParseErrorKind::UnexpectedCharacter);
    assert_eq!(kind(b"\"abc"), ParseErrorKind::UnexpectedEnd);
}

#[test]
fn duplicate_keys_found_in_large_objects() {
    let mut body = String::from("{");
    for i in 0..1000 {
        body.push_str(&format!("\"k{i}\":{i},"));
    }
    body.push_str("\"k500\":0}");
    assert_eq!(kind(body.as_bytes()), ParseErrorKind::DuplicateKey);
    let ok = body.replace("\"k500\":0}", "\"k1000\":0}");
    assert!(matches!(parse(ok.as_bytes()), Ok(Json::Object(m)) if m.len() == 1001));
}

#[test]
fn the_repeated_name_behind_a_duplicate_key_error_is_found() {
    // Each text, the error it gives, and the two names the error is about: (repeat, earlier), as
    // byte offsets.
    let cases: [(&[u8], ParseErrorKind, (usize, usize)); 8] = [
        (br#"{"a":1,"a":2}"#, ParseErrorKind::DuplicateKey, (7, 1)),
        // After unescaping, as the check compares.
        (br#"{"a":1,"\u0061":2}"#, ParseErrorKind::DuplicateKey, (7, 1)),
        // The innermost object with a repeat is the one reported; nested values are skipped.
        (br#"[{"x":{"b":[1,{"b":2}],"c":"\"b\"","b":3}}]"#, ParseErrorKind::DuplicateKey, (35, 7)),
        // Whitespace and commas between members; the first repeat counts, not a later one.
        (b"{\n  \"p\": {},\n  \"q\" : \"p\",\n  \"p\": 1, \"q\": 2\n}", ParseErrorKind::DuplicateKey, (28, 4)),
        (br#"{"k":{"a":1},"k":{"a":1}}"#, ParseErrorKind::DuplicateKey, (13, 1)),
        // An exact repeat is the error even after a folded pair, and is the pair shown.
        (br#"{"A":1,"a":2,"b":3,"b":4}"#, ParseErrorKind::DuplicateKey, (19, 13)),
        // Folded clashes: case, and an invisible character.
        (br#"{"x":0,"Tool":1,"tool":2}"#, ParseErrorKind::FoldedDuplicateKey, (16, 7)),
        (br#"[{},{"ab":1,"a\u200bb":2}]"#, ParseErrorKind::FoldedDuplicateKey, (12, 5)),
    ];
    for (text, kind, want) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(e.kind, kind, "{}", String::from_utf8_lossy(text));
        assert_eq!(repeated_name(text, &e), Some(want), "{}", String::from_utf8_lossy(text));
    }
    // Any other error, or an offset that is not the start of an object with a repeat.
    let at = |kind, offset| ParseError { kind, offset };
    let dup = br#"{"a":1,"a":2}"#;
    assert_eq!(repeated_name(dup, &at(ParseErrorKind::UnexpectedCharacter, 0)), None);
    assert_eq!(repeated_name(br#"{"a":1,"b":2}"#, &at(ParseErrorKind::DuplicateKey, 0)), None);
    assert_eq!(repeated_name(br#"{"a":1,"A":2}"#, &at(ParseErrorKind::DuplicateKey, 0)), None);
    assert_eq!(repeated_name(dup, &at(ParseErrorKind::DuplicateKey, 1)), None);
    assert_eq!(repeated_name(dup, &at(ParseErrorKind::DuplicateKey, 99)), None);
    assert_eq!(repeated_name(b"\xff{}", &at(ParseErrorKind::DuplicateKey, 1)), None);
    // Thousands of names: found through the map.
    let mut many = String::from("{");
    for i in 0..20_000 {
        many.push_str(&format!("\"k{i}\":{i},"));
    }
    let repeat = many.len();
    many.push_str("\"k7\":0}");
    let e = parse(many.as_bytes()).unwrap_err();
    assert_eq!(repeated_name(many.as_bytes(), &e), Some((repeat, 1 + 7 * 7)));
}

#[test]
fn depth_limit_is_exact_and_deep_input_is_refused_cleanly() {
    let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse(at_limit.as_bytes()).is_ok());
    let over = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_eq!(kind(over.as_bytes()), ParseErrorKind::TooDeep);
    let huge = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(parse(huge.as_bytes()).unwrap_err(), ParseError { kind: ParseErrorKind::TooDeep, offset: 64 });
    let objects = "{\"a\":".repeat(100_000);
    assert_eq!(kind(objects.as_bytes()), ParseErrorKind::TooDeep);
}

#[test]
fn write_round_trips() {
    let text = r#"{"a":[1,-2.5E+3,true,false,null,"x\u00e9\n"],"b":{},"n":123456789012345678901234567890}"#;
    let v = parse(text.as_bytes()).unwrap();
    let mut out = String::new();
    write(&mut out, &v);
    assert_eq!(out, "{\"a\":[1,-2.5E+3,true,false,null,\"x\u{e9}\\n\"],\"b\":{},\"n\":123456789012345678901234567890}");
    assert_eq!(parse(out.as_bytes()).unwrap(), v);
}

#[test]
fn write_str_escapes_exactly_quote_backslash_and_control_characters() {
    let mut out = String::new();
    write_str(&mut out, "a\"b\\c\n\r\t\u{0}\u{8}\u{c}\u{1f}\u{7f}é😀\u{2028}z");
    assert_eq!(out, "\"a\\\"b\\\\c\\n\\r\\t\\u0000\\u0008\\u000c\\u001f\u{7f}é😀\u{2028}z\"");
    out.clear();
    write_str(&mut out, "\u{1}");
    assert_eq!(out, "\"\\u0001\"");
    out.clear();
    write_str(&mut out, "");
    assert_eq!(out, "\"\"");
}

#[test]
fn write_str_round_trips_through_the_parser() {
    for s in ["plain", "quote\" back\\ nl\n tab\t ctl\u{1}", "é😀"] {
        let mut out = String::new();
        write_str(&mut out, s);
        assert_eq!(parse(out.as_bytes()).unwrap(), Json::String(s.into()));
    }
}

/// Every byte that needs an escape, at every offset of texts up to 40 bytes (the 8-byte head, a
/// 16-byte chunk and the tail of `scan::string_stop`), written as a byte-at-a-time escaper writes it.
#[test]
fn write_str_escapes_at_every_offset() {
    let reference = |s: &str| {
        let mut o = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => o.push_str("\\\""),
                '\\' => o.push_str("\\\\"),
                '\n' => o.push_str("\\n"),
                '\r' => o.push_str("\\r"),
                '\t' => o.push_str("\\t"),
                c if u32::from(c) < 0x20 => o.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => o.push(c),
            }
        }
        o.push('"');
        o
    };
    for special in ['"', '\\', '\n', '\r', '\t', '\u{0}', '\u{1f}', 'é'] {
        for len in 0..40 {
            for at in 0..len {
                let s: String = (0..len).map(|i| if i == at || i == len - 1 { special } else { 'a' }).collect();
                let mut out = String::new();
                write_str(&mut out, &s);
                assert_eq!(out, reference(&s), "{s:?}");
            }
        }
    }
}

#[test]
fn sorted_writing_orders_members_by_code_point_at_every_depth() {
    // Pins and approval keys hash this form: the order is the names' bytes, empty and NUL-bearing
    // names included, and nothing else about the text changes.
    let v = parse_folded_keys_allowed(
        r#"{"b":1,"":2,"a\u0000":3,"a":{"z":[{"y":1,"x":2}],"Z":0},"é":5,"Z":6,"ab":7,"a\u0000\u0000":8}"#.as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    write_sorted(&mut out, &v);
    assert_eq!(out, r#"{"":2,"Z":6,"a":{"Z":0,"z":[{"x":2,"y":1}]},"a\u0000":3,"a\u0000\u0000":8,"ab":7,"b":1,"é":5}"#);
    let mut plain = String::new();
    write(&mut plain, &v);
    assert_eq!(
        plain,
        r#"{"b":1,"":2,"a\u0000":3,"a":{"z":[{"y":1,"x":2}],"Z":0},"é":5,"Z":6,"ab":7,"a\u0000\u0000":8}"#
    );
}
