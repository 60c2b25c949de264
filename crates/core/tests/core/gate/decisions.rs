//! Policy decisions on the body: allowed and denied calls, conditions, passed messages, tools/list.

use super::{call, policy, post, reply, T0};
use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline;
use serde_json::{json, Value};

#[test]
fn allowed_call_is_forwarded_with_its_decision() {
    let p = policy("");
    let s = MemoryStore::new();
    let o = pipeline::on_body(&p, &post(&p, "abc"), call(1, "list_vms").as_bytes(), &s, T0);
    assert_eq!(o.reply, None);
    assert_eq!(o.decision.kind, DecisionKind::Allowed);
    assert_eq!(o.decision.tool.as_deref(), Some("list_vms"));
    assert_eq!(o.decision.rule.as_deref(), Some("tools.list_vms"));
    assert_eq!(o.decision.grant.as_deref(), Some("sha256:ba7816bf8f01"));
}

#[test]
fn denials_echo_the_id_and_name_the_reason() {
    let p = policy("");
    let s = MemoryStore::new();
    let body = r#"{"jsonrpc":"2.0","id":"q-\u00e9","method":"tools/call","params":{"name":"stop_vm"}}"#;
    let o = pipeline::on_body(&p, &post(&p, "abc"), body.as_bytes(), &s, T0);
    assert_eq!(
        o.reply.as_ref().unwrap().body,
        r#"{"jsonrpc":"2.0","id":"q-\u00e9","error":{"code":-31001,"message":"tool 'stop_vm' denied: stopping VMs needs a change ticket","data":{"kind":"denied","tool":"stop_vm","reason":"stopping VMs needs a change ticket","rule":"tools.stop_vm"}}}"#
    );
    assert_eq!(o.reply.as_ref().unwrap().status, 200);
    for (tool, rule, reason) in [
        ("delete_vm", "hide", "tool is hidden by policy"),
        ("reboot_vm", "default", "not allowed by policy (default: deny)"),
    ] {
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(7, tool).as_bytes(), &s, T0);
        let (status, b, _) = reply(&o);
        assert_eq!(status, 200);
        assert_eq!(
            b["error"],
            json!({"code":-31001,"message":format!("tool '{tool}' denied: {reason}"),
                   "data":{"kind":"denied","tool":tool,"reason":reason,"rule":rule}})
        );
        assert_eq!(b["id"], 7);
    }
    let rr = r#"{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"x"}}"#;
    let (_, b, _) = reply(&pipeline::on_body(&p, &post(&p, "abc"), rr.as_bytes(), &s, T0));
    assert_eq!(b["error"]["data"]["reason"], "method prompts/get is not allowed by policy (default: deny)");
    let rr = r#"{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///x"}}"#;
    assert_eq!(pipeline::on_body(&p, &post(&p, "abc"), rr.as_bytes(), &s, T0).reply, None);
}

#[test]
fn lifecycle_notifications_and_responses_pass() {
    let p = policy("");
    let s = MemoryStore::new();
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"srv-1","result":{"roots":[]}}"#,
    ] {
        let o = pipeline::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0);
        assert_eq!((o.reply, o.decision.kind), (None, DecisionKind::Passed), "{body}");
    }
}

