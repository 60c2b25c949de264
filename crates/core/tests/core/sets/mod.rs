//! Policy sets: the configuration (members, attach rules, containment, their errors with JSON
//! paths), the verified payload read strictly, and a request judged under its caller's policy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::config::{self, ConfigError, PolicySet, Why};
use mcp_policy_core::identity::payload::{self, Claims};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, Attached, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::terms::RefusalShape;
use mcp_policy_core::wire::b64::{self, Alphabet};

mod approval;
mod payload_header;

const T0: u64 = 1_700_000_040_000;

/// The issue's example: ops, readonly by scope, readonly by grant hash (of `ci-token`), and a
/// contained identity.
pub(crate) fn set_text() -> String {
    let ci =
        mcp_policy_core::identity::grant::hex(&mcp_policy_core::identity::grant::Grant::from_credential(b"ci-bot").id);
    format!(
        r#"{{"version": "1",
         "policies": {{"ops": {{"version": "1", "default": "deny",
                                "tools": {{"vm_agent_exec": {{"limits": [{{"counter": "exec", "window": "minute", "max": 1}}]}}, "list_vms": {{}}}}}},
                      "readonly": {{"version": "1", "default": "deny", "hide": ["vm_agent_exec"],
                                   "tools": {{"list_vms": {{"limits": [{{"counter": "exec", "window": "minute", "max": 1}}]}}}}}}}},
         "attach": [{{"policy": "ops", "when": [{{"claim": "groups", "includes": "ops"}}]}},
                    {{"policy": "readonly", "when": [{{"claim": "scope", "includes": "vms:read"}}]}},
                    {{"policy": "readonly", "when": [{{"grant": "sha256:{ci}"}}]}}],
         "contain": [{{"when": [{{"claim": "sub", "equals": "mallory"}}], "reason": "incident 42: cut off"}}],
         "gateway": {{"identity": {{"payload_header": "x-jwt-payload", "grant_claim": "sub"}}}}}}"#
    )
}

pub(crate) fn set() -> PolicySet {
    config::load_set(set_text().as_bytes()).unwrap()
}

/// The payload header value of `claims` (JSON text), as `jwt_authn` writes it.
pub(crate) fn b64url(claims: &str) -> String {
    let mut s = String::new();
    b64::encode_into(&mut s, claims.as_bytes(), Alphabet::UrlNoPad);
    s
}

fn head<'a>(set: &PolicySet, extra: &[(&'a str, &'a [u8])]) -> RequestHead {
    let mut h: Vec<(&str, &[u8])> = vec![(":method", b"POST"), ("content-type", b"application/json")];
    h.extend_from_slice(extra);
    RequestHead::from_headers(set.base(), h)
}

/// A tools/call of `tool` by the caller with `claims`, through `attach`, `on_headers` and `on_body`.
fn call_as(set: &PolicySet, claims: &str, tool: &str, store: &MemoryStore) -> (Attached, Outcome) {
    let v = b64url(claims);
    let h = head(set, &[("x-jwt-payload", v.as_bytes())]);
    let a = pipeline::attach(set, &h).unwrap();
    assert_eq!(pipeline::on_headers(&a.policy, &h), HeadOutcome::NeedBody);
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#);
    let mut out = pipeline::on_body(&a.policy, &h, body.as_bytes(), store, T0);
    a.stamp(&mut out.decision);
    out.shape(a.policy.gateway.refusal_shape);
    (a, out)
}

fn kind(out: &Outcome) -> Option<&'static str> {
    out.decision.error_kind()
}

