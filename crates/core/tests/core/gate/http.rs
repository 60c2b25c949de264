//! HTTP and JSON-RPC framing: methods, media types, body size, the MCP headers, protocol errors.

use super::{call, done, head, policy, post, reply, T0};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, HeadOutcome, RequestHead};
use serde_json::{json, Value};

#[test]
fn http_methods() {
    let p = policy("");
    let o = done(pipeline::on_headers(&p, &head(&p, &[(":method", b"PUT"), ("authorization", b"Bearer a")])));
    let (status, body, headers) = reply(&o);
    assert_eq!(status, 405);
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(body["error"]["data"]["kind"], "method_not_allowed");
    assert_eq!(headers, vec![("allow", "GET, POST, DELETE".to_owned())]);
    for m in [&b"GET"[..], b"DELETE"] {
        let o = done(pipeline::on_headers(&p, &head(&p, &[(":method", m), ("authorization", b"Bearer a")])));
        assert_eq!((o.reply, o.decision.kind), (None, DecisionKind::Passed));
        let o = done(pipeline::on_headers(&p, &head(&p, &[(":method", m)])));
        assert_eq!(reply(&o).0, 401);
    }
}

#[test]
fn media_types_and_encodings() {
    let p = policy("");
    let with = |ct: Option<&[u8]>, ce: Option<&[u8]>| {
        let mut h: Vec<(&str, &[u8])> = vec![(":method", b"POST"), ("authorization", b"Bearer a")];
        if let Some(ct) = ct {
            h.push(("content-type", ct));
        }
        if let Some(ce) = ce {
            h.push(("content-encoding", ce));
        }
        pipeline::on_headers(&p, &head(&p, &h))
    };
    for ct in [&b"Application/JSON"[..], b"application/json; charset=utf-8", b" application/json ;x=y"] {
        assert_eq!(with(Some(ct), None), HeadOutcome::NeedBody, "{}", String::from_utf8_lossy(ct));
    }
    assert_eq!(with(Some(b"application/json"), Some(b"IDENTITY")), HeadOutcome::NeedBody);
    for (ct, ce) in [
        (None, None),
        (Some(&b"text/plain"[..]), None),
        (Some(b"text/plain; a=application/json"), None),
        (Some(b"application/jsonx"), None),
        (Some(b"application/json-seq"), None),
        (Some(b"application/json"), Some(&b"gzip"[..])),
        (Some(b"application/json"), Some(b"identity, gzip")),
        (Some(b"application/json"), Some(b"")),
    ] {
        let o = done(with(ct, ce));
        let (status, body, _) = reply(&o);
        assert_eq!((status, body["error"]["data"]["kind"].as_str()), (415, Some("unsupported_media_type")));
    }
    // Two Content-Type headers: the server might read the other one.
    let o = done(pipeline::on_headers(
        &p,
        &head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("content-type", b"text/plain")]),
    ));
    assert_eq!(reply(&o).0, 415);
}

