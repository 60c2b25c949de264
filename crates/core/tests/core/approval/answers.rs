//! Require approval, from the service's answer on: replies with the id echoed, quota kept only
//! for calls that go upstream, the order of checks, dry run, batches and the per-grant cap.

use super::*;

#[test]
fn answers_become_replies_with_the_id_echoed() {
    let p = policy(r#""start_vm":{"action":"require_approval","reason":"costs money"}"#, GATEWAY);
    let store = MemoryStore::new();
    let body = call(42, "start_vm", r#"{"vmid":100}"#);
    let ask = || held(decide(&p, &store, "agent-a", &body));

    let o = pipeline::on_approval_answer(
        &p,
        ask(),
        Answer::Pending {
            approval_id: "apr_1".into(),
            approval_url: "http://a/approvals/apr_1".into(),
            expires_in_seconds: 600,
        },
        &store,
        T0,
    );
    assert_eq!(o.decision.kind, DecisionKind::ApprovalRequired);
    assert_eq!(o.decision.approval_id.as_deref(), Some("apr_1"));
    let (status, v, headers) = reply(&o);
    assert_eq!((status, headers), (200, vec![]));
    assert_eq!(
        v,
        json!({"jsonrpc":"2.0","id":42,"error":{"code":-31007,
            "message":"tool 'start_vm' requires approval: ask an approver to approve it at http://a/approvals/apr_1, then retry the identical call",
            "data":{"kind":"approval_required","tool":"start_vm","reason":"costs money","expires_in_seconds":600,
                    "approval_id":"apr_1","approval_url":"http://a/approvals/apr_1"}}})
    );

    let o = pipeline::on_approval_answer(
        &p,
        ask(),
        Answer::Denied { approval_id: "apr_2".into(), approver: "alice".into(), note: "use vm 101".into() },
        &store,
        T0,
    );
    assert_eq!(o.decision.kind, DecisionKind::ApprovalDenied);
    let (status, v, _) = reply(&o);
    assert_eq!(status, 200);
    assert_eq!(
        v["error"],
        json!({"code":-31008,"message":"tool 'start_vm' was denied by an approver: use vm 101",
               "data":{"kind":"approval_denied","tool":"start_vm","reason":"use vm 101","approval_id":"apr_2",
                       "approver":"alice","note":"use vm 101"}})
    );
    let o = pipeline::on_approval_answer(
        &p,
        ask(),
        Answer::Denied { approval_id: "apr_2".into(), approver: "alice".into(), note: String::new() },
        &store,
        T0,
    );
    assert_eq!(reply(&o).1["error"]["data"]["reason"], "denied by an approver");

    let o = pipeline::on_approval_answer(
        &p,
        ask(),
        Answer::Unavailable("the approval service did not answer in time".into()),
        &store,
        T0,
    );
    assert_eq!(o.decision.kind, DecisionKind::ApprovalUnavailable);
    let (status, v, headers) = reply(&o);
    assert_eq!((status, headers), (200, vec![("retry-after", "1".to_owned())]));
    assert_eq!(
        v["error"],
        json!({"code":-31009,"message":"tool 'start_vm' refused: approval could not be checked: the approval service did not answer in time",
               "data":{"kind":"approval_unavailable","tool":"start_vm","reason":"the approval service did not answer in time","retry_after_seconds":1}})
    );

    let o = pipeline::on_approval_answer(
        &p,
        ask(),
        Answer::Approved { approval_id: "apr_3".into(), approver: "bob".into() },
        &store,
        T0,
    );
    assert_eq!(o.reply, None);
    assert_eq!(o.approval, None);
    assert_eq!(o.decision.kind, DecisionKind::Approved);
    assert_eq!(o.decision.label(), "approved");
    let audit = o.decision.audit_json("2026-11-30T12:00:00.000Z", Some("rid"));
    assert!(audit.contains(r#""decision":"approved""#) && audit.contains(r#""approval_id":"apr_3""#), "{audit}");
    assert!(!audit.contains("100"), "argument values never reach the audit line: {audit}");
}

#[test]
fn quota_is_reserved_while_asking_and_kept_only_when_the_call_goes_upstream() {
    let p = policy(
        r#""start_vm":{"action":"require_approval","limits":[{"counter":"starts","window":"minute","max":1}]}"#,
        GATEWAY,
    );
    let store = MemoryStore::new();
    let body = call(1, "start_vm", r#"{"vmid":100}"#);
    let before = store.bytes();
    // Pending, denied and unavailable all give the unit back: the next call is asked again.
    for answer in [
        Answer::Pending { approval_id: "a".into(), approval_url: "u".into(), expires_in_seconds: 1 },
        Answer::Denied { approval_id: "a".into(), approver: String::new(), note: String::new() },
        Answer::Unavailable("down".into()),
    ] {
        let pending = held(decide(&p, &store, "agent-a", &body));
        assert!(pending.admission.is_some());
        let o = pipeline::on_approval_answer(&p, pending, answer, &store, T0);
        assert!(o.reply.is_some());
    }
    let pending = held(decide(&p, &store, "agent-a", &body));
    // While a call is held, its unit is taken: a concurrent call is rate limited, not asked.
    let o = decide(&p, &store, "agent-a", &call(2, "start_vm", r#"{"vmid":101}"#));
    assert_eq!(o.decision.kind, DecisionKind::RateLimited);
    assert_eq!(o.approval, None);
    let o = pipeline::on_approval_answer(
        &p,
        pending,
        Answer::Approved { approval_id: "a".into(), approver: "x".into() },
        &store,
        T0,
    );
    assert_eq!(o.reply, None);
    // The approved call used the unit: the next one is refused before any approval is opened.
    let o = decide(&p, &store, "agent-a", &body);
    assert_eq!(o.decision.kind, DecisionKind::RateLimited);
    assert_eq!(o.approval, None);
    assert!(store.bytes() > before);
}

#[test]
fn conditions_and_denials_come_before_approval() {
    let p = policy(
        r#""start_vm":{"action":"require_approval","require":[{"path":"args.vmid","op":"in","value":[100,101]}]},
           "delete_vm":{"action":"deny"}"#,
        GATEWAY,
    );
    let store = MemoryStore::new();
    let o = decide(&p, &store, "a", &call(1, "start_vm", r#"{"vmid":999}"#));
    assert_eq!(o.decision.kind, DecisionKind::Denied);
    assert_eq!(o.approval, None);
    assert_eq!(reply(&o).1["error"]["code"], -31001);
    let o = decide(&p, &store, "a", &call(1, "delete_vm", r#"{"vmid":100}"#));
    assert_eq!((o.decision.kind, o.approval.is_none()), (DecisionKind::Denied, true));
    let o = decide(&p, &store, "a", &call(1, "start_vm", r#"{"vmid":101}"#));
    assert!(o.approval.is_some());
}

#[test]
fn dry_run_asks_nobody_and_forwards() {
    let p = policy(r#""start_vm":{"action":"require_approval"}"#, &format!(r#"{GATEWAY},"mode":"dry_run""#));
    let o = decide(&p, &MemoryStore::new(), "a", &call(1, "start_vm", "{}"));
    assert_eq!((o.reply, o.approval), (None, None));
    assert_eq!(o.decision.kind, DecisionKind::ApprovalRequired);
    assert_eq!(o.decision.label(), "would_deny");
}

#[test]
fn a_batch_cannot_carry_a_call_that_needs_approval() {
    let p = policy(
        r#""start_vm":{"action":"require_approval","limits":[{"counter":"c","window":"minute","max":5,"scope":"global"}]},
           "list_vms":{"limits":[{"counter":"c","window":"minute","max":5,"scope":"global"}]}"#,
        GATEWAY,
    );
    let store = MemoryStore::new();
    let batch = format!("[{},{}]", call(1, "list_vms", "{}"), call(2, "start_vm", r#"{"vmid":100}"#));
    let o = decide(&p, &store, "a", &batch);
    assert_eq!(o.approval, None);
    assert_eq!(o.decision.kind, DecisionKind::ApprovalRequired);
    let (status, v, _) = reply(&o);
    assert_eq!(status, 200);
    assert_eq!(v[0]["error"]["code"], -31005);
    assert_eq!(
        v[1],
        json!({"jsonrpc":"2.0","id":2,"error":{"code":-31007,
            "message":"tool 'start_vm' requires approval: a call that needs approval cannot be part of a batch; send it on its own",
            "data":{"kind":"approval_required","tool":"start_vm","reason":"a call that needs approval cannot be part of a batch; send it on its own"}}})
    );
    // Both reserved units went back: five single list_vms calls still pass.
    for i in 0..5 {
        assert_eq!(decide(&p, &store, "a", &call(i, "list_vms", "{}")).decision.kind, DecisionKind::Allowed);
    }
    assert_eq!(decide(&p, &store, "a", &call(9, "list_vms", "{}")).decision.kind, DecisionKind::RateLimited);
}

#[test]
fn max_held_per_grant_is_checked() {
    let p = policy(
        r#""start_vm":{"action":"require_approval"}"#,
        r#""approval":{"cluster":"c","mode":"hold","max_held_per_grant":2}"#,
    );
    assert_eq!(p.gateway.approval.as_ref().unwrap().max_held_per_grant, 2);
    for bad in ["0", "10001"] {
        let text = format!(
            r#"{{"version":"1","default":"deny","tools":{{"start_vm":{{"action":"require_approval"}}}},"gateway":{{"approval":{{"cluster":"c","max_held_per_grant":{bad}}}}}}}"#
        );
        assert_eq!(
            load_errors(&text),
            vec![("gateway.approval.max_held_per_grant".to_string(), "must be an integer from 1 to 10000".to_string())]
        );
    }
}
