//! The response side, natively: the plan from the response headers and every 502 rule the filter
//! enforces on upstream responses, then the chunk filter, with exact outputs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::cell::RefCell;

use mcp_policy_core::config;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::{BadUpstream, HostOp, Plan, ResponseFilter, Step};
use mcp_policy_core::wire::json;
use mcp_policy_core::wire::mcp::Id;

/// `delete_vm` is hidden; JSON bodies and incomplete SSE events may hold 300 bytes.
fn policy(hide: &str) -> Policy {
    let text = format!(r#"{{"version":"1","default":"allow","hide":[{hide}],"gateway":{{"max_response_bytes":300}}}}"#);
    config::load(text.as_bytes()).unwrap()
}

fn id(text: &str) -> Id {
    Id::of(&json::parse(text.as_bytes()).unwrap())
}

/// The response to a forwarded request whose `tools/list` ids are `ids` (JSON texts).
fn forwarded(ids: &[&str]) -> ResponseFilter {
    let ids: Vec<Id> = ids.iter().map(|t| id(t)).collect();
    ResponseFilter::forwarded(&policy(r#""delete_vm""#), &ids)
}

/// The plan for these headers, and the names of the headers it read, in order.
fn plan(f: &mut ResponseFilter, headers: &[(&str, &str)]) -> (Plan, Vec<String>) {
    let read = RefCell::new(Vec::new());
    let plan = f.on_headers(false, |name: &str| {
        read.borrow_mut().push(name.to_owned());
        headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_bytes().to_vec())
    });
    (plan, read.into_inner())
}

/// The −31006 error text for `why`, with id `id` (a JSON text).
fn error(id: &str, why: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-31006,"message":"Bad gateway: {why}","data":{{"kind":"bad_upstream_response","reason":"{why}"}}}}}}"#
    )
}

fn refused(id: &str, why: &str) -> Plan {
    Plan::Refuse(BadUpstream { why: why.into(), body: error(id, why), status: 502 })
}

fn hidden(name: &str) -> bool {
    name == "delete_vm"
}

const LIST: &str =
    r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"list_vms"},{"name":"delete_vm"}],"nextCursor":"c"}}"#;
const FILTERED: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"list_vms"}],"nextCursor":"c"}}"#;

#[test]
fn nothing_is_inspected_unless_the_policy_removes_tools_from_lists() {
    let mut f = ResponseFilter::forwarded(&policy(""), &[id("7")]);
    assert_eq!(plan(&mut f, &[("content-type", "text/html")]), (Plan::PassThrough, vec![]));
    assert_eq!(f.on_body(10, true), Step::Pass);
    let mut local = ResponseFilter::pass();
    assert_eq!(plan(&mut local, &[("content-type", "text/event-stream")]), (Plan::PassThrough, vec![]));
}

/// Response headers, the plan for them, and the headers the plan read.
type Case<'a> = (&'a [(&'a str, &'a str)], Plan, &'a [&'a str]);

#[test]
fn the_reply_to_tools_list_is_json_or_sse_or_refused() {
    let json = ("content-type", "application/json");
    let all_read: &[&str] = &["content-type", "content-encoding", "content-length"];
    let unexpected = refused("7", "the response is neither application/json nor text/event-stream");
    let encoded = refused("7", "the response is content-encoded and its tool list cannot be filtered");
    let cases: &[Case] = &[
        (&[json], Plan::FilterJson, all_read),
        (&[("content-type", "Application/JSON; charset=\"UTF-8\"")], Plan::FilterJson, all_read),
        (&[json, ("content-encoding", "identity"), ("content-length", "300")], Plan::FilterJson, all_read),
        (&[("content-type", "text/event-stream")], Plan::FilterSse, &["content-type", "content-encoding"]),
        // The 2024-11-05 HTTP+SSE transport acknowledges a POST with 202; the reply comes on the stream.
        (&[(":status", "202")], Plan::PassThrough, &["content-type", ":status"]),
        (&[("content-type", "text/html"), (":status", "200")], unexpected.clone(), &["content-type", ":status"]),
        (&[(":status", "200")], unexpected, &["content-type", ":status"]),
        (&[json, ("content-encoding", "gzip")], encoded.clone(), &["content-type", "content-encoding"]),
        (
            &[("content-type", "text/event-stream"), ("content-encoding", "br")],
            encoded,
            &["content-type", "content-encoding"],
        ),
        (
            &[("content-type", "application/json; charset=iso-8859-1")],
            refused("7", "the response declares a charset other than utf-8"),
            &["content-type", "content-encoding"],
        ),
        (
            &[json, ("content-length", "301")],
            refused("7", "the tools/list response exceeds gateway.max_response_bytes"),
            all_read,
        ),
        // Not `1*DIGIT`, so not a length (Envoy refuses such a value): the body's own size decides.
        (&[json, ("content-length", "+301")], Plan::FilterJson, all_read),
    ];
    for (headers, want, read) in cases {
        let mut f = forwarded(&["7"]);
        let (got, names) = plan(&mut f, headers);
        assert_eq!((&got, names.as_slice()), (want, &read.iter().map(|s| s.to_string()).collect::<Vec<_>>()[..]));
        if let Plan::Refuse(bad) = got {
            let reply = bad.reply();
            assert_eq!((reply.status, reply.headers.len()), (502, 0));
            // Refused at its headers: nothing of the body is touched afterwards.
            assert_eq!(f.on_body(5, true), Step::Pass);
        }
    }
}

