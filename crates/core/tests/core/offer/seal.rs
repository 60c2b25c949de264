//! The seal, the rewrite and the offer JSON, exactly.

use super::*;

// ------------------------------------------------------------------------------------ the seal

#[test]
fn seal_is_the_documented_hmac() {
    let sealed = state::seal(&keys(), &grant_a(), &call_key(), "apr_1", 1_700_000_640);
    let mut payload = 1_700_000_640u64.to_be_bytes().to_vec();
    payload.extend_from_slice(b"apr_1");
    let mut mac = SimpleHmac::<Sha256>::new_from_slice(KEY.as_bytes()).unwrap();
    mac.update(b"mcpf-approval-state-v1");
    mac.update(&grant_a());
    mac.update(call_key().as_bytes());
    mac.update(&payload);
    let mut expected = String::from("mcpf-a1.");
    b64::encode_into(&mut expected, &payload, Alphabet::UrlNoPad);
    expected.push('.');
    b64::encode_into(&mut expected, &mac.finalize().into_bytes(), Alphabet::UrlNoPad);
    assert_eq!(sealed, expected);
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), &sealed, 1_700_000_639), Ok("apr_1".to_owned()));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), &sealed, 1_700_000_640), Err(StateError::Expired));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), "mcpf-a1.", 0), Err(StateError::Malformed));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), "server-state", 0), Err(StateError::Malformed));
}

proptest! {
    #[test]
    fn states_open_only_for_their_grant_call_and_time(
        id in "apr_[0-9A-Za-z]{1,40}",
        expiry in 1u64..4_000_000_000,
        g in prop::array::uniform32(any::<u8>()),
        other in prop::array::uniform32(any::<u8>()),
        flip in any::<prop::sample::Index>(),
        junk in "[ -~]{0,80}",
    ) {
        let k = call_key();
        let s = state::seal(&keys(), &g, &k, &id, expiry);
        prop_assert_eq!(state::open(&keys(), &g, &k, &s, expiry - 1), Ok(id.clone()));
        prop_assert_eq!(state::open(&keys(), &g, &k, &s, expiry), Err(StateError::Expired));
        if other != g {
            prop_assert_eq!(state::open(&keys(), &other, &k, &s, 0), Err(StateError::Seal));
        }
        let other_call = approval::key(&g, &server_a(), "start_vm", None);
        prop_assert_eq!(state::open(&keys(), &g, &other_call, &s, 0), Err(StateError::Seal));
        // The same call to another MCP server: the key, and so the seal, differs.
        let other_server = approval::key(&grant_a(), &server_b(), "start_vm", Some(&json_of(r#"{"vmid":100}"#)));
        prop_assert_eq!(state::open(&keys(), &g, &other_server, &s, 0), Err(StateError::Seal));
        // Any single changed character is refused (tampered payload or tag, or a broken form).
        let mut bytes = s.clone().into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        prop_assert!(state::open(&keys(), &g, &k, &tampered, 0).is_err());
        // Forged text, with or without the prefix.
        prop_assert!(state::open(&keys(), &g, &k, &junk, 0).is_err());
        let prefixed = format!("mcpf-a1.{}", junk);
        prop_assert!(state::open(&keys(), &g, &k, &prefixed, 0).is_err());
        // Rotation: the previous key still opens it; a key dropped from the rotation does not.
        let rotated = SessionKeys { current: OLD_KEY.as_bytes().to_vec(), previous: Some(KEY.as_bytes().to_vec()) };
        prop_assert_eq!(state::open(&rotated, &g, &k, &s, 0), Ok(id.clone()));
        let dropped = SessionKeys { current: OLD_KEY.as_bytes().to_vec(), previous: None };
        prop_assert_eq!(state::open(&dropped, &g, &k, &s, 0), Err(StateError::Seal));
        prop_assert_ne!(state::seal(&rotated, &g, &k, &id, expiry), s);
    }
}

// ------------------------------------------------------------------------------------ the rewrite

#[test]
fn the_rewrite_cuts_only_the_members() {
    let cut = |body: &str| {
        rewrite::without_params_members(body.as_bytes(), &rewrite::LEG_MEMBERS)
            .map(|r| (r.replaced_bytes, String::from_utf8(r.body).unwrap()))
    };
    // Each byte of a cut member, and of the one comma that separated it, becomes a space.
    let blank = |n: usize| " ".repeat(n);
    assert_eq!(
        cut(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"k":{"action":"accept"}},"requestState":"s","arguments":{"a":1}}}"#
        ),
        Some((
            150,
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t"{},"arguments":{{"a":1}}}}}}"#,
                blank(62)
            )
        ))
    );
    assert_eq!(
        cut(r#"{"params": {"requestState" : "s" , "name":"t" ,"inputResponses":{}} , "id":2}"#).unwrap().1,
        format!(r#"{{"params": {{{}   "name":"t"{}}} , "id":2}}"#, blank(20), blank(21))
    );
    assert_eq!(
        cut(r#"{"id":3,"params":{"name":"t","arguments":{"requestState":"kept"},"requestState":"s"}}"#).unwrap().1,
        format!(r#"{{"id":3,"params":{{"name":"t","arguments":{{"requestState":"kept"}}{}}}}}"#, blank(19))
    );
    assert_eq!(cut(r#"{"id":4,"params":{"name":"t"}}"#), None, "nothing to cut");
    assert_eq!(cut(r#"[{"params":{"requestState":"s"}}]"#), None, "not one object");
    assert_eq!(cut(r#"{"params":{"requestState":"s"}"#), None, "not JSON");
}

// ------------------------------------------------------------------------------------ the offer JSON

#[test]
fn the_offers_are_exact() {
    let link = ApprovalLink { approval_id: "apr_1".into(), approval_url: URL.into(), expires_in_seconds: 600 };
    assert_eq!(
        offer::input_required(&Id::of(&json_of("7")), &link, "costs \"money\"", "mcpf-a1.x.y"),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"mcp-policy-filter/approval":{"method":"elicitation/create","params":{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"costs \"money\""}}},"requestState":"mcpf-a1.x.y"}}"#
    );
    assert_eq!(
        Refusal::UrlElicitationRequired { tool: "start_vm".into(), reason: "costs money".into(), link }
            .to_json(&Id::of(&json_of("\"a\""))),
        r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32042,"message":"tool 'start_vm' requires approval: open http://127.0.0.1:9/approvals/apr_1 to approve it","data":{"kind":"approval_required","tool":"start_vm","reason":"costs money","elicitations":[{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"costs money"}]}}}"#
    );
}