#[test]
fn condition_denials_name_the_condition_not_the_value() {
    let key = |_: &str| Some("k".repeat(32)); // the example reads its session key from the VM's environment
    let p = config::load_with_env(
        &std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../../envoy/policy-conditions.json")).unwrap(),
        &key,
    )
    .unwrap();
    let s = MemoryStore::new();
    let exec = |id: u64, args: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"vm_agent_exec","arguments":args}})
            .to_string()
    };
    let ok = exec(1, json!({"node":"pve","vmid":100,"command":"uptime"}));
    assert_eq!(pipeline::on_body(&p, &post(&p, "a"), ok.as_bytes(), &s, T0).reply, None);
    for (args, rule, reason) in [
        (
            json!({"node":"pve","vmid":102,"command":"uptime"}),
            "tools.vm_agent_exec.require[0]",
            "vm_agent_exec is allowed on VMs 100 and 101 only",
        ),
        (
            json!({"node":"pve","vmid":"100","command":"uptime"}),
            "tools.vm_agent_exec.require[0]",
            "vm_agent_exec is allowed on VMs 100 and 101 only",
        ),
        (
            json!({"node":"pve","vmid":101,"command":"cd /tmp && rm -rf cache-7"}),
            "tools.vm_agent_exec.deny_if[0]",
            "destructive commands are not allowed",
        ),
        (
            json!({"node":"pve","vmid":101,"command":["rm","-rf","/"]}),
            "tools.vm_agent_exec.deny_if[0]",
            "destructive commands are not allowed",
        ),
    ] {
        let body = exec(2, args);
        let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0));
        assert_eq!(status, 200);
        assert_eq!(
            b["error"]["data"],
            json!({"kind":"denied","tool":"vm_agent_exec","reason":reason,"rule":rule}),
            "{body}"
        );
        let text = b.to_string();
        assert!(!text.contains("cache-7") && !text.contains("-rf"), "argument values leaked: {text}");
    }
}

#[test]
fn arguments_are_judged_whole_however_their_names_fold() {
    // Names of U+FDFA fold to 11 times their length. The body's parse bounds their folding by the
    // whole body; building the arguments again for the conditions is not held to a bound of the
    // arguments' own, which would read them as absent (and `exists` as false).
    let s = MemoryStore::new();
    let name = "\u{fdfa}".repeat(3_000);
    let padded = |pad: usize| {
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"deploy","arguments":{{"force":true,"{name}":1}},"_meta":{{"pad":"{}"}}}}}}"#,
            "a".repeat(pad)
        )
    };
    for (policy_text, rule, reason) in [
        (
            r#"{"version":"1","default":"deny","tools":{"deploy":{"deny_if":[{"path":"args.force","op":"exists"}]}}}"#,
            "tools.deploy.deny_if[0]",
            "denied by condition: args.force exists",
        ),
        (
            r#"{"version":"1","default":"deny","tools":{"deploy":{"require":[{"path":"args.force","op":"exists","value":false}]}}}"#,
            "tools.deploy.require[0]",
            "required condition not met: args.force exists",
        ),
    ] {
        let p = config::load(policy_text.as_bytes()).unwrap();
        let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), padded(45_000).as_bytes(), &s, T0));
        assert_eq!(
            (status, &b["error"]["data"]["rule"], &b["error"]["data"]["reason"]),
            (200, &json!(rule), &json!(reason))
        );
        // Without the pad, the body's own bound refuses it.
        let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), padded(0).as_bytes(), &s, T0));
        assert_eq!((status, &b["error"]["code"]), (400, &json!(-32700)));
    }
}

#[test]
fn the_servers_reading_of_the_arguments_may_take_twice_their_text() {
    // Thai's SARA AM (3 bytes) reads as 6 after NFKC. What a call's conditions read of its
    // arguments may take twice their text as the server reads it: a body of them near the limit is
    // judged, as Thai text; U+FDFA (3 bytes as 33) is not, and the condition cannot be evaluated.
    let p = config::load(
        br#"{"version":"1","default":"deny","tools":{"note":{"deny_if":[{"path":"args.text","op":"regex","value":"rm"}]}},"gateway":{"max_body_bytes":2048}}"#,
    )
    .unwrap();
    let s = MemoryStore::new();
    let body = |text: String| {
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"note","arguments":{"text":text}}})
            .to_string()
    };
    let thai = body("\u{e33}".repeat(600));
    assert!(thai.len() > 1_800 && thai.len() <= 2_048);
    assert_eq!(pipeline::on_body(&p, &post(&p, "a"), thai.as_bytes(), &s, T0).reply, None);
    let (status, b, _) = reply(&pipeline::on_body(&p, &post(&p, "a"), body("\u{fdfa}".repeat(200)).as_bytes(), &s, T0));
    assert_eq!(
        (status, &b["error"]["data"]["reason"]),
        (200, &json!("deny_if condition cannot be evaluated: args.text regex"))
    );
}

