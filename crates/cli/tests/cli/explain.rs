//! `explain`: the decision, the rule, the reply and the exit status of one request, and the
//! approval key of a held one.

use super::{call, run, run_with, scratch};

#[test]
fn explain_allowed_call() {
    let req = scratch("list_vms.json", &call("list_vms"));
    assert_eq!(
        run(&["explain", "envoy/policy.json", &req]),
        (
            0,
            "decision: allowed\n\
             rule:     tools.list_vms\n\
             reason:   -\n\
             method:   tools/call\n\
             tool:     list_vms\n\
             grant:    sha256:99bb88401742\n\
             status:   forwarded to the MCP server (the agent gets the server's response)\n"
                .into(),
            String::new()
        )
    );
}

#[test]
fn explain_denied_call() {
    let req = scratch("delete_vm.json", &call("delete_vm"));
    let (status, out, err) = run(&["explain", "envoy/policy.json", &req]);
    assert_eq!((status, err.as_str()), (3, ""));
    let reply = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-31001,"message":"tool 'delete_vm' denied: not allowed by policy (default: deny)","data":{"kind":"denied","tool":"delete_vm","reason":"not allowed by policy (default: deny)","rule":"default"}}}"#;
    assert_eq!(
        out,
        format!(
            "decision: denied\n\
             rule:     default\n\
             reason:   not allowed by policy (default: deny)\n\
             method:   tools/call\n\
             tool:     delete_vm\n\
             grant:    sha256:99bb88401742\n\
             error:    denied\n\
             status:   200 (answered by the filter, JSON-RPC error -31001; nothing reaches the server)\n\
             reply:\n\
             {reply}\n"
        )
    );
    let body: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(body["error"]["code"], -31001);
    assert_eq!(body["error"]["data"]["rule"], "default");
}

#[test]
fn explain_conditions_and_stdin() {
    let body = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"vm_agent_exec","arguments":{"vmid":100,"command":"rm -rf /"}}}"#;
    let (status, out, _) = run_with(&["explain", "envoy/policy-conditions.json", "-"], body);
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: denied\nrule:     tools.vm_agent_exec.deny_if[0]\nreason:   destructive commands are not allowed\nfound:    denied by condition: args.command regex\nmethod:"), "{out}");
    // The agent is shown the author's reason; `found` says the condition could not be evaluated.
    let absent = body.replace(r#","command":"rm -rf /""#, "");
    let (status, out, _) = run_with(&["explain", "envoy/policy-conditions.json", "-"], &absent);
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: denied\nrule:     tools.vm_agent_exec.deny_if[0]\nreason:   destructive commands are not allowed\nfound:    deny_if condition cannot be evaluated: args.command regex\nmethod:"), "{out}");
    let body = body.replace("rm -rf /", "uptime");
    let (status, out, _) = run_with(&["explain", "envoy/policy-conditions.json", "-"], &body);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: allowed\nrule:     tools.vm_agent_exec\n"), "{out}");
}

