//! The request pipeline end to end, natively: every row of the README's decision table.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_filter::config;
use mcp_policy_filter::gate::{self, DecisionKind, HeadOutcome, Outcome, RequestHead};
use mcp_policy_filter::policy::Policy;
use mcp_policy_filter::ratelimit::MemoryStore;
use serde_json::{json, Value};

const T0: u64 = 1_700_000_040_000; // a UTC minute boundary

fn policy(extra_gateway: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"deny","hide":["delete_vm"],
        "all_tools":{{"limits":[{{"counter":"everything","window":"minute","max":3,"scope":"global"}}]}},
        "tools":{{"list_vms":{{}},"stop_vm":{{"action":"deny","reason":"stopping VMs needs a change ticket"}},
                  "vm_agent_exec":{{"limits":[{{"counter":"vm_agent_exec_rate","window":"minute","max":2}}]}}}},
        "gateway":{{"methods":{{"resources/read":"allow"}}{extra_gateway}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, headers: &[(&str, &[u8])]) -> RequestHead {
    RequestHead::from_headers(p, headers.iter().copied())
}

fn post(p: &Policy, token: &str) -> RequestHead {
    let auth = format!("Bearer {token}");
    RequestHead::from_headers(
        p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", auth.as_bytes())],
    )
}

fn call(id: u64, tool: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}}).to_string()
}

fn done(h: HeadOutcome) -> Outcome {
    match h {
        HeadOutcome::Done(o) => *o,
        HeadOutcome::NeedBody => panic!("expected a decision from the headers"),
    }
}

/// (status, body as JSON, extra headers) of a local reply.
fn reply(o: &Outcome) -> (u16, Value, Vec<(&'static str, String)>) {
    let r = o.reply.as_ref().expect("a local reply");
    (r.status, serde_json::from_str(&r.body).unwrap(), r.headers.clone())
}

#[test]
fn http_methods() {
    let p = policy("");
    let o = done(gate::on_headers(&p, &head(&p, &[(":method", b"PUT"), ("authorization", b"Bearer a")])));
    let (status, body, headers) = reply(&o);
    assert_eq!(status, 405);
    assert_eq!(body["error"]["code"], -32600);
    assert_eq!(body["error"]["data"]["kind"], "method_not_allowed");
    assert_eq!(headers, vec![("allow", "GET, POST, DELETE".to_owned())]);
    for m in [&b"GET"[..], b"DELETE"] {
        let o = done(gate::on_headers(&p, &head(&p, &[(":method", m), ("authorization", b"Bearer a")])));
        assert_eq!((o.reply, o.decision.kind), (None, DecisionKind::Passed));
        let o = done(gate::on_headers(&p, &head(&p, &[(":method", m)])));
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
        gate::on_headers(&p, &head(&p, &h))
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
    let o = done(gate::on_headers(
        &p,
        &head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("content-type", b"text/plain")]),
    ));
    assert_eq!(reply(&o).0, 415);
}

#[test]
fn allowed_call_is_forwarded_with_its_decision() {
    let p = policy("");
    let s = MemoryStore::new();
    let o = gate::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!(o.decision.kind, DecisionKind::Allowed);
    assert_eq!(o.decision.tool.as_deref(), Some("list_vms"));
    assert_eq!(o.decision.rule.as_deref(), Some("tools.list_vms"));
    assert_eq!(o.decision.grant.as_deref(), Some("sha256:ba7816bf8f01"));
}

