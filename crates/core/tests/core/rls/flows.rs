//! Flows with the rate limit service: the checks a call carries (`rls::marks`), the markings a result
//! sends, and every answer (or its absence) turned into the agent's reply. The service's side of
//! the same descriptors, against a real Redis, is services/ratelimit/tests/marks.rs.

use mcp_policy_core::identity::grant;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::rls::{marks, proto, Answer};
use serde_json::{json, Value};

use super::{answer, body, call, decide, held};

const T0: u64 = 1_700_000_040_000;

fn trifecta(failure_mode: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"deny",
  "tools": {{"read_secret": {{"marks": ["secret"]}},
            "query_db": {{"result": {{"mark_if": [{{"regex": "\\b\\d{{3}}-\\d{{2}}-\\d{{4}}\\b", "mark": "pii"}}]}}}},
            "http_post": {{"limits":[{{"counter":"post","window":"minute","max":5}}]}},
            "list_files": {{"limits":[{{"counter":"files","window":"minute","max":5}}]}}}},
  "flows": [{{"name": "no-egress-after-secrets", "if_marked": ["secret", "pii"], "deny": ["http_post"], "for": "10m",
             "reason": "no outbound tools for 10 minutes after reading secrets"}},
            {{"name": "short", "if_marked": ["pii"], "deny": ["http_post"], "for": "90s"}}],
  "gateway": {{"rate_limit_service": {{"cluster": "mcp_ratelimit", "failure_mode": "{failure_mode}"}}}}}}"#
    );
    mcp_policy_core::config::load(text.as_bytes()).unwrap()
}

fn grant_hex(token: &str) -> String {
    grant::hex(&grant::Grant::from_credential(token.as_bytes()).id)
}

fn check(mark: &str, token: &str, for_ms: u64) -> proto::Descriptor {
    proto::Descriptor {
        entries: vec![
            ("mcp_mark".into(), mark.into()),
            ("mcp_grant".into(), grant_hex(token)),
            ("mcp_mark_for_ms".into(), for_ms.to_string()),
        ],
        limit: Some((0, 1)),
        hits_addend: Some(0),
    }
}

fn status(code: i32, until_reset_ms: Option<u64>) -> proto::Status {
    proto::Status { code, limit_remaining: 0, until_reset_ms }
}

fn data(v: &Value) -> &Value {
    &v["error"]["data"]
}

#[test]
fn a_call_a_flow_denies_carries_one_check_per_mark_after_its_limits() {
    let p = trifecta("deny");
    let store = MemoryStore::new();
    let pending = held(decide(&p, &store, "a", &call(1, "http_post")));
    let req = pending.request(&p, "mcp").unwrap();
    assert_eq!(req.descriptors.len(), 4);
    assert_eq!(
        req.descriptors[0].entries,
        vec![("mcp_counter".to_owned(), "post".to_owned()), ("mcp_grant".to_owned(), grant_hex("a"))]
    );
    // Two flows name pii: each check carries its own flow's `for`.
    assert_eq!(
        req.descriptors[1..],
        [check("secret", "a", 600_000), check("pii", "a", 600_000), check("pii", "a", 90_000)]
    );
    // A tool no flow denies carries no check; a marking tool neither (and, without limits, is not held).
    assert!(held(decide(&p, &store, "a", &call(2, "list_files"))).checks.is_empty());
    assert!(decide(&p, &store, "a", &call(3, "read_secret")).rls.is_none());
    // Nothing is read from shared data: the store stays empty.
    assert_eq!(store.len(), 0);
}

