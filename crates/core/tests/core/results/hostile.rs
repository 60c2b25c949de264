//! Responses a server shapes so that a client reads what the filter did not: each is read, or
//! refused, as the Python and TypeScript SDK clients would take it.

use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};

use super::filter::{read_file_policy, run, KEY};

const AWS: &str = "AKIAABCDEFGHIJKLMNOP";

fn contains(hay: &[u8], needle: &str) -> bool {
    hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The rules of the events, in order.
fn rules(events: &[mcp_policy_core::response::result::ResultEvent]) -> Vec<(&str, &str)> {
    events.iter().map(|e| (e.label(), e.rule.as_str())).collect()
}

fn sse(body: &str) -> String {
    format!("event: message\ndata: {body}\n\n")
}

#[test]
fn a_response_with_both_result_and_error_or_a_method_is_refused() {
    // pydantic reads `error` beside `result` as the error, and `"method":null` beside `result` as
    // the result: the filter does not pick one for the client.
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let bodies = [
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[]}},"error":{{"code":-1,"message":"{KEY}"}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":null,"error":{{"code":-1,"message":"{AWS}"}}}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":null,"result":{{"content":[{{"type":"text","text":"{AWS}"}}]}}}}"#
        ),
        format!(r#"{{"jsonrpc":"2.0","id":7,"method":"x","error":{{"code":-1,"message":"{AWS}"}}}}"#),
    ];
    let want = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31012,"message":"tool 'read_file' result refused: the tool result is not one JSON-RPC response","data":{"kind":"result_refused","tool":"read_file","reason":"the tool result is not one JSON-RPC response","rule":"tools.read_file.result"}}}"#;
    for body in &bodies {
        let (out, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
        assert_eq!(String::from_utf8(out).unwrap(), want, "{body}");
        assert_eq!(rules(&events), [("result_refused", "tools.read_file.result")]);
        let (out, _) = run(&p, &d, "text/event-stream", &[sse(body).as_bytes()]);
        assert_eq!(String::from_utf8(out).unwrap(), sse(want), "{body}");
    }
    // A request or a notification from the server (a `method`, no `result` or `error`) passes.
    let note = r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#;
    let (out, events) = run(&p, &d, "text/event-stream", &[sse(note).as_bytes()]);
    assert_eq!((String::from_utf8(out).unwrap(), events.len()), (sse(note), 0));
}

#[test]
fn every_response_on_the_reply_to_a_call_is_the_calls_whatever_its_id() {
    // The Python SDK writes the call's id over any response on its POST stream, and reads a JSON
    // reply's id as an integer ("07", "+7", fullwidth 7); TypeScript's `Number` reads "0x7".
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    for id in [r#""07""#, r#""+7""#, "\"\u{ff17}\"", r#""0x7""#, "null", "999"] {
        let error = format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-1,"message":"{KEY}","data":"{AWS}"}}}}"#);
        for (content_type, body) in [("application/json", error.clone()), ("text/event-stream", sse(&error))] {
            let (out, events) = run(&p, &d, content_type, &[body.as_bytes()]);
            assert!(!contains(&out, KEY) && !contains(&out, AWS), "{id}: {}", String::from_utf8_lossy(&out));
            assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.deny_if[0]")], "{id}");
        }
        let result =
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{AWS}"}}]}}}}"#);
        let (out, events) = run(&p, &d, "application/json", &[result.as_bytes()]);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"[redacted]"}}]}}}}"#)
        );
        assert_eq!(rules(&events), [("redacted", "tools.read_file.result.redact")]);
    }
    // The call's marks are set by its result under any id.
    let p = crate::flows::trifecta("");
    let d = Decision::allowed_call("read_secret", "1");
    for id in [r#""01""#, "999"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"s"}}]}}}}"#);
        let (_, events) = run(&p, &d, "application/json", &[body.as_bytes()]);
        assert_eq!(events.iter().filter_map(|e| e.mark.as_deref()).collect::<Vec<_>>(), ["secret"], "{id}");
    }
}