#[test]
fn denials_echo_the_id_and_name_the_reason() {
    let p = policy("");
    let s = MemoryStore::new();
    let body = r#"{"jsonrpc":"2.0","id":"q-\u00e9","method":"tools/call","params":{"name":"stop_vm"}}"#;
    let o = gate::on_body(&p, &post(&p, "abc"), body.as_bytes(), &s, T0);
    assert_eq!(
        o.reply.as_ref().unwrap().body,
        r#"{"jsonrpc":"2.0","id":"q-\u00e9","error":{"code":-31001,"message":"tool 'stop_vm' denied: stopping VMs needs a change ticket","data":{"kind":"denied","tool":"stop_vm","reason":"stopping VMs needs a change ticket","rule":"tools.stop_vm"}}}"#
    );
    assert_eq!(o.reply.as_ref().unwrap().status, 200);
    for (tool, rule, reason) in [
        ("delete_vm", "hide", "tool is hidden by policy"),
        ("reboot_vm", "default", "not allowed by policy (default: deny)"),
    ] {
        let o = gate::on_body(&p, &post(&p, "abc"), call(7, tool).as_bytes(), &s, T0);
        let (status, b, _) = reply(&o);
        assert_eq!(status, 200);
        assert_eq!(
            b["error"],
            json!({"code":-31001,"message":format!("tool '{tool}' denied: {reason}"),
                   "data":{"kind":"denied","tool":tool,"reason":reason,"rule":rule}})
        );
        assert_eq!(b["id"], 7);
    }
    let rr = r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"x"}}"#;
    let (_, b, _) = reply(&gate::on_body(&p, &post(&p, "abc"), rr.as_bytes(), &s, T0));
    assert_eq!(b["error"]["data"]["reason"], "method prompts/get is not allowed by policy (default: deny)");
    let rr = r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///x"}}"#;
    assert_eq!(gate::on_body(&p, &post(&p, "abc"), rr.as_bytes(), &s, T0).reply, None);
}

#[test]
fn rate_limits_refuse_with_retry_after_and_per_grant() {
    let p = policy("");
    let s = MemoryStore::new();
    let now = T0 + 20_250;
    for i in 0..2 {
        let o = gate::on_body(&p, &post(&p, "a"), call(i, "vm_agent_exec").as_bytes(), &s, now);
        assert_eq!(o.reply, None, "call {i}");
    }
    let o = gate::on_body(&p, &post(&p, "a"), call(9, "vm_agent_exec").as_bytes(), &s, now);
    let (status, b, headers) = reply(&o);
    assert_eq!(status, 200);
    assert_eq!(headers, vec![("retry-after", "40".to_owned())]);
    assert_eq!(
        b,
        json!({"jsonrpc":"2.0","id":9,"error":{"code":-31002,
            "message":"tool 'vm_agent_exec' rate limited: limit vm_agent_exec_rate (2 per minute) reached; retry in 40 s",
            "data":{"kind":"rate_limited","tool":"vm_agent_exec","reason":"limit vm_agent_exec_rate (2 per minute) reached",
                    "rule":"tools.vm_agent_exec.limits[0]","retry_after_seconds":40,"counter":"vm_agent_exec_rate"}}})
    );
    assert_eq!(o.decision.kind, DecisionKind::RateLimited);
    // Another grant has its own vm_agent_exec counter, but the global all_tools counter (max 3) is shared.
    assert_eq!(gate::on_body(&p, &post(&p, "b"), call(1, "vm_agent_exec").as_bytes(), &s, now).reply, None);
    let o = gate::on_body(&p, &post(&p, "b"), call(2, "list_vms").as_bytes(), &s, now);
    assert_eq!(reply(&o).1["error"]["data"]["counter"], "everything");
}

#[test]
fn no_grant_is_401_with_the_id() {
    let p = policy("");
    let s = MemoryStore::new();
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json")]);
    let (status, b, headers) = reply(&gate::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0));
    assert_eq!((status, b["id"].clone(), b["error"]["code"].clone()), (401, json!(5), json!(-31003)));
    assert_eq!(headers, vec![("www-authenticate", "Bearer".to_owned())]);
    for auth in [&b"Basic YTpi"[..], b"Bearer", b"Bearer a b"] {
        let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("authorization", auth)]);
        assert_eq!(reply(&gate::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0)).0, 401);
    }
    let h = head(
        &p,
        &[
            (":method", b"POST"),
            ("content-type", b"application/json"),
            ("authorization", b"Bearer a"),
            ("authorization", b"Bearer b"),
        ],
    );
    assert_eq!(reply(&gate::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0)).0, 401);
}

