//! Rate limits and their accounting: retry-after, batches giving quota back, the grant cap, dry run.

use super::{call, done, head, policy, post, reply, T0};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline;
use serde_json::{json, Value};

#[test]
fn rate_limits_refuse_with_retry_after_and_per_grant() {
    let p = policy("");
    let s = MemoryStore::new();
    let now = T0 + 20_250;
    for i in 0..2 {
        let o = pipeline::on_body(&p, &post(&p, "a"), call(i, "vm_agent_exec").as_bytes(), &s, now);
        assert_eq!(o.reply, None, "call {i}");
    }
    let o = pipeline::on_body(&p, &post(&p, "a"), call(9, "vm_agent_exec").as_bytes(), &s, now);
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
    assert_eq!(pipeline::on_body(&p, &post(&p, "b"), call(1, "vm_agent_exec").as_bytes(), &s, now).reply, None);
    let o = pipeline::on_body(&p, &post(&p, "b"), call(2, "list_vms").as_bytes(), &s, now);
    assert_eq!(reply(&o).1["error"]["data"]["counter"], "everything");
}

#[test]
fn batches_are_all_or_nothing_and_give_quota_back() {
    let p = policy("");
    let s = MemoryStore::new();
    let ok = format!("[{},{}]", call(1, "list_vms"), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert_eq!(pipeline::on_body(&p, &post(&p, "a"), ok.as_bytes(), &s, T0).reply, None);

    let mixed = format!(
        "[{},{},{}]",
        call(2, "vm_agent_exec"),
        r#"{"jsonrpc":"2.0","method":"notifications/x"}"#,
        call(3, "delete_vm")
    );
    let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), mixed.as_bytes(), &s, T0));
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
        assert_eq!(pipeline::on_body(&p, &post(&p, "a"), call(10 + i, "vm_agent_exec").as_bytes(), &s, T0).reply, None);
    }

    // (A fresh store: the global all_tools counter, max 3, is used up by now.)
    let invalid = format!("[{},5]", call(4, "list_vms"));
    let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), invalid.as_bytes(), &MemoryStore::new(), T0));
    assert_eq!(status, 400);
    assert_eq!(b[0]["error"]["code"], -31005);
    assert_eq!((b[1]["id"].clone(), b[1]["error"]["code"].clone()), (Value::Null, json!(-32600)));
}

#[test]
fn grant_cap_fails_closed() {
    let p = policy(r#","max_tracked_grants":1"#);
    let s = MemoryStore::new();
    assert_eq!(pipeline::on_body(&p, &post(&p, "a"), call(1, "vm_agent_exec").as_bytes(), &s, T0).reply, None);
    let o = pipeline::on_body(&p, &post(&p, "b"), call(1, "vm_agent_exec").as_bytes(), &s, T0);
    let (status, b, headers) = reply(&o);
    assert_eq!((status, b["error"]["code"].as_i64()), (200, Some(-31004)));
    assert_eq!(b["error"]["data"]["reason"], "too many distinct grants are tracked; new grants are refused");
    assert_eq!(headers, vec![("retry-after", "1".to_owned())]);
    assert_eq!(o.decision.kind, DecisionKind::LimiterUnavailable);
}

#[test]
fn dry_run_forwards_what_it_would_deny_and_consumes_nothing() {
    let p = policy(r#","mode":"dry_run","tool_modes":{"stop_vm":"enforce"}"#);
    let s = MemoryStore::new();
    let o = pipeline::on_body(&p, &post(&p, "a"), call(1, "delete_vm").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!((o.decision.kind, o.decision.dry_run, o.decision.label()), (DecisionKind::Denied, true, "would_deny"));
    assert_eq!(o.decision.rule.as_deref(), Some("hide"));
    // The per-tool override still enforces.
    assert_eq!(reply(&pipeline::on_body(&p, &post(&p, "a"), call(2, "stop_vm").as_bytes(), &s, T0)).0, 200);
    // Allowed calls consume; would-be rate-limited calls are forwarded but consume nothing.
    for i in 0..4 {
        let o = pipeline::on_body(&p, &post(&p, "a"), call(10 + i, "vm_agent_exec").as_bytes(), &s, T0);
        assert_eq!(o.reply, None);
        assert_eq!(o.decision.dry_run, i >= 2, "call {i}");
    }
    let o = pipeline::on_body(&p, &post(&p, "b"), call(20, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.decision.dry_run, o.decision.kind), (false, DecisionKind::Allowed), "global counter now 3 of 3");
    let o = pipeline::on_body(&p, &post(&p, "b"), call(21, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply, o.decision.dry_run, o.decision.kind), (None, true, DecisionKind::RateLimited));
    // Protocol errors are always enforced.
    assert_eq!(reply(&pipeline::on_body(&p, &post(&p, "a"), b"{", &s, T0)).0, 400);
    // A missing grant is a policy refusal: forwarded as "would deny", for POST and GET alike.
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json")]);
    let o = pipeline::on_body(&p, &h, call(30, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply, o.decision.kind, o.decision.dry_run), (None, DecisionKind::NoGrant, true));
    let o = done(pipeline::on_headers(&p, &head(&p, &[(":method", b"GET")])));
    assert_eq!((o.reply, o.decision.kind, o.decision.dry_run), (None, DecisionKind::NoGrant, true));
}
