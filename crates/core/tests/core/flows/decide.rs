//! Marks set by results and the calls flows refuse, natively: the request pipeline and the
//! response filter over one in-memory shared data, with the clock moved by hand.

use mcp_policy_core::identity::grant::GrantId;
use mcp_policy_core::limits::{marks, Limiter, MemoryStore, SharedStore, StoreError};
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, MarkRecord, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::result::ResultEvent;
use serde_json::{json, Value};

use super::trifecta;
use crate::results::filter::run;

const T0: u64 = 1_700_000_040_000;

fn post(p: &Policy, token: &str) -> RequestHead {
    let auth = format!("Bearer {token}");
    RequestHead::from_headers(
        p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", auth.as_bytes())],
    )
}

fn ask(p: &Policy, s: &dyn SharedStore, token: &str, id: u64, tool: &str, now: u64) -> Outcome {
    let body = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":{}}});
    pipeline::on_body(p, &post(p, token), body.to_string().as_bytes(), s, now)
}

/// The events of the JSON response `body` to a forwarded call of `tool` with id 1.
fn answered(p: &Policy, tool: &str, body: &Value) -> Vec<ResultEvent> {
    let d = Decision::allowed_call(tool, "1");
    run(p, &d, "application/json", &[body.to_string().as_bytes()]).1
}

/// Set the marks of `events` on `grant` at `now`, as the host does before releasing the result.
fn record(p: &Policy, s: &dyn SharedStore, grant: &GrantId, events: &[ResultEvent], now: u64) {
    for m in events.iter().filter_map(|e| e.mark.as_deref()) {
        assert_eq!(pipeline::record_mark(p, s, now, Some(grant), m, &mut Vec::new()), MarkRecord::Set);
    }
}

fn error_data(o: &Outcome) -> Value {
    let body: Value = serde_json::from_str(&o.reply.as_ref().expect("a refusal").body).unwrap();
    body["error"]["data"].clone()
}

fn text(t: &str) -> Value {
    json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":t}]}})
}

#[test]
fn a_secret_read_denies_egress_for_its_grant_until_the_window_ends() {
    let p = trifecta("");
    let s = MemoryStore::new();
    assert_eq!(ask(&p, &s, "a", 1, "http_post", T0).reply, None);
    let o = ask(&p, &s, "a", 2, "read_secret", T0);
    assert_eq!(o.reply, None);
    let grant = o.grant_id.unwrap();
    let events = answered(&p, "read_secret", &text("hunter2"));
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].kind, events[0].rule.as_str()), ("marked", "tools.read_secret.marks"));
    assert_eq!(events[0].mark.as_deref(), Some("secret"));
    record(&p, &s, &grant, &events, T0 + 500);

    let o = ask(&p, &s, "a", 3, "http_post", T0 + 1_000);
    assert_eq!(o.decision.kind, DecisionKind::Denied);
    assert_eq!(o.reply.as_ref().unwrap().headers, vec![("retry-after", "600".to_owned())]);
    assert_eq!(
        error_data(&o),
        json!({"kind":"flow_denied","tool":"http_post","reason":"no outbound tools for 10 minutes after reading secrets",
               "rule":"flows[0]","retry_after_seconds":600,"flow":"no-egress-after-secrets","mark":"secret"})
    );
    // Folded names are denied as well; tools the flow does not name are not.
    assert_eq!(error_data(&ask(&p, &s, "a", 4, "Send-Email", T0 + 1_000))["kind"], "denied");
    assert_eq!(error_data(&ask(&p, &s, "a", 4, "send_email", T0 + 1_000))["kind"], "flow_denied");
    assert_eq!(ask(&p, &s, "a", 5, "list_files", T0 + 1_000).reply, None);
    // Another grant is not marked.
    assert_eq!(ask(&p, &s, "b", 6, "http_post", T0 + 1_000).reply, None);
    // It lifts `for` after the latest mark.
    let o = ask(&p, &s, "a", 7, "http_post", T0 + 500 + 599_001);
    assert_eq!(error_data(&o)["retry_after_seconds"], 1);
    assert_eq!(ask(&p, &s, "a", 8, "http_post", T0 + 500 + 600_000).reply, None);
}

