//! Hardening: what the approver sees (escaping, long arguments, held buttons, counts, recent
//! decisions), retention and the schema 1 migration.

use super::*;

#[tokio::test]
async fn invisible_and_confusable_characters_are_shown_escaped() {
    let s = svc();
    // U+200B making a second "vmid", Cyrillic і, bidi override, U+2028, a C1 control, a BOM, NBSP
    // padding, an astral character: all escaped, with the badge and the look-alike warning.
    let args =
        "{\"vmid\":100,\"vmid\u{200b}\":101,\"cmd\":\"\u{0456}d \u{202e}fdp.exe\",\"x\":\"\u{2028}\u{0085}\u{feff}\",\
                \"pad\":\"\u{a0}\u{a0}\u{a0}rm -rf /\",\"e\":\"\u{1F600}\",\"n\":123456789012345678901234567890}";
    let body = format!(
        r#"{{"key":"{}","grant_id":"{}","grant":"g","tool":"start_vm","upstream":{UP},"arguments":{args},"request_id":"r\u2028x","expires_in_seconds":60,"wait_seconds":0}}"#,
        key_of(&grant(46), "start_vm", args),
        grant(46)
    );
    let r = send(&s.router, check_request(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let id = id_of(&r.json());
    let want_pre = "<pre class=\"arguments\">{\n  &quot;vmid&quot;: 100,\n  &quot;vmid\\u200b&quot;: 101,\n  \
                    &quot;cmd&quot;: &quot;\\u0456d \\u202efdp.exe&quot;,\n  &quot;x&quot;: &quot;\\u2028\\u0085\\ufeff&quot;,\n  \
                    &quot;pad&quot;: &quot;\\u00a0\\u00a0\\u00a0rm -rf /&quot;,\n  &quot;e&quot;: &quot;\\ud83d\\ude00&quot;,\n  \
                    &quot;n&quot;: 123456789012345678901234567890\n}</pre>";
    for path in ["/".to_string(), format!("/approvals/{id}")] {
        let html = page_of(&s, &path).await;
        let card = article(&html, &id);
        assert!(card.contains(want_pre), "{card}");
        assert!(card.contains(
            "<p class=\"warning\" data-warning=\"escaped\"><strong class=\"badge\">contains non-ASCII or invisible characters: shown escaped</strong></p>"
        ), "{card}");
        assert!(card.contains(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">keys that look alike in arguments: &quot;vmid&quot; and &quot;vmid\\u200b&quot; (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)</strong></p>"
        ), "{card}");
        assert!(
            card.contains(&format!("<p class=\"meta size\">arguments: {} bytes as sent</p>", args.len())),
            "{card}"
        );
        assert!(card.contains(" · request id <span class=\"mono request-id\">r\\u2028x</span>"), "{card}");
        assert!(card.contains("value=\"approve\""));
        // Nothing outside printable ASCII inside the card but our own middle dots.
        assert!(!card.contains('\u{200b}') && !card.contains('\u{202e}') && !card.contains('\u{a0}'));
        // No scroll box that could clip the arguments.
        assert!(!html.contains("max-height") && !html.contains("overflow:auto"));
    }
    // A plain card: no warnings.
    let id2 = id_of(&check(&s, &grant(47)).await);
    let html = page_of(&s, "/").await;
    let card = article(&html, &id2);
    assert!(!card.contains("class=\"warning\""), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 12 bytes as sent</p>"), "{card}");
    // Tool names are escaped too.
    let mut b = check_body(&grant(48), json!({}), 600, 0);
    b["tool"] = json!("start_vm\u{200b}");
    let id3 = id_of(&check_raw(&s, sign(b)).await.json());
    let html = page_of(&s, &format!("/approvals/{id3}")).await;
    let card = article(&html, &id3);
    assert!(card.contains("<span class=\"tool\">start_vm\\u200b</span>"), "{card}");
    assert!(card.contains("data-warning=\"escaped\""), "{card}");
}

#[tokio::test]
async fn long_arguments_are_approved_only_on_their_own_page() {
    let s = svc();
    let filler = "A".repeat(5000);
    let id =
        id_of(&check_raw(&s, check_body(&grant(49), json!({"cmd": filler, "then": "rm -rf /"}), 600, 0)).await.json());
    let raw = format!("{{\"cmd\":\"{filler}\",\"then\":\"rm -rf /\"}}");
    assert_eq!(raw.len(), 5028);
    let rendered = format!("{{\n  \"cmd\": \"{filler}\",\n  \"then\": \"rm -rf /\"\n}}");
    let html = page_of(&s, "/").await;
    let card = article(&html, &id);
    // Over 4096 bytes as sent: the list reads only their first 4096 bytes and shows them as sent.
    let head = raw[..4096].replace('"', "&quot;");
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains(&format!(
        "<p class=\"truncated\">… 5028 bytes in all: <a href=\"/approvals/{id}\">open the approval to review them</a></p>"
    )));
    assert!(!card.contains("rm -rf"));
    assert!(!card.contains("value=\"approve\""), "no Approve on a cut card");
    assert!(card.contains("<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button>"));
    assert!(card.contains(&format!("<a href=\"/approvals/{id}\" class=\"review\">Review all arguments to approve</a>")));
    assert!(card.contains("<p class=\"meta size\">arguments: 5028 bytes as sent</p>"), "{card}");
    // The approval's page: everything, both buttons.
    let html = page_of(&s, &format!("/approvals/{id}")).await;
    let card = article(&html, &id);
    assert!(card.contains(&format!("<pre class=\"arguments\">{}</pre>", rendered.replace('"', "&quot;"))));
    assert!(
        card.contains("<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>")
    );
    assert!(!card.contains("truncated"));
    // Exactly 4096 rendered bytes is shown whole, with Approve.
    let fits = "B".repeat(4096 - "{\n  \"c\": \"\"\n}".len());
    let id2 = id_of(&check_raw(&s, check_body(&grant(50), json!({"c": fits}), 600, 0)).await.json());
    let card = article(&html_of_index(&s).await, &id2).to_string();
    assert!(card.contains("value=\"approve\"") && !card.contains("truncated"), "{card}");
    // Short as sent (3001 bytes) but longer rendered (1500 lines): the first 4096 rendered bytes.
    let zeros = vec![0; 1500];
    let id3 = id_of(&check_raw(&s, check_body(&grant(55), json!(zeros), 600, 0)).await.json());
    let rendered = format!("[\n{}\n]", vec!["  0"; 1500].join(",\n"));
    assert_eq!(rendered.len(), 7502);
    let card = article(&html_of_index(&s).await, &id3).to_string();
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{}</pre>", &rendered[..4096])), "{card}");
    assert!(card.contains("… 7502 bytes in all: ") && !card.contains("value=\"approve\""), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 3001 bytes as sent</p>"), "{card}");
}

#[tokio::test]
async fn buttons_wait_after_every_load() {
    let s = svc();
    check(&s, &grant(51)).await;
    let html = page_of(&s, "/").await;
    // Enabled in the HTML (no script: usable), disabled for 1.5 s by the page's script. The only
    // button disabled in the HTML is each form's hidden default button, so Enter in the note field
    // submits nothing instead of pressing Approve.
    assert_eq!(html.matches(" disabled").count(), 1, "{html}");
    assert!(html.contains(
        "class=\"decide\"><button type=\"submit\" class=\"no-enter\" disabled hidden aria-hidden=\"true\" \
         tabindex=\"-1\"></button><input type=\"hidden\" name=\"csrf\""
    ));
    assert!(html.contains("var b=document.querySelectorAll('form.decide button:not(.no-enter)');"));
    assert!(html.contains("setTimeout(function(){for(var i=0;i<b.length;i++)b[i].disabled=false;},1500);"));
    assert!(html.contains("button:disabled{opacity:.4;"));
    assert!(html.contains("<script nonce=\""));
}

#[tokio::test]
async fn index_shows_the_true_count_oldest_first() {
    let s = svc_with(Config { max_pending_per_grant: 1000, ..config() });
    let mut ids = Vec::new();
    for n in 0..205 {
        ids.push(id_of(&check_raw(&s, check_body(&grant(52), json!({"n": n}), 3600, 0)).await.json()));
        s.clock.advance(1);
    }
    let html = page_of(&s, "/").await;
    assert!(html.contains("<h2>Pending <span class=\"muted\" id=\"pending-count\">(205)</span></h2>"));
    assert!(html.contains("<p class=\"muted\" id=\"pending-shown\">showing the oldest 200 of 205</p>"));
    assert!(html.contains("<title>(205) MCP approvals</title>"));
    let shown: Vec<&str> =
        html.split("<article class=\"approval\" data-approval-id=\"").skip(1).map(|rest| &rest[..30]).collect();
    assert_eq!(shown, ids[..200].iter().map(String::as_str).collect::<Vec<_>>(), "the oldest 200, oldest first");
    // Under the limit: no "showing".
    let s = svc();
    let a = id_of(&check(&s, &grant(53)).await);
    s.clock.advance(1);
    let b = id_of(&check(&s, &grant(54)).await);
    let html = page_of(&s, "/").await;
    assert!(!html.contains("pending-shown"));
    assert!(html.find(&a).unwrap() < html.find(&b).unwrap(), "new cards join at the bottom");
}

#[tokio::test]
async fn recent_decisions_are_decisions_only() {
    let s = svc();
    let expired = id_of(&check_raw(&s, check_body(&grant(55), json!({}), 60, 0)).await.json());
    let denied = id_of(&check(&s, &grant(56)).await);
    deny(&s, &denied, "no").await;
    s.clock.advance(61);
    assert_eq!(s.app.expire_now().await.unwrap(), 1);
    let html = page_of(&s, "/").await;
    assert!(html.contains(&format!("<tr class=\"decision\" data-approval-id=\"{denied}\">")));
    assert!(!html.contains(&expired), "an expiry is not a decision");
    assert_eq!(html.matches("<tr class=\"decision\"").count(), 1);
}

#[tokio::test]
async fn retention_deletes_old_settled_approvals() {
    let s = svc();
    let day = 86_400;
    let consumed = id_of(&check(&s, &grant(57)).await);
    approve(&s, &consumed, "").await;
    assert_eq!(check(&s, &grant(57)).await["status"], "approved");
    let denied = id_of(&check(&s, &grant(58)).await);
    deny(&s, &denied, "").await;
    let expired = id_of(&check_raw(&s, check_body(&grant(59), json!({}), 60, 0)).await.json());
    s.clock.set(T0 + 90 * day);
    let pending = id_of(&check(&s, &grant(60)).await);
    // Last timestamps: expired T0 + 60 (its expiry); consumed T0 + 600 (the end of its window);
    // denied T0 + 600 (the denial's expiry). Kept until more than 90 days after them.
    s.clock.set(T0 + 60 + 90 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    s.clock.advance(1);
    assert_eq!(s.app.purge_now().await.unwrap(), 1);
    s.clock.set(T0 + 600 + 90 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    s.clock.advance(1);
    assert_eq!(s.app.purge_now().await.unwrap(), 2);
    let left = all_approvals(&s).await;
    let left: Vec<&str> = left["approvals"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    // The pending one expired meanwhile (T0 + 90 days + 600) but is recent: kept.
    assert_eq!(left, vec![pending.as_str()]);
    assert!(![consumed, denied, expired].iter().any(|id| left.contains(&id.as_str())));
    // 0 keeps everything.
    let s = svc_with(Config { retain_days: 0, ..config() });
    check_raw(&s, check_body(&grant(61), json!({}), 60, 0)).await;
    s.clock.advance(10_000 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    assert_eq!(all_approvals(&s).await["approvals"][0]["state"], "expired");
}

#[tokio::test]
async fn a_schema_1_file_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.sqlite");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE approvals (id TEXT PRIMARY KEY, key TEXT NOT NULL, state TEXT NOT NULL \
             CHECK (state IN ('pending', 'approved', 'denied', 'consumed', 'expired')), grant_label TEXT NOT NULL, \
             tool TEXT NOT NULL, arguments TEXT NOT NULL, request_id TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', \
             created_at INTEGER NOT NULL, expires_in INTEGER NOT NULL, expires_at INTEGER NOT NULL, decided_at INTEGER, \
             approver TEXT, note TEXT NOT NULL DEFAULT '', consumed_at INTEGER, consumed_request_id TEXT) STRICT; \
             INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, created_at, expires_in, expires_at) \
             VALUES ('apr_00000000000000000000000000', 'k', 'pending', 'g', 't', '{}', '', 1764500000, 600, 1764500600); \
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let app = App::open(&db, config(), ManualClock::new(T0)).unwrap();
    let r = router(app);
    let got = api_on(&r, Method::GET, "/v1/approvals/apr_00000000000000000000000000", Some(ALICE), None).await;
    assert_eq!(got.json()["state"], "pending");
    // Stored before upstreams were bound: none is claimed (its key matches no current check).
    assert_eq!(got.json()["upstream"], Value::Null);
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (v, gid): (i64, String) = conn
        .query_row("SELECT (SELECT user_version FROM pragma_user_version), grant_id FROM approvals", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((v, gid.as_str()), (6, ""));
    // Stored before callers were recorded: none is claimed.
    let r = router(App::open(&db, config(), ManualClock::new(T0)).unwrap());
    let got = api_on(&r, Method::GET, "/v1/approvals/apr_00000000000000000000000000", Some(ALICE), None).await.json();
    assert_eq!((&got["subject"], &got["act"]), (&Value::Null, &json!([])));
}