#[test]
fn a_mark_that_holds_refuses_with_the_services_time_and_the_first_flow() {
    let p = trifecta("deny");
    let store = MemoryStore::new();
    let ok = proto::CODE_OK;
    let over = proto::CODE_OVER_LIMIT;
    // pii holds in both flows, secret does not: the first flow names pii, lifting in 123.4 s.
    let statuses = vec![status(ok, Some(1)), status(ok, None), status(over, Some(123_400)), status(over, Some(13_400))];
    let pending = held(decide(&p, &store, "a", &call(7, "http_post")));
    let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, answer(over, statuses), T0);
    let reply = out.reply.as_ref().unwrap();
    assert_eq!((reply.status, reply.headers.clone()), (200, vec![("retry-after", "124".to_owned())]));
    assert_eq!(
        *data(&body(&out)),
        json!({"kind":"flow_denied","tool":"http_post","reason":"no outbound tools for 10 minutes after reading secrets",
               "rule":"flows[0]","retry_after_seconds":124,"flow":"no-egress-after-secrets","mark":"pii"})
    );
    assert_eq!(body(&out)["id"], 7);
    // Only the second flow's check holds.
    let statuses = vec![status(ok, None), status(ok, None), status(ok, None), status(over, Some(999))];
    let pending = held(decide(&p, &store, "a", &call(8, "http_post")));
    let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, answer(over, statuses), T0);
    assert_eq!(
        (data(&body(&out))["flow"].clone(), data(&body(&out))["retry_after_seconds"].clone()),
        (json!("short"), json!(1))
    );
    // All OK: forwarded.
    let pending = held(decide(&p, &store, "a", &call(9, "http_post")));
    let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, answer(ok, vec![status(ok, None); 4]), T0);
    assert_eq!(out.reply, None);
}

#[test]
fn a_check_without_an_answer_refuses_whatever_the_failure_mode() {
    for mode in ["deny", "allow"] {
        let p = trifecta(mode);
        let store = MemoryStore::new();
        let down = || Answer::Unavailable("rate limit service unavailable (or too slow): gRPC status 14".into());
        let pending = held(decide(&p, &store, "a", &call(1, "http_post")));
        let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, down(), T0);
        assert_eq!(data(&body(&out))["kind"], "limiter_unavailable", "{mode}");
        // A tool outside the flow follows failure_mode.
        let pending = held(decide(&p, &store, "a", &call(2, "list_files")));
        let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, down(), T0);
        assert_eq!(out.reply.is_none(), mode == "allow", "{mode}");
        // Too few statuses, or OVER_LIMIT on a mark without a time: refused.
        for statuses in [vec![status(proto::CODE_OK, None); 3], {
            let mut s = vec![status(proto::CODE_OK, None); 4];
            s[2] = status(proto::CODE_OVER_LIMIT, None);
            s
        }] {
            let pending = held(decide(&p, &store, "a", &call(3, "http_post")));
            let out = mcp_policy_core::pipeline::rls::on_answer(&p, pending, answer(proto::CODE_OK, statuses), T0);
            assert_eq!(data(&body(&out))["kind"], "limiter_unavailable", "{mode}");
        }
    }
}

#[test]
fn a_marking_is_one_descriptor_per_mark_with_the_longest_for_and_only_ok_records_it() {
    let p = trifecta("allow");
    let req = marks::set_request(&p, &["secret".to_owned(), "pii".to_owned()], &grant_hex("a"), "mcp");
    let set = |mark: &str, for_ms: u64| {
        let mut d = check(mark, "a", for_ms);
        d.hits_addend = Some(1);
        d
    };
    assert_eq!(req.descriptors, vec![set("secret", 600_000), set("pii", 600_000)]);
    let ok = |n: usize| answer(proto::CODE_OK, vec![status(proto::CODE_OK, Some(600_000)); n]);
    assert_eq!(marks::set_answered(&ok(2), 2), Ok(()));
    assert!(marks::set_answered(&ok(1), 2).is_err());
    assert!(marks::set_answered(&answer(proto::CODE_OVER_LIMIT, vec![]), 2).is_err());
    assert!(marks::set_answered(&Answer::Unavailable("down".into()), 2).is_err());
    assert!(marks::set_answered(&Answer::Unusable("no".into()), 2).is_err());
}
