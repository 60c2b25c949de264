//! MCP protocol versions through the request pipeline: every method of every version, unknown
//! versions, header/`_meta` mismatches, 2026-07-28 headers and SEP-2243 names; the book's protocol
//! section equals the rendering of the method table; SSE events that are not JSON-RPC.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::toolslist;
use mcp_policy_core::wire::protocol::{self, Handling, Kind, Version, METHODS};
use proptest::prelude::*;
use serde_json::{json, Value};

const T0: u64 = 1_700_000_040_000;

fn policy(gateway: &str) -> Policy {
    let text = format!(r#"{{"version":"1","default":"allow","hide":["delete_vm"],"gateway":{{{gateway}}}}}"#);
    config::load(text.as_bytes()).unwrap()
}

fn decide(p: &Policy, headers: &[(&str, &str)], body: &str) -> Outcome {
    let mut all: Vec<(&str, &[u8])> =
        vec![(":method", b"POST"), ("content-type", b"application/json"), ("authorization", b"Bearer agent")];
    all.extend(headers.iter().map(|(k, v)| (*k, v.as_bytes())));
    let head = RequestHead::from_headers(p, all);
    pipeline::on_body(p, &head, body.as_bytes(), &MemoryStore::default(), T0)
}

/// (status, JSON-RPC error code, data.kind) of a refusal.
fn refusal(o: &Outcome) -> (u16, i64, String) {
    let r = o.reply.as_ref().unwrap_or_else(|| panic!("expected a refusal, got {:?}", o.decision));
    let v: Value = serde_json::from_str(&r.body).unwrap();
    (r.status, v["error"]["code"].as_i64().unwrap(), v["error"]["data"]["kind"].as_str().unwrap().to_owned())
}

/// A message for `row` as a client of `version` sends it, with its headers.
fn message(version: Version, name: &str, kind: Kind, name_param: Option<&str>) -> (Vec<(String, String)>, String) {
    let mut params = serde_json::Map::new();
    if let Some(p) = name_param {
        params.insert(p.into(), json!(if p == "uri" { "file:///x" } else { "list_vms" }));
    }
    if name == "subscriptions/listen" {
        params.insert("notifications".into(), json!({}));
    }
    let mut headers = vec![("mcp-protocol-version".to_owned(), version.as_str().to_owned())];
    if version.rules().meta_version {
        params.insert(
            "_meta".into(),
            json!({protocol::META_VERSION_KEY: version.as_str(), "io.modelcontextprotocol/clientCapabilities": {}}),
        );
        headers.push(("mcp-method".into(), name.into()));
        if name_param.is_some() {
            let n = if name_param == Some("uri") { "file:///x" } else { "list_vms" };
            headers.push(("mcp-name".into(), n.into()));
        }
    }
    let body = match kind {
        Kind::Request => json!({"jsonrpc":"2.0","id":1,"method":name,"params":params}),
        Kind::Notification => json!({"jsonrpc":"2.0","method":name,"params":params}),
    };
    (headers, body.to_string())
}

fn decide_owned(p: &Policy, headers: &[(String, String)], body: &str) -> Outcome {
    let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    decide(p, &h, body)
}

#[test]
fn every_method_of_every_version() {
    let p = policy("");
    let mut checked = 0;
    for version in Version::ALL {
        for row in METHODS {
            let (headers, body) = message(version, row.name, row.kind, row.name_param);
            let o = decide_owned(&p, &headers, &body);
            if row.versions.contains(version) {
                let expected = match row.handling {
                    Handling::Pass | Handling::Stream => DecisionKind::Passed,
                    Handling::Tool | Handling::Method => DecisionKind::Allowed,
                };
                assert_eq!(
                    (o.reply.is_none(), o.decision.kind),
                    (true, expected),
                    "{} in {}",
                    row.name,
                    version.as_str()
                );
            } else {
                let id = if row.kind == Kind::Request { 1 } else { 0 };
                // MCP 2026-07-28 answers a method it does not define with 404; earlier versions
                // with the JSON-RPC error in an ordinary reply.
                let status = if version == Version::V2026_07_28 { 404 } else { 200 };
                let expected = (status, -32601, "method_not_found".into());
                assert_eq!(refusal(&o), expected, "{} in {}", row.name, version.as_str());
                assert_eq!(o.decision.rule.as_deref(), Some("protocol_version"));
                assert_eq!(o.decision.kind, DecisionKind::Denied);
                let v: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
                assert_eq!(v["id"], if id == 1 { json!(1) } else { Value::Null });
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 4 * METHODS.len());
    // gateway.methods lifts a method that a version does not define, by name.
    let lifted = policy(r#""methods":{"tasks/get":"allow"}"#);
    let (headers, body) = message(Version::V2026_07_28, "tasks/get", Kind::Request, None);
    assert_eq!(decide_owned(&lifted, &headers, &body).decision.kind, DecisionKind::Allowed);
}

#[test]
fn methods_mcp_does_not_define_get_method_not_found_unless_gateway_methods_names_them() {
    let open = policy("");
    for version in Version::ALL {
        let (headers, body) = message(version, "x/custom", Kind::Request, None);
        let o = decide_owned(&open, &headers, &body);
        let status = if version == Version::V2026_07_28 { 404 } else { 200 };
        assert_eq!(refusal(&o), (status, -32601, "method_not_found".into()), "{}", version.as_str());
        assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (DecisionKind::Denied, Some("unknown_method")));
        let v: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
        assert_eq!(v["id"], 1);
        assert_eq!(v["error"]["message"], "Method not found: method x/custom is not an MCP method this gateway knows");
    }
    // A policy decision: dry-run forwards it, logged as one it would deny.
    let (headers, body) = message(Version::V2026_07_28, "ping", Kind::Request, None);
    let shadow = decide_owned(&policy(r#""mode":"dry_run""#), &headers, &body);
    assert_eq!(
        (shadow.reply.is_none(), shadow.decision.kind, shadow.decision.dry_run),
        (true, DecisionKind::Denied, true)
    );
    // Named in gateway.methods: the policy decides, with its own rule.
    let (headers, body) = message(Version::V2026_07_28, "x/custom", Kind::Request, None);
    let allowed = decide_owned(&policy(r#""methods":{"x/custom":"allow"}"#), &headers, &body);
    assert_eq!((allowed.reply.is_none(), allowed.decision.kind), (true, DecisionKind::Allowed));
    let denied = decide_owned(&policy(r#""methods":{"x/custom":"deny"}"#), &headers, &body);
    assert_eq!(refusal(&denied), (200, -31001, "denied".into()));
    assert_eq!(denied.decision.rule.as_deref(), Some("gateway.methods.x/custom"));
    // Lifecycle methods outside their version cannot be named (gateway.methods refuses them).
    for name in ["initialize", "ping", "server/discover"] {
        let text = format!(r#"{{"version":"1","gateway":{{"methods":{{"{name}":"allow"}}}}}}"#);
        assert!(config::load(text.as_bytes()).is_err(), "{name}");
    }
}

#[test]
fn versions_outside_gateway_protocol_versions_get_minus_32022() {
    let p = policy(r#""protocol_versions":["2025-11-25","2026-07-28"]"#);
    let ping = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;
    let o = decide(&p, &[("mcp-protocol-version", "2025-06-18")], ping);
    assert_eq!(refusal(&o), (400, -32022, "unsupported_protocol_version".into()));
    let v: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
    assert_eq!(v["id"], "p");
    assert_eq!(v["error"]["data"]["supported"], json!(["2025-11-25", "2026-07-28"]));
    assert_eq!(v["error"]["data"]["requested"], "2025-06-18");
    // No header reads as 2025-03-26, which is not accepted here — except initialize, which negotiates.
    assert_eq!(refusal(&decide(&p, &[], ping)).1, -32022);
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
    assert!(decide(&p, &[], init).reply.is_none());
    assert!(decide(&p, &[("mcp-protocol-version", "2025-11-25")], ping).reply.is_none());
    for bad in [
        r#""protocol_versions":[]"#,
        r#""protocol_versions":["2024-11-05"]"#,
        r#""protocol_versions":["2025-11-25","2025-11-25"]"#,
    ] {
        let text = format!(r#"{{"version":"1","gateway":{{{bad}}}}}"#);
        assert!(config::load(text.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn the_2026_envelope_and_headers() {
    let p = policy("");
    let meta = |v: &str| json!({protocol::META_VERSION_KEY: v, "io.modelcontextprotocol/clientCapabilities": {}});
    let call = |v: &str| {
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_vms","_meta":meta(v)}}).to_string()
    };
    let h26 = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "list_vms")];
    assert_eq!(decide(&p, &h26, &call("2026-07-28")).decision.kind, DecisionKind::Allowed);
    // The header and params._meta disagree, or the header is missing: 400 −32020.
    assert_eq!(refusal(&decide(&p, &h26, &call("2025-11-25"))), (400, -32020, "header_mismatch".into()));
    assert_eq!(refusal(&decide(&p, &h26[1..], &call("2026-07-28"))), (400, -32020, "header_mismatch".into()));
    // A 2026-07-28 header without params._meta: 400 −32602.
    let bare = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_vms"}}"#;
    assert_eq!(refusal(&decide(&p, &h26, bare)), (400, -32602, "invalid_params".into()));
    // Mcp-Method and Mcp-Name are required; wrong ones are mismatches.
    for headers in [&h26[..2], &[h26[0], h26[2]][..]] {
        assert_eq!(refusal(&decide(&p, headers, &call("2026-07-28"))), (400, -32020, "header_mismatch".into()));
    }
    let wrong = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "delete_vm")];
    assert_eq!(refusal(&decide(&p, &wrong, &call("2026-07-28"))).1, -32020);
    // SEP-2243: a base64 Mcp-Name is decoded; a malformed one never matches.
    let b64 =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?bGlzdF92bXM=?=")];
    assert_eq!(decide(&p, &b64, &call("2026-07-28")).decision.kind, DecisionKind::Allowed);
    let b64_hidden =
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_vm","_meta":meta("2026-07-28")}})
            .to_string();
    let b64h =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?ZGVsZXRlX3Zt?=")];
    assert_eq!(refusal(&decide(&p, &b64h, &b64_hidden)), (200, -31001, "denied".into()));
    let bad =
        [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "=?base64?bGlzdF92bXM?=")];
    assert_eq!(refusal(&decide(&p, &bad, &call("2026-07-28"))).1, -32020);
    // No sessions and no client responses in 2026-07-28; no batches since 2025-06-18.
    let mut with_session = h26.to_vec();
    with_session.push(("mcp-session-id", "abc"));
    assert_eq!(refusal(&decide(&p, &with_session, &call("2026-07-28"))), (400, -32600, "invalid_request".into()));
    let response = r#"{"jsonrpc":"2.0","id":"s1","result":{}}"#;
    assert_eq!(refusal(&decide(&p, &[("mcp-protocol-version", "2026-07-28")], response)).1, -32600);
    assert!(decide(&p, &[("mcp-protocol-version", "2025-11-25")], response).reply.is_none());
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#;
    assert!(decide(&p, &[], batch).reply.is_none());
    assert!(decide(&p, &[("mcp-protocol-version", "2025-03-26")], batch).reply.is_none());
    for v in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        assert_eq!(
            refusal(&decide(&p, &[("mcp-protocol-version", v)], batch)),
            (400, -32600, "invalid_request".into()),
            "{v}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any version string the filter does not know is refused with −32022, never forwarded.
    #[test]
    fn a_wrong_version_is_refused(v in "[0-9a-zA-Z .-]{0,12}") {
        prop_assume!(Version::parse(&v).is_none());
        let p = policy("");
        let o = decide(&p, &[("mcp-protocol-version", &v)], r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        prop_assert_eq!(refusal(&o), (400, -32022, "unsupported_protocol_version".to_owned()));
    }

    /// A header and a params._meta version that differ are a mismatch, whichever they are.
    #[test]
    fn a_version_mismatch_is_refused(h in 0usize..4, m in 0usize..4, method in 0usize..METHODS.len()) {
        prop_assume!(h != m);
        let (hv, mv) = (Version::ALL[h], Version::ALL[m]);
        let row = &METHODS[method];
        prop_assume!(row.kind == Kind::Request);
        let body = json!({"jsonrpc":"2.0","id":1,"method":row.name,"params":{"name":"list_vms","uri":"file:///x",
            "notifications":{},"_meta":{protocol::META_VERSION_KEY: mv.as_str()}}}).to_string();
        let p = policy("");
        let o = decide(&p, &[("mcp-protocol-version", hv.as_str()), ("mcp-method", row.name)], &body);
        prop_assert_eq!(refusal(&o), (400, -32020, "header_mismatch".to_owned()));
    }
}

#[test]
fn the_book_protocol_section_is_the_rendered_table() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/policy/protocol-versions.md"))
            .unwrap();
    let start = "<!-- protocol-table:start (rendered by protocol::render_markdown; crates/core/tests/core/protocol.rs checks it) -->\n";
    let end = "<!-- protocol-table:end -->";
    let from = doc.find(start).expect("protocol-versions.md: protocol table start marker") + start.len();
    let to = doc[from..].find(end).expect("protocol-versions.md: protocol table end marker") + from;
    assert_eq!(&doc[from..to], protocol::render_markdown());
}

#[test]
fn the_book_lists_the_rendered_subscription_kinds() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/policy/methods.md")).unwrap();
    let start = "<!-- subscription-kinds:start (rendered by protocol::render_subscription_kinds; crates/core/tests/core/protocol.rs checks it) -->\n";
    let end = "<!-- subscription-kinds:end -->";
    let from = doc.find(start).expect("methods.md: subscription kinds start marker") + start.len();
    let to = doc[from..].find(end).expect("methods.md: subscription kinds end marker") + from;
    assert_eq!(&doc[from..to], protocol::render_subscription_kinds());
}

/// A 2026-07-28 `subscriptions/listen` with id "L1" and filter `notifications`, as the Python SDK sends it.
fn listen(p: &Policy, notifications: &str) -> Outcome {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{{"_meta":{{"{}":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{{}}}},"notifications":{notifications}}}}}"#,
        protocol::META_VERSION_KEY
    );
    decide(p, &[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "subscriptions/listen")], &body)
}

#[test]
fn subscriptions_listen_is_refused_when_a_kind_it_asks_for_stands_for_a_denied_method() {
    let strict = config::load(br#"{"version":"1","default":"deny","tools":{"list_vms":{}}}"#).unwrap();
    let o = listen(&strict, r#"{"toolsListChanged":true,"resourceSubscriptions":["file:///etc/passwd"]}"#);
    assert_eq!(refusal(&o), (200, -31001, "denied".into()));
    let v: Value = serde_json::from_str(&o.reply.as_ref().unwrap().body).unwrap();
    assert_eq!(v["id"], "L1");
    assert_eq!(v["error"]["data"]["rule"], "default");
    assert_eq!(
        v["error"]["data"]["reason"],
        "subscriptions/listen asks for notifications.resourceSubscriptions, which stands for resources/subscribe: \
         method resources/subscribe is not allowed by policy (default: deny)"
    );
    assert_eq!(
        (o.decision.method.as_deref(), o.decision.rule.as_deref()),
        (Some("subscriptions/listen"), Some("default"))
    );
    for kind in ["promptsListChanged", "resourcesListChanged"] {
        assert_eq!(refusal(&listen(&strict, &format!(r#"{{"{kind}":true}}"#))), (200, -31001, "denied".into()));
    }
    // Tool list changes alone pass, as tools/list does; nothing asked passes too.
    for ok in [r#"{"toolsListChanged":true}"#, "{}", r#"{"resourceSubscriptions":[],"promptsListChanged":false}"#] {
        let o = listen(&strict, ok);
        assert_eq!((o.reply.is_none(), o.decision.kind), (true, DecisionKind::Passed), "{ok}");
    }
    // gateway.methods allows resources/subscribe: the resource subscription goes on, under that rule.
    let lifted =
        config::load(br#"{"version":"1","default":"deny","gateway":{"methods":{"resources/subscribe":"allow"}}}"#)
            .unwrap();
    let o = listen(&lifted, r#"{"toolsListChanged":true,"resourceSubscriptions":["file:///a"]}"#);
    assert_eq!((o.reply.is_none(), o.decision.kind), (true, DecisionKind::Allowed));
    assert_eq!(o.decision.rule.as_deref(), Some("gateway.methods.resources/subscribe"));
    // An unknown kind is refused even under default allow; an unreadable filter is −32602.
    let open = policy("");
    let o = listen(&open, r#"{"toolsListChanged":true,"taskIds":["t"]}"#);
    assert_eq!(refusal(&o), (200, -31001, "denied".into()));
    assert_eq!(o.decision.rule.as_deref(), Some("unknown_subscription"));
    let o = listen(&open, r#"{"resourcesListChanged":"yes"}"#);
    assert_eq!(refusal(&o), (400, -32602, "invalid_params".into()));
    let v: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
    assert_eq!(v["id"], "L1");
}

#[test]
fn sse_events_that_are_not_jsonrpc_pass() {
    let hide = |n: &str| n == "delete_vm";
    let stream = concat!(
        "event: endpoint\ndata: /messages?session_id=abc\n\n",
        "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"a\"}]}}\n\n",
        "data: [DONE]\n\n",
    );
    let (out, removed) = toolslist::filter_sse(stream.as_bytes(), &[], &hide).unwrap();
    assert_eq!(removed, 1);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        concat!(
            "event: endpoint\ndata: /messages?session_id=abc\n\n",
            "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\n\n",
            "data: [DONE]\n\n",
        )
    );
    // An unreadable event that could carry a message still fails closed.
    for bad in
        ["data: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}\n\n", "event: message\ndata: [{\"id\":1\n\n"]
    {
        assert!(toolslist::filter_sse(bad.as_bytes(), &[], &hide).is_err(), "{bad}");
    }
    // A tool list is filtered whatever the event type.
    let odd = "event: other\ndata: {\"id\":2,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}]}}\n\n";
    assert_eq!(toolslist::filter_sse(odd.as_bytes(), &[], &hide).unwrap().1, 1);
}

/// MCP 2026-07-28 multi-round-trip requests: a `tools/call` retried with `inputResponses` and the
/// server's opaque `requestState` is a new call — judged by the same rules, and counted again.
#[test]
fn input_required_retries_are_judged_and_counted_like_any_call() {
    let text = r#"{"version":"1","default":"deny","hide":["delete_vm"],
        "tools":{"vm_agent_exec":{"limits":[{"counter":"exec","window":"minute","max":2}]}}}"#;
    let p = config::load(text.as_bytes()).unwrap();
    let store = MemoryStore::default();
    let h = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "vm_agent_exec")];
    let leg = |id: u32, state: Option<&str>| {
        let mut params = json!({"name":"vm_agent_exec","arguments":{"vmid":100,"command":"uptime"},
            "_meta":{protocol::META_VERSION_KEY:"2026-07-28"}});
        if let Some(s) = state {
            params["inputResponses"] = json!({"confirm":{"action":"accept","content":{"name":"web-01"}}});
            params["requestState"] = json!(s);
        }
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":params}).to_string()
    };
    let mut all: Vec<(&str, &[u8])> =
        vec![(":method", b"POST"), ("content-type", b"application/json"), ("authorization", b"Bearer agent")];
    all.extend(h.iter().map(|(k, v)| (*k, v.as_bytes())));
    let head = RequestHead::from_headers(&p, all);
    let run = |body: &str| pipeline::on_body(&p, &head, body.as_bytes(), &store, T0);
    assert_eq!(run(&leg(1, None)).decision.kind, DecisionKind::Allowed);
    assert_eq!(run(&leg(2, Some("opaque-state-from-the-server"))).decision.kind, DecisionKind::Allowed);
    let third = run(&leg(3, Some("opaque-state-2")));
    assert_eq!(refusal(&third), (200, -31002, "rate_limited".into()));
    // A hidden tool stays denied whatever requestState it carries.
    let hidden = json!({"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"delete_vm","requestState":"s",
        "_meta":{protocol::META_VERSION_KEY:"2026-07-28"}}})
    .to_string();
    let hh = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "delete_vm")];
    assert_eq!(refusal(&decide(&p, &hh, &hidden)), (200, -31001, "denied".into()));
}

#[test]
fn get_and_delete_with_a_version_outside_gateway_protocol_versions_are_refused() {
    use mcp_policy_core::pipeline::HeadOutcome;
    let p = policy(r#""protocol_versions":["2025-11-25"]"#);
    for method in ["GET", "DELETE"] {
        let head = |v: Option<&str>| {
            let mut h: Vec<(&str, &[u8])> = vec![(":method", method.as_bytes()), ("authorization", b"Bearer agent")];
            if let Some(v) = v {
                h.push(("mcp-protocol-version", v.as_bytes()));
            }
            RequestHead::from_headers(&p, h)
        };
        let outcome = |v: Option<&str>| match pipeline::on_headers(&p, &head(v)) {
            HeadOutcome::Done(o) => *o,
            HeadOutcome::NeedBody => panic!("{method} needs no body"),
        };
        assert_eq!(refusal(&outcome(Some("2025-06-18"))), (400, -32022, "unsupported_protocol_version".into()));
        assert!(outcome(Some("2025-11-25")).reply.is_none());
        assert!(outcome(None).reply.is_none(), "{method} without the header is not refused");
        // Without an Accept naming events, it is no MCP client's stream (a health check, a page).
        assert!(!outcome(None).event_stream);
    }
    // A GET that accepts events opens the server's SSE stream: its reply is held to being one
    // (`crate::response`); a DELETE opens none.
    for (method, accept, want) in [
        ("GET", "text/event-stream", true),
        ("GET", "text/html", false),
        ("GET", "application/json", false),
        ("DELETE", "text/event-stream", false),
    ] {
        let h = RequestHead::from_headers(
            &p,
            [(":method", method.as_bytes()), ("accept", accept.as_bytes()), ("authorization", &b"Bearer agent"[..])],
        );
        match pipeline::on_headers(&p, &h) {
            HeadOutcome::Done(o) => assert_eq!(o.event_stream, want, "{method} {accept}"),
            HeadOutcome::NeedBody => panic!("{method} needs no body"),
        }
    }
}

#[test]
fn a_refusal_shaped_as_a_tool_result_says_its_result_type_in_2026() {
    let p = policy(r#""refusal_shape":"tool_result""#);
    let meta = json!({protocol::META_VERSION_KEY: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let call = json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_vm","_meta":meta}});
    let h26 = [("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", "delete_vm")];
    let mut out = decide(&p, &h26, &call.to_string());
    out.shape(p.gateway.refusal_shape);
    assert_eq!(
        out.reply.unwrap().body,
        r#"{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[{"type":"text","text":"tool is hidden by policy"}],"isError":true}}"#
    );
    // Before 2026-07-28 results carry no resultType.
    let old = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_vm"}}"#;
    let mut out = decide(&p, &[("mcp-protocol-version", "2025-11-25")], old);
    out.shape(p.gateway.refusal_shape);
    assert_eq!(
        out.reply.unwrap().body,
        r#"{"jsonrpc":"2.0","id":5,"result":{"content":[{"type":"text","text":"tool is hidden by policy"}],"isError":true}}"#
    );
}

#[test]
fn a_batch_element_is_held_to_the_methods_of_the_batchs_version() {
    // A batch is read by MCP 2025-03-26, whose method table holds for each element as it does for a
    // message on its own: a method of a later version, or of none, is refused in its slot.
    let p = policy("");
    let h = [("mcp-protocol-version", "2025-03-26")];
    let single = decide(&p, &h, r#"{"jsonrpc":"2.0","id":1,"method":"server/discover"}"#);
    assert_eq!(refusal(&single), (200, -32601, "method_not_found".into()));
    let batch = r#"[{"jsonrpc":"2.0","id":1,"method":"server/discover"},{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"x/custom"}]"#;
    let o = decide(&p, &h, batch);
    assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (DecisionKind::Denied, Some("protocol_version")));
    let r = o.reply.unwrap();
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (r.status, &v[0]["error"]["message"], &v[1]["error"]["data"]["kind"], &v[2]["error"]["data"]["rule"]),
        (
            200,
            &json!("Method not found: method server/discover does not exist in MCP 2025-03-26"),
            &json!("batch_refused"),
            &json!("unknown_method")
        )
    );
    // Named in gateway.methods, a method no version defines is the policy's to decide, in a batch too.
    let named = policy(r#""methods":{"x/custom":"allow"}"#);
    let ok = r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"x/custom"}]"#;
    assert!(decide(&named, &h, ok).reply.is_none());
}