#[test]
fn an_error_on_any_stream_is_judged_by_every_tools_rules() {
    // A GET stream (a resumed call's reply is replayed there) carries no call of its own.
    let p = read_file_policy("");
    let mut get = Decision::allowed_call("x", "1");
    (get.method, get.tool, get.id) = (None, None, None);
    let error = format!(r#"{{"jsonrpc":"2.0","id":7,"error":{{"code":-1,"message":"{KEY}"}}}}"#);
    let (out, events) = run(&p, &get, "text/event-stream", &[sse(&error).as_bytes()]);
    assert!(!contains(&out, KEY), "{}", String::from_utf8_lossy(&out));
    assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.deny_if[0]")]);
    let plain = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found"}}"#;
    let (out, events) = run(&p, &get, "text/event-stream", &[sse(plain).as_bytes()]);
    assert_eq!((String::from_utf8(out).unwrap(), events.len()), (sse(plain), 0));
}

#[test]
fn a_charset_in_rfc_2231_form_is_refused() {
    // httpx decodes by `charset*` (Python's `email.message`): UTF-7 would pass every rule unread.
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    for ct in ["text/event-stream; charset*=utf-8''utf-7", "application/json; charset*0=utf-; charset*1=7"] {
        let mut f = ResponseFilter::forwarded(&p, &[]).judging(&p, &d);
        let Plan::Refuse(bad) = f.on_headers(false, |n| (n == "content-type").then(|| ct.as_bytes().to_vec())) else {
            panic!("{ct}: not refused")
        };
        assert!(bad.body.contains("the response declares a charset other than utf-8"), "{}", bad.body);
    }
}

#[test]
fn a_json_reply_to_another_request_is_read() {
    // The SDKs hand a JSON reply's response to the pending request its id names: the reply to a
    // `prompts/list` may answer a concurrent `tools/list`, and the reply to a call of a tool
    // without rules a concurrent call of one with them.
    let p = super::policy(r#"{"version":"1","default":"allow","hide":["delete_vm"]}"#);
    let mut prompts = Decision::allowed_call("x", "4");
    (prompts.method, prompts.tool) = (Some("prompts/list".into()), None);
    let list = r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"delete_vm","inputSchema":{"type":"object"}},{"name":"list_vms","inputSchema":{"type":"object"}}]}}"#;
    let mut f = ResponseFilter::forwarded(&p, &[]).judging(&p, &prompts);
    assert_eq!(f.on_headers(false, |n| (n == "content-type").then(|| b"application/json".to_vec())), Plan::FilterJson);
    assert_eq!(f.on_body(list.len(), true), Step::Read);
    let Step::Write { bytes, removed } = f.on_chunk(list.as_bytes(), true, &|n| p.is_unlisted(n)) else { panic!() };
    assert_eq!(
        (String::from_utf8(bytes).unwrap().as_str(), removed),
        (r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[{"name":"list_vms","inputSchema":{"type":"object"}}]}}"#, 1)
    );
    let p = read_file_policy("");
    // Held up to gateway.max_response_bytes, not read_file's 2,048: a large reply to another
    // request that holds no tool result passes as it came.
    let mut read = Decision::allowed_call("x", "5");
    (read.method, read.tool) = (Some("resources/read".into()), None);
    let large = format!(
        r#"{{"jsonrpc":"2.0","id":5,"result":{{"contents":[{{"uri":"file:///a","text":"{}"}}]}}}}"#,
        "a".repeat(5000)
    );
    let (out, events) = run(&p, &read, "application/json", &[large.as_bytes()]);
    assert_eq!((out, events.len()), (large.into_bytes(), 0));
    let other = Decision::allowed_call("other", "8");
    let result = format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{KEY}"}}]}}}}"#);
    let (out, events) = run(&p, &other, "application/json", &[result.as_bytes()]);
    assert!(!contains(&out, KEY));
    assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.deny_if[0]")]);
}

#[test]
fn a_text_to_redact_split_over_two_items_refuses_the_result() {
    // Each item is redacted on its own; a client that joins them would read the key whole.
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let split = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"key: AKIAABCDEFGH"},{"type":"text","text":"IJKLMNOP"}]}}"#;
    let (out, events) = run(&p, &d, "application/json", &[split.as_bytes()]);
    assert!(!contains(&out, "AKIAABCDEFGH"), "{}", String::from_utf8_lossy(&out));
    assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.redact")]);
    assert_eq!(events[0].reason.as_deref(), Some("a text to redact spans two content items"));
    // One inside an item, and one beside it, are redacted as ever.
    let whole = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{AWS}"}},{{"type":"text","text":"x"}}]}}}}"#
    );
    let (out, events) = run(&p, &d, "application/json", &[whole.as_bytes()]);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"[redacted]"},{"type":"text","text":"x"}]}}"#
    );
    assert_eq!(rules(&events), [("redacted", "tools.read_file.result.redact")]);
}

