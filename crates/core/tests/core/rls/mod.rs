//! Cluster-wide limits through the rate limit service, natively: the policy key, the descriptors
//! sent, and every answer (or its absence) turned into the agent's reply. The wire codec is checked
//! against envoy-types' prost messages in services/ratelimit/tests/filter_codec.rs; the whole path in real
//! Envoy with the real service and Redis in tests/envoy/test_rls.py.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::approval::Answer as ApprovalAnswer;
use mcp_policy_core::config;
use mcp_policy_core::identity::grant;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::rls::Pending;
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::policy::RateLimitService;
use mcp_policy_core::rls::{self, proto, Answer};
use mcp_policy_core::terms::FailureMode;
use serde_json::Value;

mod flows;
mod grpc;
mod with_approval;
use with_approval::{ok_status, over_status};

const T0: u64 = 1_700_000_040_000; // a UTC minute boundary
const RLS: &str = r#""rate_limit_service":{"cluster":"mcp_ratelimit"}"#;

fn policy(tools: &str, gateway: &str) -> Policy {
    let text = format!(
        r#"{{"version":"1","default":"deny","tools":{{{tools}}},"all_tools":{{"limits":[{{"counter":"all","window":"hour","max":1000,"scope":"global"}}]}},"gateway":{{{gateway}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

fn errors(text: &str) -> Vec<(String, String)> {
    config::load(text.as_bytes()).unwrap_err().0.into_iter().map(|e| (e.path, e.message)).collect()
}

fn decide(p: &Policy, store: &MemoryStore, token: &str, body: &str) -> Outcome {
    let auth = format!("Bearer {token}");
    let mut head = RequestHead::from_headers(
        p,
        [
            (":method", &b"POST"[..]),
            (":authority", b"gw"),
            (":path", b"/mcp"),
            ("content-type", b"application/json"),
            ("authorization", auth.as_bytes()),
        ],
    );
    head.cluster = Some("mcp_upstream".into());
    assert_eq!(pipeline::on_headers(p, &head), HeadOutcome::NeedBody);
    pipeline::on_body(p, &head, body.as_bytes(), store, T0)
}

fn call(id: u64, tool: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#)
}

fn held(o: Outcome) -> Pending {
    assert_eq!(o.reply, None);
    assert!(o.approval.is_none());
    *o.rls.expect("held for the rate limit service")
}

fn answer(code: i32, statuses: Vec<proto::Status>) -> Answer {
    Answer::Decoded(proto::Response { overall_code: code, statuses })
}

fn body(o: &Outcome) -> Value {
    serde_json::from_str(&o.reply.as_ref().expect("a local reply").body).unwrap()
}

const EXEC: &str = r#""exec":{"limits":[{"counter":"exec","window":"minute","max":10}]},"free":{}"#;

#[test]
fn the_policy_key_and_its_errors() {
    let p = policy(EXEC, RLS);
    assert_eq!(
        p.gateway.rate_limit_service,
        Some(RateLimitService {
            cluster: "mcp_ratelimit".into(),
            authority: None,
            domain: "mcp".into(),
            timeout_ms: 100,
            failure_mode: FailureMode::Deny
        })
    );
    let p = policy(
        EXEC,
        r#""rate_limit_service":{"cluster":"rl","domain":"agents","timeout":"250ms","failure_mode":"allow"}"#,
    );
    let s = p.gateway.rate_limit_service.unwrap();
    assert_eq!((s.domain.as_str(), s.timeout_ms, s.failure_mode), ("agents", 250, FailureMode::Allow));
    // Sliding windows cannot be said in the protocol: refused at load, naming the limit.
    let e = errors(
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"burst","window":"minute","max":5,"algorithm":"sliding"}]}},
            "gateway":{"rate_limit_service":{"cluster":"rl"}}}"#,
    );
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].0, "tools.x.limits[0].algorithm");
    assert!(e[0].1.contains("'burst'") && e[0].1.contains("sliding"), "{}", e[0].1);
    let e = errors(
        r#"{"version":"1","gateway":{"rate_limit_service":{"cluster":"","timeout":"2m","failure_mode":"open","x":1}}}"#,
    );
    assert_eq!(e[0].0, "gateway.rate_limit_service.failure_mode");
    let e = errors(r#"{"version":"1","gateway":{"rate_limit_service":{"cluster":"","timeout":"2m"}}}"#);
    let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["gateway.rate_limit_service.cluster", "gateway.rate_limit_service.timeout"]);
}

