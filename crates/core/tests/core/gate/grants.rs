//! Grants: missing, unregistered and trusted-header grants, and the 401 challenge.

use super::{call, done, head, policy, post, reply, T0};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline;
use serde_json::json;

#[test]
fn no_grant_is_401_with_the_id() {
    let p = policy("");
    let s = MemoryStore::new();
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json")]);
    let (status, b, headers) = reply(&pipeline::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0));
    assert_eq!((status, b["id"].clone(), b["error"]["code"].clone()), (401, json!(5), json!(-31003)));
    assert_eq!(headers, vec![("www-authenticate", "Bearer".to_owned())]);
    for auth in [&b"Basic YTpi"[..], b"Bearer", b"Bearer a b"] {
        let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("authorization", auth)]);
        assert_eq!(reply(&pipeline::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0)).0, 401);
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
    assert_eq!(reply(&pipeline::on_body(&p, &h, call(5, "list_vms").as_bytes(), &s, T0)).0, 401);
}

#[test]
fn registered_grants_and_trusted_headers() {
    // sha256("abc")
    let p = policy(
        r#","grants":[{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","label":"agent-a"}]"#,
    );
    let s = MemoryStore::new();
    let o = pipeline::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!((o.reply.is_none(), o.decision.grant.as_deref()), (true, Some("agent-a")));
    let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "abd"), call(1, "list_vms").as_bytes(), &s, T0));
    assert_eq!(
        (status, b["error"]["data"]["reason"].as_str()),
        (401, Some("the credential is not a registered grant"))
    );

    let p = policy(r#","grant_header":"X-Agent-Id""#);
    let h = head(&p, &[(":method", b"POST"), ("content-type", b"application/json"), ("x-agent-id", b"agent-7")]);
    assert_eq!(pipeline::on_body(&p, &h, call(1, "list_vms").as_bytes(), &s, T0).reply, None);
    // The bearer token is not a grant when a trusted header is configured.
    assert_eq!(reply(&pipeline::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0)).0, 401);
}

/// MCP authorization: the challenge names the protected resource metadata (RFC 9728 §5.1) on every
/// 401, and a trusted grant header that is repeated (a client copy next to `jwt_authn`'s) or empty
/// is no grant.
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
        let (status, b, headers) = reply(&pipeline::on_body(&p, &with(extra), call(9, "list_vms").as_bytes(), &s, T0));
        assert_eq!((status, &b["id"], b["error"]["data"]["reason"].as_str()), (401, &json!(9), Some(reason)));
        assert_eq!(headers, challenge);
        // GET (the SSE stream) is refused the same way.
        let mut get: Vec<(&str, &[u8])> = vec![(":method", b"GET")];
        get.extend_from_slice(extra);
        let (status, _, headers) = reply(&done(pipeline::on_headers(&p, &head(&p, &get))));
        assert_eq!((status, headers), (401, challenge.clone()));
    }
    let o = pipeline::on_body(&p, &with(&[("x-mcp-grant", b"alice")]), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!(o.decision.grant, Some(mcp_policy_core::identity::grant::Grant::from_credential(b"alice").label()));
    // A repeated Authorization keeps the generic reason (the bearer default is unchanged).
    let p = policy("");
    let h = head(&p, &[(":method", b"GET"), ("authorization", b"Bearer a"), ("authorization", b"Bearer a")]);
    let (status, b, headers) = reply(&done(pipeline::on_headers(&p, &h)));
    assert_eq!(
        (status, b["error"]["data"]["reason"].as_str(), headers),
        (
            401,
            Some("a grant is required: send Authorization: Bearer <token>"),
            vec![("www-authenticate", "Bearer".to_owned())]
        )
    );
}