#[test]
fn registered_grants_and_trusted_headers() {
    // sha256("abc")
    let p = policy(
        r#","grants":[{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","label":"agent-a"}]"#,
    );
    let s = MemoryStore::new();
    let o = gate::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply.is_none(), o.decision.grant.as_deref()), (true, Some("agent-a")));
    let (status, b, _) = reply(&gate::on_body(&p, &post(&p, "abd"), call(1, "list_vms").as_bytes(), &s, T0));
    assert_eq!(
        (status, b["error"]["data"]["reason"].as_str()),
        (401, Some("the credential is not a registered grant"))
    );

    let p = policy(r#","grant_header":"X-Agent-Id""#);
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("x-agent-id", b"agent-7")]);
    assert_eq!(gate::on_body(&p, &h, call(1, "list_vms").as_bytes(), &s, T0).reply, None);
    // The bearer token is not a grant when a trusted header is configured.
    assert_eq!(reply(&gate::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0)).0, 401);
}

/// Issue 16: the challenge names the protected resource metadata (RFC 9728 §5.1) on every 401, and a
/// trusted grant header that is repeated (a client copy next to `jwt_authn`'s) or empty is no grant.
#[test]
fn challenge_and_trusted_header_shape() {
    let url = "https://mcp.example.com/.well-known/oauth-protected-resource";
    let p = policy(&format!(r#","grant_header":"x-mcp-grant","resource_metadata_url":"{url}""#));
    let s = MemoryStore::new();
    let challenge = vec![("www-authenticate", format!("Bearer resource_metadata=\"{url}\""))];
    let json_post = [(":method", &b"POST"[..]), ("content-type", b"application/json")];
    let with = |extra: &[(&'static str, &'static [u8])]| {
        let mut h: Vec<(&str, &[u8])> = json_post.to_vec();
        h.extend_from_slice(extra);
        head(&p, &h)
    };
    for (extra, reason) in [
        (&[][..], "a grant is required: send Authorization: Bearer <token>"),
        (&[("x-mcp-grant", &b"alice"[..]), ("x-mcp-grant", b"bob")][..], "the grant header was sent more than once"),
        (&[("x-mcp-grant", &b"alice"[..]), ("x-mcp-grant", b"alice")][..], "the grant header was sent more than once"),
        (&[("x-mcp-grant", &b""[..])][..], "the grant header is empty"),
        (&[("x-mcp-grant", &b" \t "[..])][..], "the grant header is empty"),
    ] {
        let (status, b, headers) = reply(&gate::on_body(&p, &with(extra), call(9, "list_vms").as_bytes(), &s, T0));
        assert_eq!((status, &b["id"], b["error"]["data"]["reason"].as_str()), (401, &json!(9), Some(reason)));
        assert_eq!(headers, challenge);
        // GET (the SSE stream) is refused the same way.
        let mut get: Vec<(&str, &[u8])> = vec![(":method", b"GET")];
        get.extend_from_slice(extra);
        let (status, _, headers) = reply(&done(gate::on_headers(&p, &head(&p, &get))));
        assert_eq!((status, headers), (401, challenge.clone()));
    }
    let o = gate::on_body(&p, &with(&[("x-mcp-grant", b"alice")]), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!(o.decision.grant, Some(mcp_policy_filter::grant::Grant::from_credential(b"alice").label()));
    // A repeated Authorization keeps the generic reason (the bearer default is unchanged).
    let p = policy("");
    let h = head(&p, &[(":method", b"GET"), ("authorization", b"Bearer a"), ("authorization", b"Bearer a")]);
    let (status, b, headers) = reply(&done(gate::on_headers(&p, &h)));
    assert_eq!(
        (status, b["error"]["data"]["reason"].as_str(), headers),
        (
            401,
            Some("a grant is required: send Authorization: Bearer <token>"),
            vec![("www-authenticate", "Bearer".to_owned())]
        )
    );
}

#[test]
fn protocol_errors() {
    let p = policy("");
    let s = MemoryStore::new();
    let check = |body: &[u8], status: u16, code: i64, id: Value| {
        let (st, b, _) = reply(&gate::on_body(&p, &post(&p, "a"), body, &s, T0));
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
        gate::on_body(&p, &with(&[("mcp-method", b"tools/call"), ("mcp-name", b"list_vms")]), body.as_bytes(), &s, T0)
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
        let (status, b, _) = reply(&gate::on_body(&p, &with(extra), body.as_bytes(), &s, T0));
        assert_eq!((status, b["error"]["code"].as_i64(), b["id"].as_i64()), (400, Some(-32020), Some(4)));
    }
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    assert_eq!(reply(&gate::on_body(&p, &with(&[("mcp-name", b"x")]), ping.as_bytes(), &s, T0)).0, 400);
}

#[test]
fn lifecycle_notifications_and_responses_pass() {
    let p = policy("");
    let s = MemoryStore::new();
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}"#,
    ] {
        let o = gate::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0);
        assert_eq!((o.reply, o.decision.kind), (None, DecisionKind::Passed), "{body}");
    }
}

