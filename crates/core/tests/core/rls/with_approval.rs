//! The rate limit service together with approvals, dry run, and descriptors that cannot be built.

use super::*;

pub(super) fn over_status() -> proto::Status {
    proto::Status { code: proto::CODE_OVER_LIMIT, limit_remaining: 0, until_reset_ms: Some(1_000) }
}

pub(super) fn ok_status() -> proto::Status {
    proto::Status { code: proto::CODE_OK, limit_remaining: 1, until_reset_ms: Some(1_000) }
}

#[test]
fn approval_is_asked_first_and_only_approved_calls_are_counted() {
    let p = policy(
        r#""exec":{"action":"require_approval","limits":[{"counter":"exec","window":"minute","max":10}]}"#,
        &format!(r#"{RLS},"approval":{{"cluster":"mcp_approvals"}}"#),
    );
    let store = MemoryStore::new();
    let out = decide(&p, &store, "tok", &call(5, "exec"));
    assert!(out.rls.is_none(), "waiting for approval consumes nothing");
    let pending = *out.approval.unwrap();
    assert_eq!(pending.rls_limits.len(), 2);
    // Pending and denied answers: no service call at all.
    for a in [
        ApprovalAnswer::Pending {
            approval_id: "a1".into(),
            approval_url: "http://x/a1".into(),
            expires_in_seconds: 60,
        },
        ApprovalAnswer::Denied { approval_id: "a1".into(), approver: "bo".into(), note: String::new() },
        ApprovalAnswer::Unavailable("down".into()),
    ] {
        let out = pipeline::on_approval_answer(&p, pending.clone(), a, &store, T0);
        assert!(out.rls.is_none() && out.reply.is_some());
    }
    // Approved: now the service is asked; over the limit refuses the approved call.
    let approved = ApprovalAnswer::Approved { approval_id: "a1".into(), approver: "bo".into() };
    let out = pipeline::on_approval_answer(&p, pending, approved, &store, T0);
    assert_eq!(out.decision.kind, DecisionKind::Approved);
    let rls_pending = held(out);
    assert_eq!(rls_pending.request(&p, "mcp").unwrap().descriptors[0].hits_addend, Some(1));
    let out = pipeline::rls::on_answer(&p, rls_pending.clone(), answer(proto::CODE_OK, vec![]), T0);
    assert_eq!((out.reply, out.decision.kind), (None, DecisionKind::Approved));
    let out = pipeline::rls::on_answer(&p, rls_pending, answer(proto::CODE_OVER_LIMIT, vec![over_status()]), T0);
    assert_eq!(body(&out)["error"]["data"]["kind"], "rate_limited");
}

#[test]
fn dry_run_asks_and_forwards_refusals_as_would_deny() {
    let p = policy(EXEC, &format!(r#"{RLS},"mode":"dry_run""#));
    let store = MemoryStore::new();
    let pending = held(decide(&p, &store, "tok", &call(1, "exec")));
    assert!(pending.dry_run);
    let out = pipeline::rls::on_answer(&p, pending.clone(), answer(proto::CODE_OVER_LIMIT, vec![over_status()]), T0);
    assert_eq!(out.reply, None);
    assert!(out.decision.dry_run);
    assert_eq!(out.decision.kind, DecisionKind::RateLimited);
    assert_eq!(out.decision.label(), "would_deny");
    let out = pipeline::rls::on_answer(&p, pending, rls::read_answer(14, None), T0);
    assert_eq!((out.reply, out.decision.label()), (None, "would_deny"));
    // Denied calls in dry-run are never counted.
    assert!(decide(&p, &store, "tok", &call(1, "nope")).rls.is_none());
}

#[test]
fn a_descriptor_that_cannot_be_built_refuses_the_call() {
    let p = policy(EXEC, RLS);
    let mut pending = Pending::new([1; 32], false);
    pending.add(&p, Some(mcp_policy_core::wire::mcp::Id::null()), Some("exec".into()), &[0, usize::MAX]);
    let why = pending.request(&p, "mcp").unwrap_err();
    assert_eq!(why, pipeline::rls::NotSendable::Broken);
    let out = pipeline::rls::not_sent(&p, pending.clone(), why, T0);
    assert_eq!(body(&out)["error"]["data"]["kind"], "limiter_unavailable");
    // Never forwarded uncounted, also with failure_mode allow.
    let allow = policy(EXEC, r#""rate_limit_service":{"cluster":"mcp_ratelimit","failure_mode":"allow"}"#);
    let out = pipeline::rls::not_sent(&allow, pending, why, T0);
    assert_eq!(body(&out)["error"]["data"]["reason"], "a rate limit descriptor could not be built");
    assert_eq!(rls::limit_indices(&p, &[&p.limits[0], &policy(EXEC, RLS).limits[0]]), vec![0, usize::MAX]);
}

#[test]
fn without_the_key_shared_data_counts_as_before() {
    let p = policy(EXEC, "");
    let store = MemoryStore::new();
    let out = decide(&p, &store, "tok", &call(1, "exec"));
    assert!(out.rls.is_none() && out.reply.is_none());
    assert!(!store.is_empty());
}

proptest::proptest! {
    /// Any bytes as a service answer: decoded or refused, never a panic; and a decoded answer
    /// always leads to a decision.
    #[test]
    fn any_answer_bytes_are_safe(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
        let p = policy(EXEC, RLS);
        let store = MemoryStore::new();
        let pending = held(decide(&p, &store, "tok", &call(1, "exec")));
        let out = pipeline::rls::on_answer(&p, pending, rls::read_answer(0, Some(&bytes)), T0);
        proptest::prop_assert!(out.reply.is_some() || out.decision.kind == DecisionKind::Allowed);
    }
}
