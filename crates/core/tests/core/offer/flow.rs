//! The offer through `gate`: offered, retried, approved, pending, denied, declined, invalid, fallback.

use super::*;

// ------------------------------------------------------------------------------------ the flow

/// The offer for the 2026-07-28 call with URL elicitation declared: (reply JSON, requestState).
fn offered(p: &Policy, now: u64) -> (Value, String) {
    let h = head(p, V26, None);
    let held = pending(decide_at(p, &h, &call26(1, &format!(",{CAPS}"), ""), now));
    assert_eq!((held.offer, held.key.clone()), (Offer::InputRequired, call_key()));
    let o = answer_pending(p, held, now);
    assert_eq!((o.decision.kind, o.offer), (DecisionKind::ApprovalRequired, Some(offer::Event::InputRequired)));
    assert_eq!(o.decision.error_kind(), Some("approval_required"));
    let (status, v) = body_of(&o);
    assert_eq!(status, 200);
    let state = v["result"]["requestState"].as_str().unwrap().to_owned();
    (v, state)
}

/// The gateway's members of a retry, as the client appends them to `params`.
fn retry_tail(state: &str, action: &str) -> String {
    format!(r#","inputResponses":{{"mcp-policy-filter/approval":{{"action":"{action}"}}}},"requestState":"{state}""#)
}

fn retry_body(id: u64, state: &str, action: &str) -> String {
    call26(id, &format!(",{CAPS}"), &retry_tail(state, action))
}

#[test]
fn offer_retry_approved_is_forwarded_without_the_gateways_members() {
    let p = policy(true);
    let (v, state) = offered(&p, T0);
    let expected_state = state::seal(&keys(), &grant_a(), &call_key(), "apr_1", T0 / 1000 + 600);
    assert_eq!(state, expected_state);
    assert_eq!(
        v,
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{
            "mcp-policy-filter/approval":{"method":"elicitation/create","params":{"mode":"url","url":URL,
            "elicitationId":"apr_1","message":"starting a VM costs money"}}},"requestState":expected_state}})
    );

    // The retry: the same call plus the gateway's answer and state; checked, then held under the same key.
    let body = retry_body(2, &state, "accept");
    let o = decide_at(&p, &head(&p, V26, None), &body, T0 + 5_000);
    // Forwarded: the same bytes with the gateway's members blanked (the length is kept).
    let rewritten = call26(2, &format!(",{CAPS}"), &" ".repeat(retry_tail(&state, "accept").len()));
    assert_eq!(o.rewrite, Some(BodyRewrite { replaced_bytes: body.len(), body: rewritten.into_bytes() }));
    let held = pending(o);
    assert_eq!((held.key.clone(), held.leg.is_continuation(), held.offer), (call_key(), false, Offer::InputRequired));
    let approved = Answer::Approved { approval_id: "apr_1".into(), approver: "alice".into() };
    let o = pipeline::on_approval_answer(&p, held.clone(), approved, &MemoryStore::default(), T0 + 5_000);
    assert_eq!((o.reply.clone(), o.decision.kind), (None, DecisionKind::Approved));

    // Still pending: a new offer (new state, same approval). Denied: −31008 as always.
    let (status, again) = body_of(&answer_pending(&p, held.clone(), T0 + 5_000));
    assert_eq!((status, again["id"].clone()), (200, json!(2)));
    assert_eq!(again["result"]["inputRequests"]["mcp-policy-filter/approval"]["params"]["elicitationId"], "apr_1");
    assert_eq!(
        again["result"]["requestState"],
        json!(state::seal(&keys(), &grant_a(), &call_key(), "apr_1", T0 / 1000 + 605))
    );
    let denied = Answer::Denied { approval_id: "apr_1".into(), approver: "bob".into(), note: "no".into() };
    let (status, v) = body_of(&pipeline::on_approval_answer(&p, held, denied, &MemoryStore::default(), T0));
    assert_eq!((status, v["error"]["code"].clone()), (200, json!(-31008)));
}