#[test]
fn a_split_text_is_found_in_dry_run_and_a_replacement_may_match_its_rule() {
    // `with` may match its own regex: the split is found in the texts as received.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{"redact":[
            {"regex":"Bearer \\S+","with":"Bearer [redacted]"}]}}}}"#,
    );
    let d = Decision::allowed_call("t", "7");
    let one = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Bearer abc"}]}}"#;
    let (out, events) = run(&p, &d, "application/json", &[one.as_bytes()]);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Bearer [redacted]"}]}}"#
    );
    assert_eq!(rules(&events), [("redacted", "tools.t.result.redact")]);
    let split = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"Bear"},{"type":"text","text":"er abc"}]}}"#;
    let (_, events) = run(&p, &d, "application/json", &[split.as_bytes()]);
    assert_eq!(rules(&events), [("result_refused", "tools.t.result.redact")]);
    let dry = read_file_policy(r#","gateway":{"mode":"dry_run"}"#);
    let split = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"AKIAABCDEFGH"},{"type":"text","text":"IJKLMNOP"}]}}"#;
    let (out, events) = run(&dry, &Decision::allowed_call("read_file", "7"), "application/json", &[split.as_bytes()]);
    assert_eq!(
        (String::from_utf8(out).unwrap().as_str(), rules(&events)),
        (split, vec![("would_deny", "tools.read_file.result.redact")])
    );
}

#[test]
fn a_response_under_another_id_on_a_calls_reply_is_judged_by_every_tools_rules() {
    // Both SDKs hand a JSON reply's responses to the calls their ids name: a reply to `search`
    // may answer a concurrent call of read_file, by its id.
    let p = super::policy(&format!(
        r#"{{"version":"1","default":"allow","tools":{{"read_file":{{"result":{{"deny_if":[{{"regex":"{}"}}]}}}},
           "search":{{"result":{{"max_bytes":100000}}}}}}}}"#,
        "-----BEGIN [A-Z ]*PRIVATE KEY-----"
    ));
    let d = Decision::allowed_call("search", "1");
    let other = format!(r#"{{"jsonrpc":"2.0","id":2,"result":{{"content":[{{"type":"text","text":"{KEY}"}}]}}}}"#);
    let own = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}"#;
    for (content_type, body) in [
        ("application/json", other.clone()),
        ("application/json", format!("[{other},{own}]")),
        ("text/event-stream", format!("{}{}", sse(&other), sse(own))),
    ] {
        let (out, events) = run(&p, &d, content_type, &[body.as_bytes()]);
        assert!(!contains(&out, KEY), "{body}");
        assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.deny_if[0]")], "{body}");
    }
    // Under the call's own id, its own rules.
    let (out, events) = run(&p, &d, "application/json", &[other.replace(r#""id":2"#, r#""id":1"#).as_bytes()]);
    assert!(contains(&out, KEY) && events.is_empty());
}

#[test]
fn neither_the_answer_of_a_tool_without_rules_nor_an_error_is_held_to_other_tools_sizes() {
    let p = read_file_policy("");
    let big = format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "x".repeat(5000)
    );
    let d = Decision::allowed_call("other", "7");
    for (content_type, body) in [("application/json", big.clone()), ("text/event-stream", sse(&big))] {
        let (out, events) = run(&p, &d, content_type, &[body.as_bytes()]);
        assert_eq!((String::from_utf8(out).unwrap(), events.len()), (body, 0));
    }
    let mut read = Decision::allowed_call("x", "3");
    (read.method, read.tool) = (Some("resources/read".into()), None);
    let error = format!(r#"{{"jsonrpc":"2.0","id":3,"error":{{"code":-32602,"message":"{}"}}}}"#, "y".repeat(3000));
    let (out, events) = run(&p, &read, "application/json", &[error.as_bytes()]);
    assert_eq!((String::from_utf8(out).unwrap(), events.len()), (error, 0));
}

#[test]
fn what_a_redaction_joins_is_judged_again_and_a_match_running_on_is_a_split() {
    // An empty `with` takes the key out of `…PRIVAKIA…ATE KEY-----`: what is left is refused.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{
            "deny_if":[{"regex":"-----BEGIN [A-Z ]*PRIVATE KEY-----"}],
            "redact":[{"regex":"AKIA[0-9A-Z]{16}","with":""},{"regex":"Bearer \\S+","with":"Bearer [redacted]"}]}}}}"#,
    );
    let d = Decision::allowed_call("t", "7");
    let joined = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"-----BEGIN RSA PRIVAKIA1234567890123456ATE KEY-----"}]}}"#;
    let (out, events) = run(&p, &d, "application/json", &[joined.as_bytes()]);
    assert!(!contains(&out, "PRIVATE KEY"), "{}", String::from_utf8_lossy(&out));
    assert_eq!(rules(&events), [("result_refused", "tools.t.result.deny_if[0]")]);
    // A token whose match runs on into the next item is a split, even where its part in the first
    // item matches alone: `Bearer s` | `k-live-…` would pass the rest of the token.
    for second in ["k-live-SECRET0123456789 ok", "Response: 200"] {
        let on = format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"auth: Bearer s"}},{{"type":"text","text":"{second}"}}]}}}}"#
        );
        let (out, events) = run(&p, &d, "application/json", &[on.as_bytes()]);
        assert!(!contains(&out, "SECRET"), "{}", String::from_utf8_lossy(&out));
        assert_eq!(rules(&events), [("result_refused", "tools.t.result.redact")], "{second}");
    }
}