#[test]
fn the_authority_makes_the_upstream_a_grpc_service() {
    // Without it the upstream is the cluster name, as Envoy's wasm host reads a plain name.
    let p = policy(EXEC, RLS);
    assert_eq!(p.gateway.rate_limit_service.unwrap().upstream(), b"mcp_ratelimit");
    // Istio's cluster name is no valid :authority; the Service host is.
    let cluster = "outbound|8081||mcp-ratelimit.mcp-system.svc.cluster.local";
    let host = "mcp-ratelimit.mcp-system.svc.cluster.local";
    let p = policy(EXEC, &format!(r#""rate_limit_service":{{"cluster":"{cluster}","authority":"{host}"}}"#));
    let s = p.gateway.rate_limit_service.unwrap();
    assert_eq!(s.authority.as_deref(), Some(host));
    let mut want = vec![0x0a, (2 + cluster.len() + 2 + host.len()) as u8, 0x0a, cluster.len() as u8];
    want.extend_from_slice(cluster.as_bytes());
    want.extend_from_slice(&[0x12, host.len() as u8]);
    want.extend_from_slice(host.as_bytes());
    assert_eq!(s.upstream(), want);
    assert_eq!(s.upstream(), proto::grpc_service(cluster, host));
    for bad in ["a|b", "", "host name", "h\\u00e9"] {
        let e = errors(&format!(
            r#"{{"version":"1","gateway":{{"rate_limit_service":{{"cluster":"c","authority":"{bad}"}}}}}}"#
        ));
        let paths: Vec<&str> = e.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["gateway.rate_limit_service.authority"], "{bad:?}");
    }
    // Together at most 123 bytes: the serialized GrpcService stays ASCII (the SDK takes a &str).
    let long = |c: usize, a: usize| {
        format!(
            r#"{{"version":"1","gateway":{{"rate_limit_service":{{"cluster":"{}","authority":"{}"}}}}}}"#,
            "c".repeat(c),
            "a".repeat(a)
        )
    };
    let p = config::load(long(100, 23).as_bytes()).unwrap();
    assert!(p.gateway.rate_limit_service.unwrap().upstream().is_ascii());
    let e = errors(&long(100, 24));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].0, "gateway.rate_limit_service.authority");
    assert_eq!(
        e[0].1,
        "cluster and authority together must be at most 123 bytes (they are 124): proxy-wasm hands them to \
         Envoy as one text, a serialized GrpcService"
    );
    let ok = policy(EXEC, r#""rate_limit_service":{"cluster":"c","authority":"[::1]:8081"}"#);
    assert_eq!(ok.gateway.rate_limit_service.unwrap().authority.as_deref(), Some("[::1]:8081"));
}

#[test]
fn one_descriptor_per_limit_with_override_and_hits() {
    let p = policy(
        r#""exec":{"limits":[{"counter":"exec","window":"minute","max":10},{"counter":"fleet","window":"day","max":500,"scope":"global"}]}"#,
        RLS,
    );
    let store = MemoryStore::new();
    let pending = held(decide(&p, &store, "tok-a", &call(1, "exec")));
    assert!(store.is_empty(), "shared data counts nothing with the service");
    let req = pending.request(&p, "mcp").unwrap();
    let g = grant::hex(&grant::from_authorization(b"Bearer tok-a").unwrap().id);
    assert_eq!(req.domain, "mcp");
    let shapes: Vec<_> = req.descriptors.iter().map(|d| (d.entries.clone(), d.limit, d.hits_addend)).collect();
    assert_eq!(
        shapes,
        vec![
            (vec![("mcp_counter".into(), "exec".into()), ("mcp_grant".into(), g.clone())], Some((10, 2)), Some(1)),
            (vec![("mcp_counter".into(), "fleet".into())], Some((500, 4)), Some(1)),
            (vec![("mcp_counter".into(), "all".into())], Some((1000, 3)), Some(1)),
        ]
    );
    // Allowed: forwarded with the decision so far.
    let out = pipeline::rls::on_answer(&p, pending, answer(proto::CODE_OK, vec![]), T0);
    assert_eq!(out.reply, None);
    assert_eq!(out.decision.kind, DecisionKind::Allowed);
    assert_eq!(out.decision.tool.as_deref(), Some("exec"));
    // A denied call asks nothing.
    assert!(decide(&p, &store, "tok-a", &call(2, "not_listed")).rls.is_none());
}