#[test]
fn a_declined_elicitation_gets_the_fallback_without_asking() {
    // Declined or cancelled: nobody is asked (an approved approval would run the call and be used
    // up), −31007 without a link, so the client's loop stops.
    let p = policy(true);
    let (_, state) = offered(&p, T0);
    let why = "the client declined the gateway's approval request (inputResponses action decline or cancel); nothing was asked or forwarded";
    for action in ["decline", "cancel"] {
        let o = decide_at(&p, &head(&p, V26, None), &retry_body(3, &state, action), T0);
        assert_eq!(
            (o.approval.is_none(), o.decision.kind, o.offer),
            (true, DecisionKind::ApprovalRequired, Some(offer::Event::Declined))
        );
        assert_eq!(
            body_of(&o),
            (
                200,
                json!({"jsonrpc":"2.0","id":3,"error":{"code":-31007,
                    "message":format!("tool 'start_vm' requires approval: {why}"),
                    "data":{"kind":"approval_required","tool":"start_vm","reason":why}}})
            )
        );
    }
}

#[test]
fn invalid_states_are_refused_with_400_and_the_id() {
    let p = policy(true);
    let (_, state) = offered(&p, T0);
    let expired = "params.requestState has expired; call the tool again without it";
    let not_ours = "params.requestState was not issued by this gateway for this grant and this exact call";
    let mut tampered = state.clone();
    tampered.replace_range(10..11, if &state[10..11] == "A" { "B" } else { "A" });
    let other_args = retry_body(4, &state, "accept").replace(r#""vmid":100"#, r#""vmid":101"#);
    let other_state = state::seal(&keys(), &[9; 32], &call_key(), "apr_1", T0 / 1000 + 600);
    let without_state = call26(4, "", r#","inputResponses":{"mcp-policy-filter/approval":{"action":"accept"}}"#);
    let mixed = retry_body(4, &state, "accept").replace(r#"{"mcp-policy-filter"#, r#"{"x":{},"mcp-policy-filter"#);
    let cases: Vec<(String, String, u64, &str)> = vec![
        (retry_body(4, &state, "accept"), "Bearer agent-a".into(), T0 + 600_000, expired),
        (retry_body(4, &tampered, "accept"), "Bearer agent-a".into(), T0, not_ours),
        (other_args, "Bearer agent-a".into(), T0, not_ours),
        (retry_body(4, &other_state, "accept"), "Bearer agent-a".into(), T0, not_ours),
        (retry_body(4, &state, "accept"), "Bearer agent-b".into(), T0, not_ours),
        (
            retry_body(4, "mcpf-a1.forged", "accept"),
            "Bearer agent-a".into(),
            T0,
            "params.requestState is not an approval state issued by this gateway",
        ),
        (
            without_state,
            "Bearer agent-a".into(),
            T0,
            "params.inputResponses answers the gateway's approval request without its requestState",
        ),
        (
            mixed,
            "Bearer agent-a".into(),
            T0,
            "params.inputResponses may hold only the gateway's approval answer with its requestState",
        ),
        (retry_body(4, &state, "Decline"), "Bearer agent-a".into(), T0, offer::NOT_AN_ELICIT_RESULT),
        (
            retry_body(4, &state, "accept").replace(r#"{"action":"accept"}"#, "{}"),
            "Bearer agent-a".into(),
            T0,
            offer::NOT_AN_ELICIT_RESULT,
        ),
    ];
    let on = |body: String, to: approval::Upstream| (body, to, "Bearer agent-a".to_owned(), T0, not_ours);
    let cases: Vec<(String, approval::Upstream, String, u64, &str)> = cases
        .into_iter()
        .map(|(body, auth, now, why)| (body, server_a(), auth, now, why))
        // The state of the call to one MCP server, retried on another behind the same Envoy.
        .chain([
            on(retry_body(4, &state, "accept"), server_b()),
            on(retry_body(4, &state, "accept"), approval::Upstream { path: "/a/mcp?x".into(), ..server_a() }),
            on(retry_body(4, &state, "accept"), approval::Upstream { authority: "gw2".into(), ..server_a() }),
        ])
        .collect();
    for (body, to, auth, now, why) in cases {
        let h = head_as(&p, V26, None, &auth, &to);
        let o = decide_at(&p, &h, &body, now);
        assert_eq!(o.approval, None, "{body}");
        assert_eq!((o.decision.kind, o.offer), (DecisionKind::Invalid, Some(offer::Event::StateInvalid)));
        let (status, v) = body_of(&o);
        assert_eq!(
            (status, v),
            (
                400,
                json!({"jsonrpc":"2.0","id":4,"error":{"code":-31011,"message":format!("Invalid params: {why}"),
                    "data":{"kind":"approval_state_invalid","tool":"start_vm","reason":why}}})
            ),
            "{body}"
        );
    }
    // The upstream of a retry cannot be read: the gateway's state is not opened, the call not
    // forwarded, and the refusal says why (−31009, as for every approval that cannot be checked).
    let mut h = head(&p, V26, None);
    h.cluster = None;
    let o = decide_at(&p, &h, &retry_body(4, &state, "accept"), T0);
    assert_eq!((o.approval.is_none(), o.rewrite.is_none(), o.offer), (true, true, None));
    let (status, v) = body_of(&o);
    assert_eq!((status, v["id"].clone(), v["error"]["code"].clone()), (200, json!(4), json!(-31009)));
    assert_eq!(v["error"]["data"]["reason"], pipeline::NO_CLUSTER);
    // Without gateway.session_key no state is ever valid.
    let o = decide_at(&policy(false), &head(&policy(false), V26, None), &retry_body(4, &state, "accept"), T0);
    assert_eq!(body_of(&o).1["error"]["data"]["reason"], not_ours);
    // A server's own requestState is not the gateway's business.
    let leg = call26(5, &format!(",{CAPS}"), r#","requestState":"server-state""#);
    let held = pending(decide_at(&p, &head(&p, V26, None), &leg, T0));
    assert_eq!((held.offer, held.leg.request_state.as_deref()), (Offer::Fallback, Some("server-state")));
}

#[test]
fn the_fallback_stays_without_key_capability_or_with_a_batch() {
    let fallback = |p: &Policy, h: &RequestHead, body: &str| {
        let held = pending(decide_at(p, h, body, T0));
        assert_eq!(held.offer, Offer::Fallback, "{body}");
        let (status, v) = body_of(&answer_pending(p, held, T0));
        assert_eq!((status, v["error"]["code"].clone()), (200, json!(-31007)), "{body}");
        assert_eq!(v["error"]["data"]["approval_url"], URL);
    };
    let (with, without) = (policy(true), policy(false));
    fallback(&without, &head(&without, V26, None), &call26(1, &format!(",{CAPS}"), ""));
    fallback(&with, &head(&with, V26, None), &call26(1, "", ""));
    let form_only = r#","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}"#;
    fallback(&with, &head(&with, V26, None), &call26(1, form_only, ""));
    let url_true = r#","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":true}}"#;
    fallback(&with, &head(&with, V26, None), &call26(1, url_true, ""));
    // 2025-11-25 on an m1 session (or none): −31007.
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    fallback(&with, &head(&with, "2025-11-25", None), body);
    let m1 = session::wrap(&keys(), &grant_a(), b"up-1");
    fallback(&with, &head(&with, "2025-11-25", Some(&m1)), body);
    // A batch (2025-03-26 allows them): approval_required without a link, never an offer.
    let batch = format!("[{body}]");
    let h = head(&with, "2025-03-26", None);
    let o = decide_at(&with, &h, &batch, T0);
    assert_eq!(o.approval, None);
    assert_eq!(serde_json::from_str::<Value>(&o.reply.unwrap().body).unwrap()[0]["error"]["code"], -31007);
}

#[test]
fn an_m2_session_gets_url_elicitation_required() {
    let p = policy(true);
    let m2 = session::wrap_with(&keys(), &grant_a(), b"up-1", true);
    assert!(m2.starts_with("m2.dXAtMQ."), "{m2}");
    assert!(session::declares_url_elicitation(&keys(), &grant_a(), m2.as_bytes()));
    assert!(!session::declares_url_elicitation(&keys(), &[9; 32], m2.as_bytes()));
    // The flag is under the tag: an m1 id relabelled m2 is not a session at all.
    let relabelled = session::wrap(&keys(), &grant_a(), b"up-1").replacen("m1.", "m2.", 1);
    assert_eq!(session::unwrap(&keys(), &grant_a(), relabelled.as_bytes()), None);
    assert_eq!(session::unwrap(&keys(), &grant_a(), m2.as_bytes()).as_deref(), Some(&b"up-1"[..]));
    let body =
        r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    let held = pending(decide_at(&p, &head(&p, "2025-11-25", Some(&m2)), body, T0));
    assert_eq!(held.offer, Offer::UrlElicitation);
    let o = answer_pending(&p, held, T0);
    assert_eq!(o.decision.kind, DecisionKind::ApprovalRequired);
    assert_eq!(
        o.reply.unwrap().body,
        r#"{"jsonrpc":"2.0","id":"c","error":{"code":-32042,"message":"tool 'start_vm' requires approval: open http://127.0.0.1:9/approvals/apr_1 to approve it","data":{"kind":"approval_required","tool":"start_vm","reason":"starting a VM costs money","elicitations":[{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"starting a VM costs money"}]}}}"#
    );
}

#[test]
fn initialize_with_url_elicitation_binds_an_m2_session() {
    let init = |caps: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{caps},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
        )
    };
    let p = policy(true);
    let h = RequestHead::from_headers(
        &p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", b"Bearer agent-a")],
    );
    let decide = |p: &Policy, body: &str| pipeline::on_body(p, &h, body.as_bytes(), &MemoryStore::default(), T0);
    assert!(decide(&p, &init(r#"{"elicitation":{"url":{}}}"#)).url_elicitation);
    assert!(decide(&p, &init(r#"{"elicitation":{"form":{},"url":{}},"roots":{}}"#)).url_elicitation);
    for caps in [r#"{}"#, r#"{"elicitation":{}}"#, r#"{"elicitation":{"form":{}}}"#, r#"{"elicitation":{"url":1}}"#] {
        assert!(!decide(&p, &init(caps)).url_elicitation, "{caps}");
    }
    assert!(!decide(&policy(false), &init(r#"{"elicitation":{"url":{}}}"#)).url_elicitation, "no session_key");
    // The id handed out is m2, and presenting it keeps the flag for the ids handed back later.
    let sid = pipeline::session_id_out(&p, Some(&grant_a()), b"up-1", true).unwrap();
    assert_eq!(sid, session::wrap_with(&keys(), &grant_a(), b"up-1", true));
    let again = head(&p, "2025-11-25", Some(&sid));
    assert_eq!(
        pipeline::check_session(&p, &again),
        pipeline::SessionCheck::Bound(pipeline::Binding {
            grant: Some(grant_a()),
            session: Some(b"up-1".to_vec()),
            url_elicitation: true,
            ..Default::default()
        })
    );
}

#[test]
fn a_valid_retry_of_a_tool_allowed_since_is_forwarded_without_the_gateways_members() {
    // The policy changed between the offer and the retry: start_vm is now allowed (with and without
    // a counter). The retry is forwarded at once, still without the gateway's members.
    let (_, state) = offered(&policy(true), T0);
    for rule in [r#"{}"#, r#"{"limits":[{"counter":"vm","window":"minute","max":5,"scope":"grant"}]}"#] {
        let text = format!(
            r#"{{"version":"1","default":"deny","tools":{{"start_vm":{rule}}},
            "gateway":{{"approval":{{"cluster":"mcp_approvals"}},"session_key":{{"current":"{KEY}"}}}}}}"#
        );
        let p = config::load(text.as_bytes()).unwrap();
        let body = retry_body(4, &state, "accept");
        let o = decide_at(&p, &head(&p, V26, None), &body, T0 + 1_000);
        assert_eq!(
            (o.reply.clone(), o.approval.is_none(), o.decision.kind),
            (None, true, DecisionKind::Allowed),
            "{rule}"
        );
        let rewritten = call26(4, &format!(",{CAPS}"), &" ".repeat(retry_tail(&state, "accept").len()));
        assert_eq!(o.rewrite, Some(BodyRewrite { replaced_bytes: body.len(), body: rewritten.into_bytes() }), "{rule}");
    }
}
