//! Second red-team pass: click-jacking window, numbers, whitespace, flooding, the list's reads.

use super::*;

#[tokio::test]
async fn buttons_are_held_from_the_head_before_anything_paints() {
    let s = svc();
    check(&s, &grant(80)).await;
    let cookie = login(&s, "alice", ALICE).await;
    let r = send(&s.router, get("/", Some(&cookie))).await;
    let html = r.body;
    let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    let nonce = &csp[csp.find("'nonce-").unwrap() + 7..][..32];
    let head_script = format!(
        "<script nonce=\"{nonce}\">(function(){{var h=document.documentElement,t=0;\n\
         function hold(){{h.classList.add('hold');}}\n\
         function release(){{clearTimeout(t);t=setTimeout(function(){{h.classList.remove('hold');}},1500);}}\n\
         hold();document.addEventListener('DOMContentLoaded',release);\n\
         window.addEventListener('pagehide',hold);\n\
         window.addEventListener('pageshow',function(e){{if(e.persisted){{hold();release();}}}});}})();</script></head>"
    );
    let at = html.find(&head_script).unwrap_or_else(|| panic!("{html}"));
    assert!(at < html.find("<body").unwrap(), "the hold is set before <body>");
    assert!(html.find("html.hold form.decide button{pointer-events:none;opacity:.45}\n").unwrap() < at);
    // The buttons it holds; nothing is held in the HTML itself (no script: usable).
    assert!(html.contains("<form method=\"post\" action=\"/approvals/"));
    assert!(html.contains("class=\"decide\">"));
    assert!(!html.contains("class=\"hold\"") && !html.contains("<html lang=\"en\" class"));
    // The end-of-body disabling stays, with the same nonce.
    assert_eq!(html.matches(&format!("<script nonce=\"{nonce}\">")).count(), 2);
    // An approval's own page is held the same way; the login page has no script.
    let id = id_of(&check(&s, &grant(81)).await);
    let html = send(&s.router, get(&format!("/approvals/{id}"), Some(&cookie))).await.body;
    assert!(html.contains("window.addEventListener('pagehide',hold);"));
    let html = send(&s.router, get("/login", None)).await.body;
    assert!(!html.contains("<script"));
}