#[test]
fn three_identities_three_decisions_on_one_call() {
    let s = set();
    let store = MemoryStore::default();
    let (a, ops) = call_as(&s, r#"{"sub":"alice","groups":["ops"]}"#, "vm_agent_exec", &store);
    assert_eq!((a.why, a.policy.name.as_deref(), kind(&ops)), (Why::Attached(0), Some("ops"), None));
    let (a, ro) = call_as(&s, r#"{"sub":"bob","scope":"openid vms:read"}"#, "vm_agent_exec", &store);
    assert_eq!((a.why, a.policy.name.as_deref(), kind(&ro)), (Why::Attached(1), Some("readonly"), Some("denied")));
    assert_eq!(ro.decision.rule.as_deref(), Some("hide"));
    let (a, none) = call_as(&s, r#"{"sub":"carol"}"#, "vm_agent_exec", &store);
    assert_eq!((a.why, a.policy.name.as_deref(), kind(&none)), (Why::NoRule, None, Some("no_policy")));
    assert!(none.reply.unwrap().body.contains(r#""kind":"no_policy""#));
    // The grant matcher: the grant is the `sub` claim's hash.
    let (a, ci) = call_as(&s, r#"{"sub":"ci-bot"}"#, "list_vms", &store);
    assert_eq!((a.why, kind(&ci)), (Why::Attached(2), None));
    // Containment wins over every attach rule.
    let (a, c) = call_as(&s, r#"{"sub":"mallory","groups":["ops"]}"#, "list_vms", &store);
    assert_eq!((a.why, kind(&c)), (Why::Contained(0), Some("contained")));
    assert_eq!(c.decision.reason.as_deref(), Some("incident 42: cut off"));
}

#[test]
fn tools_list_follows_the_callers_policy() {
    let s = set();
    let ops = &s.members()[0];
    let ro = &s.members()[1];
    assert_eq!((ops.name.as_deref(), ops.is_unlisted("vm_agent_exec")), (Some("ops"), false));
    assert_eq!(
        (ro.name.as_deref(), ro.is_unlisted("vm_agent_exec"), ro.is_unlisted("list_vms")),
        (Some("readonly"), true, false)
    );
    let (none, _) = s.choose(None, None);
    assert!(none.filters_tools_list() && none.is_unlisted("list_vms") && none.is_unlisted("anything"));
}

#[test]
fn limits_count_per_grant_within_the_policy() {
    let s = set();
    let store = MemoryStore::default();
    // ops and readonly both name counter "exec" (max 1): separate counts, keyed by policy name.
    let (_, first) = call_as(&s, r#"{"sub":"dave","groups":["ops"]}"#, "vm_agent_exec", &store);
    assert_eq!(kind(&first), None);
    let (_, other_policy) = call_as(&s, r#"{"sub":"dave","scope":"vms:read"}"#, "list_vms", &store);
    assert_eq!(kind(&other_policy), None);
    let (_, again) = call_as(&s, r#"{"sub":"dave","groups":["ops"]}"#, "vm_agent_exec", &store);
    assert_eq!(kind(&again), Some("rate_limited"));
    assert_eq!(again.decision.rule.as_deref(), Some("policies.ops.tools.vm_agent_exec.limits[0]"));
    // Another grant under the same policy has its own count.
    let (_, erin) = call_as(&s, r#"{"sub":"erin","groups":["ops"]}"#, "vm_agent_exec", &store);
    assert_eq!(kind(&erin), None);
}

#[test]
fn the_audit_record_names_policy_subject_client_and_actors() {
    let s = set();
    let claims =
        r#"{"sub":"alice","groups":["ops"],"client_id":"assistant","act":{"sub":"agent-7","act":{"sub":"planner"}}}"#;
    let (_, out) = call_as(&s, claims, "list_vms", &MemoryStore::default());
    let line = out.decision.audit_json("2026-01-01T00:00:00.000Z", None);
    assert!(
        line.contains(r#""policy":"ops","subject":"alice","client_id":"assistant","act":["agent-7","planner"]"#),
        "{line}"
    );
    assert!(line.contains(r#""grant":"sha256:"#), "{line}");
}

#[test]
fn refusal_shape_tool_result_answers_a_failed_tool_call() {
    let text =
        set_text().replace(r#""grant_claim": "sub"}"#, r#""grant_claim": "sub"}, "refusal_shape": "tool_result""#);
    let s = config::load_set(text.as_bytes()).unwrap();
    assert_eq!(s.base().gateway.refusal_shape, RefusalShape::ToolResult);
    let (_, out) = call_as(&s, r#"{"sub":"carol"}"#, "vm_agent_exec", &MemoryStore::default());
    let reply = out.reply.unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.body,
        r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"no policy is attached to this caller (no attach rule of the policy set matches it)"}],"isError":true}}"#
    );
    assert_eq!(out.decision.error_kind(), Some("no_policy"));
    // Anything but a refused tools/call stays an error.
    let h = head(&s, &[]);
    let e = pipeline::attach(&s, &h).unwrap_err();
    assert_eq!(e.reply.unwrap().status, 401);
}

#[test]
fn a_plain_policy_is_one_policy_for_every_caller() {
    let s = config::load_set(br#"{"version":"1","tools":{"a":{}}}"#).unwrap();
    let p = s.plain().unwrap();
    assert_eq!((p.name.as_deref(), s.choose(None, None).1), (None, Why::Plain));
    let h = RequestHead::from_headers(p, [(":method", &b"POST"[..]), ("authorization", b"Bearer t")]);
    let a = pipeline::attach(&s, &h).unwrap();
    assert!(mcp_policy_core::config::Shared::ptr_eq(&a.policy, p));
    assert_eq!(a.provenance, None);
}

fn set_err(text: &str) -> Vec<ConfigError> {
    config::load_set(text.as_bytes()).unwrap_err().0
}

fn paths(errs: &[ConfigError]) -> Vec<&str> {
    errs.iter().map(|e| e.path.as_str()).collect()
}

#[test]
fn set_errors_name_the_json_path() {
    let gw = r#""gateway":{"identity":{"payload_header":"x-jwt-payload"}}"#;
    let e = set_err(&format!(
        r#"{{"version":"1","policies":{{"a":{{"version":"1","gateway":{{}}}},"b c":{{"version":"1","tools":{{"x":{{"limits":[{{"counter":"c","window":"day","max":0}}]}}}}}}}},
        "attach":[{{"policy":"nope","when":[]}},{{"policy":"a","when":[{{"claim":"sub"}}]}},
                  {{"policy":"a","when":[{{"grant":"agent-x"}},{{"claim":"scope","includes":"a b"}}]}}],
        "contain":[{{"when":[],"reason":" "}}],{gw}}}"#
    ));
    assert_eq!(
        paths(&e),
        [
            "policies.a.gateway",
            "policies.b c",
            "policies.b c.tools.x.limits[0].max",
            "attach[0].policy",
            "attach[1]",
            "attach[1].when[0]",
            "attach[2]",
            "attach[2].when[0].grant",
            "attach[2].when[1].includes",
            "contain[0].when",
            "contain[0].reason",
        ],
        "{e:?}"
    );
    assert_eq!(e[3].message, "unknown policy 'nope'; the set defines: a, b c");
    assert_eq!(e[4].message, "never tried: attach[0] matches every caller");
    // Claims need gateway.identity; an unregistered hash can never hold when grants are listed.
    let e = set_err(
        r#"{"version":"1","policies":{"a":{"version":"1"}},"attach":[{"policy":"a","when":[{"claim":"sub","equals":"x"}]},
        {"policy":"a","when":[{"grant":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}]}],
        "gateway":{"grants":[{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","label":"abc"}]}}"#,
    );
    assert_eq!(paths(&e), ["attach[0].when[0].claim", "attach[1].when[0].grant"]);
    assert!(e[1].message.starts_with("can never hold"), "{e:?}");
    // Unknown keys and duplicate policy names.
    assert_eq!(paths(&set_err(r#"{"version":"1","policies":{"a":{"version":"1"}},"atach":[]}"#)), ["atach"]);
    assert_eq!(
        paths(&set_err(
            r#"{"version":"1","policies":{"a":{"version":"1"}},"attach":[{"policy":"a","when":[{"claim":"x","equals":"y","grant":"z"}]}]}"#
        )),
        ["attach[0].when[0]"]
    );
    let dup = set_err(r#"{"version":"1","policies":{"a":{"version":"1"},"a":{"version":"1"}}}"#);
    assert!(dup[0].message.contains("duplicate object key"), "{dup:?}");
    // A label of gateway.grants is a grant matcher.
    let ok = config::load_set(
        br#"{"version":"1","policies":{"a":{"version":"1"}},"attach":[{"policy":"a","when":[{"grant":"abc"}]}],
        "gateway":{"grants":[{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","label":"abc"}]}}"#,
    )
    .unwrap();
    let id = mcp_policy_core::identity::grant::Grant::from_credential(b"abc").id;
    assert_eq!(ok.choose(None, Some(&id)).1, Why::Attached(0));
    assert_eq!(ok.choose(None, None).1, Why::NoRule);
}

#[test]
fn attach_and_contain_are_read_strictly() {
    let one = |tail: &str| {
        let e = set_err(&format!(r#"{{"version":"1","policies":{{"a":{{"version":"1"}}}},{tail}}}"#));
        assert_eq!(e.len(), 1, "{e:?}");
        (e[0].path.clone(), e[0].message.clone())
    };
    let pm = |p: &str, m: &str| (p.to_owned(), m.to_owned());
    assert_eq!(one(r#""attach":{}"#), pm("attach", "must be an array, not object"));
    assert_eq!(one(r#""attach":[["a"]]"#), pm("attach[0]", "must be an object, not array"));
    assert_eq!(one(r#""attach":[{"when":[]}]"#), pm("attach[0]", "missing field `policy`"));
    assert_eq!(one(r#""attach":[{"policy":1}]"#), pm("attach[0].policy", "must be a string, not number"));
    assert_eq!(
        one(r#""attach":[{"policy":"a","when":[{"claim":"sub","equal":"x"}]}]"#),
        pm("attach[0].when[0].equal", "unknown field `equal`, expected one of `claim`, `equals`, `includes`, `grant`")
    );
    assert_eq!(
        one(r#""contain":[{"when":[{"grant":true}],"reason":"r"}]"#),
        pm("contain[0].when[0].grant", "must be a string, not boolean")
    );
    assert_eq!(one(r#""contain":[{"when":[]}]"#), pm("contain[0]", "missing field `reason`"));
    assert_eq!(one(r#""policies2":1"#).0, "policies2");
    assert_eq!(one(r#""attach":[{"policy":"a","when":[]}],"policies3":1"#).0, "policies3");
}

#[test]
fn matchers_hold_as_documented() {
    let c = Claims::read(b64url(r#"{"sub":"a","scope":"openid vms:read","groups":["ops","dev"],"n":1}"#).as_bytes())
        .unwrap();
    assert!(c.includes("scope", "vms:read") && c.includes("scope", "openid") && !c.includes("scope", "vms"));
    assert!(c.includes("groups", "dev") && !c.includes("groups", "op") && !c.includes("n", "1"));
    assert!(c.equals("sub", "a") && !c.equals("groups", "ops") && !c.equals("n", "1") && !c.equals("missing", ""));
    assert_eq!(payload::MAX_ACTORS, 8);
}

#[test]
fn a_label_given_to_two_grants_names_neither() {
    // The registry has no order: a label shared by two grants would match one of them, a different
    // one on each load. It is refused where a matcher uses it, and left alone elsewhere.
    let [a, b] = [b"ci-token-1".as_slice(), b"ci-token-2"].map(|t| {
        mcp_policy_core::identity::grant::hex(&mcp_policy_core::identity::grant::Grant::from_credential(t).id)
    });
    let text = |when: &str| {
        format!(
            r#"{{"version":"1","policies":{{"a":{{"version":"1"}}}},"attach":[{{"policy":"a","when":[{when}]}}],
            "gateway":{{"grants":[{{"sha256":"{a}","label":"ci"}},{{"sha256":"{b}","label":"ci"}}]}}}}"#
        )
    };
    let e = set_err(&text(r#"{"grant":"ci"}"#));
    assert_eq!(paths(&e), ["attach[0].when[0].grant"]);
    assert_eq!(e[0].message, "labels more than one grant of gateway.grants: name the grant by sha256:<64 hex>");
    let ok = config::load_set(text(&format!(r#"{{"grant":"sha256:{a}"}}"#)).as_bytes()).unwrap();
    let id = mcp_policy_core::identity::grant::Grant::from_credential(b"ci-token-1").id;
    assert_eq!(ok.choose(None, Some(&id)).1, Why::Attached(0));
    let other = mcp_policy_core::identity::grant::Grant::from_credential(b"ci-token-2").id;
    assert_eq!(ok.choose(None, Some(&other)).1, Why::NoRule);
    // A label that reads as a grant's id would be taken for one by a matcher: refused at load.
    let e = set_err(&text(r#"{"grant":"ci"}"#).replace(r#""label":"ci"}]"#, &format!(r#""label":"sha256:{b}"}}]"#)));
    assert_eq!(paths(&e), ["gateway.grants[1].label"]);
    assert_eq!(e[0].message, "must be 1 to 64 printable ASCII characters, not starting with sha256:");
}

#[test]
fn containment_is_enforced_under_dry_run() {
    // `contain` is an incident's cut-off: neither `gateway.mode` nor `tool_modes` in dry run lets a
    // contained caller's call through, while another caller's refusal is still only shadowed.
    for gateway in [r#""mode":"dry_run""#, r#""tool_modes":{"vm_agent_exec":"dry_run","list_vms":"dry_run"}"#] {
        let text = set_text().replace(r#""gateway": {"#, &format!(r#""gateway": {{{gateway}, "#));
        let s = config::load_set(text.as_bytes()).unwrap();
        let store = MemoryStore::default();
        let (a, c) = call_as(&s, r#"{"sub":"mallory","groups":["ops"]}"#, "vm_agent_exec", &store);
        assert_eq!((a.why, kind(&c), c.decision.dry_run), (Why::Contained(0), Some("contained"), false), "{gateway}");
        assert!(c.reply.unwrap().body.contains(r#""kind":"contained""#), "{gateway}");
        let (a, ro) = call_as(&s, r#"{"sub":"bob","scope":"vms:read"}"#, "vm_agent_exec", &store);
        assert_eq!((a.why, kind(&ro), ro.decision.dry_run, ro.reply), (Why::Attached(1), Some("denied"), true, None));
    }
}

#[test]
fn a_session_is_bound_to_its_caller_not_only_to_its_grant() {
    // Under `gateway.identity` the grant is the `sub` claim's hash: a session alice opened through
    // one client under `ops` is refused from alice through another client attached to `readonly`
    // (it could resume the ops stream), and accepted from the caller it was handed to.
    let text = set_text()
        .replace(r#""gateway": {"#, r#""gateway": {"session_key": {"current": "0123456789abcdef0123456789abcdef"}, "#);
    let s = config::load_set(text.as_bytes()).unwrap();
    let plan_of = |claims: &str, sid: Option<&str>| {
        let v = b64url(claims);
        let mut extra: Vec<(&str, &[u8])> = vec![("x-jwt-payload", v.as_bytes())];
        if let Some(sid) = sid {
            extra.push(("mcp-session-id", sid.as_bytes()));
        }
        let h = head(&s, &extra);
        pipeline::request_headers(Some(&s), mcp_policy_core::config::Shared::clone(s.base()), &h, false)
    };
    let ops = r#"{"sub":"alice","groups":["ops"],"client_id":"ops-console"}"#;
    let first = plan_of(ops, None);
    let grant = first.binding.unwrap().grant;
    let sid = pipeline::session_id_out(&first.policy, grant.as_ref(), b"S-ops", false).unwrap();
    let again = plan_of(ops, Some(&sid));
    assert_eq!((again.next, again.binding.unwrap().session), (HeadOutcome::NeedBody, Some(b"S-ops".to_vec())));
    for other in [
        r#"{"sub":"alice","scope":"vms:read","client_id":"rogue-agent"}"#,
        r#"{"sub":"alice","groups":["ops"],"client_id":"ops-console","act":{"sub":"agent-x"}}"#,
    ] {
        let plan = plan_of(other, Some(&sid));
        let HeadOutcome::Done(out) = plan.next else { panic!("{other}: the session was accepted") };
        let reply = out.reply.unwrap();
        assert_eq!(reply.status, 404, "{other}");
        assert!(reply.body.contains(r#""kind":"session_invalid""#), "{other}: {}", reply.body);
    }
}
