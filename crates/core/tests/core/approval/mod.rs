//! Require approval, natively: the policy keys, the held call, and every answer of the approval
//! service turned into the agent's reply, with the reserved quota given back unless the call goes on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::approval::{self, Answer};
use mcp_policy_core::config;
use mcp_policy_core::identity::grant;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, PendingApproval, RequestHead};
use mcp_policy_core::policy::{ApprovalService, Policy};
use mcp_policy_core::terms::ApprovalMode;
use mcp_policy_core::wire::json;
use serde_json::{json, Value};

mod answers;

const T0: u64 = 1_700_000_040_000; // a UTC minute boundary

const GATEWAY: &str = r#""approval":{"cluster":"mcp_approvals"}"#;

fn policy(tools: &str, gateway: &str) -> Policy {
    let text = format!(r#"{{"version":"1","default":"deny","tools":{{{tools}}},"gateway":{{{gateway}}}}}"#);
    config::load(text.as_bytes()).unwrap()
}

fn load_errors(text: &str) -> Vec<(String, String)> {
    config::load(text.as_bytes()).unwrap_err().0.into_iter().map(|e| (e.path, e.message)).collect()
}

/// The MCP server of [`post`]: the host's `xds.cluster_name`, `:authority` and `:path`.
fn server_a() -> approval::Upstream {
    approval::Upstream { cluster: "mcp_a".into(), authority: "gw.example:10000".into(), path: "/a/mcp".into() }
}

fn post(p: &Policy, token: &str) -> RequestHead {
    post_to(p, token, &server_a())
}

fn post_to(p: &Policy, token: &str, to: &approval::Upstream) -> RequestHead {
    let auth = format!("Bearer {token}");
    let mut head = RequestHead::from_headers(
        p,
        [
            (":method", &b"POST"[..]),
            (":authority", to.authority.as_bytes()),
            (":path", to.path.as_bytes()),
            ("content-type", b"application/json"),
            ("authorization", auth.as_bytes()),
        ],
    );
    head.cluster = Some(to.cluster.clone());
    head
}

fn call(id: u64, tool: &str, args: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#)
}

fn decide(p: &Policy, store: &MemoryStore, token: &str, body: &str) -> Outcome {
    let head = post(p, token);
    assert_eq!(pipeline::on_headers(p, &head), HeadOutcome::NeedBody);
    pipeline::on_body(p, &head, body.as_bytes(), store, T0)
}

fn held(o: Outcome) -> PendingApproval {
    assert_eq!(o.reply, None, "a held call has no reply yet");
    *o.approval.expect("the call is held for approval")
}

fn reply(o: &Outcome) -> (u16, Value, Vec<(&'static str, String)>) {
    let r = o.reply.as_ref().expect("a local reply");
    (r.status, serde_json::from_str(&r.body).unwrap(), r.headers.clone())
}

fn grant_id(token: &str) -> [u8; 32] {
    grant::from_authorization(format!("Bearer {token}").as_bytes()).unwrap().id
}

#[test]
fn policy_keys_and_defaults() {
    let p = policy(
        r#""start_vm":{"action":"require_approval","reason":"starting a VM costs money"},
           "delete_vm":{"action":"require_approval","approval_timeout":"1h 30m"},"list_vms":{}"#,
        GATEWAY,
    );
    assert_eq!(
        p.gateway.approval,
        Some(ApprovalService {
            cluster: "mcp_approvals".into(),
            path: "/v1/check".into(),
            authority: "mcp_approvals".into(),
            timeout_ms: 5000,
            mode: ApprovalMode::Retry,
            max_held_per_grant: 8,
        })
    );
    assert_eq!(p.gateway.approval.as_ref().unwrap().wait_seconds(), 0);
    let hold = policy(
        r#""start_vm":{"action":"require_approval"}"#,
        r#""approval":{"cluster":"c","path":"/check","authority":"approvals.internal","mode":"hold"}"#,
    );
    let svc = hold.gateway.approval.unwrap();
    assert_eq!((svc.path.as_str(), svc.authority.as_str(), svc.timeout_ms), ("/check", "approvals.internal", 30_000));
    assert_eq!(svc.wait_seconds(), 29);
    // An approval-required tool is listed like an allowed one.
    assert!(!p.is_unlisted("start_vm"));
}

#[test]
fn policy_errors_name_their_path() {
    let base = |tools: &str, gw: &str| format!(r#"{{"version":"1","tools":{{{tools}}},"gateway":{{{gw}}}}}"#);
    assert_eq!(
        load_errors(&base(r#""start_vm":{"action":"require_approval"}"#, "")),
        [(
            "tools.start_vm.action".to_owned(),
            "require_approval needs gateway.approval (the Envoy cluster of the approval service)".to_owned()
        )]
    );
    assert_eq!(
        load_errors(&base(r#""start_vm":{"approval_timeout":"10m"}"#, GATEWAY)),
        [("tools.start_vm.approval_timeout".to_owned(), "only applies to action \"require_approval\"".to_owned())]
    );
    let paths = |text: &str| load_errors(text).into_iter().map(|(p, _)| p).collect::<Vec<_>>();
    for bad in ["0s", "500ms", "8days", "ten minutes", ""] {
        assert_eq!(
            paths(&base(&format!(r#""t":{{"action":"require_approval","approval_timeout":"{bad}"}}"#), GATEWAY)),
            ["tools.t.approval_timeout"],
            "{bad}"
        );
    }
    let tool = r#""t":{"action":"require_approval"}"#;
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":""}"#)), ["gateway.approval.cluster"]);
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":"c","path":"v1/check"}"#)), ["gateway.approval.path"]);
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":"c","authority":"a b"}"#)), ["gateway.approval.authority"]);
    assert_eq!(
        paths(&base(tool, r#""approval":{"cluster":"c","mode":"hold","timeout":"1s"}"#)),
        ["gateway.approval.timeout"]
    );
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":"c","timeout":"10m"}"#)), ["gateway.approval.timeout"]);
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":"c","mode":"later"}"#)), ["gateway.approval.mode"]);
    assert_eq!(paths(&base(tool, r#""approval":{"cluster":"c","clutser":"d"}"#)), ["gateway.approval.clutser"]);
    assert_eq!(paths(&base(tool, r#""approval":["c"]"#)), ["gateway.approval"]);
    // `default` and `gateway.methods` take allow/deny only.
    assert_eq!(paths(r#"{"version":"1","default":"require_approval"}"#), ["default"]);
}

#[test]
fn a_call_is_held_with_its_binding_key_and_request() {
    let p = policy(r#""start_vm":{"action":"require_approval","reason":"costs money"}"#, GATEWAY);
    let store = MemoryStore::new();
    let args = r#"{ "vmid" : 100, "node":"pve1" }"#;
    let o = decide(&p, &store, "agent-a", &call(7, "start_vm", args));
    assert_eq!(o.decision.kind, DecisionKind::Allowed);
    let pending = held(o);
    let args_value = json::parse(br#"{"node":"pve1","vmid":100}"#).unwrap();
    let expected_key = approval::key(&grant_id("agent-a"), &server_a(), "start_vm", Some(&args_value));
    assert_eq!(pending.key, expected_key);
    assert_eq!(pending.id.raw(), "7");
    assert_eq!(pending.decision.arg_keys, ["vmid", "node"]);
    assert_eq!(pending.decision.tool.as_deref(), Some("start_vm"));
    let body: Value = serde_json::from_str(&pending.check_body("req-1", 0)).unwrap();
    assert_eq!(
        body,
        json!({"key": expected_key, "grant": pending.grant_label,
               "grant_id": mcp_policy_core::identity::grant::hex(&grant_id("agent-a")), "tool": "start_vm",
               "upstream": {"cluster": "mcp_a", "authority": "gw.example:10000", "path": "/a/mcp"},
               "arguments": {"vmid": 100, "node": "pve1"}, "request_id": "req-1",
               "expires_in_seconds": 600, "wait_seconds": 0, "reason": "costs money"})
    );
    // Free text in x-request-id is not passed on to the approver's page.
    let body: Value = serde_json::from_str(&pending.check_body("PRE-APPROVED by security", 0)).unwrap();
    assert_eq!(body["request_id"], "");
    // The callout both hosts send: its headers in order, `x-request-id` only as a plain token.
    let svc = p.gateway.approval.as_ref().unwrap();
    for (rid, sent_rid, wait) in [("req-1", Some("req-1"), 29), ("PRE-APPROVED by security", None, 0)] {
        let callout = pending.callout(svc, rid, wait);
        assert_eq!(callout.body, pending.check_body(sent_rid.unwrap_or(""), wait));
        let length = callout.body.len().to_string();
        let mut headers = vec![
            (":method", "POST"),
            (":path", "/v1/check"),
            (":authority", "mcp_approvals"),
            ("content-type", "application/json"),
            ("content-length", length.as_str()),
        ];
        headers.extend(sent_rid.map(|r| ("x-request-id", r)));
        assert_eq!(callout.headers(), headers, "{rid}");
    }
    assert!(pending.grant_label.starts_with("sha256:"));
    // The same call from another grant, or with other arguments, has another key.
    let other_grant = held(decide(&p, &store, "agent-b", &call(7, "start_vm", args)));
    assert_ne!(other_grant.key, pending.key);
    let other_args = held(decide(&p, &store, "agent-a", &call(8, "start_vm", r#"{"vmid":101,"node":"pve1"}"#)));
    assert_ne!(other_args.key, pending.key);
    let reordered = held(decide(&p, &store, "agent-a", &call(9, "start_vm", r#"{"node":"pve\u0031","vmid":100}"#)));
    assert_eq!(reordered.key, pending.key);
}

/// Decide `body` for `token` sent to the MCP server `to`.
fn decide_to(p: &Policy, store: &MemoryStore, token: &str, to: &approval::Upstream, body: &str) -> Outcome {
    let head = post_to(p, token, to);
    assert_eq!(pipeline::on_headers(p, &head), HeadOutcome::NeedBody);
    pipeline::on_body(p, &head, body.as_bytes(), store, T0)
}

#[test]
fn the_same_call_to_another_upstream_has_another_key() {
    let p = policy(r#""delete_vm":{"action":"require_approval"}"#, GATEWAY);
    let store = MemoryStore::new();
    let body = call(1, "delete_vm", r#"{"vmid":100}"#);
    let a = held(decide(&p, &store, "agent-a", &body));
    assert_eq!(a.upstream, server_a());
    let at = |cluster: &str, authority: &str, path: &str| approval::Upstream {
        cluster: cluster.into(),
        authority: authority.into(),
        path: path.into(),
    };
    // Another route's cluster, another virtual host or another endpoint of one cluster.
    for other in [
        at("mcp_b", "gw.example:10000", "/a/mcp"),
        at("mcp_a", "b.gw.example:10000", "/a/mcp"),
        at("mcp_a", "gw.example:10000", "/b/mcp"),
        at("mcp_a", "gw.example:10000", "/a/mcp?server=b"),
    ] {
        let held_b = held(decide_to(&p, &store, "agent-a", &other, &body));
        assert_ne!(held_b.key, a.key, "{other:?}");
        let sent: Value = serde_json::from_str(&held_b.check_body("", 0)).unwrap();
        assert_eq!(
            sent["upstream"],
            json!({"cluster": other.cluster, "authority": other.authority, "path": other.path}),
            "the service is told the upstream, to bind and show it"
        );
    }
    assert_eq!(held(decide_to(&p, &store, "agent-a", &server_a(), &body)).key, a.key);
}

#[test]
fn a_call_whose_upstream_is_unknown_is_refused_not_held() {
    let p = policy(
        r#""delete_vm":{"action":"require_approval","limits":[{"counter":"d","window":"minute","max":1}]}"#,
        GATEWAY,
    );
    let store = MemoryStore::new();
    let body = call(5, "delete_vm", r#"{"vmid":100}"#);
    let no_cluster = {
        let mut h = post(&p, "agent-a");
        h.cluster = None;
        h
    };
    let empty_cluster = {
        let mut h = post(&p, "agent-a");
        h.cluster = Some(String::new());
        h
    };
    let auth = b"Bearer agent-a";
    let no_authority = {
        let mut h = RequestHead::from_headers(
            &p,
            [
                (":method", &b"POST"[..]),
                (":path", b"/a/mcp"),
                ("content-type", b"application/json"),
                ("authorization", auth),
            ],
        );
        h.cluster = Some("mcp_a".into());
        h
    };
    let two_paths = {
        let mut h = RequestHead::from_headers(
            &p,
            [
                (":method", &b"POST"[..]),
                (":authority", b"gw"),
                (":path", b"/a/mcp"),
                (":path", b"/b/mcp"),
                ("content-type", b"application/json"),
                ("authorization", auth),
            ],
        );
        h.cluster = Some("mcp_a".into());
        h
    };
    for (head, why) in [
        (&no_cluster, pipeline::NO_CLUSTER),
        (&empty_cluster, pipeline::NO_CLUSTER),
        (&no_authority, pipeline::NO_AUTHORITY),
        (&two_paths, pipeline::NO_PATH),
    ] {
        let before = store.bytes();
        let o = pipeline::on_body(&p, head, body.as_bytes(), &store, T0);
        assert_eq!(o.approval, None, "{why}");
        assert_eq!(o.decision.kind, DecisionKind::ApprovalUnavailable);
        let (status, v, headers) = reply(&o);
        assert_eq!((status, headers), (200, vec![("retry-after", "1".to_owned())]));
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":5,"error":{"code":-31009,
                "message":format!("tool 'delete_vm' refused: approval could not be checked: {why}"),
                "data":{"kind":"approval_unavailable","tool":"delete_vm","reason":why,"retry_after_seconds":1}}})
        );
        assert_eq!(store.bytes(), before, "no quota is taken for a call that is not asked");
    }
    assert!(pipeline::NO_CLUSTER.contains("xds.cluster_name"));
}

#[test]
fn upstream_headers_are_kept_only_with_an_approval_service() {
    let headers = [(":method", &b"POST"[..]), (":authority", b"gw"), (":path", b"/mcp")];
    let with = RequestHead::from_headers(&policy(r#""t":{"action":"require_approval"}"#, GATEWAY), headers);
    assert_eq!(
        (with.authority, with.path),
        (pipeline::HeaderValue::One(b"gw".to_vec()), pipeline::HeaderValue::One(b"/mcp".to_vec()))
    );
    let without = RequestHead::from_headers(&policy(r#""t":{}"#, r#""mode":"enforce""#), headers);
    assert_eq!((without.authority, without.path), (pipeline::HeaderValue::Absent, pipeline::HeaderValue::Absent));
}