#[test]
fn an_error_under_another_id_on_a_calls_stream_is_held_to_the_calls_size() {
    // The Python SDK hands it to the call whatever its id.
    let p = read_file_policy("");
    let d = Decision::allowed_call("read_file", "7");
    let error =
        format!(r#"{{"jsonrpc":"2.0","id":8,"error":{{"code":-1,"message":"boom","data":"{}"}}}}"#, "b".repeat(5000));
    let (out, events) = run(&p, &d, "text/event-stream", &[sse(&error).as_bytes()]);
    assert!(!contains(&out, "bbbb"));
    assert_eq!(rules(&events), [("result_refused", "tools.read_file.result.max_bytes")]);
}

#[test]
fn a_key_nested_in_itself_is_redacted_again_until_none_is_left() {
    // Each pass with an empty `with` joins `AK` and `IA…` around the key it takes out into another.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{
            "redact":[{"regex":"AKIA[0-9A-Z]{16}","with":""},{"regex":"Bearer \\S+","with":"Bearer [redacted]"}]}}}}"#,
    );
    let d = Decision::allowed_call("t", "7");
    let nested = |layers: usize| (1..layers).fold(AWS.to_owned(), |k, _| format!("AK{k}IA{}", &AWS[4..]));
    let body = |text: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#)
    };
    let (out, events) =
        run(&p, &d, "application/json", &[body(&format!("k={} Bearer [redacted]", nested(3))).as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), body("k= Bearer [redacted]"));
    assert_eq!((rules(&events), events[0].redactions), (vec![("redacted", "tools.t.result.redact")], 3));
    // Four layers take a fourth pass that still changes the text: refused.
    let (out, events) = run(&p, &d, "application/json", &[body(&nested(4)).as_bytes()]);
    assert!(!contains(&out, "IAABCD"), "{}", String::from_utf8_lossy(&out));
    assert_eq!(rules(&events), [("result_refused", "tools.t.result.redact")]);
    assert_eq!(events[0].reason.as_deref(), Some("redacting the result does not settle"));
    // A match within text a `with` wrote is the operator's own: a replacement that holds a match
    // of its rule, or of another rule, settles instead of being replaced on every pass.
    let own = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{"redact":[
            {"regex":"secret","with":"[secret removed]"},
            {"regex":"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}","with":"redacted@example.com"},
            {"regex":"\\b[a-z0-9-]+\\.(com|net|org)\\b","with":"example.invalid"}]}}}}"#,
    );
    let (out, events) = run(&own, &d, "application/json", &[body("a secret; alice@acme.org; acme.net").as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), body("a [secret removed]; redacted@example.com; example.invalid"));
    assert_eq!((rules(&events), events[0].redactions), (vec![("redacted", "tools.t.result.redact")], 3));
    // A redaction that joins the items around it into a key across two of them is a split.
    let split = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"AK"},{"type":"text","text":"AKIAABCDEFGHIJKLMNOPIAABCDEFGHIJKLMNOP"}]}}"#;
    let (_, events) = run(&p, &d, "application/json", &[split.as_bytes()]);
    assert_eq!(rules(&events), [("result_refused", "tools.t.result.redact")]);
    assert_eq!(events[0].reason.as_deref(), Some("a text to redact spans two content items"));
}