#[test]
fn explain_protocol_errors_and_passes() {
    // Not JSON at all: refused before any policy, 400, id null.
    let (status, out, _) = run_with(&["explain", "envoy/policy.json", "-"], "nope");
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: invalid\n"), "{out}");
    assert!(
        out.contains("\nerror:    parse_error\nstatus:   400 (answered by the filter, JSON-RPC error -32700;"),
        "{out}"
    );
    // Lifecycle methods pass.
    let (status, out, _) =
        run_with(&["explain", "envoy/policy.json", "-"], r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    assert_eq!(status, 0);
    assert!(
        out.starts_with(
            "decision: passed\nrule:     -\nreason:   - (not subject to policy: lifecycle methods, notifications and \
             client responses pass, and tools/list, which hide and pins filter: the manual's MCP methods)\nmethod:   ping\n"
        ),
        "{out}"
    );
}

#[test]
fn explain_grant_option() {
    // sha256("agent-1") is registered: only that token gets through, and it shows by its label.
    let p = scratch(
        "grants.json",
        r#"{"version":"1","default":"allow","gateway":{"grants":[{"sha256":"6ff3b3bd11c44cac620c43d5b65377bd2ba7e8951c1e835ae40c96733730982b","label":"agent-one"}]}}"#,
    );
    let req = scratch("reboot_vm.json", &call("reboot_vm"));
    let (status, out, _) = run(&["explain", &p, &req, "--grant", "agent-1"]);
    assert_eq!(status, 0);
    assert!(out.contains("\ngrant:    agent-one\n"), "{out}");
    let (status, out, _) = run(&["explain", &p, &req, "--grant=agent-1"]);
    assert_eq!(status, 0, "{out}");
    // The default grant, `cli`, is not registered: 401.
    let (status, out, _) = run(&["explain", &p, &req]);
    assert_eq!(status, 3);
    assert!(
        out.starts_with("decision: no_grant\nrule:     -\nreason:   the credential is not a registered grant\n"),
        "{out}"
    );
    assert!(out.contains("\nstatus:   401 (answered by the filter, JSON-RPC error -31003; nothing reaches the server)\nheader:   www-authenticate: Bearer\n"), "{out}");
    // With gateway.grant_header the grant goes in that header instead of Authorization.
    let p = scratch("grant-header.json", r#"{"version":"1","default":"allow","gateway":{"grant_header":"X-Agent"}}"#);
    let (status, out, _) = run(&["explain", &p, &req, "--grant", "agent-1"]);
    assert_eq!(status, 0, "{out}");
    assert!(out.contains("\ngrant:    sha256:6ff3b3bd11c4\n"), "{out}");
}

#[test]
fn explain_dry_run_forwards() {
    let p = scratch("dry.json", r#"{"version":"1","default":"deny","gateway":{"mode":"dry_run"}}"#);
    let req = scratch("dry-delete.json", &call("delete_vm"));
    let (status, out, _) = run(&["explain", &p, &req]);
    assert_eq!(status, 0);
    assert!(out.starts_with("decision: would_deny\nrule:     default\n"), "{out}");
    assert!(out.contains("\nstatus:   forwarded to the MCP server (dry run: the policy would refuse it;"), "{out}");
}

#[test]
fn explain_invalid_policy_exits_1() {
    let p = scratch(
        "explain-invalid.json",
        r#"{"version":"1","tools":{"x":{"limits":[{"counter":"","window":"day","max":1},{"counter":"c","window":"day","max":0}]}}}"#,
    );
    let req = scratch("x.json", &call("x"));
    assert_eq!(
        run(&["explain", &p, &req]),
        (
            1,
            String::new(),
            format!(
                "{p}: invalid policy at tools.x.limits[0].counter: must not be empty\n\
                 {p}: invalid policy at tools.x.limits[1].max: must be at least 1\n"
            )
        )
    );
}

#[test]
fn explain_call_that_needs_approval_exits_4() {
    let req = scratch("start_vm.json", &call("start_vm"));
    let grant = mcp_policy_core::identity::grant::from_authorization(b"Bearer cli").unwrap();
    let upstream = mcp_policy_core::approval::Upstream {
        cluster: "mcp_upstream".into(),
        authority: "127.0.0.1:10000".into(),
        path: "/mcp".into(),
    };
    let key = mcp_policy_core::approval::key(
        &grant.id,
        &upstream,
        "start_vm",
        Some(&mcp_policy_core::wire::json::parse(br#"{"vmid":100,"node":"pve"}"#).unwrap()),
    );
    assert_eq!(
        run(&["explain", "envoy/policy.json", &req]),
        (
            4,
            format!(
                "decision: approval_required\n\
                 rule:     tools.start_vm\n\
                 reason:   starting a VM costs money\n\
                 method:   tools/call\n\
                 tool:     start_vm\n\
                 grant:    sha256:99bb88401742\n\
                 approval: required, key {key}\n\
                 upstream: cluster mcp_upstream, authority 127.0.0.1:10000, path /mcp\n\
                 status:   held: the approval service (cluster mcp_approvals) is asked; forwarded only once a person \
                 approved this exact call, else answered by the filter (JSON-RPC error -31007, -31008 or -31009)\n"
            ),
            String::new()
        )
    );
    // The same call to another MCP server has another key.
    let b =
        mcp_policy_core::approval::Upstream { cluster: "mcp_b".into(), authority: "gw".into(), path: "/b/mcp".into() };
    let key_b = mcp_policy_core::approval::key(
        &grant.id,
        &b,
        "start_vm",
        Some(&mcp_policy_core::wire::json::parse(br#"{"vmid":100,"node":"pve"}"#).unwrap()),
    );
    let (status, out, _) =
        run(&["explain", "envoy/policy.json", &req, "--cluster", "mcp_b", "--authority=gw", "--path", "/b/mcp"]);
    assert_eq!(status, 4);
    assert!(
        out.contains(&format!("approval: required, key {key_b}\nupstream: cluster mcp_b, authority gw, path /b/mcp\n")),
        "{out}"
    );
    assert_ne!(key_b, key);
}

#[test]
fn explain_judges_a_result_under_the_tools_result_rules() {
    let policy = scratch(
        "results-policy.json",
        r#"{"version":"1","default":"allow","tools":{"read_file":{"result":{
        "deny_if":[{"regex":"-----BEGIN [A-Z ]*PRIVATE KEY-----","reason":"a private key"}],
        "redact":[{"regex":"AKIA[0-9A-Z]{16}","with":"[redacted]"}]}}}}"#,
    );
    let req = scratch("read_file.json", &call("read_file"));
    let tail = "status:   forwarded to the MCP server (the agent gets the server's response)\n\
                note:     the result is judged by tools.read_file.result (see --result)\n";
    for (name, text, line) in [
        ("clean", "hello", "result:   passes unchanged\n"),
        ("aws", "AKIAIOSFODNN7EXAMPLE", "result:   redacted by tools.read_file.result.redact (1 redactions)\n"),
        (
            "key",
            "-----BEGIN RSA PRIVATE KEY-----",
            "result:   result_refused by tools.read_file.result.deny_if[0] (a private key)\n",
        ),
    ] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"content":[{{"type":"text","text":"{text}"}}]}}}}"#);
        let result = scratch(&format!("result-{name}.json"), &body);
        let (status, out, err) = run(&["explain", &policy, &req, "--result", &result]);
        assert_eq!((status, err.as_str()), (0, ""));
        assert!(out.ends_with(&format!("{tail}{line}")), "{out}");
        assert!(!out.contains(text) || name == "clean", "{out}");
    }
}

