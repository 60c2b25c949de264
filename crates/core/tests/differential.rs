//! Property test: whenever the filter lets a body through, two other JSON readers (serde_json's
//! `Value` and Python's `json` module, which MCP servers built on the Python SDK use) read the same
//! method and tool name from it as the filter did. Generated bodies include duplicate keys, `\u`
//! escapes (also surrogate pairs), reordered members, whitespace and batches.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, HeadOutcome, RequestHead};
use mcp_policy_core::wire::mcp::{self, Body, Call, Message};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use std::io::Write;
use std::process::{Command, Stdio};

const METHODS: &[&str] =
    &["tools/call", "tools/list", "ping", "initialize", "notifications/initialized", "resources/read"];
const NAMES: &[&str] = &["list_vms", "delete_vm", "a\"b\\c", "é", "😀x", "LIST_VMS", ""];

/// A JSON string literal for `s`, escaping each char as `\uXXXX` where the mask says so.
fn lit(s: &str, mask: u64) -> String {
    let mut out = String::from("\"");
    for (i, ch) in s.chars().enumerate() {
        let escape = mask & (1 << (i % 64)) != 0;
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if escape => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[derive(Debug, Clone)]
struct Msg {
    jsonrpc_ok: bool,
    id: Option<u8>,
    method: usize,
    name: Option<usize>,
    dup_method: Option<usize>,
    dup_name: Option<usize>,
    swap: bool,
    mask: u64,
    ws: bool,
}

fn msg() -> impl Strategy<Value = Msg> {
    (
        prop::bool::weighted(0.95),
        prop::option::weighted(0.9, 0u8..4),
        0..METHODS.len(),
        prop::option::weighted(0.9, 0..NAMES.len()),
        prop::option::weighted(0.15, 0..METHODS.len()),
        prop::option::weighted(0.15, 0..NAMES.len()),
        any::<bool>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(|(jsonrpc_ok, id, method, name, dup_method, dup_name, swap, mask, ws)| Msg {
            jsonrpc_ok,
            id,
            method,
            name,
            dup_method,
            dup_name,
            swap,
            mask,
            ws,
        })
}

fn render(m: &Msg) -> String {
    let sep = if m.ws { " , " } else { "," };
    let mut members = vec![format!("\"jsonrpc\":{}", if m.jsonrpc_ok { "\"2.0\"" } else { "\"1.0\"" })];
    match m.id {
        Some(0) => members.push("\"id\":123456789012345678901234567890".into()),
        Some(1) => members.push(format!("\"id\":{}", lit("req-é", m.mask))),
        Some(n) => members.push(format!("\"id\":{n}")),
        None => {}
    }
    members.push(format!("\"method\":{}", lit(METHODS[m.method], m.mask)));
    if let Some(d) = m.dup_method {
        members.push(format!("{}:{}", lit("method", m.mask >> 7), lit(METHODS[d], m.mask >> 3)));
    }
    let mut params = Vec::new();
    if let Some(n) = m.name {
        params.push(format!("\"name\":{}", lit(NAMES[n], m.mask >> 11)));
    }
    if let Some(d) = m.dup_name {
        params.push(format!("{}:{}", lit("name", m.mask >> 5), lit(NAMES[d], m.mask >> 17)));
    }
    params.push("\"arguments\":{}".into());
    if m.swap {
        params.reverse();
    }
    members.push(format!("\"params\":{{{}}}", params.join(sep)));
    if m.swap {
        members.rotate_left(1);
    }
    format!("{{{}}}", members.join(sep))
}

fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => msg().prop_map(|m| render(&m)),
        1 => prop::collection::vec(msg(), 1..4).prop_map(|ms| format!("[{}]", ms.iter().map(render).collect::<Vec<_>>().join(","))),
    ]
}

/// (method, tool name) of each message of a body.
type View = Vec<(String, Option<String>)>;

/// (method, tool name) per message, as the filter read them.
fn filter_view(bytes: &[u8]) -> View {
    let one = |m: &Message| match m {
        Message::Request { call: Call::Tool(t), .. } => ("tools/call".to_owned(), Some(t.name.clone())),
        Message::Request { call: Call::Method { method, .. }, .. } => (method.name().to_owned(), None),
        Message::Notification { method } => (method.name().to_owned(), None),
        Message::Response { .. } => ("<response>".to_owned(), None),
    };
    match mcp::read_body(bytes).expect("a forwarded body parses") {
        Body::Single(m) => vec![one(&m)],
        Body::Batch(items) => items.iter().map(|i| one(i.as_ref().expect("forwarded elements are valid"))).collect(),
    }
}

fn serde_view(bytes: &[u8]) -> View {
    let v: serde_json::Value = serde_json::from_slice(bytes).expect("serde_json reads a forwarded body");
    let one = |m: &serde_json::Value| {
        let method = m["method"].as_str().expect("method").to_owned();
        let name = (method == "tools/call").then(|| m["params"]["name"].as_str().expect("name").to_owned());
        (method, name)
    };
    match &v {
        serde_json::Value::Array(items) => items.iter().map(one).collect(),
        m => vec![one(m)],
    }
}

#[test]
fn forwarded_bodies_read_the_same_in_serde_json_and_python() {
    let policy = config::load(
        br#"{"version":"1","default":"allow","hide":["delete_vm"],"gateway":{"methods":{"resources/read":"allow"}}}"#,
    )
    .unwrap();
    let head = RequestHead::from_headers(
        &policy,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", b"Bearer t")],
    );
    assert_eq!(pipeline::on_headers(&policy, &head), HeadOutcome::NeedBody);
    let mut runner = TestRunner::new(Config { cases: 3000, ..Config::default() });
    let mut forwarded: Vec<(String, View)> = Vec::new();
    let mut refused = 0usize;
    for _ in 0..3000 {
        let tree = body().new_tree(&mut runner).unwrap();
        let text = tree.current();
        let store = MemoryStore::new();
        let out = pipeline::on_body(&policy, &head, text.as_bytes(), &store, 1_700_000_000_000);
        if out.reply.is_some() {
            refused += 1;
            continue;
        }
        let mine = filter_view(text.as_bytes());
        assert_eq!(mine, serde_view(text.as_bytes()), "serde_json disagrees on {text}");
        assert!(mine.iter().all(|(_, n)| n.as_deref() != Some("delete_vm")), "hidden tool forwarded: {text}");
        forwarded.push((text, mine));
    }
    // Both outcomes must be well represented, or the generator is not testing anything.
    assert!(forwarded.len() > 300, "only {} forwarded", forwarded.len());
    assert!(refused > 300, "only {refused} refused");

    let script = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(json.loads(line))
    items = msg if isinstance(msg, list) else [msg]
    out = []
    for m in items:
        name = m["params"]["name"] if m["method"] == "tools/call" else None
        out.append([m["method"], name])
    print(json.dumps(out))
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    {
        let mut stdin = child.stdin.take().unwrap();
        for (text, _) in &forwarded {
            writeln!(stdin, "{}", serde_json::to_string(text).unwrap()).unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let lines: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().lines().collect();
    assert_eq!(lines.len(), forwarded.len());
    for ((text, mine), line) in forwarded.iter().zip(lines) {
        let py: View = serde_json::from_str(line).unwrap();
        assert_eq!(&py, mine, "Python's json disagrees on {text}");
    }
}

/// The fast path that checks without building (`skip_value`) must accept and refuse exactly what
/// the building parser does, with the same error, on arbitrary JSON-ish input; and whatever the
/// strict parser accepts, serde_json accepts too.
#[test]
fn skip_and_build_agree_and_serde_json_accepts_what_we_accept() {
    use mcp_policy_core::wire::json::{parse, Parser};
    let validate = |b: &[u8]| -> Result<(), mcp_policy_core::wire::json::ParseError> {
        let mut p = Parser::new(b)?;
        p.skip_value()?;
        p.finish()
    };
    let alphabet = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        " ",
        "\"a\"",
        "\"a\"",
        "\"b\"",
        "\"\\u0061\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"\\n\"",
        "\"\u{1}\"",
        "1",
        "-0",
        "01",
        "1.5e3",
        "1.",
        "true",
        "nul",
        "null",
        "\u{feff}",
        "é",
    ]);
    let mut runner = TestRunner::new(Config { cases: 20_000, ..Config::default() });
    let (mut ok, mut bad) = (0, 0);
    for _ in 0..20_000 {
        let tokens = prop::collection::vec(alphabet.clone(), 1..14).new_tree(&mut runner).unwrap().current();
        let text = tokens.concat();
        let built = parse(text.as_bytes());
        assert_eq!(validate(text.as_bytes()), built.as_ref().map(|_| ()).map_err(|e| *e), "{text:?}");
        if built.is_ok() {
            ok += 1;
            // serde_json alone refuses numbers beyond f64 (`1e400`); the filter keeps their exact text.
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                assert!(e.to_string().contains("number out of range"), "serde_json refuses {text:?}: {e}");
            }
        } else {
            bad += 1;
        }
    }
    assert!(ok > 500 && bad > 500, "ok {ok}, bad {bad}");
}