#[test]
fn other_replies_are_filtered_when_they_stream_or_are_json() {
    // The SDKs hand a JSON reply's responses to the requests their ids name: any may carry a list.
    for (headers, want) in [
        (&[("content-type", "text/event-stream")][..], Plan::FilterSse),
        (&[("content-type", "application/json")], Plan::FilterJson),
        (&[("content-type", "text/html")], Plan::PassThrough),
        (&[], Plan::PassThrough),
    ] {
        assert_eq!(plan(&mut forwarded(&[]), headers).0, want, "{headers:?}");
    }
    // A refused stream answers no tools/list request: its error's id is null.
    let (got, _) = plan(&mut forwarded(&[]), &[("content-type", "text/event-stream; charset=latin1")]);
    assert_eq!(got, refused("null", "the response declares a charset other than utf-8"));
    // Clients read more as JSON or SSE than those two exactly: the Python SDK a content type that
    // starts with either, the TypeScript SDK one that holds either. The filter does not guess.
    let loose = refused("null", "the response is neither application/json nor text/event-stream");
    for ct in ["application/jsonx", "Application/JSON-seq", "text/event-streams", "text/plain; x=application/json"] {
        assert_eq!(plan(&mut forwarded(&[]), &[("content-type", ct), (":status", "200")]).0, loose, "{ct}");
        assert_eq!(plan(&mut forwarded(&[]), &[("content-type", ct), (":status", "202")]).0, Plan::PassThrough);
    }
}

#[test]
fn the_reply_to_a_get_is_sse_or_refused() {
    // The TypeScript SDK reads a GET's 2xx body as events whatever its content type.
    let get = || {
        let mut f = forwarded(&[]);
        f.set_event_stream(true);
        f
    };
    let not_sse = refused("null", "the response is neither application/json nor text/event-stream");
    for (headers, want) in [
        (&[("content-type", "text/event-stream"), (":status", "200")][..], Plan::FilterSse),
        (&[("content-type", "text/plain"), (":status", "200")], not_sse.clone()),
        (&[(":status", "200")], not_sse.clone()),
        // Not a stream: a client reads none of these as events.
        (&[("content-type", "text/plain"), (":status", "405")], Plan::PassThrough),
        (&[("content-type", "text/html"), (":status", "404")], Plan::PassThrough),
        // A 202 with a body: the TypeScript SDK reads it as events, as any other 2xx.
        (&[("content-type", "text/plain"), (":status", "202")], not_sse.clone()),
    ] {
        assert_eq!(plan(&mut get(), headers).0, want, "{headers:?}");
    }
    // A POST's reply of another type passes, as above.
    assert_eq!(plan(&mut forwarded(&[]), &[("content-type", "text/plain"), (":status", "200")]).0, Plan::PassThrough);
}

#[test]
fn a_response_without_body_and_a_second_call_pass() {
    let mut f = forwarded(&["7"]);
    assert_eq!(f.on_headers(true, |_: &str| panic!("no header is read")), Plan::PassThrough);
    let mut f = forwarded(&["7"]);
    assert_eq!(plan(&mut f, &[("content-type", "application/json")]).0, Plan::FilterJson);
    assert_eq!(plan(&mut f, &[("content-type", "text/html")]), (Plan::PassThrough, vec![]));
}

