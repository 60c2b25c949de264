//! Property: a private key in a tool result never reaches the client, however the result is
//! escaped, framed (JSON, SSE with its data over several lines) and cut into chunks.

use proptest::prelude::*;

use super::filter::{read_file_policy, run, KEY};
use mcp_policy_core::outcome::decision::Decision;

/// `text` as a JSON string literal, each character escaped as `\uXXXX` where `escape` says so.
fn literal(text: &str, escape: &[bool]) -> String {
    let mut out = String::from("\"");
    for (i, c) in text.chars().enumerate() {
        if escape.get(i % escape.len().max(1)).copied().unwrap_or(false) && (c as u32) < 0x10000 {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    }
    out.push('"');
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_key_never_reaches_the_client(
        before in "[ -~]{0,40}",
        after in "[ -~\n]{0,40}",
        escape in proptest::collection::vec(any::<bool>(), 1..8),
        sse in any::<bool>(),
        lines in 1usize..4,
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
    ) {
        let p = read_file_policy("");
        let d = Decision::allowed_call("read_file", "7");
        let text = literal(&format!("{before}{KEY}{after}"), &escape);
        let msg = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":{text}}}]}}}}"#);
        let body = if sse {
            // Split the JSON text between members, over `lines` data: lines.
            let parts: Vec<&str> = msg.splitn(lines, ',').collect();
            let mut s = String::from("event: message\n");
            for (i, part) in parts.iter().enumerate() {
                let comma = if i + 1 < parts.len() { "," } else { "" };
                s.push_str(&format!("data: {part}{comma}\n"));
            }
            s.push('\n');
            s
        } else {
            msg
        };
        let b = body.as_bytes();
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(b.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks: Vec<&[u8]> = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&b[last..p]);
            last = p;
        }
        chunks.push(&b[last..]);
        let (out, events) = run(&p, &d, if sse { "text/event-stream" } else { "application/json" }, &chunks);
        let out = String::from_utf8(out).unwrap();
        prop_assert!(!out.contains("PRIVATE KEY"), "{}", out);
        prop_assert!(out.contains(r#""kind":"result_refused""#), "{}", out);
        prop_assert_eq!(events.len(), 1);
    }
}
