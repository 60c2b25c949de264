//! `pins` and `default_for`: tools not listed under `tools`, decided by their pinned annotations.
//! Loading (errors with their paths), tools/list (verified, removed, listed under default deny),
//! and calls (allowed only once verified; `default` until then; refused after a mismatch).

use mcp_policy_core::limits::{self, MemoryStore, SharedStore};
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};
use mcp_policy_core::wire::json;
use mcp_policy_core::wire::mcp::Id;
use mcp_policy_core::wire::pin;

use super::{load_errors, policy};

const READ_VM: &str = r#"{"name":"read_vm","description":"Reads a VM","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#;
const REBOOT_VM: &str = r#"{"name":"reboot_vm","description":"Reboots a VM","inputSchema":{"type":"object"},"annotations":{"destructiveHint":false}}"#;
const PIN: &str = "sha256:abababababababababababababababababababababababababababababababab";

fn pin_of(tool: &str) -> String {
    pin::text(&pin::hash(&json::parse(tool.as_bytes()).unwrap()))
}

/// Default deny; `read_vm` and `reboot_vm` pinned with their annotations; read-only tools allowed.
fn by_annotations(default: &str) -> Policy {
    policy(&format!(
        r#"{{"version":"1","default":"{default}","tools":{{"listed":{{}}}},
        "pins":{{"read_vm":{{"pin":"{}","annotations":{{"readOnlyHint":true}}}},
                 "reboot_vm":{{"pin":"{}","annotations":{{"destructiveHint":false}}}}}},
        "default_for":[{{"when":{{"readOnlyHint":true}},"action":"allow"}},
                       {{"when":{{"destructiveHint":true}},"action":"deny","reason":"destructive"}}],
        "gateway":{{"hide_denied_tools":true}}}}"#,
        pin_of(READ_VM),
        pin_of(REBOOT_VM)
    ))
}

fn list(tools: &[&str]) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"tools":[{}]}}}}"#, tools.join(","))
}

/// The tools/list reply `body` through the filter, as a host runs it: what the client gets, and
/// the events (label:tool:rule).
fn listed(p: &Policy, body: &str) -> (String, Vec<String>, Vec<String>) {
    let mut f = ResponseFilter::forwarded(p, &[Id::of(&json::Json::Number("1".into()))]);
    assert_eq!(f.on_headers(false, |n| (n == "content-type").then(|| b"application/json".to_vec())), Plan::FilterJson);
    assert_eq!(f.on_body(body.len(), true), Step::Read);
    let out = match f.on_chunk_judged(body.as_bytes(), true, &|n| p.is_unlisted(n), p) {
        Step::Pass => body.to_owned(),
        Step::Write { bytes, .. } => String::from_utf8(bytes).unwrap(),
        other => panic!("{other:?}"),
    };
    let events = f.take_events();
    assert!(events.iter().all(|e| e.marker_only() == (e.kind == "pin_verified")));
    let markers = events.iter().filter_map(|e| e.pin_marker(p)).map(|k| k.to_string()).collect();
    (out, events.into_iter().map(|e| format!("{}:{}:{}", e.label(), e.tool, e.rule)).collect(), markers)
}

fn head(p: &Policy) -> RequestHead {
    RequestHead::from_headers(
        p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", b"Bearer t")],
    )
}

fn call(p: &Policy, store: &MemoryStore, tool: &str) -> (DecisionKind, Option<String>, Option<String>) {
    let body =
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#);
    let out = pipeline::on_body(p, &head(p), body.as_bytes(), store, 0);
    (out.decision.kind, out.decision.rule.clone(), out.reply.map(|r| r.body))
}

