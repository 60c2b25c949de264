//! `tools/call` results through the response filter, natively: JSON and SSE, chunked at every byte
//! offset, batches, redaction byte for byte, oversize, unreadable, dry run.

use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::result::ResultEvent;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};

use super::policy;

pub(crate) const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----";
const AWS: &str = "AKIAABCDEFGHIJKLMNOP";

pub(crate) fn read_file_policy(extra: &str) -> Policy {
    policy(&format!(
        r#"{{"version":"1","default":"allow","tools":{{"read_file":{{"result":{{
        "max_bytes": 2048,
        "deny_if": [{{"regex": "-----BEGIN [A-Z ]*PRIVATE KEY-----", "reason": "a private key in a tool result"}}],
        "redact":  [{{"regex": "AKIA[0-9A-Z]{{16}}", "with": "[redacted]"}}]}}}}, "other": {{}}}}{extra}}}"#
    ))
}

/// What the client receives for `chunks` of a response with `content_type`, as Envoy hands them
/// over, and what was recorded.
pub(crate) fn run(p: &Policy, d: &Decision, content_type: &str, chunks: &[&[u8]]) -> (Vec<u8>, Vec<ResultEvent>) {
    let mut f = ResponseFilter::forwarded(p, &[]).judging(p, d);
    let plan = f.on_headers(false, |name| (name == "content-type").then(|| content_type.as_bytes().to_vec()));
    let mut out = Vec::new();
    let mut events = Vec::new();
    match plan {
        Plan::PassThrough | Plan::Unanswered => {
            chunks.iter().for_each(|c| out.extend_from_slice(c));
            return (out, events);
        }
        Plan::Refuse(bad) => return (bad.body.into_bytes(), f.take_events()),
        Plan::FilterJson | Plan::FilterSse => {}
    }
    let json = plan == Plan::FilterJson;
    let mut held: Vec<u8> = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        let end = i + 1 == chunks.len();
        held.extend_from_slice(c);
        let at_hand = if json { held.clone() } else { std::mem::take(&mut held) };
        let step = match f.on_body(at_hand.len(), end) {
            Step::Read => f.on_chunk_judged(&at_hand, end, &|_| false, p),
            step => step,
        };
        match step {
            Step::Hold => continue,
            Step::Pass => out.extend_from_slice(&at_hand),
            Step::Write { bytes, .. } => out.extend_from_slice(&bytes),
            Step::Drop => {}
            Step::Fail(bad) => out.extend_from_slice(bad.body.as_bytes()),
            Step::Read => unreachable!(),
        }
        held.clear();
        events.extend(f.take_events());
    }
    (out, events)
}

fn text_result(id: &str, text_json: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":{text_json}}}],"isError":false}}}}"#
    )
}

fn refused_json(id: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-31012,"message":"tool 'read_file' result refused: a private key in a tool result","data":{{"kind":"result_refused","tool":"read_file","reason":"a private key in a tool result","rule":"tools.read_file.result.deny_if[0]"}}}}}}"#
    )
}

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn a_private_key_anywhere_in_a_json_result_is_refused_at_every_chunk_boundary() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let escaped = KEY.replace('-', "\\u002d");
    let bodies = [
        text_result("7", &format!("\"secret:\\n{KEY}\\nMIIE...\"")),
        text_result("7", &format!("\"{escaped}\"")),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[],"structuredContent":{{"files":[{{"body":"{KEY}"}}]}}}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"resource","resource":{{"uri":"file:///k","text":"{KEY}"}}}}]}}}}"#
        ),
        // Split over two content items.
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"-----BEGIN RSA PRIV"},{"type":"text","text":"ATE KEY-----"}]}}"#.to_owned(),
    ];
    for body in &bodies {
        let b = body.as_bytes();
        for cut in 0..=b.len() {
            let (out, events) = run(&p, &d, "application/json", &[&b[..cut], &b[cut..]]);
            assert_eq!(String::from_utf8(out).unwrap(), refused_json("7"), "{body} cut at {cut}");
            assert_eq!(events.len(), 1);
            assert_eq!(events[0].rule, "tools.read_file.result.deny_if[0]");
            assert_eq!(events[0].label(), "result_refused");
        }
    }
}