#[test]
fn over_limit_is_rate_limited_with_retry_after_from_the_answer_or_the_window() {
    let p = policy(EXEC, RLS);
    let store = MemoryStore::new();
    let over = |statuses| {
        let pending = held(decide(&p, &store, "tok", &call(7, "exec")));
        pipeline::rls::on_answer(&p, pending, answer(proto::CODE_OVER_LIMIT, statuses), T0 + 20_000)
    };
    let ok = proto::Status { code: proto::CODE_OK, limit_remaining: 5, until_reset_ms: Some(1_000) };
    let out = over(vec![
        proto::Status { code: proto::CODE_OVER_LIMIT, limit_remaining: 0, until_reset_ms: Some(12_300) },
        ok.clone(),
    ]);
    let b = body(&out);
    assert_eq!(out.reply.as_ref().unwrap().status, 200);
    assert_eq!(b["id"], 7);
    assert_eq!(b["error"]["code"], -31002);
    assert_eq!(b["error"]["data"]["kind"], "rate_limited");
    assert_eq!(b["error"]["data"]["counter"], "exec");
    assert_eq!(b["error"]["data"]["retry_after_seconds"], 13);
    assert_eq!(b["error"]["data"]["rule"], "tools.exec.limits[0]");
    assert_eq!(out.reply.as_ref().unwrap().headers, vec![("retry-after", "13".to_owned())]);
    assert_eq!(out.decision.kind, DecisionKind::RateLimited);
    // The second descriptor over (all_tools) names that limit; no duration: the window's end.
    let out = over(vec![ok, proto::Status { code: proto::CODE_OVER_LIMIT, limit_remaining: 0, until_reset_ms: None }]);
    let b = body(&out);
    assert_eq!(b["error"]["data"]["counter"], "all");
    // T0 is 840 s into its UTC hour.
    assert_eq!(b["error"]["data"]["retry_after_seconds"], 3600 - 840 - 20);
    // OVER_LIMIT with no statuses: the first descriptor, the window's end.
    assert_eq!(body(&over(vec![]))["error"]["data"]["retry_after_seconds"], 40);
}