#[test]
fn a_result_matching_mark_if_marks_pii_and_errors_do_not_mark() {
    let p = trifecta("");
    let s = MemoryStore::new();
    let grant = ask(&p, &s, "a", 1, "query_db", T0).grant_id.unwrap();
    assert!(answered(&p, "query_db", &text("no rows")).is_empty());
    // A JSON-RPC error answers no result: `marks` is not set.
    let err = json!({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"vault sealed"}});
    assert!(answered(&p, "read_secret", &err).is_empty());
    // `isError: true` is a result: it marks.
    let is_error = json!({"jsonrpc":"2.0","id":1,"result":{"isError":true,"content":[{"type":"text","text":"x"}]}});
    assert_eq!(answered(&p, "read_secret", &is_error).len(), 1);
    let events = answered(&p, "query_db", &text("name: Ann, ssn 078-05-1120"));
    assert_eq!(events.len(), 1);
    assert_eq!((events[0].rule.as_str(), events[0].mark.as_deref()), ("tools.query_db.result.mark_if[0]", Some("pii")));
    assert!(events[0].audit_json("t").contains(
        r#""kind":"marked","tool":"query_db","id":1,"rule":"tools.query_db.result.mark_if[0]","mark":"pii""#
    ));
    record(&p, &s, &grant, &events, T0);
    let o = ask(&p, &s, "a", 2, "http_post", T0 + 60_000);
    assert_eq!(
        (error_data(&o)["mark"].clone(), error_data(&o)["retry_after_seconds"].clone()),
        (json!("pii"), json!(540))
    );
}