#[test]
fn batches_are_all_or_nothing_and_give_quota_back() {
    let p = policy("");
    let s = MemoryStore::new();
    let ok = format!("[{},{}]", call(1, "list_vms"), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(gate::on_body(&p, &post(&p, "a"), ok.as_bytes(), &s, T0).reply, None);

    let mixed = format!(
        "[{},{},{}]",
        call(2, "vm_agent_exec"),
        r#"{"jsonrpc":"2.0","method":"notifications/x"}"#,
        call(3, "delete_vm")
    );
    let (status, b, _) = reply(&gate::on_body(&p, &post(&p, "a"), mixed.as_bytes(), &s, T0));
    assert_eq!(status, 200);
    assert_eq!(
        b,
        json!([
            {"jsonrpc":"2.0","id":2,"error":{"code":-31005,"message":"Batch refused: another message in the batch was refused",
              "data":{"kind":"batch_refused","reason":"another message in the batch was refused"}}},
            {"jsonrpc":"2.0","id":3,"error":{"code":-31001,"message":"tool 'delete_vm' denied: tool is hidden by policy",
              "data":{"kind":"denied","tool":"delete_vm","reason":"tool is hidden by policy","rule":"hide"}}}
        ])
    );
    // The refused batch gave back its vm_agent_exec unit: two calls are still admitted.
    for i in 0..2 {
        assert_eq!(gate::on_body(&p, &post(&p, "a"), call(10 + i, "vm_agent_exec").as_bytes(), &s, T0).reply, None);
    }

    // (A fresh store: the global all_tools counter, max 3, is used up by now.)
    let invalid = format!("[{},5]", call(4, "list_vms"));
    let (status, b, _) = reply(&gate::on_body(&p, &post(&p, "a"), invalid.as_bytes(), &MemoryStore::new(), T0));
    assert_eq!(status, 400);
    assert_eq!(b[0]["error"]["code"], -31005);
    assert_eq!((b[1]["id"].clone(), b[1]["error"]["code"].clone()), (Value::Null, json!(-32600)));
}

#[test]
fn oversized_bodies_are_refused_before_parsing() {
    let p = policy(r#","max_body_bytes":100"#);
    let s = MemoryStore::new();
    let body = format!("{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"pad\":\"{}\"}}", "x".repeat(100));
    let (status, b, _) = reply(&gate::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0));
    assert_eq!((status, b["error"]["data"]["kind"].as_str()), (413, Some("body_too_large")));
    assert_eq!(b["error"]["data"]["reason"], "request body exceeds 100 bytes");
}

#[test]
fn grant_cap_fails_closed() {
    let p = policy(r#","max_tracked_grants":1"#);
    let s = MemoryStore::new();
    assert_eq!(gate::on_body(&p, &post(&p, "a"), call(1, "vm_agent_exec").as_bytes(), &s, T0).reply, None);
    let o = gate::on_body(&p, &post(&p, "b"), call(1, "vm_agent_exec").as_bytes(), &s, T0);
    let (status, b, headers) = reply(&o);
    assert_eq!((status, b["error"]["code"].as_i64()), (200, Some(-31004)));
    assert_eq!(b["error"]["data"]["reason"], "too many distinct grants are tracked; new grants are refused");
    assert_eq!(headers, vec![("retry-after", "1".to_owned())]);
    assert_eq!(o.decision.kind, DecisionKind::LimiterUnavailable);
}

#[test]
fn condition_denials_name_the_condition_not_the_value() {
    let p = config::load(&std::fs::read("envoy/policy-conditions.json").unwrap()).unwrap();
    let s = MemoryStore::new();
    let exec = |id: u64, args: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"vm_agent_exec","arguments":args}})
            .to_string()
    };
    let ok = exec(1, json!({"node":"pve","vmid":100,"command":"uptime"}));
    assert_eq!(gate::on_body(&p, &post(&p, "a"), ok.as_bytes(), &s, T0).reply, None);
    for (args, rule, reason) in [
        (
            json!({"node":"pve","vmid":102,"command":"uptime"}),
            "tools.vm_agent_exec.require[0]",
            "vm_agent_exec is allowed on VMs 100 and 101 only",
        ),
        (
            json!({"node":"pve","vmid":"100","command":"uptime"}),
            "tools.vm_agent_exec.require[0]",
            "vm_agent_exec is allowed on VMs 100 and 101 only",
        ),
        (
            json!({"node":"pve","vmid":101,"command":"cd /tmp && rm -rf cache-7"}),
            "tools.vm_agent_exec.deny_if[0]",
            "destructive commands are not allowed",
        ),
        (
            json!({"node":"pve","vmid":101,"command":["rm","-rf","/"]}),
            "tools.vm_agent_exec.deny_if[0]",
            "destructive commands are not allowed",
        ),
    ] {
        let body = exec(2, args);
        let (status, b, _) = reply(&gate::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0));
        assert_eq!(status, 200);
        assert_eq!(
            b["error"]["data"],
            json!({"kind":"denied","tool":"vm_agent_exec","reason":reason,"rule":rule}),
            "{body}"
        );
        let text = b.to_string();
        assert!(!text.contains("cache-7") && !text.contains("-rf"), "argument values leaked: {text}");
    }
}