#[test]
fn a_private_key_in_sse_data_lines_is_refused_at_every_chunk_boundary() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "\"a-1\"");
    // The JSON text spread over three data: lines (joined with LF, which JSON reads as whitespace),
    // after a progress notification that passes.
    let note = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":1,\"progress\":1}}\n\n";
    let body = format!(
        "{note}id: e2\nevent: message\ndata: {{\"jsonrpc\":\"2.0\",\"id\":\"a-1\",\ndata: \"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"{}\"}}]}}\ndata: }}\n\n",
        KEY.replace("BEGIN", "\\u0042EGIN")
    );
    let b = body.as_bytes();
    for cut in 0..=b.len() {
        let (out, events) = run(&p, &d, "text/event-stream", &[&b[..cut], &b[cut..]]);
        let out = String::from_utf8(out).unwrap();
        assert!(!out.contains("PRIVATE KEY"), "cut at {cut}: {out}");
        assert_eq!(out, format!("{note}id: e2\nevent: message\ndata: {}\n\n", refused_json("\"a-1\"")), "cut at {cut}");
        assert_eq!(events.len(), 1, "cut at {cut}");
    }
}

#[test]
fn an_access_key_is_redacted_and_the_rest_stays_byte_identical() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let body = text_result("7", &format!("\"id={AWS} and {AWS}.\""));
    let want = text_result("7", "\"id=[redacted] and [redacted].\"");
    let (out, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), want);
    assert_eq!(events[0].redactions, 2);
    assert_eq!(events[0].label(), "redacted");
    assert!(!events[0].audit_json("t").contains(AWS));
    // In SSE, only the data line changes.
    let sse = format!("id: 1\nevent: message\ndata: {body}\n\n");
    let (out, _) = run(&p, &d, "text/event-stream", &[sse.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), format!("id: 1\nevent: message\ndata: {want}\n\n"));
}

#[test]
fn clean_results_pass_byte_for_byte_and_oversize_ones_are_refused_on_any_calls_reply() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let clean = text_result("7", "\"hello \\u00e9 world\"").replace(',', " ,");
    let (out, events) = run(&p, &d, "application/json", &[clean.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), clean);
    assert!(events.is_empty());
    let big = text_result("7", &format!("\"{}\"", "x".repeat(3000)));
    let (out, events) = run(&p, &d, "application/json", &[&big.as_bytes()[..1000], &big.as_bytes()[1000..]]);
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.contains(r#""kind":"result_refused""#) && out.contains(r#""rule":"tools.read_file.result.max_bytes""#),
        "{out}"
    );
    assert_eq!(events[0].rule, "tools.read_file.result.max_bytes");
    // The answer of a tool without rules, under its own id, is judged by every tool's rules: a
    // client that reuses the id of a read_file call in flight has the server answer read_file's
    // call there. It is not held to their size limits (read_file's 2048 bytes).
    let (out, events) = run(
        &p,
        &Decision::allowed_call("other", "7"),
        "application/json",
        &[text_result("7", &format!("\"{KEY}\"")).as_bytes()],
    );
    assert!(!contains(&out, KEY));
    assert_eq!(events[0].rule, "tools.read_file.result.deny_if[0]");
    let big = text_result("7", &format!("\"{}\"", "x".repeat(3000)));
    let (out, events) = run(&p, &Decision::allowed_call("other", "7"), "application/json", &[big.as_bytes()]);
    assert_eq!((String::from_utf8(out).unwrap(), events), (big, vec![]));
    let aws = text_result("7", &format!("\"{AWS}\""));
    let (out, events) = run(&p, &Decision::allowed_call("other", "7"), "application/json", &[aws.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), text_result("7", "\"[redacted]\""));
    assert_eq!((events[0].label(), events[0].tool.as_str()), ("redacted", "read_file"));
    // Under another id it is judged by every tool's rules too: the SDKs hand each response to the
    // call its id names, which may be read_file's.
    let (out, events) = run(
        &p,
        &Decision::allowed_call("other", "8"),
        "application/json",
        &[text_result("7", &format!("\"{KEY}\"")).as_bytes()],
    );
    assert!(!contains(&out, KEY));
    assert_eq!(events[0].rule, "tools.read_file.result.deny_if[0]");
    let (out, events) =
        run(&p, &Decision::allowed_call("other", "7"), "application/json", &[text_result("7", "\"ok\"").as_bytes()]);
    assert!(contains(&out, "ok") && events.is_empty());
}