#[test]
fn protocol_errors() {
    let p = policy("");
    let s = MemoryStore::new();
    let check = |body: &[u8], status: u16, code: i64, id: Value| {
        let (st, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), body, &s, T0));
        assert_eq!(
            (st, b["error"]["code"].as_i64(), b["id"].clone()),
            (status, Some(code), id),
            "{}",
            String::from_utf8_lossy(body)
        );
    };
    check(b"", 400, -32700, Value::Null);
    check(b"\xEF\xBB\xBF{}", 400, -32700, Value::Null);
    check(br#"{"jsonrpc":"2.0","id":1,"method":"ping"} {}"#, 400, -32700, Value::Null);
    check(b"[NaN]", 400, -32700, Value::Null);
    check(br#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"\ud800"}"#, 400, -32700, Value::Null);
    check(b"\x7b\xff\x7d", 400, -32700, Value::Null);
    check(b"[]", 400, -32600, Value::Null);
    check(br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#, 400, -32600, Value::Null);
    check(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":1}}"#, 400, -32602, json!(1));
    let big = format!("{{\"a\":{}1{}}}", "[".repeat(100_000), "]".repeat(100_000));
    check(big.as_bytes(), 400, -32700, Value::Null);
}

#[test]
fn mcp_header_mismatch_is_minus_32020() {
    let p = policy("");
    let s = MemoryStore::new();
    let with = |extra: &[(&str, &[u8])]| {
        let mut h: Vec<(&str, &[u8])> =
            vec![(":method", b"POST"), ("content-type", b"application/json"), ("authorization", b"Bearer a")];
        h.extend_from_slice(extra);
        RequestHead::from_headers(&p, h)
    };
    let body = call(4, "list_vms");
    assert_eq!(
        pipeline::on_body(
            &p,
            &with(&[("mcp-method", b"tools/call"), ("mcp-name", b"list_vms")]),
            body.as_bytes(),
            &s,
            T0
        )
        .reply,
        None
    );
    for extra in [
        &[("mcp-method", &b"tools/list"[..])][..],
        &[("mcp-name", b"delete_vm")],
        &[("mcp-name", b"LIST_VMS")],
        &[("mcp-name", b"list_vms"), ("mcp-name", b"list_vms")],
        &[("mcp-name", b"\xff")],
    ] {
        let (status, b, _) = reply(&pipeline::on_body(&p, &with(extra), body.as_bytes(), &s, T0));
        assert_eq!((status, b["error"]["code"].as_i64(), b["id"].as_i64()), (400, Some(-32020), Some(4)));
    }
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(reply(&pipeline::on_body(&p, &with(&[("mcp-name", b"x")]), ping.as_bytes(), &s, T0)).0, 400);
}

#[test]
fn a_body_declared_over_the_limit_is_refused_from_the_headers() {
    let p = policy(r#","max_body_bytes":100"#);
    let with = |ct: &[u8], lengths: &[&[u8]]| {
        let mut h: Vec<(&str, &[u8])> =
            vec![(":method", b"POST"), ("authorization", b"Bearer a"), ("content-type", ct)];
        h.extend(lengths.iter().map(|l| ("content-length", *l)));
        pipeline::on_headers(&p, &head(&p, &h))
    };
    // Over the limit, however far past a machine word: the body's own 413, before its bytes.
    for length in [&b"101"[..], b"18446744073709551616", b"99999999999999999999999999"] {
        let (status, b, _) = reply(&done(with(b"application/json", &[length])));
        assert_eq!((status, b["id"].clone()), (413, Value::Null), "{}", String::from_utf8_lossy(length));
        assert_eq!(b["error"]["data"], json!({"kind": "body_too_large", "reason": "request body exceeds 100 bytes"}));
    }
    // At the limit, or not a number (Envoy refuses those itself): the body decides.
    for length in [&b"100"[..], b"0", b"", b"1e9", b"-1", b" 101"] {
        assert_eq!(with(b"application/json", &[length]), HeadOutcome::NeedBody, "{}", String::from_utf8_lossy(length));
    }
    // Two lengths (a client's and a proxy's): the larger one counts, whichever comes first.
    for lengths in [[&b"50"[..], b"101"], [b"101", b"50"]] {
        assert_eq!(reply(&done(with(b"application/json", &lengths))).0, 413);
    }
    // The header refusals come first, as they do for a body over the limit.
    assert_eq!(reply(&done(with(b"text/plain", &[b"101"]))).0, 415);
}

#[test]
fn oversized_bodies_are_refused_before_parsing() {
    let p = policy(r#","max_body_bytes":100"#);
    let s = MemoryStore::new();
    let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"pad\":\"{}\"}}", "x".repeat(100));
    let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0));
    assert_eq!((status, b["error"]["data"]["kind"].as_str()), (413, Some("body_too_large")));
    assert_eq!(b["error"]["data"]["reason"], "request body exceeds 100 bytes");
}