#[test]
fn items_are_read_joined_by_nothing_and_by_a_line_break() {
    // A client may show the `text` items as one text with or without a line break between them.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{
            "deny_if":[{"regex":"password:\\s+hunter2"}],
            "redact":[{"regex":"Bearer\\s+[A-Za-z0-9._~+/-]+=*","with":"Bearer [redacted]"},
                      {"regex":"\\b[A-Za-z0-9/+=]{40}\\b","with":"[redacted]"}]}}}}"#,
    );
    let d = Decision::allowed_call("t", "7");
    let items = |texts: &[&str]| {
        let items: Vec<String> = texts.iter().map(|t| format!(r#"{{"type":"text","text":"{t}"}}"#)).collect();
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{}]}}}}"#, items.join(","))
    };
    let token = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl";
    let key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEK/+";
    for (texts, rule) in [
        // `Bearer` and its token, the line break between them matched by `\s+`.
        (vec!["Authorization: Bearer", token], "tools.t.result.redact"),
        // A key that `\b` bounds only where the items meet: no item alone shows the match.
        (vec![&*format!("aws_secret_access_key = {key}"), "x"], "tools.t.result.redact"),
        (vec!["password:", "hunter2"], "tools.t.result.deny_if[0]"),
    ] {
        let (out, events) = run(&p, &d, "application/json", &[items(&texts).as_bytes()]);
        assert!(!contains(&out, token) && !contains(&out, key) && !contains(&out, "hunter2"));
        assert_eq!(rules(&events), [("result_refused", rule)], "{texts:?}");
    }
    // A `text` that is not a text item's, between two of them, parts nothing a client joins.
    let hidden = r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"password: "},
        {"type":"text","_meta":{"text":"-"},"text":"hunter2"}]}}"#;
    let (out, events) = run(&p, &d, "application/json", &[hidden.as_bytes()]);
    assert!(!contains(&out, "hunter2"));
    assert_eq!(rules(&events), [("result_refused", "tools.t.result.deny_if[0]")]);
    // A token at the end of an item beside the next item's first word: redacted, as what is left
    // joined holds no match (`[` is not in the token's class).
    let (out, events) = run(&p, &d, "application/json", &[items(&["Bearer a1", "Accept: x"]).as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), items(&["Bearer [redacted]", "Accept: x"]));
    assert_eq!(rules(&events), [("redacted", "tools.t.result.redact")]);
    // Tokens whole in their items are redacted as ever.
    let (out, events) = run(&p, &d, "application/json", &[items(&["Bearer a1", " and Bearer b2"]).as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), items(&["Bearer [redacted]", " and Bearer [redacted]"]));
    assert_eq!(rules(&events), [("redacted", "tools.t.result.redact")]);
}

#[test]
fn every_tools_replacement_is_left_as_it_is_in_a_response_judged_by_every_tool() {
    // Two tools redact addresses with their own placeholders; an error that may answer either is
    // redacted by both, and each placeholder is an address to the other's rule.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{
            "crm":{"result":{"redact":[{"regex":"[a-z.]+@[a-z]+\\.[a-z]{2,}","with":"redacted@example.com"}]}},
            "mail":{"result":{"redact":[{"regex":"[a-z.]+@[a-z]+\\.[a-z]{2,}","with":"nobody@example.org"}]}}}}"#,
    );
    let d = Decision::allowed_call("crm", "7");
    let error = r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"no such user: bob@corp.io"}}"#;
    let (out, events) = run(&p, &d, "application/json", &[error.as_bytes()]);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"no such user: redacted@example.com"}}"#
    );
    assert_eq!(events.iter().map(|e| (e.label(), e.redactions)).collect::<Vec<_>>(), [("redacted", 1)]);
}