#[test]
fn dry_run_forwards_what_it_would_deny_and_consumes_nothing() {
    let p = policy(r#","mode":"dry_run","tool_modes":{"stop_vm":"enforce"}"#);
    let s = MemoryStore::new();
    let o = gate::on_body(&p, &post(&p, "a"), call(1, "delete_vm").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!((o.decision.kind, o.decision.dry_run, o.decision.label()), (DecisionKind::Denied, true, "would_deny"));
    assert_eq!(o.decision.rule.as_deref(), Some("hide"));
    // The per-tool override still enforces.
    assert_eq!(reply(&gate::on_body(&p, &post(&p, "a"), call(2, "stop_vm").as_bytes(), &s, T0)).0, 200);
    // Allowed calls consume; would-be rate-limited calls are forwarded but consume nothing.
    for i in 0..4 {
        let o = gate::on_body(&p, &post(&p, "a"), call(10 + i, "vm_agent_exec").as_bytes(), &s, T0);
        assert_eq!(o.reply, None);
        assert_eq!(o.decision.dry_run, i >= 2, "call {i}");
    }
    let o = gate::on_body(&p, &post(&p, "b"), call(20, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.decision.dry_run, o.decision.kind), (false, DecisionKind::Allowed), "global counter now 3 of 3");
    let o = gate::on_body(&p, &post(&p, "b"), call(21, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply, o.decision.dry_run, o.decision.kind), (None, true, DecisionKind::RateLimited));
    // Protocol errors are always enforced.
    assert_eq!(reply(&gate::on_body(&p, &post(&p, "a"), b"{", &s, T0)).0, 400);
    // A missing grant is a policy refusal: forwarded as "would deny", for POST and GET alike.
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json")]);
    let o = gate::on_body(&p, &h, call(30, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply, o.decision.kind, o.decision.dry_run), (None, DecisionKind::NoGrant, true));
    let o = done(gate::on_headers(&p, &head(&p, &[(":method", b"GET")])));
    assert_eq!((o.reply, o.decision.kind, o.decision.dry_run), (None, DecisionKind::NoGrant, true));
}

#[test]
fn audit_lines_carry_keys_not_values() {
    let p = policy("");
    let s = MemoryStore::new();
    let body = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"reboot_vm","arguments":{"node":"pve","vmid":100,"secret":"hunter2"}}}"#;
    let o = gate::on_body(&p, &post(&p, "abc"), body.as_bytes(), &s, T0);
    let line = o.decision.audit_json("2026-11-30T09:00:00.000Z", Some("rid-1"));
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap(),
        json!({"ts":"2026-11-30T09:00:00.000Z","decision":"denied","error":"denied","method":"tools/call","tool":"reboot_vm",
               "rule":"default","reason":"not allowed by policy (default: deny)","grant":"sha256:ba7816bf8f01","id":"a-1",
               "arg_keys":["node","vmid","secret"],"request_id":"rid-1"})
    );
    assert!(!line.contains("hunter2") && !line.contains("pve"));
}