#[tokio::test]
async fn numbers_a_server_may_read_differently_get_a_badge() {
    let s = svc();
    let badge =
        "<p class=\"warning\" data-warning=\"numbers\"><strong class=\"badge\">numbers that a server may round or \
                 read differently (fractions, exponents, beyond ±2^53): shown exactly as sent</strong></p>";
    let cases: &[(&str, &str, bool)] = &[
        (r#"{"vmid":101.99999999999999999}"#, "{\n  &quot;vmid&quot;: 101.99999999999999999\n}", true),
        (r#"{"vmid":1e2}"#, "{\n  &quot;vmid&quot;: 1e2\n}", true),
        (r#"{"vmid":100.0}"#, "{\n  &quot;vmid&quot;: 100.0\n}", true),
        (r#"{"vmid":-0}"#, "{\n  &quot;vmid&quot;: -0\n}", true),
        (
            r#"{"a":[1,{"b":9007199254740993}]}"#,
            "{\n  &quot;a&quot;: [\n    1,\n    {\n      &quot;b&quot;: 9007199254740993\n    }\n  ]\n}",
            true,
        ),
        (r#"{"vmid":-9007199254740993}"#, "{\n  &quot;vmid&quot;: -9007199254740993\n}", true),
        (
            r#"{"vmid":123456789012345678901234567890}"#,
            "{\n  &quot;vmid&quot;: 123456789012345678901234567890\n}",
            true,
        ),
        // Exact in a double: no badge.
        (r#"{"vmid":9007199254740992}"#, "{\n  &quot;vmid&quot;: 9007199254740992\n}", false),
        (r#"{"vmid":-9007199254740992}"#, "{\n  &quot;vmid&quot;: -9007199254740992\n}", false),
        (
            r#"{"vmid":101,"z":0,"n":-5}"#,
            "{\n  &quot;vmid&quot;: 101,\n  &quot;z&quot;: 0,\n  &quot;n&quot;: -5\n}",
            false,
        ),
    ];
    for (args, pre, warn) in cases {
        let r = check_text(&s, &grant(82), "g", args).await;
        assert_eq!(r.status, StatusCode::OK, "{args}: {}", r.body);
        let id = id_of(&r.json());
        for path in ["/".to_string(), format!("/approvals/{id}")] {
            let html = page_of(&s, &path).await;
            let card = article(&html, &id);
            assert!(card.contains(&format!("<pre class=\"arguments\">{pre}</pre>")), "{args}: {card}");
            assert_eq!(warnings_of(card), if *warn { vec!["numbers"] } else { vec![] }, "{args}");
            assert_eq!(card.contains(badge), *warn, "{args}: {card}");
        }
    }
}

#[tokio::test]
async fn whitespace_and_lookalike_keys_get_warnings() {
    let s = svc();
    let ws = "<p class=\"warning\" data-warning=\"whitespace\"><strong class=\"badge\">strings with runs of spaces or \
              leading/trailing whitespace: check line breaks</strong></p>";
    let look = |path: &str, a: &str, b: &str| {
        format!(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">keys that look alike in {path}: \
             &quot;{a}&quot; and &quot;{b}&quot; (equal without non-ASCII or invisible characters, punctuation or \
             spaces, or ignoring case)</strong></p>"
        )
    };
    let cases: Vec<(&str, Vec<&str>, Vec<String>)> = vec![
        (r#"{"cmd":"ls -l                                        rm -rf /"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":"ls    -l"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":" ls"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":"ls\n"}"#, vec!["escaped", "whitespace"], vec![ws.into()]),
        (r#"{"a":["x","y\t"]}"#, vec!["escaped", "whitespace"], vec![ws.into()]),
        // A key with trailing whitespace: both warnings.
        (
            r#"{"vmid":100,"vmid ":101}"#,
            vec!["whitespace", "lookalike"],
            vec![ws.into(), look("arguments", "vmid", "vmid ")],
        ),
        (r#"{"vm_id":100,"vm-id":101}"#, vec!["lookalike"], vec![look("arguments", "vm_id", "vm-id")]),
        (r#"{"o":{"vm.id":1,"VMID":2,"x":3}}"#, vec!["lookalike"], vec![look("arguments.o", "vm.id", "VMID")]),
        (
            r#"{"vm_id":1,"vm-id":2,"vm.id":3}"#,
            vec!["lookalike", "lookalike", "lookalike"],
            vec![
                look("arguments", "vm_id", "vm-id"),
                look("arguments", "vm_id", "vm.id"),
                look("arguments", "vm-id", "vm.id"),
            ],
        ),
        // Three spaces, inner single spaces, distinct keys: nothing.
        (r#"{"cmd":"ls   -l","vmid":1,"vmids":2,"node":"a b"}"#, vec![], vec![]),
    ];
    for (args, kinds, badges) in cases {
        let r = check_text(&s, &grant(83), "g", args).await;
        assert_eq!(r.status, StatusCode::OK, "{args}: {}", r.body);
        let id = id_of(&r.json());
        let html = page_of(&s, &format!("/approvals/{id}")).await;
        let card = article(&html, &id);
        assert_eq!(warnings_of(card), kinds, "{args}");
        for b in &badges {
            assert!(card.contains(b.as_str()), "{args}: {card}");
        }
    }
}

#[tokio::test]
async fn pending_approvals_are_capped_in_all() {
    let s = svc_with(Config { max_pending: 3, ..config() });
    let mut ids = Vec::new();
    for n in 0..3u8 {
        let r = check_raw(&s, check_body(&grant(90 + n), json!({"vmid": 1}), 600, 0)).await;
        assert_eq!(r.status, StatusCode::OK);
        ids.push(id_of(&r.json()));
    }
    // Rotating credentials does not get past it.
    for n in 3..6u8 {
        let r = check_raw(&s, check_body(&grant(90 + n), json!({"vmid": 1}), 600, 30)).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            r.json(),
            json!({"error": "there are already 3 pending approvals (at most 3 in all): decide them or let them expire"})
        );
    }
    // Existing ones are still answered; a decision frees a place.
    let again = check_raw(&s, check_body(&grant(91), json!({"vmid": 1}), 600, 0)).await;
    assert_eq!((again.status, id_of(&again.json())), (StatusCode::OK, ids[1].clone()));
    assert_eq!(deny(&s, &ids[0], "no").await.status, StatusCode::OK);
    assert_eq!(check_raw(&s, check_body(&grant(93), json!({"vmid": 1}), 600, 0)).await.status, StatusCode::OK);
    assert_eq!(
        check_raw(&s, check_body(&grant(94), json!({"vmid": 1}), 600, 0)).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The per-grant cap answers first when both apply.
    let s = svc_with(Config { max_pending: 2, max_pending_per_grant: 2, ..config() });
    for vmid in 0..2 {
        assert_eq!(check_raw(&s, check_body(&grant(95), json!({"vmid": vmid}), 600, 0)).await.status, StatusCode::OK);
    }
    let r = check_raw(&s, check_body(&grant(95), json!({"vmid": 2}), 600, 0)).await;
    assert_eq!(
        r.json(),
        json!({"error": "this grant already has 2 pending approvals (at most 2 per grant): decide them or let them expire"})
    );
    let r = check_raw(&s, check_body(&grant(96), json!({"vmid": 2}), 600, 0)).await;
    assert_eq!(
        r.json(),
        json!({"error": "there are already 2 pending approvals (at most 2 in all): decide them or let them expire"})
    );
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_checks_total{status=\"too_many_pending\"} 2\n"), "{m}");
    assert!(m.contains("mcp_approvals_pending 2\n"), "{m}");
}

#[tokio::test]
async fn arguments_over_the_limit_are_413() {
    let s = svc();
    assert_eq!(mcp_approvals::DEFAULT_MAX_ARGUMENTS_BYTES, 65_536);
    assert_eq!(check_text(&s, &grant(97), "g", &args_of_len(65_536)).await.status, StatusCode::OK);
    let r = check_text(&s, &grant(97), "g", &args_of_len(65_537)).await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 65536 bytes"})));
    // Checked before the key: a big body with a wrong key is 413 too.
    let mut b = check_body(&grant(97), json!({"a": "x".repeat(70_000)}), 600, 0);
    b["key"] = json!("0".repeat(64));
    let r = check_raw(&s, b).await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 65536 bytes"})));
    // The limit is the flag's; whitespace sent inside the arguments counts.
    let s = svc_with(Config { max_arguments_bytes: 16, ..config() });
    assert_eq!(check_text(&s, &grant(97), "g", &args_of_len(16)).await.status, StatusCode::OK);
    let r = check_text(&s, &grant(97), "g", "{\"a\":  \"xxxxxxx\"}").await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 16 bytes"})));
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_bad_requests_total 1\n"), "{m}");
    assert!(m.contains("mcp_approvals_opened_total 1\n"), "{m}");
}

#[test]
fn the_list_reads_at_most_4096_bytes_of_arguments_per_row() {
    use mcp_approvals::store::{Backend, CheckInput, NewPending};
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::open(&new_db(dir.path()), 2, mcp_approvals::DEFAULT_DB_TIMEOUT).unwrap();
    // 4094 ASCII bytes then 3-byte characters: byte 4096 is inside the first one.
    let long = format!("[\"{}{}\"]", "x".repeat(4092), "\u{2028}".repeat(40_000));
    let short = "{\"vmid\":1}".to_string();
    for (n, args) in [(0u8, &long), (1, &short)] {
        let input = CheckInput {
            key: format!("{n:02x}").repeat(32),
            grant_id: grant(98),
            grant: "g".into(),
            tool: "t".into(),
            upstream: mcp_approvals::store::Upstream {
                cluster: "mcp_a".into(),
                authority: "gw".into(),
                path: "/mcp".into(),
            },
            arguments: args.clone(),
            request_id: String::new(),
            expires_in: 600,
            reason: String::new(),
            input_responses: String::new(),
            request_state: None,
            caller: None,
        };
        backend
            .with(|st| {
                st.check(
                    &input,
                    T0 + i64::from(n),
                    &NewPending { id: &format!("apr_{n:026}"), max_per_grant: 20, max_in_all: 1000 },
                )
            })
            .unwrap();
    }
    let (page, _) = backend.with(|st| st.pending(T0 + 2, 200, 4096, 10)).unwrap();
    let got: Vec<(&str, usize)> =
        page.list.iter().map(|l| (l.approval.arguments.as_str(), l.arguments_bytes)).collect();
    let cut = format!("[\"{}", "x".repeat(4092));
    assert_eq!(cut.len(), 4094);
    assert_eq!(got, vec![(cut.as_str(), long.len()), (short.as_str(), 10)]);
    assert_eq!(long.len(), 124_096);
    assert_eq!((page.total, page.grants_total, page.grants.len()), (2, 1, 1));
    assert!(!page.list[0].complete() && page.list[1].complete());
}

#[tokio::test]
async fn the_list_page_shows_the_start_of_long_arguments_as_sent() {
    let s = svc_with(Config { max_pending_per_grant: 1000, ..config() });
    // 200 pending approvals of 64 KiB of arguments each, one with characters to escape.
    let mut ids = Vec::new();
    for n in 0..200 {
        let args = if n == 0 {
            format!("{{\"a\":\"\u{200b}{}\",\"b\":1.5}}", "x".repeat(65_536 - 23))
        } else {
            args_of_len(65_537 - n.to_string().len()).replacen("{\"a\"", &format!("{{\"{n}\""), 1)
        };
        assert_eq!(args.len(), if n == 0 { 65_532 } else { 65_536 });
        let r = check_text(&s, &grant(99), "g", &args).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        ids.push(id_of(&r.json()));
        s.clock.advance(1);
    }
    let cookie = login(&s, "alice", ALICE).await;
    let started = std::time::Instant::now();
    let r = send(&s.router, get("/", Some(&cookie))).await;
    let took = started.elapsed();
    assert_eq!(r.status, StatusCode::OK);
    let html = r.body;
    eprintln!("GET / with 200 pending approvals of 64 KiB: {} bytes in {took:?}", html.len());
    assert_eq!(html.matches("<article class=\"approval\"").count(), 200);
    // The first: the start as sent, escaped, no Approve, no warnings about what was not read.
    let card = article(&html, &ids[0]);
    let head = format!("{{&quot;a&quot;:&quot;\\u200b{}", "x".repeat(4096 - 6 - 6));
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains("<p class=\"truncated\">… 65532 bytes in all: "), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 65532 bytes as sent</p>"));
    assert_eq!(warnings_of(card), vec!["escaped"]);
    assert!(!card.contains("value=\"approve\""));
    let card = article(&html, &ids[199]);
    let head = format!("{{&quot;199&quot;:&quot;{}", "x".repeat(4096 - 8));
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains("<p class=\"truncated\">… 65536 bytes in all: "), "{card}");
    // About 4 KiB per card, not 64.
    assert!(html.len() < 200 * 6 * 1024, "{}", html.len());
    // The approval's own page has all of it.
    let html = page_of(&s, &format!("/approvals/{}", ids[0])).await;
    let card = article(&html, &ids[0]);
    assert!(card
        .contains(&format!("  &quot;a&quot;: &quot;\\u200b{}&quot;,\n  &quot;b&quot;: 1.5\n}}", "x".repeat(65_513))));
    assert_eq!(warnings_of(card), vec!["escaped", "numbers"]);
}

#[tokio::test]
async fn the_heading_counts_pending_approvals_per_grant() {
    let s = svc();
    // One grant: no per-grant line.
    check_text(&s, &grant(100), "agent-a", "{\"n\":0}").await;
    assert!(!page_of(&s, "/").await.contains("pending-by-grant"));
    // Three grants: most first, then by grant id.
    for n in 1..3 {
        check_text(&s, &grant(100), "agent-a", &format!("{{\"n\":{n}}}")).await;
    }
    check_text(&s, &grant(101), "agent-<b>", "{\"n\":0}").await;
    for n in 0..2 {
        check_text(&s, &grant(102), "agent-c", &format!("{{\"n\":{n}}}")).await;
    }
    let html = page_of(&s, "/").await;
    let count = |g: u8, label: &str, n: i64| {
        format!(
            "<span class=\"grant-count\" data-grant-id=\"{}\"><span class=\"mono\">{label}</span>: {n}</span>",
            grant(g)
        )
    };
    let want = format!(
        "<h2>Pending <span class=\"muted\" id=\"pending-count\">(6)</span></h2><p class=\"muted\" id=\"pending-by-grant\">\
         by grant (3 grants): {} · {} · {}</p><section id=\"pending\">",
        count(100, "agent-a", 3),
        count(102, "agent-c", 2),
        count(101, "agent-&lt;b&gt;", 1)
    );
    assert!(html.contains(&want), "{html}");
    // Twelve grants: the top 10 and how many more.
    for g in 103..112 {
        check_text(&s, &grant(g), &format!("agent-{g}"), "{\"n\":0}").await;
    }
    let html = page_of(&s, "/").await;
    let mut tail: Vec<String> = (103..111).map(|g| count(g, &format!("agent-{g}"), 1)).collect();
    tail.insert(0, count(101, "agent-&lt;b&gt;", 1));
    let want = format!(
        "<p class=\"muted\" id=\"pending-by-grant\">by grant (12 grants): {} · {} · {} · 2 more grants</p>",
        count(100, "agent-a", 3),
        count(102, "agent-c", 2),
        tail[..8].join(" · ")
    );
    assert!(html.contains(&want), "{html}");
}