#[test]
fn outages_deny_by_default_and_allow_when_asked() {
    let store = MemoryStore::new();
    // Envoy's timeout and no healthy endpoint are 14; a service giving up within grpc-timeout, 4.
    let outages = [rls::read_answer(14, None), rls::read_answer(4, None)];
    let deny = policy(EXEC, RLS);
    for a in outages.clone() {
        assert!(matches!(a, Answer::Unavailable(_)), "{a:?}");
        let out = pipeline::rls::on_answer(&deny, held(decide(&deny, &store, "t", &call(3, "exec"))), a.clone(), T0);
        let b = body(&out);
        assert_eq!(b["error"]["data"]["kind"], "limiter_unavailable", "{a:?}");
        assert_eq!(b["error"]["code"], -31004);
        assert_eq!(b["id"], 3);
        assert_eq!(out.decision.kind, DecisionKind::LimiterUnavailable);
    }
    let allow = policy(EXEC, r#""rate_limit_service":{"cluster":"mcp_ratelimit","failure_mode":"allow"}"#);
    for a in outages {
        let out = pipeline::rls::on_answer(&allow, held(decide(&allow, &store, "t", &call(3, "exec"))), a, T0);
        assert_eq!(out.reply, None, "forwarded");
        assert_eq!(out.decision.kind, DecisionKind::LimiterUnavailable, "counted as limiter_unavailable");
        assert!(out.decision.reason.as_deref().unwrap().ends_with("forwarded (failure_mode allow)"));
    }
    let unavailable = |s| Answer::Unavailable(format!("rate limit service unavailable (or too slow): gRPC status {s}"));
    assert_eq!((rls::read_answer(14, None), rls::read_answer(4, None)), (unavailable(14), unavailable(4)));
}

#[test]
fn only_outages_follow_failure_mode_every_other_status_refuses() {
    assert_eq!(rls::OUTAGE_STATUSES, [4, 14]);
    for status in 1..=20u32 {
        let a = rls::read_answer(status, None);
        assert_eq!(matches!(a, Answer::Unavailable(_)), status == 4 || status == 14, "status {status}: {a:?}");
        assert_eq!(matches!(a, Answer::Unusable(_)), status != 4 && status != 14, "status {status}: {a:?}");
    }
    assert_eq!(
        rls::read_answer(3, None),
        Answer::Unusable("rate limit service did not take the request: gRPC status 3".into())
    );
    // Answers that are no decision: unreadable, an empty message (code UNKNOWN), another code, and
    // OVER_LIMIT naming a descriptor the request did not have.
    let unusable = [
        rls::read_answer(3, None),
        rls::read_answer(8, None),
        rls::read_answer(13, None),
        rls::read_answer(2, None),
        rls::read_answer(1, None),
        rls::read_answer(0, Some(&[0xff])),
        rls::read_answer(0, None),
        answer(proto::CODE_UNKNOWN, vec![]),
        answer(7, vec![]),
        answer(proto::CODE_OVER_LIMIT, vec![ok_status(), ok_status(), ok_status(), over_status()]),
    ];
    let store = MemoryStore::new();
    for failure_mode in ["deny", "allow"] {
        let p = policy(
            EXEC,
            &format!(r#""rate_limit_service":{{"cluster":"mcp_ratelimit","failure_mode":"{failure_mode}"}}"#),
        );
        for a in unusable.clone() {
            let out = pipeline::rls::on_answer(&p, held(decide(&p, &store, "t", &call(9, "exec"))), a.clone(), T0);
            let b = body(&out);
            assert_eq!(b["error"]["data"]["kind"], "limiter_unavailable", "{failure_mode} {a:?}");
            assert_eq!((b["error"]["code"].as_i64(), b["id"].as_i64()), (Some(-31004), Some(9)));
            assert_eq!(out.reply.as_ref().unwrap().headers, vec![("retry-after", "1".to_owned())]);
            assert_eq!(out.decision.kind, DecisionKind::LimiterUnavailable);
            assert!(!b["error"]["data"]["reason"].as_str().unwrap().contains("forwarded"));
        }
    }
}

/// `n` tools `t0`… each with its own limit (plus the helper's `all_tools` one).
fn many_tools(n: usize) -> String {
    (0..n)
        .map(|i| format!(r#""t{i}":{{"limits":[{{"counter":"c{i}","window":"hour","max":5}}]}}"#))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn a_batch_over_the_descriptor_bound_is_refused_by_the_filter_in_every_mode() {
    assert_eq!(rls::MAX_DESCRIPTORS, 64);
    let store = MemoryStore::new();
    let batch =
        |n: usize| format!("[{}]", (0..n).map(|i| call(i as u64, &format!("t{i}"))).collect::<Vec<_>>().join(","));
    for gateway in [
        r#""rate_limit_service":{"cluster":"mcp_ratelimit","failure_mode":"allow"}"#,
        r#""rate_limit_service":{"cluster":"mcp_ratelimit"},"mode":"dry_run""#,
    ] {
        let p = policy(&many_tools(70), gateway);
        // 63 tools and all_tools: 64 descriptors, the most one request takes.
        assert_eq!(held(decide(&p, &store, "tok", &batch(63))).request(&p, "mcp").unwrap().descriptors.len(), 64);
        let pending = held(decide(&p, &store, "tok", &batch(70)));
        let why = pending.request(&p, "mcp").unwrap_err();
        assert_eq!(why, pipeline::rls::NotSendable::TooManyDescriptors(71));
        let out = pipeline::rls::not_sent(&p, pending, why, T0);
        let reply = out.reply.as_ref().expect("refused, also in dry-run and with failure_mode allow");
        assert_eq!(reply.status, 400);
        let b = body(&out);
        let items = b.as_array().unwrap();
        assert_eq!(items.iter().map(|i| i["id"].as_u64().unwrap()).collect::<Vec<_>>(), (0..70).collect::<Vec<_>>());
        for i in items {
            assert_eq!(i["error"]["code"], -32600);
            assert_eq!(i["error"]["data"]["kind"], "invalid_request");
            assert_eq!(
                i["error"]["data"]["reason"],
                "the calls of this request count against 71 rate limits; the rate limit service takes at most 64 \
                 in one request: send fewer calls per batch"
            );
        }
        assert_eq!(out.decision.kind, DecisionKind::Invalid);
        assert!(!out.decision.dry_run);
        // `ask`, the step both hosts take: the same refusal, with nothing to send.
        let pending = held(decide(&p, &store, "tok", &batch(70)));
        let pipeline::rls::Ask::Done { outcome, why } = pipeline::rls::ask(&p, pending, T0) else {
            panic!("nothing is sent for a batch over the bound");
        };
        assert_eq!((outcome.reply, why.as_str()), (out.reply, "rate limit request not sent: TooManyDescriptors(71)"));
        // Within the bound it is the encoded request, with the domain of the policy.
        let pending = held(decide(&p, &store, "tok", &batch(63)));
        let want = pending.request(&p, "mcp").unwrap().encode();
        let pipeline::rls::Ask::Send { message, .. } = pipeline::rls::ask(&p, pending, T0) else {
            panic!("sent");
        };
        assert_eq!(message, want);
    }
}

#[test]
fn policy_load_keeps_one_call_within_the_service_bounds() {
    let own = |n: usize| {
        (0..n).map(|i| format!(r#"{{"counter":"c{i}","window":"hour","max":5}}"#)).collect::<Vec<_>>().join(",")
    };
    let doc = |tool_limits: usize, all: usize| {
        format!(
            r#"{{"version":"1","tools":{{"x":{{"limits":[{}]}},"off":{{"action":"deny","limits":[{}]}}}},
                "all_tools":{{"limits":[{}]}},"gateway":{{"rate_limit_service":{{"cluster":"rl"}}}}}}"#,
            own(tool_limits),
            own(80),
            (0..all).map(|i| format!(r#"{{"counter":"a{i}","window":"day","max":9}}"#)).collect::<Vec<_>>().join(",")
        )
    };
    // 63 + 1 fit; the same counter twice is one descriptor; a denied tool never counts.
    config::load(doc(63, 1).as_bytes()).unwrap();
    let e = errors(&doc(64, 1));
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].0, "tools.x.limits");
    assert_eq!(
        e[0].1,
        "with gateway.rate_limit_service one call counts against at most 64 distinct limits (counter, scope and \
         window: one RLS descriptor each); these and all_tools.limits make more"
    );
    let e = errors(&doc(0, 65));
    assert_eq!(e.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["all_tools.limits"]);
    // Without the service, shared data counts any number.
    config::load(doc(64, 1).replace(r#""rate_limit_service":{"cluster":"rl"}"#, "").as_bytes()).unwrap();
    // Counter names: the service takes entry values of at most 256 bytes.
    let long = |n: usize| {
        format!(
            r#"{{"version":"1","tools":{{"x":{{"limits":[{{"counter":"{}","window":"hour","max":5}}]}}}},
                "gateway":{{"rate_limit_service":{{"cluster":"rl"}}}}}}"#,
            "c".repeat(n)
        )
    };
    config::load(long(256).as_bytes()).unwrap();
    assert_eq!(errors(&long(257)).iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["tools.x.limits[0].counter"]);
}

#[test]
fn batches_count_once_per_descriptor_and_refuse_whole() {
    let p = policy(EXEC, RLS);
    let store = MemoryStore::new();
    let calls: Vec<String> = (1..=11).map(|i| call(i, "exec")).collect();
    let pending = held(decide(&p, &store, "tok", &format!("[{}]", calls.join(","))));
    let req = pending.request(&p, "mcp").unwrap();
    assert_eq!(req.descriptors.len(), 2);
    assert_eq!(req.descriptors[0].hits_addend, Some(11));
    let over = proto::Status { code: proto::CODE_OVER_LIMIT, limit_remaining: 10, until_reset_ms: Some(5_000) };
    let out = pipeline::rls::on_answer(&p, pending, answer(proto::CODE_OVER_LIMIT, vec![over]), T0);
    let b = body(&out);
    let items = b.as_array().unwrap();
    assert_eq!(items.len(), 11);
    assert!(items.iter().all(|i| i["error"]["data"]["kind"] == "rate_limited"));
    // A denied call inside a batch: nothing is asked (nothing consumed), the batch is refused.
    let out = decide(&p, &store, "tok", &format!("[{},{}]", call(1, "exec"), call(2, "nope")));
    assert!(out.rls.is_none());
    let b = body(&out);
    assert_eq!(b[0]["error"]["data"]["kind"], "batch_refused");
    assert_eq!(b[1]["error"]["data"]["kind"], "denied");
    // Mixed batch over one limit: the calls under it are rate_limited, the others batch_refused.
    let pending = held(decide(&p, &store, "tok", &format!("[{},{}]", call(1, "exec"), call(2, "free"))));
    assert_eq!(pending.request(&p, "mcp").unwrap().descriptors[1].hits_addend, Some(2), "all_tools counts both");
    let out =
        pipeline::rls::on_answer(&p, pending, answer(proto::CODE_OVER_LIMIT, vec![over_status(), ok_status()]), T0);
    let b = body(&out);
    assert_eq!(b[0]["error"]["data"]["kind"], "rate_limited");
    assert_eq!(b[1]["error"]["data"]["kind"], "batch_refused");
}
