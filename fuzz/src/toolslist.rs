//! Fuzz the tools/list response filter (JSON and SSE) with arbitrary upstream bytes: it must never
//! panic, and whenever it succeeds its output must not list a hidden tool in the matching response.
//! Then the same bytes through the response side's chunk filter (`response::ResponseFilter`), cut
//! into chunks as Envoy hands them over: it must never panic, must drop everything after an error
//! that replaced the body, and when it filters the whole body without error its output must be the
//! whole-body filter's, whatever the cuts.
use mcp_policy_core::config;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::toolslist;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};
use mcp_policy_core::wire::json::{self, Json};
use mcp_policy_core::wire::mcp::Id;

thread_local! {
    static POLICY: Policy = config::load(
        br#"{"version":"1","default":"allow","hide":["delete*"],"gateway":{"max_response_bytes":512}}"#,
    )
    .expect("the fuzz policy loads");
}

fn hidden(name: &str) -> bool {
    name.starts_with("delete")
}

/// One fuzz input (the target's body; also replayed by `cargo test` over the seeds).
pub fn run(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else { return };
    let ids = [Json::Number("1".into()), Json::String("L".into())];
    let result = if sel & 1 == 0 {
        toolslist::filter_json(body, &ids, &hidden)
    } else {
        toolslist::filter_sse(body, &ids, &hidden)
    };
    if let (Ok((out, _)), 0) = (&result, sel & 1) {
        // A matching JSON response keeps no hidden tool.
        if let Ok(Json::Object(m)) = json::parse(out) {
            let matches = m.iter().any(|(k, v)| k == "id" && (v == &ids[0] || v == &ids[1]));
            if matches {
                if let Some(Json::Array(tools)) = Json::Object(m.clone()).get("result").and_then(|r| r.get("tools")) {
                    for t in tools {
                        assert!(!t.get("name").and_then(Json::as_str).is_some_and(hidden), "hidden tool kept");
                    }
                }
            }
        }
    }
    POLICY.with(|policy| chunked(policy, sel, body, &ids));
}

/// Drive the chunk filter: `sel` bit 0 picks SSE or JSON, bit 1 a `tools/list` reply (ids `ids`) or
/// any other stream, bits 2.. the chunk length.
fn chunked(policy: &Policy, sel: u8, body: &[u8], ids: &[Json]) {
    let sse = sel & 1 == 1;
    let ids = if sel & 2 == 0 { ids } else { &[] };
    let list_ids: Vec<Id> = ids.iter().map(Id::of).collect();
    let mut f = ResponseFilter::forwarded(policy, &list_ids);
    let content_type: &[u8] = if sse { b"text/event-stream" } else { b"application/json" };
    let plan = f.on_headers(false, |name: &str| (name == "content-type").then(|| content_type.to_vec()));
    match (&plan, sse, ids.is_empty()) {
        (Plan::FilterSse, true, _) | (Plan::FilterJson, false, false) => {}
        (Plan::PassThrough, false, true) => return, // a JSON reply to another request
        _ => panic!("unexpected plan {plan:?}"),
    }
    let step_len = usize::from(sel >> 2) + 1;
    let (mut out, mut failed, mut removed) = (Vec::new(), false, 0);
    let mut start = 0;
    loop {
        let end = (start + step_len).min(body.len());
        let last = end == body.len();
        // JSON is held, so Envoy hands over everything buffered so far; SSE chunks are new bytes.
        let bytes = if sse { &body[start..end] } else { &body[..end] };
        let step = match f.on_body(bytes.len(), last) {
            Step::Read => f.on_chunk(bytes, last, &hidden),
            step => step,
        };
        match step {
            Step::Pass if !failed => out.extend_from_slice(bytes),
            Step::Hold if !failed && !sse && !last => {}
            Step::Write { bytes, removed: n } if !failed => {
                out.extend_from_slice(&bytes);
                removed += n;
            }
            Step::Drop if failed => {}
            Step::Fail(bad) if !failed => {
                assert!(bad.body.contains("\"code\":-31006"), "{}", bad.body);
                failed = true;
            }
            step => panic!("step {step:?} after failed={failed}"),
        }
        if last {
            break;
        }
        start = end;
    }
    if failed {
        return;
    }
    // Filtered without error: the whole-body filter succeeds on the same bytes, with the same output.
    let whole =
        if sse { toolslist::filter_sse(body, ids, &hidden) } else { toolslist::filter_json(body, ids, &hidden) };
    let (expected, n) = whole.expect("the chunk filter passed what the whole-body filter refuses");
    if sse || n > 0 {
        assert_eq!((out, removed), (expected, n), "chunked output differs");
    } else {
        assert_eq!((out.as_slice(), removed), (body, 0), "an unfiltered JSON body changed");
    }
}