#[test]
fn json_is_held_until_whole_then_filtered() {
    let mut f = forwarded(&["7"]);
    assert_eq!(plan(&mut f, &[("content-type", "application/json")]).0, Plan::FilterJson);
    assert_eq!(f.on_body(40, false), Step::Hold);
    assert_eq!(f.on_body(LIST.len(), true), Step::Read);
    assert_eq!(
        f.on_chunk(LIST.as_bytes(), true, &hidden),
        Step::Write { bytes: FILTERED.as_bytes().to_vec(), removed: 1 }
    );
    assert_eq!(f.on_body(0, true), Step::Pass);
    // Nothing hidden, or another response: the bytes pass as they are.
    let mut f = forwarded(&["7"]);
    plan(&mut f, &[("content-type", "application/json")]);
    assert_eq!(f.on_chunk(FILTERED.as_bytes(), true, &hidden), Step::Pass);
}

/// The step for a whole JSON body answering `tools/list` request 7.
fn json_body(body: &str) -> Step {
    let mut f = forwarded(&["7"]);
    plan(&mut f, &[("content-type", "application/json")]);
    assert_eq!(f.on_body(body.len(), true), Step::Read);
    f.on_chunk(body.as_bytes(), true, &hidden)
}

fn failed(body: String, why: &str) -> Step {
    Step::Fail(BadUpstream { why: why.into(), body, status: 502 })
}

