//! Fuzz the result reader and result rules (`response::result`) with arbitrary upstream bytes as
//! the reply to a `tools/call` of a tool with `deny_if` and `redact` rules, JSON or SSE, cut into
//! chunks as Envoy hands them over: it must never panic, and whatever reaches the client must not
//! hold a tool result (a response with id 7) in which a `deny_if` rule matches or a `redact` rule
//! still matches.
use mcp_policy_core::config;
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::result::reader;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};
use mcp_policy_core::wire::json::{self, Json};

thread_local! {
    static POLICY: Policy = config::load(
        br#"{"version":"1","default":"allow","tools":{"read_file":{"result":{"max_bytes":4096,
        "deny_if":[{"regex":"-----BEGIN [A-Z ]*PRIVATE KEY-----","reason":"key"}],
        "redact":[{"regex":"AKIA[0-9A-Z]{16}","with":"[redacted]"}]}}}}"#,
    )
    .expect("the fuzz policy loads");
}

/// One fuzz input (the target's body; also replayed by `cargo test` over the seeds).
pub fn run(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else { return };
    POLICY.with(|policy| judge(policy, sel, body));
}

/// `sel` bit 0 picks SSE or JSON, bits 1.. the chunk length.
fn judge(policy: &Policy, sel: u8, body: &[u8]) {
    let sse = sel & 1 == 1;
    let mut f = ResponseFilter::forwarded(policy, &[]).judging(policy, &Decision::allowed_call("read_file", "7"));
    let content_type: &[u8] = if sse { b"text/event-stream" } else { b"application/json" };
    match f.on_headers(false, |name: &str| (name == "content-type").then(|| content_type.to_vec())) {
        Plan::FilterSse | Plan::FilterJson => {}
        plan => panic!("unexpected plan {plan:?}"),
    }
    let step_len = usize::from(sel >> 1) + 1;
    let (mut out, mut failed) = (Vec::new(), false);
    let mut start = 0;
    loop {
        let end = (start + step_len).min(body.len());
        let last = end == body.len();
        let bytes = if sse { &body[start..end] } else { &body[..end] };
        let step = match f.on_body(bytes.len(), last) {
            Step::Read => f.on_chunk_judged(bytes, last, &|_| false, policy),
            step => step,
        };
        match step {
            Step::Pass if !failed => out.extend_from_slice(bytes),
            Step::Hold if !failed && !sse && !last => {}
            Step::Write { bytes, .. } if !failed => out.extend_from_slice(&bytes),
            Step::Drop if failed => {}
            Step::Fail(bad) if !failed => {
                assert!(bad.body.contains("\"code\":-31012"), "{}", bad.body);
                out.extend_from_slice(bad.body.as_bytes());
                failed = true;
            }
            step => panic!("step {step:?} after failed={failed}"),
        }
        let _ = f.take_events();
        if last {
            break;
        }
        start = end;
    }
    if sse {
        return;
    }
    // A JSON reply that reaches the client as one response with id 7 holds nothing a rule matches.
    let Ok(msg) = json::parse(&out) else { return };
    if msg.get("id") != Some(&Json::Number("7".into())) {
        return;
    }
    let Some(payload) = reader::payload(&msg) else { return };
    let texts = reader::texts(payload);
    let rules = policy.result_rules("read_file").expect("rules");
    assert!(reader::first_match(&texts, rules.deny_if.iter().map(|d| &d.needle)).is_none(), "a denied result passed");
    if msg.get("result").is_some() {
        assert!(texts.all.iter().all(|t| !rules.redact[0].needle.is_match(t)), "an unredacted key passed");
    }
}
