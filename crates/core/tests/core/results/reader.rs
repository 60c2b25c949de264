//! The result reader: the texts a model sees, decoded; matches across texts; literal prefixes.

use mcp_policy_core::policy::needle::{literal_prefix, Needle};
use mcp_policy_core::response::result::reader;
use mcp_policy_core::wire::json;

fn needle(re: &str) -> Needle {
    Needle::new(regex_lite::Regex::new(re).unwrap())
}

#[test]
fn every_string_value_of_the_result_is_read_decoded() {
    let msg = json::parse(
        br#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\u002db"},{"type":"resource","resource":{"uri":"u","text":"r"}}],"structuredContent":{"k":["s",1,{"deep":"d"}]},"isError":false}}"#,
    )
    .unwrap();
    let texts = reader::texts(reader::payload(&msg).unwrap());
    assert_eq!(texts.all, ["text", "a-b", "resource", "u", "r", "s", "d"]);
    assert!(reader::matches(&texts, &needle("a-b")));
    assert!(!reader::matches(&texts, &needle("a-br")), "a resource's text is not joined");
    assert!(!reader::matches(&texts, &needle("rs")), "other values are not joined");
    assert_eq!(reader::first_match(&texts, [&needle("zz"), &needle("deep|d$")]), Some(1));
    let err = json::parse(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}"#).unwrap();
    assert_eq!(reader::texts(reader::payload(&err).unwrap()).all, ["m"]);
    // The `text` of the `content` items of type `text` are read joined, by nothing and by a line
    // break; a `text` anywhere else is not, even between them.
    let msg = json::parse(
        br#"{"result":{"content":[{"type":"text","text":"AK"},{"type":"image","data":"","text":"-"},
            {"type":"text","_meta":{"text":"-"},"text":"IA"},{"type":"resource","resource":{"text":"-"}},
            {"type":"text","text":"1"}],"structuredContent":{"text":"-"}}}"#,
    )
    .unwrap();
    let texts = reader::texts(reader::payload(&msg).unwrap());
    assert!(reader::matches(&texts, &needle("AKIA1")) && reader::matches(&texts, &needle("AK\nIA\n1")));
    assert!(!reader::matches(&texts, &needle("K-I|A-1|-I|A-")), "{:?}", texts.all);
}

#[test]
fn redaction_replaces_literally_and_counts() {
    let mut s = String::from("AKIAABCDEFGHIJKLMNOP, AKIAABCDEFGHIJKLMNOQ; AKIA");
    assert_eq!(reader::redact(&mut s, &needle("AKIA[0-9A-Z]{16}"), "$0", &["$0"], usize::MAX), Some(2));
    assert_eq!(s, "$0, $0; AKIA");
    // No longer than `max_len`: a redaction that would be is not made.
    let mut s = String::from("k1 k2");
    assert_eq!(reader::redact(&mut s, &needle("k[0-9]"), "[gone]", &[], 12), None);
    assert_eq!(s, "k1 k2");
    assert_eq!(reader::redact(&mut s, &needle("k[0-9]"), "[gone]", &[], 13), Some(2));
    assert_eq!(s, "[gone] [gone]");
    // A match within text a replacement already holds is left; one reaching past it is not.
    let n = needle("k[0-9]+");
    let withs = ["[k1 gone]", "é k2"];
    assert_eq!(reader::to_redact("[k1 gone] k12 é k2 k3", &n, &withs), [(10, 13), (20, 22)]);
    assert_eq!(reader::to_redact("[k12 gone] [k1 gon", &n, &withs), [(1, 4), (12, 14)]);
    assert_eq!(reader::to_redact("k1 gone]", &n, &withs), [(0, 2)]);
    assert_eq!(reader::to_redact("é k2", &n, &withs), []);
    assert_eq!(reader::to_redact("k2", &n, &withs), [(0, 2)]);
    assert_eq!(reader::to_redact("k1", &n, &["", "k"]), [(0, 2)]);
}

#[test]
fn literal_prefixes_are_only_taken_when_sure() {
    assert_eq!(literal_prefix("-----BEGIN [A-Z ]*PRIVATE KEY-----").as_deref(), Some("-----BEGIN "));
    assert_eq!(literal_prefix("AKIA[0-9A-Z]{16}").as_deref(), Some("AKIA"));
    assert_eq!(literal_prefix("abc?d").as_deref(), Some("ab"));
    assert_eq!(literal_prefix("ab{2}").as_deref(), Some("a"));
    // `+` may carry a second quantifier (`b+*`, `b+{0}`): the `b` is not sure either.
    assert_eq!(literal_prefix("ab+").as_deref(), Some("a"));
    assert_eq!(literal_prefix("rm +*-rf").as_deref(), Some("rm"));
    for none in ["a|b", "(?i)akia", "[a]b", "\\d", "x*", ".abc", "^abc"] {
        assert_eq!(literal_prefix(none), None, "{none}");
    }
    // An anchored run at every occurrence of the literal would read to the end of the line each
    // time: `rm .*-rf` over 64 KiB of `rm ` took 70 s that way. Past two misses, one unanchored run.
    let text = "rm ".repeat(1 << 14);
    let slow = needle("rm .*-rf");
    assert!(!slow.is_match(&text) && slow.matches(&text).is_empty());
    let last = format!("{text}-rf");
    assert!(slow.is_match(&last));
    assert_eq!(slow.matches(&last), [(0, last.len())]);
    // The prefilter never changes the answer.
    for (re, text) in [("ab?c", "ac"), ("AKIA[0-9]{2}", "xAKIA12"), ("a{0}b", "b")] {
        assert_eq!(needle(re).is_match(text), regex_lite::Regex::new(re).unwrap().is_match(text), "{re}");
    }
}

proptest::proptest! {
    /// The literal-anchored search finds exactly what `regex-lite` finds on its own.
    #[test]
    fn the_anchored_search_agrees_with_the_regex(text in "(AK|AKIA|AAKIA|[A-Z0-9]{1,8}|-----BEGIN |[ a-z]{1,4}|é|\n){0,40}") {
        // Up to 40 pieces: past two anchored misses the rest is searched unanchored.
        for re in [
            "AKIA[0-9A-Z]{4}", "AKIA[0-9A-Z]{16}", "-----BEGIN [A-Z ]*KEY", "AA?KIA", "AK+I", "AK+*I", "AK+{0}I", "AK+??I",
            "AK.*IA", "AK.*?I\\b",
        ] {
            let n = needle(re);
            let plain = regex_lite::Regex::new(re).unwrap();
            let want: Vec<(usize, usize)> = plain.find_iter(&text).map(|m| (m.start(), m.end())).collect();
            proptest::prop_assert_eq!(n.matches(&text), want, "{}", re);
            proptest::prop_assert_eq!(n.is_match(&text), plain.is_match(&text), "{}", re);
        }
    }
}