#[test]
fn tools_list_requests_are_marked_for_response_filtering() {
    let p = policy("");
    let s = MemoryStore::new();
    let o = pipeline::on_body(&p, &post(&p, "a"), br#"{"jsonrpc":"2.0","id":"L","method":"tools/list"}"#, &s, T0);
    assert_eq!(o.tools_list_ids.iter().map(|i| i.raw()).collect::<Vec<_>>(), ["\"L\""]);
    let o = pipeline::on_body(&p, &post(&p, "a"), call(1, "list_vms").as_bytes(), &s, T0);
    assert!(o.tools_list_ids.is_empty());
}

/// Under `default: "allow"`, a name that folds onto a restricted tool's (case, `-`, an invisible or
/// fullwidth character) is refused: a server that folds names would run the restricted tool without
/// its limits, conditions or approval. Folded names of an unrestricted allow rule stay allowed.
#[test]
fn under_default_allow_folded_names_of_restricted_tools_are_refused() {
    let text = r#"{"version":"1","default":"allow","tools":{
        "vm_agent_exec":{"require":[{"path":"args.vmid","op":"in","value":[100]}]},
        "start_vm":{"action":"require_approval"},
        "list_vms":{}},
        "gateway":{"approval":{"cluster":"mcp_approvals"}}}"#;
    let p = config::load_set(text.as_bytes()).unwrap().base().clone();
    let s = MemoryStore::new();
    for (tool, restricted) in [
        ("VM_AGENT_EXEC", "vm_agent_exec"),
        ("vm-agent-exec", "vm_agent_exec"),
        ("vm_agent\u{200b}_exec", "vm_agent_exec"),
        ("\u{ff56}m_agent_exec", "vm_agent_exec"),
        ("Start_VM", "start_vm"),
    ] {
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(4, tool).as_bytes(), &s, T0);
        let reason = format!("the name folds onto '{restricted}', which the policy restricts: use its exact name");
        let (status, b, _) = reply(&o);
        assert_eq!(status, 200, "{tool}");
        assert_eq!(
            b["error"],
            json!({"code":-31001,"message":format!("tool '{tool}' denied: {reason}"),
                   "data":{"kind":"denied","tool":tool,"reason":reason,"rule":format!("tools.{restricted}")}}),
            "{tool}"
        );
    }
    for (tool, rule) in [("LIST_VMS", "default"), ("list_vms", "tools.list_vms"), ("other", "default")] {
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(5, tool).as_bytes(), &s, T0);
        assert_eq!((o.reply, o.decision.kind, o.decision.rule.as_deref()), (None, DecisionKind::Allowed, Some(rule)));
    }
}

/// Two tools whose names fold together are each judged by their own rule when called by name; a
/// third spelling is refused on the least of the two restricted names (by bytes: `Get-Data` before
/// `get_data`), the same on every load, whatever order the hash map of tools holds them in.
#[test]
fn tools_whose_names_fold_together_keep_their_own_rules() {
    let text = r#"{"version":"1","default":"allow","tools":{
        "get_data":{"limits":[{"counter":"g","window":"minute","max":5}]},
        "Get-Data":{"require":[{"path":"args.id","op":"eq","value":1}]},
        "Put-Data":{}, "put_data":{"limits":[{"counter":"p","window":"minute","max":5}]}}}"#;
    let s = MemoryStore::new();
    // Every load seeds its maps anew: 32 loads see the tools in more than one order.
    for _ in 0..32 {
        let p = config::load_set(text.as_bytes()).unwrap().base().clone();
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(6, "GET_DATA").as_bytes(), &s, T0);
        assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (DecisionKind::Denied, Some("tools.Get-Data")));
    }
    let p = config::load_set(text.as_bytes()).unwrap().base().clone();
    for (tool, kind, rule) in [
        ("get_data", DecisionKind::Allowed, "tools.get_data"),
        ("Get-Data", DecisionKind::Denied, "tools.Get-Data.require[0]"),
        ("Put-Data", DecisionKind::Allowed, "tools.Put-Data"),
        ("put_data", DecisionKind::Allowed, "tools.put_data"),
        ("PUT_DATA", DecisionKind::Denied, "tools.put_data"),
    ] {
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(6, tool).as_bytes(), &s, T0);
        assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (kind, Some(rule)), "{tool}");
    }
}