#[test]
fn tools_list_requests_are_marked_for_response_filtering() {
    let p = policy("");
    let s = MemoryStore::new();
    let o = gate::on_body(&p, &post(&p, "a"), br#"{"jsonrpc":"2.0","id":"L","method":"tools/list"}"#, &s, T0);
    assert_eq!(o.tools_list_ids.iter().map(|i| i.raw()).collect::<Vec<_>>(), ["\"L\""]);
    let o = gate::on_body(&p, &post(&p, "a"), call(1, "list_vms").as_bytes(), &s, T0);
    assert!(o.tools_list_ids.is_empty());
}

#[test]
fn audit_lines_and_log_fields_are_bounded_and_cannot_forge_lines() {
    let p = policy("");
    let s = MemoryStore::new();
    let long_id = "9".repeat(5000);
    let keys: String = (0..100).map(|i| format!("\"k{i}\":1")).collect::<Vec<_>>().join(",");
    let name = format!("x\n[info] forged\u{1b}[31m\u{2028}{}", "y".repeat(1000));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{long_id},"method":"tools/call","params":{{"name":{},"arguments":{{{keys}}}}}}}"#,
        serde_json::to_string(&name).unwrap()
    );
    let o = gate::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0);
    let line = o.decision.audit_json("t", None);
    assert!(line.len() < 2000, "audit line is {} bytes", line.len());
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id_bytes"], 5000);
    assert_eq!(v["arg_keys"].as_array().unwrap().len(), 32);
    assert_eq!(v["arg_keys_total"], 100);
    assert_eq!(v["tool"].as_str().unwrap().chars().count(), 257);
    let safe = gate::log_safe(&name);
    assert!(safe.starts_with("x\\u{a}[info] forged\\u{1b}[31m\\u{2028}yyy"), "{safe}");
    assert!(!safe.contains('\n') && !safe.contains('\u{1b}') && safe.chars().count() < 160);
}