#[test]
fn unreadable_results_are_refused_with_the_same_kind() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    for (ct, body) in [
        ("application/json", "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"a\":1,\"a\":2}}".to_owned()),
        ("text/plain", text_result("7", "\"x\"")),
        ("application/json", format!("{}1{}", "[".repeat(70), "]".repeat(70))),
    ] {
        let (out, events) = run(&p, &d, ct, &[body.as_bytes()]);
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31012"#), "{out}");
        assert!(out.contains(r#""rule":"tools.read_file.result""#), "{out}");
        assert_eq!(events.len(), 1);
    }
}

#[test]
fn batch_elements_are_judged_each_and_unknown_calls_by_every_rule() {
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "1");
    let body = format!(
        "[{},{},{}]",
        text_result("1", "\"ok\""),
        text_result("2", &format!("\"{KEY}\"")),
        text_result("3", "\"fine\"")
    );
    let (out, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!("[{},{},{}]", text_result("1", "\"ok\""), refused_json("2"), text_result("3", "\"fine\""))
    );
    assert_eq!(events.len(), 1);
    // A GET stream replaying a tool result: judged too.
    let get = Decision { method: None, tool: None, id: None, ..Decision::allowed_call("x", "1") };
    let sse = format!("id: 9\ndata: {}\n\n", text_result("5", &format!("\"{KEY}\"")));
    let (out, _) = run(&p, &get, "text/event-stream", &[sse.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), format!("id: 9\ndata: {}\n\n", refused_json("5")));
}

#[test]
fn dry_run_changes_nothing_and_records_what_would_have_happened() {
    let p = read_file_policy(r#","gateway":{"mode":"dry_run"}"#);
    let d = Decision::allowed_call("read_file", "7");
    let body = text_result("7", &format!("\"{KEY} {AWS}\""));
    let (out, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), body);
    assert_eq!(events[0].label(), "would_deny");
    let body = text_result("7", &format!("\"{AWS}\""));
    let (out, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), body);
    assert_eq!((events[0].label(), events[0].redactions), ("would_redact", 1));
}

#[test]
fn policies_without_result_rules_read_no_result() {
    let p = policy(r#"{"version":"1","default":"allow"}"#);
    let mut f = ResponseFilter::forwarded(&p, &[]).judging(&p, &Decision::allowed_call("read_file", "7"));
    assert_eq!(f.on_headers(false, |_| Some(b"application/json".to_vec())), Plan::PassThrough);
}

/// The reply to `tasks/result` (MCP 2025-11-25) is the result of a `tools/call` made as a task,
/// whose call is not known here: its JSON is read too, and judged by every tool's rules.
#[test]
fn a_task_result_is_judged_by_every_tool_rule() {
    let p = read_file_policy("");
    let mut d = Decision::allowed_call("other", "2");
    (d.method, d.tool) = (Some("tasks/result".into()), None);
    let key = serde_json::to_string(KEY).unwrap();
    let (out, _) = run(&p, &d, "application/json", &[text_result("2", &key).as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), refused_json("2"));
    let clean = text_result("2", r#""fine""#);
    let (out, _) = run(&p, &d, "application/json", &[clean.as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), clean);
}

/// A result whose call is not known (an event replayed on another stream) may be any tool's: it is
/// judged in dry run only when every tool with result rules is, whatever their names' order.
#[test]
fn a_result_of_an_unknown_call_is_enforced_when_any_tool_is() {
    let rules =
        r#"{"deny_if":[{"regex":"-----BEGIN [A-Z ]*PRIVATE KEY-----","reason":"a private key in a tool result"}]}"#;
    let key = serde_json::to_string(KEY).unwrap();
    let event = format!("id: 9\ndata: {}\n\n", text_result("5", &key));
    for (gateway, enforced) in [
        (r#"{"tool_modes":{"a_probe":"dry_run"}}"#, true),
        (r#"{"mode":"dry_run","tool_modes":{"read_file":"enforce"}}"#, true),
        (r#"{"mode":"dry_run"}"#, false),
    ] {
        let p = policy(&format!(
            r#"{{"version":"1","default":"allow","tools":{{"read_file":{{"result":{rules}}},
            "a_probe":{{"result":{{"deny_if":[{{"regex":"NEVER"}}]}}}}}},"gateway":{gateway}}}"#
        ));
        let (out, events) = run(&p, &Decision::allowed_call("other", "1"), "text/event-stream", &[event.as_bytes()]);
        assert_eq!(!contains(&out, KEY), enforced, "{gateway}");
        assert_eq!(events.len(), 1, "{gateway}");
    }
}