/// A name with a rule of its own that folds onto both a tool with `action: "deny"` and a restricted
/// one is refused by the deny rule, whichever name sorts first; so is the restricted tool's own
/// name (a server that folds names would run the denied tool), and any other spelling.
#[test]
fn a_deny_rule_wins_over_a_restricted_one_among_folded_names() {
    let s = MemoryStore::new();
    for (denied, restricted) in [("a_b_c", "a-b-c"), ("a-b-c", "a_b_c")] {
        let text = format!(
            r#"{{"version":"1","default":"allow","tools":{{"{denied}":{{"action":"deny","reason":"never"}},
            "{restricted}":{{"limits":[{{"counter":"x","window":"minute","max":5}}]}},"a-b_c":{{}}}}}}"#
        );
        let p = config::load_set(text.as_bytes()).unwrap().base().clone();
        for (tool, kind, rule) in [
            ("a-b_c", DecisionKind::Denied, format!("tools.{denied}")),
            ("A_B_C", DecisionKind::Denied, format!("tools.{denied}")),
            (denied, DecisionKind::Denied, format!("tools.{denied}")),
            (restricted, DecisionKind::Denied, format!("tools.{denied}")),
        ] {
            let o = pipeline::on_body(&p, &post(&p, "abc"), call(7, tool).as_bytes(), &s, T0);
            assert_eq!((o.decision.kind, o.decision.rule.as_deref()), (kind, Some(rule.as_str())), "{denied}: {tool}");
        }
    }
}

/// Under a dry-run `mode`, a name that folds onto a tool `tool_modes` enforces is enforced too: a
/// server that folds names would run that tool.
#[test]
fn folded_names_of_enforced_tools_are_enforced() {
    let text = r#"{"version":"1","default":"deny","tools":{"list_vms":{}},
        "gateway":{"mode":"dry_run","tool_modes":{"vm_agent_exec":"enforce","delete_vm":"dry_run"}}}"#;
    let p = config::load_set(text.as_bytes()).unwrap().base().clone();
    let s = MemoryStore::new();
    for (tool, enforced) in
        [("VM_AGENT_EXEC", true), ("vm-agent-exec", true), ("vm_agent_exec", true), ("DELETE_VM", false)]
    {
        let o = pipeline::on_body(&p, &post(&p, "abc"), call(8, tool).as_bytes(), &s, T0);
        assert_eq!(o.reply.is_some(), enforced, "{tool}");
        assert_eq!(
            (o.decision.kind, o.decision.label()),
            (DecisionKind::Denied, if enforced { "denied" } else { "would_deny" }),
            "{tool}"
        );
    }
}

#[test]
fn the_calls_of_a_batch_each_have_their_own_arguments_for_a_bound() {
    // Each call of a batch reads its own part of the body: a batch of calls whose arguments read
    // 11 times longer is refused call by call, as one such call is.
    let p = config::load(
        br#"{"version":"1","default":"deny","tools":{"note":{"deny_if":[{"path":"args.text","op":"contains","value":"zzz"}]}}}"#,
    )
    .unwrap();
    let s = MemoryStore::new();
    let call = |id: u64, text: &str| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"note","arguments":{"text":text}}});
    let long = "\u{fdfa}".repeat(20_000);
    let batch = json!([call(1, &long), call(2, "fine"), call(3, &long)]).to_string();
    let head = mcp_policy_core::pipeline::RequestHead::from_headers(
        &p,
        [
            (":method", &b"POST"[..]),
            ("content-type", b"application/json"),
            ("authorization", b"Bearer a"),
            ("mcp-protocol-version", b"2025-03-26"),
        ],
    );
    let o = pipeline::on_body(&p, &head, batch.as_bytes(), &s, T0);
    let body: Value = serde_json::from_str(&o.reply.unwrap().body).unwrap();
    let why = "deny_if condition cannot be evaluated: args.text contains";
    assert_eq!(
        (&body[0]["error"]["data"]["reason"], &body[1]["error"]["data"]["kind"]),
        (&json!(why), &json!("batch_refused"))
    );
    assert_eq!(body[2]["error"]["data"]["reason"], json!(why));
}
