//! Who called: the policy, subject, client and actor chain the filter read from the verified token,
//! bound by the key, stored on both stores, returned by the API and shown (escaped) on the page.

use super::*;
use mcp_approvals::store::Caller;

/// A check of `start_vm` by agent `grant_id` with a caller (the four members as the filter sends
/// them) and the key the filter makes for it.
fn caller_check(grant_id: &str, caller: &Caller) -> Value {
    let mut b = check_body(grant_id, json!({"vmid": 100}), 600, 0);
    b["policy"] = json!(caller.policy);
    b["subject"] = json!(caller.subject);
    b["client_id"] = json!(caller.client_id);
    b["act"] = json!(caller.act);
    b["key"] = json!(caller_key(grant_id, Some(caller)));
    b
}

/// The filter's key of [`caller_check`]'s call.
fn caller_key(grant_id: &str, caller: Option<&Caller>) -> String {
    let g = mcp_policy_core::identity::grant::from_hex32(grant_id).unwrap();
    let s = |k: &str| up_a()[k].as_str().unwrap().to_owned();
    let up = mcp_approvals::store::Upstream { cluster: s("cluster"), authority: s("authority"), path: s("path") };
    let args = mcp_policy_core::wire::json::parse(br#"{"vmid":100}"#).unwrap();
    mcp_policy_core::approval::key_for(caller, &g, &up, "start_vm", Some(&args), None, None)
}

fn delegated() -> Caller {
    Caller {
        policy: Some("ops".into()),
        subject: Some("alice@example.com".into()),
        client_id: Some("ops-console".into()),
        act: vec!["agent-ci".into(), "orchestrator".into()],
    }
}

#[tokio::test]
async fn the_caller_is_stored_returned_and_shown() {
    let s = svc();
    let r = check_raw(&s, caller_check(&grant(110), &delegated())).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let id = id_of(&r.json());
    let one = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(
        (&one["policy"], &one["subject"], &one["client_id"], &one["act"]),
        (&json!("ops"), &json!("alice@example.com"), &json!("ops-console"), &json!(["agent-ci", "orchestrator"]))
    );
    assert_eq!(one["key"], caller_key(&grant(110), Some(&delegated())));
    let line = "<p class=\"caller\">caller: subject <b class=\"mono subject\">alice@example.com</b> · client \
                <span class=\"mono client-id\">ops-console</span> · actors, current first: <span class=\"mono actor\">\
                agent-ci</span>, <span class=\"mono actor\">orchestrator</span> · policy <span class=\"mono policy\">ops\
                </span></p>";
    for path in ["/".to_string(), format!("/approvals/{id}")] {
        let html = page_of(&s, &path).await;
        let card = article(&html, &id);
        assert!(card.contains(line), "{card}");
        assert!(!card.contains("data-warning=\"escaped\""), "{card}");
    }
    // Consumed once approved: the record keeps who asked.
    assert_eq!(approve(&s, &id, "").await.status, StatusCode::OK);
    let used = check_raw(&s, caller_check(&grant(110), &delegated())).await.json();
    assert_eq!(used["status"], "approved");
    let all = all_approvals(&s).await;
    assert_eq!(all["approvals"][0]["act"], json!(["agent-ci", "orchestrator"]));
    assert_eq!(all["approvals"][0]["state"], "consumed");
}

#[tokio::test]
async fn an_approval_is_used_only_by_the_caller_it_was_given_to() {
    let s = svc();
    let id = id_of(&check_raw(&s, caller_check(&grant(111), &delegated())).await.json());
    assert_eq!(approve(&s, &id, "").await.status, StatusCode::OK);
    // The same call of the same grant by another actor, client or policy, or without a caller,
    // is another key: a new pending approval, the approved one untouched.
    let mut others = Vec::new();
    for other in [
        Caller { act: vec!["agent-evil".into(), "orchestrator".into()], ..delegated() },
        Caller { act: vec![], ..delegated() },
        Caller { client_id: Some("other-client".into()), ..delegated() },
        Caller { policy: Some("readonly".into()), ..delegated() },
    ] {
        let v = check_raw(&s, caller_check(&grant(111), &other)).await.json();
        assert_eq!(v["status"], "pending", "{other:?}");
        others.push(id_of(&v));
    }
    let plain = check(&s, &grant(111)).await;
    assert_eq!(plain["status"], "pending");
    others.push(id_of(&plain));
    others.sort();
    others.dedup();
    assert_eq!(others.len(), 5);
    assert!(!others.contains(&id));
    let v = check_raw(&s, caller_check(&grant(111), &delegated())).await.json();
    assert_eq!((v["status"].as_str(), v["approval_id"].as_str()), (Some("approved"), Some(id.as_str())));
}

#[tokio::test]
async fn a_caller_without_a_subject_and_a_plain_call_show_what_they_have() {
    let s = svc();
    // A service token: a client, no subject, no actor, plain policy (no name).
    let service = Caller { policy: None, subject: None, client_id: Some("ci-bot".into()), act: vec![] };
    let id = id_of(&check_raw(&s, caller_check(&grant(112), &service)).await.json());
    let one = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(
        (&one["policy"], &one["subject"], &one["client_id"], &one["act"]),
        (&Value::Null, &Value::Null, &json!("ci-bot"), &json!([]))
    );
    let html = page_of(&s, &format!("/approvals/{id}")).await;
    assert!(article(&html, &id)
        .contains("<p class=\"caller\">caller: client <span class=\"mono client-id\">ci-bot</span></p>"));
    // Without identity: nulls, and no caller line.
    let plain = id_of(&check(&s, &grant(113)).await);
    let one = api(&s, Method::GET, &format!("/v1/approvals/{plain}"), Some(ALICE), None).await.json();
    assert_eq!(
        (&one["policy"], &one["subject"], &one["client_id"], &one["act"]),
        (&Value::Null, &Value::Null, &Value::Null, &json!([]))
    );
    let html = page_of(&s, &format!("/approvals/{plain}")).await;
    assert!(!article(&html, &plain).contains("class=\"caller\""));
}

#[tokio::test]
async fn caller_values_are_escaped_on_the_page() {
    let s = svc();
    let hostile = Caller {
        policy: Some("ops".into()),
        subject: Some("<script>alert(1)</script>".into()),
        client_id: Some("cli\u{202e}gnp.exe".into()),
        act: vec!["a\"b&c".into(), "bob\u{200b}".into()],
    };
    let id = id_of(&check_raw(&s, caller_check(&grant(114), &hostile)).await.json());
    let html = page_of(&s, &format!("/approvals/{id}")).await;
    let card = article(&html, &id);
    assert!(card.contains(
        "<p class=\"caller\">caller: subject <b class=\"mono subject\">&lt;script&gt;alert(1)&lt;/script&gt;</b> · \
         client <span class=\"mono client-id\">cli\\u202egnp.exe</span> · actors, current first: \
         <span class=\"mono actor\">a&quot;b&amp;c</span>, <span class=\"mono actor\">bob\\u200b</span> · policy \
         <span class=\"mono policy\">ops</span></p>"
    ), "{card}");
    assert!(card.contains("data-warning=\"escaped\""), "{card}");
    assert!(!html.contains("<script>alert"));
    // The API returns them as sent.
    let one = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(one["client_id"], "cli\u{202e}gnp.exe");
    assert_eq!(one["act"], json!(["a\"b&c", "bob\u{200b}"]));
}

#[tokio::test]
async fn bad_callers_are_refused() {
    let s = svc();
    let good = caller_check(&grant(115), &delegated());
    let cases: Vec<(&str, Value, &str)> = vec![
        ("policy", json!(5), "policy: must be a string or null"),
        ("subject", json!(["alice"]), "subject: must be a string or null"),
        ("client_id", json!("x".repeat(1025)), "client_id: longer than 1024 bytes"),
        ("subject", json!("a\u{0}b"), "subject: must not contain U+0000"),
        ("act", json!("agent-ci"), "act: must be an array of strings"),
        ("act", json!([1]), "act: must be an array of strings"),
        ("act", json!(vec!["a"; 9]), "act: at most 8 actors"),
    ];
    for (field, value, msg) in cases {
        let mut b = good.clone();
        b[field] = value.clone();
        let r = check_raw(&s, b).await;
        assert_eq!((r.status, r.json()["error"].as_str().unwrap()), (StatusCode::BAD_REQUEST, msg), "{field}={value}");
    }
    // All four or none.
    for field in ["policy", "subject", "client_id", "act"] {
        let mut b = good.clone();
        b.as_object_mut().unwrap().remove(field);
        let r = check_raw(&s, b).await;
        assert_eq!(
            (r.status, r.json()["error"].as_str().unwrap()),
            (StatusCode::BAD_REQUEST, "policy, subject, client_id and act: send all four or none"),
            "{field}"
        );
    }
    // A caller the key was not made with.
    let mut b = good.clone();
    b["subject"] = json!("mallory");
    let r = check_raw(&s, b).await;
    assert_eq!(
        (r.status, r.json()["error"].as_str().unwrap()),
        (StatusCode::BAD_REQUEST, "key does not match grant_id, upstream, tool and arguments")
    );
    assert_eq!(all_approvals(&s).await["approvals"], json!([]));
}

#[tokio::test]
async fn a_row_written_without_a_caller_reads_as_none_on_every_store() {
    let s = svc();
    // As a schema 5 writer inserts: none of the caller's columns named.
    let insert = "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, created_at, \
                  expires_in, expires_at, grant_id, upstream_cluster, upstream_authority, upstream_path) VALUES \
                  ('apr_00000000000000000000000001', 'k5', 'pending', 'g', 'start_vm', '{}', '', 1764500000, 600, \
                  1764500600, '', 'mcp_a', 'gw:10000', '/a/mcp')";
    match &s.db {
        Location::Sqlite(p) => {
            rusqlite::Connection::open(p).unwrap().execute_batch(insert).unwrap();
        }
        Location::Postgres(url) => with_pg(url.clone(), move |c| c.batch_execute(insert).unwrap()),
    }
    let id = "apr_00000000000000000000000001";
    let one = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(
        (&one["policy"], &one["subject"], &one["client_id"], &one["act"], &one["state"]),
        (&Value::Null, &Value::Null, &Value::Null, &json!([]), &json!("pending"))
    );
    let html = page_of(&s, "/").await;
    assert!(!article(&html, id).contains("class=\"caller\""));
}