#[test]
fn dry_run_forwards_and_records_would_deny() {
    let p = trifecta(r#","gateway":{"mode":"dry_run"}"#);
    let s = MemoryStore::new();
    let grant = ask(&p, &s, "a", 1, "read_secret", T0).grant_id.unwrap();
    record(&p, &s, &grant, &answered(&p, "read_secret", &text("k")), T0);
    let o = ask(&p, &s, "a", 2, "http_post", T0 + 1);
    assert_eq!(o.reply, None);
    assert!(o.decision.dry_run);
    assert_eq!(o.decision.refusal.as_ref().unwrap().kind(), "flow_denied");
}

/// A store whose every operation fails.
struct Broken;
impl SharedStore for Broken {
    fn get(&self, _: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        Err(StoreError::Host("down".into()))
    }
    fn set(&self, _: &str, _: &[u8], _: u32) -> Result<(), StoreError> {
        Err(StoreError::Host("down".into()))
    }
}

#[test]
fn an_unreadable_store_refuses_the_flows_tools_only() {
    let p = trifecta("");
    let o = ask(&p, &Broken, "a", 1, "http_post", T0);
    assert_eq!(error_data(&o)["kind"], "limiter_unavailable");
    assert_eq!(ask(&p, &Broken, "a", 2, "list_files", T0).reply, None);
}

#[test]
fn marks_count_against_the_grant_cap_and_only_move_forward() {
    let p = trifecta(r#","gateway":{"max_tracked_grants":1}"#);
    let s = MemoryStore::new();
    let limiter = |now| Limiter { store: &s, now_ms: now, max_tracked_grants: 1 };
    let (a, b) = ([1u8; 32], [2u8; 32]);
    marks::set(&limiter(T0 + 10), &a, "secret").unwrap();
    marks::set(&limiter(T0), &a, "secret").unwrap();
    assert_eq!(marks::set_at(&s, &a, &mcp_policy_core::limits::mark_base("", "secret")).unwrap(), Some(T0 + 10));
    assert_eq!(marks::set(&limiter(T0), &b, "secret"), Err(mcp_policy_core::limits::Unavailable::GrantCapReached));
    assert_eq!(marks::set_at(&s, &b, &mcp_policy_core::limits::mark_base("", "secret")).unwrap(), None);
    let _ = p;
}

/// A POST of MCP 2025-03-26, the version with batches.
fn batch_head(p: &Policy) -> RequestHead {
    RequestHead::from_headers(
        p,
        [
            (":method", &b"POST"[..]),
            ("content-type", b"application/json"),
            ("authorization", b"Bearer a"),
            ("mcp-protocol-version", b"2025-03-26"),
        ],
    )
}

#[test]
fn a_marking_call_in_a_batch_is_refused() {
    let p = trifecta("");
    let s = MemoryStore::new();
    let batch = json!([
        {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_files","arguments":{}}},
        {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_secret","arguments":{}}}
    ]);
    let head = batch_head(&p);
    let o = pipeline::on_body(&p, &head, batch.to_string().as_bytes(), &s, T0);
    let body: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
    assert_eq!(body[1]["error"]["data"]["rule"], "tools.read_secret.marks");
    assert_eq!(body[0]["error"]["data"]["kind"], "batch_refused");
}

/// A call whose result the policy checks (`deny_if`, `redact`, `mark_if`) must come alone too: the
/// response to a batch is not read, so its results would go on unchecked.
#[test]
fn a_call_whose_result_is_checked_in_a_batch_is_refused() {
    let p = trifecta("");
    let s = MemoryStore::new();
    let batch = json!([
        {"jsonrpc":"2.0","id":"q","method":"tools/call","params":{"name":"query_db","arguments":{}}},
        {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"list_files","arguments":{}}}
    ]);
    let head = batch_head(&p);
    let o = pipeline::on_body(&p, &head, batch.to_string().as_bytes(), &s, T0);
    let reply = o.reply.unwrap();
    let body: Value = serde_json::from_str(&reply.body).unwrap();
    let why = "a call whose result the policy checks cannot be part of a batch; send it on its own";
    assert_eq!(reply.status, 200);
    assert_eq!(
        body[0],
        json!({"jsonrpc":"2.0","id":"q","error":{"code":-31001,"message":format!("tool 'query_db' denied: {why}"),
            "data":{"kind":"denied","tool":"query_db","reason":why,"rule":"tools.query_db.result"}}})
    );
    assert_eq!(body[1]["error"]["data"]["kind"], "batch_refused");
    assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (DecisionKind::Denied, Some("tools.query_db.result")));
}

#[test]
fn an_sse_result_marks_through_the_same_reader() {
    let p = trifecta("");
    let d = Decision::allowed_call("query_db", "1");
    let event = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\ndata: \"result\":{\"content\":[{\"type\":\"text\",\"text\":\"078-05-1120\"}]}}\n\n";
    let (out, events) = run(&p, &d, "text/event-stream", &[event.as_bytes()]);
    assert_eq!(out, event.as_bytes());
    let marked: Vec<_> = events.iter().filter_map(|e| e.mark.as_deref()).collect();
    assert_eq!(marked, ["pii"]);
}

#[test]
fn a_mark_without_a_grant_or_store_fails_and_with_the_service_is_queued_once() {
    let p = trifecta("");
    let grant = [7u8; 32];
    let mut queue = Vec::new();
    assert_eq!(pipeline::record_mark(&p, &MemoryStore::new(), T0, None, "secret", &mut queue), MarkRecord::NoGrant);
    let failed = pipeline::record_mark(&p, &Broken, T0, Some(&grant), "secret", &mut queue);
    assert_eq!(failed, MarkRecord::Failed(mcp_policy_core::limits::Unavailable::Host("down".into())));
    assert!(failed.fails() && MarkRecord::NoGrant.fails() && !MarkRecord::Set.fails() && !MarkRecord::Queued.fails());
    assert!(queue.is_empty());

    let p = trifecta(r#","gateway":{"rate_limit_service":{"cluster":"mcp_ratelimit"}}"#);
    let s = MemoryStore::new();
    for _ in 0..2 {
        assert_eq!(pipeline::record_mark(&p, &s, T0, Some(&grant), "secret", &mut queue), MarkRecord::Queued);
    }
    assert_eq!(queue, ["secret"]);
    // The service keeps the marks: none is set in this Envoy's store.
    assert_eq!(marks::set_at(&s, &grant, &mcp_policy_core::limits::mark_base("", "secret")).unwrap(), None);
}

#[test]
fn a_calls_sse_reply_that_ends_without_a_response_sets_its_marks() {
    // A server that closes a call's stream before the result has its client poll (a GET with
    // `Last-Event-ID`), where the result is replayed and the call is not known: the call marks
    // when its own stream ends unanswered.
    let p = trifecta("");
    let d = Decision::allowed_call("read_secret", "1");
    let priming = "id: ev-1\ndata: \n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";
    let marks = |events: &[ResultEvent]| -> Vec<(String, String)> {
        events.iter().filter_map(|e| Some((e.mark.clone()?, e.rule.clone()))).collect()
    };
    for chunks in [&[priming.as_bytes(), b""][..], &[priming.as_bytes()][..]] {
        let (out, events) = run(&p, &d, "text/event-stream", chunks);
        assert_eq!(out, priming.as_bytes());
        assert_eq!(marks(&events), [("secret".into(), "tools.read_secret.marks".into())]);
    }
    // Answered on its stream: a result marks once, an error (the tool did not run) not at all.
    let answer =
        |payload: &str| format!("{priming}event: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,{payload}}}\n\n");
    let (_, events) = run(&p, &d, "text/event-stream", &[answer(r#""result":{"content":[]}"#).as_bytes(), b""]);
    assert_eq!(marks(&events), [("secret".into(), "tools.read_secret.marks".into())]);
    let (_, events) =
        run(&p, &d, "text/event-stream", &[answer(r#""error":{"code":-1,"message":"no"}"#).as_bytes(), b""]);
    assert_eq!(marks(&events), []);
    // A response under another id may answer another call (TypeScript's client hands it to the
    // call its id names), and a message that is not one response answers none: the call is still
    // unanswered.
    for other in [
        r#"{"jsonrpc":"2.0","id":"zz","error":{"code":-1,"message":"no"}}"#,
        r#"[{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"no"}}]"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"notifications/progress","params":{},"result":{}}"#,
    ] {
        let reply = format!("{priming}event: message\ndata: {other}\n\n");
        let (_, events) = run(&p, &d, "text/event-stream", &[reply.as_bytes(), b""]);
        assert_eq!(marks(&events), [("secret".into(), "tools.read_secret.marks".into())], "{other}");
    }
    // A tool that marks only by what its result says (`mark_if`) is read where it is replayed; a
    // JSON reply always holds its response.
    let (_, events) =
        run(&p, &Decision::allowed_call("query_db", "1"), "text/event-stream", &[priming.as_bytes(), b""]);
    assert_eq!(marks(&events), []);
    let (_, events) =
        run(&p, &d, "application/json", &[br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"no"}}"#]);
    assert_eq!(marks(&events), []);
}

/// What the client receives of a reply to a forwarded call of `tool` (id 1) with `status` and
/// `content_type`, and the events, driven as the hosts drive it: its `chunks` (the last ends the
/// body, unless `cut`: the stream is reset before the body's end; none: a reply without a body),
/// the marks of a reply that does not answer the call or is refused set at once (`held`), then
/// the stream's end.
fn reply_then_end(
    p: &Policy,
    tool: &str,
    status: &str,
    content_type: &str,
    chunks: &[&str],
    cut: bool,
) -> (String, Vec<ResultEvent>) {
    use mcp_policy_core::response::{Plan, ResponseFilter, Step};
    let mut f = ResponseFilter::forwarded(p, &[]).judging(p, &Decision::allowed_call(tool, "1"));
    let header = |name: &str| match name {
        ":status" => Some(status.as_bytes().to_vec()),
        "content-type" => Some(content_type.as_bytes().to_vec()),
        _ => None,
    };
    let (mut out, mut events) = (String::new(), Vec::new());
    match f.on_headers(chunks.is_empty(), header) {
        Plan::Refuse(bad) => {
            out = bad.body;
            f.on_end(p, true);
        }
        Plan::Unanswered => {
            f.on_end(p, true);
            out = chunks.concat();
        }
        Plan::PassThrough => out = chunks.concat(),
        Plan::FilterJson | Plan::FilterSse => {
            let mut held = String::new();
            for (i, c) in chunks.iter().enumerate() {
                let end = i + 1 == chunks.len() && !cut;
                held.push_str(c);
                let step = match f.on_body(held.len(), end) {
                    Step::Read => f.on_chunk_judged(held.as_bytes(), end, &|_| false, p),
                    step => step,
                };
                match step {
                    Step::Hold => continue,
                    Step::Pass => out.push_str(&held),
                    Step::Write { bytes, .. } => out.push_str(std::str::from_utf8(&bytes).unwrap()),
                    Step::Fail(bad) => {
                        out.push_str(&bad.body);
                        f.on_end(p, true);
                    }
                    Step::Drop | Step::Read => {}
                }
                held.clear();
            }
        }
    }
    events.extend(f.take_events());
    f.on_end(p, false);
    events.extend(f.take_events());
    (out, events)
}

fn marked(events: &[ResultEvent]) -> Vec<(&str, &str)> {
    events.iter().filter_map(|e| Some((e.mark.as_deref()?, e.rule.as_str()))).collect()
}

#[test]
fn a_marking_call_acknowledged_with_202_marks_at_the_acknowledgement() {
    // The 2024-11-05 HTTP+SSE transport answers a POST with 202 and sends the result on the GET
    // stream, where the call is not known: the call marks at its acknowledgement, which passes
    // as it is. With the rate limit service too: the host holds the acknowledgement until the
    // service has recorded the mark.
    let service = r#","gateway":{"rate_limit_service":{"cluster":"mcp_ratelimit"}}"#;
    for p in [trifecta(""), trifecta(service)] {
        for chunks in [&["Accepted"][..], &["Acc", "epted"][..]] {
            let (out, events) = reply_then_end(&p, "read_secret", "202", "text/plain; charset=utf-8", chunks, false);
            assert_eq!(out, "Accepted");
            assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")]);
        }
        // A tool that marks only by what its result says is judged where the result comes.
        let (_, events) = reply_then_end(&p, "query_db", "202", "text/plain", &["Accepted"], false);
        assert_eq!(marked(&events), []);
    }
}

#[test]
fn a_reply_cut_off_or_without_a_body_marks_when_its_stream_ends() {
    let p = trifecta("");
    let result = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"s3cr3t"}]}}"#;
    let event = format!("id: ev-1\nevent: message\ndata: {result}\n\n");
    // Reset before the body's end: the client may fetch the result again on another stream (an
    // SSE stream resumed with `Last-Event-ID`), where the call is not known.
    for (content_type, chunks) in
        [("text/event-stream", ["id: ev-1\ndata: \n\n"]), ("application/json", [&result[..20]])]
    {
        let (_, events) = reply_then_end(&p, "read_secret", "200", content_type, &chunks, true);
        assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")], "{content_type}");
    }
    // The result went out on its reply, and then the stream was reset: marked once.
    let (out, events) = reply_then_end(&p, "read_secret", "200", "text/event-stream", &[&event, "id: "], true);
    assert_eq!(out, event);
    assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")]);
    // A 202 with no body at all, and a 200 with none.
    for status in ["202", "200"] {
        let (_, events) = reply_then_end(&p, "read_secret", status, "text/plain", &[], false);
        assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")], "{status}");
    }
    // A reply the filter refused is no answer: the client may still fetch the result on another
    // stream (a 2024-11-05 HTTP+SSE client never reads a POST's reply).
    for (status, content_type, body) in [("200", "text/html", "<p>oops</p>"), ("202", "application/json", "")] {
        let (out, events) = reply_then_end(&p, "read_secret", status, content_type, &[body], false);
        assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["error"]["data"]["kind"], "result_refused");
        assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")], "{status} {content_type}");
    }
    // A call answered on its reply marks there, and not again at the stream's end.
    let (_, events) = reply_then_end(&p, "read_secret", "200", "application/json", &[result], false);
    assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")]);
    // With the rate limit service, a stream that has ended can no longer be held until the
    // service records a mark: none is set then. A reply without a body is held at its headers.
    let p = trifecta(r#","gateway":{"rate_limit_service":{"cluster":"mcp_ratelimit"}}"#);
    let (_, events) = reply_then_end(&p, "read_secret", "200", "text/event-stream", &["id: ev-1\ndata: \n\n"], true);
    assert_eq!(marked(&events), []);
    let (_, events) = reply_then_end(&p, "read_secret", "202", "text/plain", &[], false);
    assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")]);
}

#[test]
fn an_acknowledgement_is_passed_as_it_is_and_marks_at_its_headers() {
    use mcp_policy_core::response::{Plan, ResponseFilter};
    let service = r#","gateway":{"rate_limit_service":{"cluster":"mcp_ratelimit"}}"#;
    let small = r#","gateway":{"max_response_bytes":16}"#;
    let dry = r#","gateway":{"mode":"dry_run","max_response_bytes":16}"#;
    let long = "Accepted: the message is queued for the session";
    for extra in ["", service, small, dry] {
        let p = trifecta(extra);
        let plan = |tool: &str, status: &str| {
            let mut f = ResponseFilter::forwarded(&p, &[]).judging(&p, &Decision::allowed_call(tool, "1"));
            f.on_headers(false, |n| match n {
                ":status" => Some(status.as_bytes().to_vec()),
                "content-type" => Some(b"text/plain".to_vec()),
                _ => None,
            })
        };
        // Not held: what the server sent passes as it is, however long.
        assert_eq!(plan("read_secret", "202"), Plan::Unanswered, "{extra}");
        let (out, events) = reply_then_end(&p, "read_secret", "202", "text/plain", &[long], false);
        assert_eq!((out.as_str(), marked(&events)), (long, vec![("secret", "tools.read_secret.marks")]), "{extra}");
        // A tool without `marks`: nothing to set, nothing changed.
        let (out, events) = reply_then_end(&p, "query_db", "202", "text/plain", &[long], false);
        assert_eq!((out.as_str(), events.len()), (long, 0), "{extra}");
    }
}

#[test]
fn a_reply_refused_part_way_marks_before_its_error_goes_on() {
    // An SSE reply whose first event is not JSON-RPC: the error replaces the rest of the stream,
    // and the call's marks are set first, with the rate limit service too (the host holds the
    // error until the service has recorded them).
    let chunks = ["id: e1\ndata: {\"jsonrpc\":\n\n", "id: e2\ndata: x\n\n"];
    for extra in ["", r#","gateway":{"rate_limit_service":{"cluster":"mcp_ratelimit"}}"#] {
        let p = trifecta(extra);
        let (out, events) = reply_then_end(&p, "read_secret", "200", "text/event-stream", &chunks, false);
        assert!(out.contains("result_refused"), "{out}");
        assert_eq!(marked(&events), [("secret", "tools.read_secret.marks")], "{extra}");
    }
}