#[test]
fn default_for_needs_pins_enforce_and_an_annotation() {
    let errs = load_errors(r#"{"version":"1","default_for":[{"when":{"readOnlyHint":true},"action":"allow"}]}"#);
    assert_eq!(
        errs,
        [(
            "default_for".to_owned(),
            "decides only tools recorded in pins (reviewed definitions, mcp-policy pin --write), and the policy has none"
                .to_owned()
        )]
    );
    let pins = format!(r#""pins":{{"t":{{"pin":"{PIN}"}}}}"#);
    let errs = load_errors(&format!(
        r#"{{"version":"1",{pins},"default_for":[{{"when":{{"readOnlyHint":true}},"action":"allow"}}],"gateway":{{"pins":"report"}}}}"#
    ));
    assert_eq!(errs.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(), ["default_for"]);
    assert!(errs[0].1.starts_with("needs gateway.pins \"enforce\""), "{}", errs[0].1);
    let errs = load_errors(&format!(r#"{{"version":"1",{pins},"default_for":[{{"when":{{}},"action":"allow"}}]}}"#));
    assert_eq!(errs[0].0, "default_for[0].when");
    let errs = load_errors(&format!(
        r#"{{"version":"1",{pins},"default_for":[{{"when":{{"readonlyHint":true}},"action":"allow"}}]}}"#
    ));
    assert_eq!(errs[0].0, "default_for[0].when.readonlyHint");
    let errs = load_errors(&format!(
        r#"{{"version":"1",{pins},"default_for":[{{"when":{{"readOnlyHint":true}},"action":"require_approval"}}]}}"#
    ));
    assert_eq!(errs[0].0, "default_for[0].action");
}

#[test]
fn pins_errors_name_their_paths() {
    let errs = load_errors(&format!(r#"{{"version":"1","tools":{{"t":{{}}}},"pins":{{"t":{{"pin":"{PIN}"}}}}}}"#));
    assert_eq!(errs, [("pins.t".to_owned(), "the tool is listed under tools: its pin goes in tools.t.pin".to_owned())]);
    let errs = load_errors(r#"{"version":"1","pins":{"t":{"pin":"sha256:AB"}}}"#);
    assert_eq!(errs[0].0, "pins.t.pin");
    let errs = load_errors(&format!(
        r#"{{"version":"1","pins":{{"t":{{"pin":"{PIN}","annotations":{{"readOnlyHint":"yes"}}}}}}}}"#
    ));
    assert_eq!(errs, [("pins.t.annotations.readOnlyHint".to_owned(), "must be a boolean".to_owned())]);
    let errs = load_errors(&format!(r#"{{"version":"1","pins":{{"t":{{"pin":"{PIN}","annotations":[]}}}}}}"#));
    assert_eq!(errs[0].0, "pins.t.annotations");
    let errs = load_errors(&format!(r#"{{"version":"1","pins":{{"t":{{"pin":"{PIN}","hint":1}}}}}}"#));
    assert_eq!(errs[0].0, "pins.t.hint");
}

#[test]
fn a_pinned_tool_grants_nothing_by_itself() {
    let p =
        policy(&format!(r#"{{"version":"1","default":"deny","pins":{{"read_vm":{{"pin":"{}"}}}}}}"#, pin_of(READ_VM)));
    let store = MemoryStore::new();
    limits::init_lock(&store).unwrap();
    store.set(&limits::pin_verified_key("read_vm", p.pin("read_vm").unwrap()), b"1", 0).unwrap();
    assert_eq!(call(&p, &store, "read_vm").0, DecisionKind::Denied);
    assert_eq!(call(&p, &store, "read_vm").1.as_deref(), Some("default"));
}

#[test]
fn tools_list_verifies_lists_and_removes_by_pin_and_recorded_annotations() {
    let p = by_annotations("deny");
    let (out, events, markers) = listed(&p, &list(&[READ_VM, REBOOT_VM, r#"{"name":"other"}"#]));
    // reboot_vm: destructive by MCP's default (its annotations say destructiveHint false, so the
    // second rule does not match, and no rule allows it): denied by name, hidden.
    assert_eq!(out, list(&[READ_VM]));
    // A marker only: the hosts neither audit nor count it (`ResultEvent::marker_only`).
    assert_eq!(events, ["pin_verified:read_vm:pins.read_vm.pin"]);
    let verified = limits::pin_verified_key("read_vm", p.pin("read_vm").unwrap()).to_string();
    assert_eq!(markers, [verified]);
    // The recorded annotations differ from the listed ones (the hash alone would match): removed.
    let changed = READ_VM.replace(r#"{"readOnlyHint":true}"#, r#"{"readOnlyHint":true,"title":"x"}"#);
    let (out, events, markers) = listed(&p, &list(&[&changed]));
    assert_eq!(out, list(&[]));
    assert_eq!(events, ["pin_mismatch:read_vm:pins.read_vm.pin"]);
    assert_eq!(markers, [limits::pin_mismatch_key("read_vm", p.pin("read_vm").unwrap()).to_string()]);
    let lying = policy(&format!(
        r#"{{"version":"1","pins":{{"reboot_vm":{{"pin":"{}","annotations":{{"readOnlyHint":true}}}}}},
        "default_for":[{{"when":{{"readOnlyHint":true}},"action":"allow"}}]}}"#,
        pin_of(REBOOT_VM)
    ));
    let (out, events, _) = listed(&lying, &list(&[REBOOT_VM]));
    assert_eq!((out, events), (list(&[]), vec!["pin_mismatch:reboot_vm:pins.reboot_vm.pin".to_owned()]));
}

#[test]
fn an_allow_by_default_for_holds_once_verified_and_not_after_a_mismatch() {
    let p = by_annotations("deny");
    let store = MemoryStore::new();
    limits::init_lock(&store).unwrap();
    let (kind, rule, reply) = call(&p, &store, "read_vm");
    assert_eq!((kind, rule.as_deref()), (DecisionKind::Denied, Some("default_for[0]")));
    assert_eq!(
        reply.unwrap(),
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-31001,"message":"tool 'read_vm' denied: default_for[0] allows the tool only once this Envoy has listed it (tools/list) matching its pin (pins.read_vm.pin); not allowed by policy until then (default: deny)","data":{"kind":"denied","tool":"read_vm","reason":"default_for[0] allows the tool only once this Envoy has listed it (tools/list) matching its pin (pins.read_vm.pin); not allowed by policy until then (default: deny)","rule":"default_for[0]"}}}"#
    );
    let pin = *p.pin("read_vm").unwrap();
    store.set(&limits::pin_verified_key("read_vm", &pin), b"1", 0).unwrap();
    assert_eq!(call(&p, &store, "read_vm"), (DecisionKind::Allowed, Some("default_for[0]".into()), None));
    assert_eq!(call(&p, &store, "reboot_vm").1.as_deref(), Some("default"));
    assert_eq!(call(&p, &store, "listed").1.as_deref(), Some("tools.listed"));
    store.set(&limits::pin_mismatch_key("read_vm", &pin), b"1", 0).unwrap();
    let (kind, _, reply) = call(&p, &store, "read_vm");
    assert_eq!(kind, DecisionKind::Denied);
    assert!(reply.unwrap().contains(r#""kind":"pin_mismatch""#));
    // Under default allow, an unverified tool is allowed by default.
    let open = by_annotations("allow");
    assert_eq!(call(&open, &MemoryStore::new(), "read_vm"), (DecisionKind::Allowed, Some("default".into()), None));
}

#[test]
fn default_for_deny_needs_no_verification() {
    let p = policy(&format!(
        r#"{{"version":"1","default":"allow","pins":{{"wipe":{{"pin":"{PIN}"}}}},
        "default_for":[{{"when":{{"destructiveHint":true}},"action":"deny","reason":"destructive tools need a rule"}}]}}"#
    ));
    let (kind, rule, reply) = call(&p, &MemoryStore::new(), "wipe");
    assert_eq!((kind, rule.as_deref()), (DecisionKind::Denied, Some("default_for[0]")));
    assert!(reply.unwrap().contains(r#""reason":"destructive tools need a rule""#));
    assert!(p.is_unlisted("wipe") == p.gateway.hide_denied_tools);
}

#[test]
fn dry_run_forwards_an_unverified_default_for_call_as_would_deny() {
    let p = policy(&format!(
        r#"{{"version":"1","default":"deny","pins":{{"read_vm":{{"pin":"{}","annotations":{{"readOnlyHint":true}}}}}},
        "default_for":[{{"when":{{"readOnlyHint":true}},"action":"allow"}}],"gateway":{{"mode":"dry_run"}}}}"#,
        pin_of(READ_VM)
    ));
    let body = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_vm","arguments":{}}}"#;
    let out = pipeline::on_body(&p, &head(&p), body, &MemoryStore::new(), 0);
    assert_eq!((out.decision.label(), out.decision.rule.as_deref()), ("would_deny", Some("default_for[0]")));
    assert!(out.reply.is_none());
}

/// Under `default: "allow"`, a name that folds onto a pinned tool's is refused: a server that folds
/// names would run that tool, which its pin and `default_for` decide, not the default. Under
/// `default: "deny"` the default refuses it anyway.
#[test]
fn folded_names_of_pinned_tools_are_refused_under_default_allow() {
    let store = MemoryStore::new();
    let reason = "the name folds onto 'reboot_vm', which the policy pins: use its exact name";
    let p = by_annotations("allow");
    for tool in ["REBOOT_VM", "reboot-vm", "reboot_vm\u{200b}"] {
        let (kind, rule, reply) = call(&p, &store, tool);
        let reply: serde_json::Value = serde_json::from_str(&reply.unwrap()).unwrap();
        assert_eq!((kind, rule.as_deref()), (DecisionKind::Denied, Some("pins.reboot_vm")), "{tool}");
        assert_eq!(reply["error"]["data"]["reason"], reason, "{tool}");
    }
    assert_eq!(call(&p, &store, "LISTED").0, DecisionKind::Allowed);
    let p = by_annotations("deny");
    assert_eq!(call(&p, &store, "REBOOT_VM").1.as_deref(), Some("default"));
}

/// Two pinned tools whose names fold together are each decided by their own pin when called by
/// exact name; a third spelling is refused on the least of them.
#[test]
fn pinned_tools_whose_names_fold_together_keep_their_own_pins() {
    let store = MemoryStore::new();
    let p = policy(&format!(
        r#"{{"version":"1","default":"allow","pins":{{"a-b-c":{{"pin":"{PIN}"}},"a_b_c":{{"pin":"{PIN}"}}}}}}"#
    ));
    let exact = call(&p, &store, "a-b-c");
    assert_eq!(call(&p, &store, "a_b_c").0, exact.0);
    assert_ne!(exact.1.as_deref(), Some("pins.a-b-c"));
    assert_eq!(call(&p, &store, "A_B-C").0, DecisionKind::Denied);
    assert_eq!(call(&p, &store, "A_B-C").1.as_deref(), Some("pins.a-b-c"));
}