/// `--protocol-version` sends the MCP-Protocol-Version header; without it the request is read as
/// 2025-03-26, as the filter reads one without the header.
#[test]
fn explain_sends_the_protocol_version_given() {
    let policy = scratch(
        "modern.json",
        r#"{"version":"1","default":"deny","tools":{"list_vms":{}},"gateway":{"protocol_versions":["2025-11-25"]}}"#,
    );
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms","arguments":{}}}"#;
    let (status, out, _) = run_with(&["explain", &policy, "-", "--protocol-version", "2025-11-25"], body);
    assert_eq!(status, 0, "{out}");
    assert!(out.starts_with("decision: allowed\nrule:     tools.list_vms\n"), "{out}");
    let (status, out, _) = run_with(&["explain", &policy, "-", "--protocol-version", "2025-06-18"], body);
    assert_eq!(status, 3);
    assert!(
        out.starts_with(
            "decision: invalid\nrule:     -\nreason:   protocol version is not accepted by this gateway (gateway.protocol_versions)\n"
        ),
        "{out}"
    );
    let (status, out, _) = run_with(&["explain", &policy, "-"], body);
    assert_eq!(status, 3);
    assert!(out.contains("\nreason:   a request without MCP-Protocol-Version is read as 2025-03-26, which"), "{out}");
    // 2026-07-28: Mcp-Method and Mcp-Name are sent as the body says, a name of other than printable
    // ASCII as =?base64?…?=.
    let modern = scratch(
        "newest.json",
        r#"{"version":"1","default":"deny","tools":{"list_vms":{},"héllo":{}},"gateway":{"protocol_versions":["2026-07-28"]}}"#,
    );
    for tool in ["list_vms", "héllo"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}}}"#
        );
        let (status, out, _) = run_with(&["explain", &modern, "-", "--protocol-version", "2026-07-28"], &body);
        assert_eq!(status, 0, "{out}");
        assert!(out.starts_with(&format!("decision: allowed\nrule:     tools.{tool}\n")), "{out}");
    }
}