#[test]
fn json_bodies_that_cannot_be_filtered_are_replaced_by_the_error() {
    let malformed = |why: &str| format!("malformed response: {why}");
    for (body, why) in [
        (r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a"}]"#.to_owned(), None),
        (r#"{"id":7,"id":7,"result":{"tools":[]}}"#.to_owned(), None),
        (r#"{"id":7,"result":{"tools":{}}}"#.to_owned(), Some(malformed("result.tools is not an array"))),
        (r#"{"id":7,"result":{}}"#.to_owned(), Some(malformed("result has no tools"))),
        (r#"{"id":7,"result":[]}"#.to_owned(), Some(malformed("result is not an object"))),
        (r#"{"id":7,"result":{"tools":[{"title":"x"}]}}"#.to_owned(), Some(malformed("a tool has no string name"))),
        (r#"{"id":7,"result":{"tools":[7]}}"#.to_owned(), Some(malformed("a tool has no string name"))),
        // Folded clashes: a case-insensitive client reads a list the filter did not.
        (
            r#"{"id":7,"result":{"tools":[],"Tools":[{"name":"delete_vm"}]}}"#.to_owned(),
            Some(malformed("member names equal after case folding")),
        ),
        (
            r#"{"id":7,"result":{"tools":[{"name":"a","Name":"delete_vm"}]}}"#.to_owned(),
            Some(malformed("member names equal after case folding")),
        ),
        (
            r#"{"id":7,"Result":{"tools":[{"name":"delete_vm"}]}}"#.to_owned(),
            Some(malformed("a member name that folds to a JSON-RPC or MCP member without being it")),
        ),
        // Another id, but it carries a tool list: filtered whatever its id says.
        (r#"{"id":8,"result":{"tools":{}}}"#.to_owned(), Some(malformed("result.tools is not an array"))),
    ] {
        let Step::Fail(bad) = json_body(&body) else { panic!("{body} passed") };
        if let Some(why) = why {
            assert_eq!(bad, BadUpstream { why: why.clone(), body: error("7", &why), status: 502 }, "{body}");
        } else {
            assert!(bad.why.starts_with("unreadable response: "), "{body}: {}", bad.why);
            assert_eq!(bad.body, error("7", &bad.why));
        }
    }
    // Error responses and other results pass.
    assert_eq!(json_body(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x"}}"#), Step::Pass);
    assert_eq!(json_body(r#"{"jsonrpc":"2.0","id":8,"result":{"resources":[]}}"#), Step::Pass);
}

#[test]
fn a_json_body_over_the_limit_is_replaced_and_the_rest_dropped() {
    let why = "the tools/list response exceeds gateway.max_response_bytes";
    let mut f = forwarded(&["\"L1\""]);
    plan(&mut f, &[("content-type", "application/json")]);
    assert_eq!(f.on_body(300, false), Step::Hold);
    assert_eq!(f.on_body(301, false), failed(error("\"L1\"", why), why));
    assert_eq!(f.on_body(310, false), Step::Drop);
    assert_eq!(f.on_body(320, true), Step::Drop);
    // Over the limit in its last chunk: replaced, and nothing follows.
    let mut f = forwarded(&["7"]);
    plan(&mut f, &[("content-type", "application/json")]);
    assert_eq!(f.on_body(301, true), failed(error("7", why), why));
    assert_eq!(f.on_body(0, true), Step::Pass);
}

fn sse(ids: &[&str]) -> ResponseFilter {
    let mut f = forwarded(ids);
    assert_eq!(plan(&mut f, &[("content-type", "text/event-stream")]).0, Plan::FilterSse);
    f
}

fn sse_error(id: &str, why: &str) -> String {
    format!("event: message\ndata: {}\n\n", error(id, why))
}

#[test]
fn sse_is_filtered_event_by_event() {
    let mut f = sse(&["7"]);
    let ping = ": ping\n\n";
    assert_eq!(f.on_body(ping.len(), false), Step::Read);
    assert_eq!(f.on_chunk(ping.as_bytes(), false, &hidden), Step::Pass);
    // An incomplete event is held back (its bytes are replaced by nothing until it completes).
    let event = format!("id: e1\ndata: {LIST}\n\n");
    let (head, tail) = event.split_at(20);
    assert_eq!(f.on_chunk(head.as_bytes(), false, &hidden), Step::Write { bytes: vec![], removed: 0 });
    assert_eq!(
        f.on_chunk(tail.as_bytes(), false, &hidden),
        Step::Write { bytes: format!("id: e1\ndata: {FILTERED}\n\n").into_bytes(), removed: 1 }
    );
    let note = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n";
    assert_eq!(f.on_chunk(note.as_bytes(), true, &hidden), Step::Pass);
}

#[test]
fn sse_events_that_cannot_be_filtered_replace_the_stream() {
    let unreadable = |why: &str| format!("unreadable response: {why}");
    let list = r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"delete_vm"}]}}"#;
    let cases = [
        ("data: {\"jsonrpc\":\"2.0\",\"id\":7,\n\n".to_owned(), None),
        ("event: message\ndata: [{\"id\":7\n\n".to_owned(), None),
        (format!("Data: {list}\n\n"), Some(unreadable("an SSE field name that lenient clients read as data"))),
        (format!(" data: {list}\n\n"), Some(unreadable("an SSE field name that lenient clients read as data"))),
        (
            "data: {\"id\":7,\"result\":{\"tools\":{}}}\n\n".to_owned(),
            Some("malformed response: result.tools is not an array".to_owned()),
        ),
    ];
    for (stream, why) in cases {
        let mut f = sse(&["7"]);
        let Step::Fail(bad) = f.on_chunk(stream.as_bytes(), false, &hidden) else { panic!("{stream:?} passed") };
        if let Some(why) = why {
            assert_eq!(bad.why, why, "{stream:?}");
        } else {
            assert!(bad.why.starts_with("unreadable response: SSE data: "), "{stream:?}: {}", bad.why);
        }
        assert_eq!(bad.body, sse_error("7", &bad.why));
        // The error replaced the stream: whatever follows is dropped.
        assert_eq!(f.on_body(12, false), Step::Drop);
        assert_eq!(f.on_body(12, true), Step::Drop);
    }
    // Not UTF-8.
    let mut f = sse(&["7"]);
    let why = "unreadable response: SSE stream is not UTF-8";
    assert_eq!(f.on_chunk(b"data: \xff\n\n", true, &hidden), failed(sse_error("7", why), why));
    assert_eq!(f.on_body(1, true), Step::Pass);
    // An incomplete event over gateway.max_response_bytes.
    let mut f = sse(&[]);
    let why = "unreadable response: an SSE event exceeds gateway.max_response_bytes";
    let long = format!("data: \"{}", "x".repeat(300));
    assert_eq!(f.on_chunk(long.as_bytes(), false, &hidden), failed(sse_error("null", why), why));
}

#[test]
fn sse_events_that_cannot_carry_jsonrpc_pass() {
    let mut f = sse(&["7"]);
    let stream = "event: endpoint\ndata: /messages?session_id=1\n\ndata: [DONE]\n\nevent: ping\ndata: {x\n\n";
    assert_eq!(f.on_chunk(stream.as_bytes(), true, &hidden), Step::Pass);
}

#[test]
fn host_failures_replace_the_body_with_the_error() {
    #[derive(Debug)]
    struct InternalFailure;
    let mut f = sse(&["7"]);
    let why = "cannot read the response body: InternalFailure";
    let bad = f.host_failed(HostOp::Read, &InternalFailure, false);
    assert_eq!(bad, BadUpstream { why: why.into(), body: sse_error("7", why), status: 502 });
    assert_eq!(f.on_body(3, true), Step::Drop);
    let mut f = forwarded(&["7"]);
    plan(&mut f, &[("content-type", "application/json")]);
    let why = "cannot rewrite the response body: InternalFailure";
    assert_eq!(
        f.host_failed(HostOp::Write, &InternalFailure, true),
        BadUpstream { why: why.into(), body: error("7", why), status: 502 }
    );
}

/// A policy with `gateway.session_key`, hiding `hide`.
fn bound_policy(hide: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"allow","hide":[{hide}],"gateway":{{"max_response_bytes":300,"session_key":{{"current":"0123456789abcdef0123456789abcdef"}}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

/// The response to a forwarded request of grant `[9; 32]` in the server's session `up-1`.
fn bound(p: &Policy, ids: &[&str]) -> ResponseFilter {
    let ids: Vec<Id> = ids.iter().map(|t| id(t)).collect();
    let seal = mcp_policy_core::pipeline::stream_ids(p, Some(&[9; 32]), Some(b"up-1"));
    ResponseFilter::forwarded(p, &ids).sealing(p, seal)
}

fn sealed_id(p: &Policy, session: &[u8], event: &str) -> String {
    let keys = p.gateway.session_keys.as_ref().unwrap();
    mcp_policy_core::identity::session::event::seal_id(keys, &[9; 32], session, event.as_bytes())
}

const SSE: &[(&str, &str)] = &[("content-type", "text/event-stream")];

#[test]
fn with_session_key_sse_replies_have_their_ids_sealed_and_nothing_else_read() {
    let p = bound_policy("");
    let mut f = bound(&p, &[]);
    assert_eq!(plan(&mut f, SSE), (Plan::FilterSse, vec!["content-type".into(), "content-encoding".into()]));
    assert_eq!(f.on_body(40, false), Step::Read);
    // Data is not parsed (no tool list is filtered), ids are sealed, an empty id passes.
    let chunk = "id: ev-1\ndata: {not json\n\nid:\ndata: x\n\n";
    let want = format!("id: {}\ndata: {{not json\n\nid:\ndata: x\n\n", sealed_id(&p, b"up-1", "ev-1"));
    assert_eq!(f.on_chunk(chunk.as_bytes(), false, &hidden), Step::Write { bytes: want.into_bytes(), removed: 0 });
    assert_eq!(f.on_chunk(b": ping\n\n", true, &hidden), Step::Pass);
    // The response names a new session (initialize): its events are sealed under it.
    let mut init = bound(&p, &[]);
    init.set_session(b"up-2");
    assert_eq!(plan(&mut init, SSE).0, Plan::FilterSse);
    let want = format!("id: {}\n\n", sealed_id(&p, b"up-2", "1"));
    assert_eq!(init.on_chunk(b"id: 1\n\n", true, &hidden), Step::Write { bytes: want.into_bytes(), removed: 0 });
    // JSON replies, encoded streams and bodiless replies pass untouched; nothing is refused.
    for headers in [
        &[("content-type", "application/json")][..],
        &[("content-type", "text/event-stream"), ("content-encoding", "gzip")],
        &[("content-type", "text/html"), (":status", "502")],
    ] {
        let mut f = bound(&p, &["7"]);
        assert_eq!(plan(&mut f, headers).0, Plan::PassThrough, "{headers:?}");
        assert_eq!(f.on_body(10, true), Step::Pass);
    }
    let mut empty = bound(&p, &[]);
    assert_eq!(empty.on_headers(true, |_: &str| panic!("no header is read")), Plan::PassThrough);
    // Without a grant to bind them to, nothing is read.
    let mut unbound = ResponseFilter::forwarded(&p, &[]).sealing(&p, None);
    assert_eq!(plan(&mut unbound, SSE), (Plan::PassThrough, vec![]));
}

#[test]
fn with_session_key_and_hidden_tools_lists_are_filtered_and_ids_sealed() {
    let p = bound_policy(r#""delete_vm""#);
    let mut f = bound(&p, &["7"]);
    assert_eq!(plan(&mut f, SSE).0, Plan::FilterSse);
    let want = format!("id: {}\ndata: {FILTERED}\n\n", sealed_id(&p, b"up-1", "e"));
    let got = f.on_chunk(format!("id: e\ndata: {LIST}\n\n").as_bytes(), true, &hidden);
    assert_eq!(got, Step::Write { bytes: want.into_bytes(), removed: 1 });
    // The header rules of a tools/list reply still hold.
    let mut f = bound(&p, &["7"]);
    let why = "the response is content-encoded and its tool list cannot be filtered";
    let gz = [("content-type", "text/event-stream"), ("content-encoding", "gzip")];
    assert_eq!(plan(&mut f, &gz).0, refused("7", why));
}