#[test]
fn redaction_that_would_grow_the_result_past_max_bytes_is_refused() {
    // A one-byte match replaced by a long `with` many times over would grow a result of `max_bytes`
    // many times over, in the gateway's memory and in every later reading: what redaction adds is
    // held to what `max_bytes` leaves.
    let p = super::policy(
        r#"{"version":"1","default":"allow","tools":{"t":{"result":{"max_bytes":200,
            "redact":[{"regex":"k\\d","with":"[a key removed]"}]}}}}"#,
    );
    let d = Decision::allowed_call("t", "7");
    let body = |text: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#)
    };
    let keys = |n: usize| vec!["k1"; n].join(" ");
    // 13 bytes more a key: 8 keys make exactly 200 bytes (96 received, 104 added), 9 make 216.
    assert_eq!((body(&keys(8)).len(), body(&keys(9)).len()), (96, 99));
    let (out, events) = run(&p, &d, "application/json", &[body(&keys(8)).as_bytes()]);
    assert_eq!(String::from_utf8(out).unwrap(), body(&["[a key removed]"; 8].join(" ")));
    assert_eq!((rules(&events), events[0].redactions), (vec![("redacted", "tools.t.result.redact")], 8));
    let refused = r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31012,"message":"tool 't' result refused: redacting the result makes it larger than 200 bytes","data":{"kind":"result_refused","tool":"t","reason":"redacting the result makes it larger than 200 bytes","rule":"tools.t.result.redact"}}}"#;
    let (out, events) = run(&p, &d, "application/json", &[body(&keys(9)).as_bytes()]);
    assert_eq!(
        (String::from_utf8(out).unwrap().as_str(), rules(&events)),
        (refused, vec![("result_refused", "tools.t.result.redact")])
    );
    // Keys in two items count together: 6 keys fit in 115 bytes (193 redacted), 7 do not in 118
    // (209). An SSE event is not a body: the events of one chunk may add up to the limit together.
    let two = |n: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"k1 k1 k1"}},{{"type":"text","text":"{}"}}]}}}}"#,
            keys(n - 3)
        )
    };
    let (out, events) = run(&p, &d, "application/json", &[two(6).as_bytes()]);
    assert_eq!((out.len(), rules(&events)), (193, vec![("redacted", "tools.t.result.redact")]));
    let (out, events) = run(&p, &d, "application/json", &[two(7).as_bytes()]);
    assert_eq!(
        (String::from_utf8(out).unwrap().as_str(), rules(&events)),
        (refused, vec![("result_refused", "tools.t.result.redact")])
    );
    let (out, events) = run(&p, &d, "text/event-stream", &[sse(&two(7)).as_bytes()]);
    assert_eq!((out.len(), rules(&events)), (sse(&two(7)).len() + 91, vec![("redacted", "tools.t.result.redact")]));
    // The responses of a batch share what the limit leaves of the body, and the SSE events of a
    // chunk share the limit (200 bytes: 15 events adding 13 each).
    let one = |id: usize| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#, keys(2))
    };
    let batch = format!("[{},{}]", one(7), one(8));
    let (out, events) = run(&p, &d, "application/json", &[batch.as_bytes()]);
    // 159 bytes leave 41: the first response's 26 fit, the second's do not (alone, each would).
    assert_eq!(batch.len(), 159);
    assert_eq!(rules(&events), [("redacted", "tools.t.result.redact"), ("result_refused", "tools.t.result.redact")]);
    assert_eq!(String::from_utf8(out).unwrap().matches("[a key removed]").count(), 2);
    let stream: String =
        (7..=23).map(|id| sse(&body(&keys(1)).replace(r#""id":7"#, &format!(r#""id":{id}"#)))).collect();
    let (out, events) = run(&p, &d, "text/event-stream", &[stream.as_bytes()]);
    let refused_events = events.iter().filter(|e| e.label() == "result_refused").count();
    assert_eq!((events.len() - refused_events, refused_events), (15, 2));
    assert_eq!(String::from_utf8(out).unwrap().matches("[a key removed]").count(), 15);
    // What a rule takes out before another adds leaves room; dry run counts what enforcing refuses.
    let dry = super::policy(
        r#"{"version":"1","default":"allow","gateway":{"mode":"dry_run"},"tools":{"t":{"result":{"max_bytes":200,
            "redact":[{"regex":"z+","with":""},{"regex":"k\\d","with":"[a key removed]"}]}}}}"#,
    );
    let (out, events) = run(&dry, &d, "application/json", &[body(&keys(9)).as_bytes()]);
    assert_eq!(
        (String::from_utf8(out).unwrap(), rules(&events)),
        (body(&keys(9)), vec![("would_deny", "tools.t.result.redact")])
    );
    let padded = body(&format!("{}{}", "z".repeat(40), keys(8)));
    let (out, events) = run(&dry, &d, "application/json", &[padded.as_bytes()]);
    assert_eq!(
        (String::from_utf8(out).unwrap(), rules(&events)),
        (padded.clone(), vec![("would_redact", "tools.t.result.redact")])
    );
    assert_eq!(events[0].redactions, 9);
}