/// The request given where the policy goes: the error says which comes first.
#[test]
fn explain_with_its_arguments_swapped_says_so() {
    let req = scratch("swapped.json", r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
    let (status, out, err) = run(&["explain", &req, "envoy/policy.json"]);
    assert_eq!((status, out.as_str()), (1, ""));
    assert!(
        err.ends_with(&format!(
            "\n{req}: this is a JSON-RPC message, not a policy (explain and test take the policy first: \
             mcp-policy explain POLICY.json REQUEST.json)\n"
        )),
        "{err}"
    );
}

/// A batch: after the batch's own decision, one line per message, each decided alone.
#[test]
fn explain_a_batch_decides_each_message_alone_too() {
    let call = |id: u32, tool: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#)
    };
    let body = format!(
        "[{},{},{}]",
        call(1, "list_vms"),
        call(2, "delete_vm"),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list"}"#
    );
    let (status, out, _) = run_with(&["explain", "envoy/policy.json", "-"], &body);
    assert_eq!(status, 3);
    assert!(out.starts_with("decision: denied\nrule:     default\n"), "{out}");
    assert!(
        out.ends_with(
            "\nmessages: 3 in the batch, each decided here as if sent alone (a refused message refuses the whole batch):\n\
             \x20 [0] tools/call list_vms: allowed by tools.list_vms\n\
             \x20 [1] tools/call delete_vm: denied by default (not allowed by policy (default: deny))\n\
             \x20 [2] tools/list: passed\n"
        ),
        "{out}"
    );
    // A call that needs an approval is named as alone, though the batch refuses it.
    let held = format!("[{},{}]", call(1, "list_vms"), call(2, "start_vm"));
    let (_, out, _) = run_with(&["explain", "envoy/policy.json", "-"], &held);
    assert!(
        out.contains("\n  [1] tools/call start_vm: approval_required by tools.start_vm (starting a VM costs money)\n"),
        "{out}"
    );
    // One message alone is no batch: no such lines.
    let (_, out, _) = run_with(&["explain", "envoy/policy.json", "-"], &call(1, "list_vms"));
    assert!(!out.contains("messages:"), "{out}");
}

/// `found:` reads the arguments as the filter does, within the same budget: U+3300 written as
/// escapes reads as アパート (NFKC), which the condition denies, though the escaped text is short.
#[test]
fn explain_found_reads_the_arguments_as_the_filter_does() {
    let policy = scratch(
        "apart.json",
        r#"{"version":"1","default":"deny","tools":{"t":{"deny_if":[{"path":"args.command","op":"regex","value":"アパート","reason":"no"}]}}}"#,
    );
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{{"command":"{}"}}}}}}"#,
        r"\u3300".repeat(40)
    );
    let (status, out, _) = run_with(&["explain", &policy, "-"], &body);
    assert_eq!(status, 3);
    assert!(
        out.starts_with(
            "decision: denied\nrule:     tools.t.deny_if[0]\nreason:   no\nfound:    denied by condition: args.command regex\n"
        ),
        "{out}"
    );
}
